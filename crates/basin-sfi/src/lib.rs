//! SFi-Former: sparse-flow-induced attention in a GraphGPS-style graph transformer.
//!
//! Built so far: [`attention`], the global-attention branch of an SFi-GPS layer — multi-head
//! sparse-flow attention (the ℓ1-regularised flow energy solved by `basin_core::flow`)
//! enhanced by the normalised adjacency (eq. 11), with DFi-Former and the Table 3 ablations
//! as switches; [`gated_gcn`], the local message-passing branch (GatedGCN with edge gates);
//! [`gps`], the SFi-GPS layer joining the two (BatchNorm over real nodes, FFN); [`encoders`],
//! the LapPE DeepSet encoder.
//!
//! Still to come (issue 17): the other encoders (Atom/Bond, ESLapPE, RWSE), the graph task
//! and the presets of the paper's LRGB and GNN Benchmark tables.

pub mod attention;
pub mod encoders;
pub mod gated_gcn;
pub mod gps;
