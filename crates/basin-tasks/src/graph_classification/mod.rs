//! Graph classification with stacked energy blocks (ET Section 5, Appendix D;
//! the public ET graph code; CDAT §5.1 and Appendix B.3 run the same front end with its own
//! block).
//!
//! Node features are encoded, a learned CLS token is prepended, and a linear projection of the
//! k smallest non-trivial Laplacian eigenvectors of the CLS-augmented graph (eq. 23) is added to
//! every token. The attention of each head is modulated by the parameterised adjacency
//! `Â = Conv2D(X ⊗ X) ⊙ A′` (eq. 24), computed once from the initial tokens, where A′ is a
//! linear map of the edge features if the dataset has them and the batches carry them
//! (`batching.dense_edge_features`), else of the adjacency; non-edges are masked out of the
//! attention as eq. 25 says. S blocks, each with its own LayerNorm and weights,
//! descend their energies; the CLS token of the last block is read out linearly; label-smoothed
//! cross-entropy trains it.
//!
//! What the blocks are is the family's choice: [`GraphClassifierConfig::block`] (ET: attention +
//! Hopfield memory with Langevin dynamics, `basin_et::graph`), or prebuilt blocks through
//! [`GraphClassifier::with_blocks`]. Â has one channel per head of the block's attention term
//! (the `heads` parameter of its first term that has one); a block without one gets no Â.
//!
//! Switches for the reference code: `adjacency = "reference-multiply"` (Â multiplies the logits
//! of every pair, so after training non-edges are no longer masked) and the batch settings of
//! basin-graph (`sink` padding, per-entry sign flips). `adjacency = "mask-only"` keeps the mask
//! of eq. 25 and drops Â (vMF logits then stay within [−β, β]; CDAT's presets keep Â but build
//! it from the tokens' cosines, `gram = "cosine"`).

mod batch;
mod config;
mod data;
mod describe;
mod learner;
mod model;
mod readout;
mod structure;
mod task;
#[cfg(test)]
mod tests;

pub use batch::GraphBatchOnDevice;
pub use config::{AdjacencyMode, Gram, GraphClassifierConfig, Readout};
pub use data::{SPARSE_MEAN_NODES, dataset_pe, graph_classes, large_graphs, node_classes};
pub use learner::GraphClassifierLearner;
pub(crate) use learner::predict_in_buckets;
pub use model::{GraphClassifier, InputWidths};
pub(crate) use model::{cls_token, with_cls};
pub use readout::{node_degrees, pool, structure_statistics};
pub use task::{GraphData, GraphRun, graph_dataset};
