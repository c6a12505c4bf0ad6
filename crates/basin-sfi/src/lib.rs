//! SFi-Former: sparse-flow-induced attention in a GraphGPS-style graph transformer.
//!
//! - [`attention`]: the global-attention branch — multi-head sparse-flow attention (the
//!   ℓ1-regularised flow energy solved by `basin_core::flow`) enhanced by the normalised
//!   adjacency (eq. 11); DFi-Former, GraphGPS's Transformer and the Table 3 ablations are
//!   switches of it.
//! - [`gated_gcn`]: the local message-passing branch (GatedGCN with edge gates, EquivStable
//!   LapPE gates as a switch).
//! - [`gps`]: one GPS layer joining the two (BatchNorm over real nodes, FFN).
//! - [`encoders`]: atom/bond embeddings, LapPE (DeepSet), EquivStable LapPE, RWSE.
//! - [`model`]: encoders + layers + GraphGym head, graph- or node-level.
//! - [`learner`]: the model on a graph dataset (Peptides-func multi-label, PATTERN/CLUSTER node
//!   classes) for basin-train's protocols.
//! - [`presets`]: the published configurations (GraphGPS, SFi Tables 5/6) and CPU-scale ones.
//! - [`task`]: the model as a run file names it (`task = "gps"`, a `basin_tasks::task::Task`).
//!
//! Every dense layer and batch norm starts as PyTorch starts them
//! (`basin_core::init::DenseInit::Torch`, `basin_core::norm::BatchNorm1d`), as the GraphGPS and
//! SFi-Former code do (GraphGPS's `GPSModel` applies no `init_weights` of its own); tch's
//! defaults are wider linears and U(0, 1) norm scales. GraphGPS's `transformer` branch and the
//! Transformer LapPE encoder's layers hold PyTorch's `nn.MultiheadAttention`, and start as it
//! does (the joint input projection Xavier-uniform, zero biases; `multihead_init` on the
//! branch).

pub mod attention;
pub mod encoders;
pub mod gated_gcn;
pub mod gps;
pub mod learner;
pub mod model;
pub mod presets;
pub mod task;
