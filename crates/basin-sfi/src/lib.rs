//! SFi-Former: sparse-flow-induced attention in a GraphGPS-style graph transformer.
//!
//! - [`attention`]: the global-attention branch — multi-head sparse-flow attention (the
//!   ℓ1-regularised flow energy solved by [`flow`]) enhanced by the normalised
//!   adjacency (eq. 11); DFi-Former, GraphGPS's Transformer and the Table 3 ablations are
//!   switches of it.
//! - [`gated_gcn`]: the local message-passing branch (GatedGCN with edge gates, EquivStable
//!   LapPE gates as a switch).
//! - [`flow`]: the sparse-flow energy (eq. 8–10): the unrolled proximal solver with
//!   Barzilai–Borwein steps, the exact minimiser, and softmax as its λ = 0 case.
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
//!
//! ```
//! use basin_sfi::flow::{FlowConfig, sparse_flow};
//! use basin_sfi::model::GpsModel;
//! use basin_sfi::presets::{self, Dataset, Variant};
//! use tch::{Device, Kind, Tensor, nn::VarStore};
//!
//! // The sparse flow of eq. 9 between 5 tokens (1 graph, 2 heads, λ = 0.5): the attention
//! // that minimises the circuit energy with friction.
//! let opts = (Kind::Double, Device::Cpu);
//! let (s, f) = (Tensor::randn([1, 2, 5, 5], opts), Tensor::rand([1, 2, 5, 5], opts));
//! let mask = Tensor::ones([1, 5], (Kind::Bool, Device::Cpu));
//! let z = sparse_flow(&s, &f, &mask, &Tensor::from_slice(&[0.5f64]), &FlowConfig::default());
//! assert_eq!(z.size(), [1, 2, 5, 5]);
//! assert!(z.isfinite().all().int64_value(&[]) == 1);
//!
//! // SFi-Former at the CPU scale on PATTERN (GraphGPS with sparse-flow attention, SFi Table 6).
//! let vs = VarStore::new(Device::Cpu);
//! let model = GpsModel::new(&vs.root(), &presets::cpu(Dataset::Pattern, Variant::Sfi), 2)?;
//! assert!(vs.trainable_variables().len() > 10);
//! # let _ = model;
//! # Ok::<(), basin_core::CoreError>(())
//! ```

pub mod attention;
pub mod encoders;
pub mod flow;
pub mod gated_gcn;
pub mod gps;
pub mod learner;
pub mod model;
pub mod presets;
pub mod task;
