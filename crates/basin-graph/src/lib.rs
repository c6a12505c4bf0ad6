//! Graph data and preprocessing for basin; pure Rust, no libtorch, so its tests run in seconds.
//!
//! What will live here (issue "Graph data and preprocessing"):
//! - types: CSR graphs with node/edge features and labels, graph-level and node-level datasets,
//!   conversions to and from petgraph;
//! - loaders for the TU text format, CARE-GNN `.mat` fraud graphs, npz anomaly graphs and
//!   LRGB Peptides-func, each returning errors that name the file and line;
//! - seeded generators: SBM PATTERN/CLUSTER with the published parameters, planted-anomaly graphs;
//! - preprocessing: normalised Laplacian eigenvectors (dense per graph in parallel, sparse
//!   LOBPCG for large graphs), CLS augmentation, padding with a cap, dense masks and CSR
//!   neighbourhoods for `basin_core::Structure`, subgraph sampling and splits.
//!
//! The tensors it produces are handed to basin-core by the model crates; this crate never
//! depends on tch.
