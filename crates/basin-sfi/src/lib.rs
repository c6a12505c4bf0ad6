//! SFi-Former: sparse-flow-induced attention in a GraphGPS-style graph transformer.
//!
//! What will live here: the GPS layer (local message passing plus global attention) whose
//! global attention is the solution of the ℓ1-regularised flow energy, solved by the unrolled
//! proximal solver in `basin_core::flow`; encoders (Laplacian and random-walk PE), presets for
//! the paper's LRGB and GNN Benchmark tables.
