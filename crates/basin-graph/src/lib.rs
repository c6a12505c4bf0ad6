//! Graph data and preprocessing for basin; pure Rust, no libtorch, so its tests run in seconds.
//!
//! - [`csr`]: the CSR adjacency and its operations, conversions to and from petgraph, sprs
//!   and PyG's edge index ([`csr::convert`]); [`graph`]: a graph with node/edge features and
//!   labels; [`dataset`]: graph-level and node-level datasets and their statistics;
//! - loaders, each returning a [`GraphError`] that names the file, the line and what was
//!   expected: [`tu`] (TU text format), [`mat`] (CARE-GNN `.mat` fraud graphs), [`npz`] (node
//!   anomaly graphs), [`lrgb`] (the LRGB, superpixel and ZINC npz layout, read and written);
//! - seeded generators: [`sbm`] (PATTERN/CLUSTER with the published parameters),
//!   [`anomaly`] (planted contextual and structural anomalies) and [`synthetic`] (small sets in
//!   every LRGB layout, with a learnable target);
//! - preprocessing: [`laplacian`] (normalised-Laplacian eigenvectors, dense per graph in
//!   parallel, sparse LOBPCG for big graphs; ET eq. 23), [`batch`] (CLS, padding with a cap,
//!   masks, neighbour CSR), [`sample`] (induced-subgraph and neighbour sampling), [`cache`] (preprocessed results on disk),
//!   [`features`] (attribute scaling fitted on training items only);
//! - [`source`]: opens a graph dataset by path or by registered name (where datasets are and
//!   how they are fetched is basin-data's: `basin_data::registry`, `basin_data::datadir`);
//! - [`mil`]: multiple-instance bags (the Hopfield MIL benchmarks: CSV and PRTools files).
//!
//! The arrays it produces are handed to basin-core by the model crates; this crate never
//! depends on tch.
//!
//! ```
//! use basin_graph::batch::{BatchConfig, make_batch};
//! use basin_graph::{Csr, Graph, GraphDataset, Targets};
//! use rand::SeedableRng;
//!
//! let triangle = Graph::structure_only(Csr::from_undirected(3, &[(0, 1), (1, 2), (2, 0)])?);
//! let ds = GraphDataset {
//!     name: "toy".into(),
//!     graphs: vec![triangle.clone(), triangle],
//!     targets: Targets::Classes { labels: vec![0, 1], num_classes: 2 },
//!     class_values: vec![0, 1],
//!     official_split: None,
//!     node_features: None,
//! };
//! let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
//! let batch = make_batch(&ds, &[0, 1], &BatchConfig::et_graph(), None, &mut rng)?;
//! assert_eq!(batch.mask.dim(), (2, 4, 4)); // CLS + 3 nodes per graph
//! assert_eq!(batch.pe.as_ref().map(|p| p.dim()), Some((2, 4, 15))); // k = 15, zero-padded
//! # Ok::<(), basin_graph::GraphError>(())
//! ```

pub mod anomaly;
pub mod batch;
pub mod cache;
pub mod csr;
pub mod dataset;
pub mod error;
pub mod features;
pub mod graph;
pub mod laplacian;
pub mod lobpcg;
pub mod lrgb;
pub mod mat;
pub mod mil;
pub mod npz;
mod partial_eigh;
pub mod posenc;
pub mod sample;
pub mod sbm;
pub mod source;
pub mod synthetic;
mod text;
pub mod tu;

pub use basin_data::split::{KFoldConfig, Split, SplitConfig, stratified_kfold, stratified_split};
pub use csr::Csr;
pub use dataset::{DatasetStats, GraphDataset, LinkTargets, NodeDataset, Relation, Targets};
pub use error::{GraphError, Result};
pub use graph::Graph;
