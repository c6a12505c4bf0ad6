//! The graph classifier's configuration: the front end (encodings, Â, readout), its blocks,
//! and the memory bound of a batch.

use basin_core::BlockConfig;
use basin_core::init::DenseInit;
use basin_graph::batch::BatchConfig;
use basin_graph::features::FeatureScaling;
use serde::{Deserialize, Serialize};

use crate::{Result, TaskError, prefix_field};

/// How Â enters the attention.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdjacencyMode {
    /// Â multiplies the scores of edges; non-edges are masked (eq. 25).
    #[default]
    Masked,
    /// The reference: Â multiplies every pair's score and only exact zeros are masked, so the
    /// learned bias of `A′` lets non-edges back in; only padding is masked here.
    ReferenceMultiply,
    /// Non-edges masked as eq. 25, without the learned scale Â (not in the papers). Â is
    /// unbounded and grows with the square of the tokens; vMF attention (CDAT eq. 10–11) keeps
    /// its logits in [−β, β] only without it.
    MaskOnly,
}

/// Which pairwise product of the initial tokens the convolution of Â sees (eq. 24).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gram {
    /// X ⊗ X, the papers' and reference code's: grows with the square of the tokens.
    #[default]
    Dot,
    /// The cosines of the tokens (each token over its L2 norm), in [−1, 1] (not in the papers):
    /// Â stays bounded by its learned weights, so vMF logits β cos(q, k) · Â (CDAT eq. 10)
    /// keep a bounded range while still seeing the pairwise features of the tokens.
    Cosine,
}

/// What the linear readout sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Readout {
    /// The CLS token after the last block (ET Appendix D, the reference code).
    #[default]
    Cls,
    /// The CLS token concatenated with the mean of the graph's node tokens after the last block
    /// (not in the papers: a switch of basin's CPU presets, so that the readout sees every node
    /// even where a few small descent steps barely move the CLS token).
    ClsMean,
    /// [`Readout::ClsMean`] and the mean amplified by `ln(n + 1)` for a graph of `n` nodes (PNA's
    /// amplification scaler, Corso et al. 2020; not in the papers). A mean is blind to a
    /// graph's size, which the pooled-feature baseline and GIN's sum readout see.
    ClsMeanSize,
    /// [`Readout::ClsMeanSize`] and the standard deviation and maximum of the node tokens,
    /// feature by feature (PNA's std and max aggregators, Corso et al. 2020; not in the
    /// papers). A few small descent steps leave the tokens close to a linear encoding of the node
    /// attributes, so a mean readout sees only first moments, while the pooled-feature baseline
    /// also sees each attribute's spread across the graph.
    ClsMoments,
    /// Every real node token after the last block, one row of logits per node (inductive node
    /// classification: PATTERN, CLUSTER; ET Table 7). Rows run graph by graph, nodes in order;
    /// every node must be in the batch (no truncation).
    Nodes,
}

/// Configuration of a [`GraphClassifier`](super::GraphClassifier).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphClassifierConfig {
    /// The energy block; each of the `blocks` stacked blocks has its own weights.
    pub block: BlockConfig,
    /// Stacked blocks S.
    pub blocks: usize,
    /// Side of the Conv2D kernel on X ⊗ X (eq. 24).
    pub conv_kernel: i64,
    /// How Â enters the attention.
    pub adjacency: AdjacencyMode,
    /// The pairwise product Â is computed from.
    pub gram: Gram,
    /// Label smoothing of the cross-entropy (the ET reference: 0.05).
    pub label_smoothing: f64,
    /// Graphs per batch.
    pub batch: usize,
    /// Batching (CLS, cap, padding, encodings, sign flips).
    pub batching: BatchConfig,
    /// Node attributes standardised with the training graphs' statistics (default) or raw, as
    /// the reference code feeds them.
    pub features: FeatureScaling,
    /// Outputs of the readout; `None`: the dataset's classes. (The graph reference codes use
    /// 10 for every TU set, binary ones included; the papers' parameter counts need it.)
    pub readout_classes: Option<i64>,
    /// What the readout sees.
    pub readout: Readout,
    /// The readout also sees the same pooling of the initial tokens (the encoded nodes with
    /// their encodings, before the first block), concatenated (not in the papers). GIN's
    /// readout sums every layer's node states, layer 0 included, as do jumping-knowledge
    /// networks (Xu et al. 2018): a pooled view of the input that the descent cannot wash out,
    /// which is what the pooled-feature baseline sees. Off in the presets, where it moves ET's
    /// CPU preset within noise only.
    pub readout_initial: bool,
    /// The readout also sees four numbers about the graph's structure, each as ln(1 + ·): its
    /// node count and the mean, standard deviation and maximum of its nodes' degrees
    /// ([`structure_statistics`](super::structure_statistics); not in the papers). Masked softmax attention averages over a
    /// node's neighbours and cannot count them, while the pooled-feature baseline reads these
    /// counts directly. Off in the presets, as ET's CPU preset scores no higher with it.
    pub readout_degrees: bool,
    /// Dropout on the readout's input in training (0: none, as the papers).
    pub readout_dropout: f64,
    /// `Some(h)`: the readout is an MLP with one hidden ReLU layer of width h (as GIN's and
    /// GraphGPS's heads, and ET's own anomaly readout, eq. 21) instead of the papers' linear
    /// map.
    pub readout_hidden: Option<i64>,
    /// The readout's last layer starts at this multiple of its `dense_init` initialisation,
    /// weights and bias (1: the papers'; not in the papers otherwise). A
    /// random readout on tokens of several units makes confident guesses, so training starts
    /// above loss ln C (the ET CPU preset near 2.8 on ENZYMES, ln 6 ≈ 1.79); at 0 the
    /// untrained logits are all zero and the loss is exactly ln C (as the zero-initialised
    /// heads of ViT and DiT), and the layers below get gradient from the second step on; a
    /// small gain starts near ln C and keeps a random readout's first gradients.
    pub readout_init_gain: f64,
    /// How the dense layers start (encoder, encoding projection, A′ and readout): `tch` (the
    /// default, as every run recorded without this field), or `flax` as the ET reference code
    /// starts them (`nn.Dense`: lecun-normal weights, zero biases; tch's weights have √2
    /// that standard deviation), or `torch`. A′'s bias starts at 0 under each, as the
    /// reference's (non-edges masked at the start). The presets keep `tch`, `flax` scoring
    /// within noise of it.
    pub dense_init: DenseInit,
    /// `Some(m)`: Graphormer's centrality encoding (Ying et al. 2021, eq. 5; not in the ET or
    /// CDAT papers): a learned embedding of each node's degree in the batch's graph, degrees
    /// ≥ m sharing the last row, added to its initial token. Masked attention normalises over
    /// neighbours, so without it a token sees its degree only through the Laplacian encodings,
    /// while the pooled-feature baseline and GIN's sums see degrees directly. Off in the
    /// presets, as it helps ET's CPU preset on NCI1 alone.
    pub degree_encoding: Option<i64>,
    /// Attention over the mask's pairs as an edge list (basin-core's sparse structure, with Â
    /// computed at each edge only) instead of dense `[B, H, N', N']` scores: the same energies
    /// and gradients up to rounding, in work that grows with the edges rather than the square
    /// of the padded tokens. For large sparse graphs (DD: 284 nodes and 1,431 directed edges
    /// per graph on average, so dense scores are about 98 % masked pairs); not with
    /// `adjacency = "reference-multiply"`, whose Â reaches every pair.
    pub sparse_attention: bool,
    /// Weight of ET's auxiliary edge reconstruction (Appendix D.3, the MNIST and CIFAR10
    /// models; 0: off): Â `[B, H, N', N']` projected by a Linear to the P edge-feature channels
    /// and fitted to the dense edge features by mean squared error over the real node pairs,
    /// added to the loss. Needs edge features in the batches (`batching.dense_edge_features`)
    /// and dense attention.
    pub edge_reconstruction: f64,
}

impl Default for GraphClassifierConfig {
    fn default() -> Self {
        Self {
            block: BlockConfig::default(),
            blocks: 1,
            conv_kernel: 3,
            adjacency: AdjacencyMode::Masked,
            gram: Gram::Dot,
            label_smoothing: 0.0,
            batch: 32,
            batching: BatchConfig::et_graph(),
            features: FeatureScaling::Standardize,
            readout_classes: None,
            readout: Readout::Cls,
            readout_initial: false,
            readout_degrees: false,
            readout_dropout: 0.0,
            readout_hidden: None,
            readout_init_gain: 1.0,
            dense_init: DenseInit::Tch,
            degree_encoding: None,
            sparse_attention: false,
            edge_reconstruction: 0.0,
        }
    }
}

impl GraphClassifierConfig {
    /// This model with the front end and readout of ET's and CDAT's CPU presets, one
    /// definition for both families: k = 8 Laplacian eigenvectors (`BatchConfig::tu_cpu`),
    /// [`Readout::ClsMoments`] (neither in the papers), and attention over the edges
    /// ([`Self::sparse_attention`], the same model): at this size it is the faster form on every
    /// TU set here, not only on large graphs ([`SPARSE_MEAN_NODES`](super::SPARSE_MEAN_NODES)).
    pub fn with_tu_cpu_front_end(self) -> Self {
        Self {
            batching: BatchConfig::tu_cpu(),
            readout: Readout::ClsMoments,
            sparse_attention: true,
            ..self
        }
    }

    /// Heads of Â: the `heads` of the block's first term that has one.
    pub fn heads(&self) -> Option<i64> {
        self.block.heads()
    }

    /// The factors of [`Self::batch_memory_lower_bound`]: batch, heads, padded tokens, steps.
    fn batch_memory_factors(&self, largest_graph: usize, items: usize) -> [u64; 4] {
        let n =
            (largest_graph.min(self.batching.max_nodes) + usize::from(self.batching.cls)) as u64;
        let b = self.batch.min(items.max(1)) as u64;
        match self.heads().filter(|_| !self.sparse_attention) {
            Some(h) => {
                let steps = self.block.steps.saturating_mul(self.blocks).max(1) as u64;
                [b, h.max(1) as u64, n, steps]
            }
            // No attention, or sparse attention: only the batch's mask (and, dense, the
            // one-channel X ⊗ X map of the front end) is N' × N'.
            None => [b, 1, n, 1],
        }
    }

    /// A lower bound, in bytes, on the memory one training batch needs: the float32 attention
    /// scores `[B, H, N', N']` that each descent step of each block keeps for the backward
    /// pass (without an attention term or with sparse attention, one float `[B, N', N']` map),
    /// with B the batch (at most `items`) and N' the padded token count (the largest graph
    /// under the node cap, plus CLS). Everything else comes on top, so a batch above the
    /// machine's memory cannot run.
    pub fn batch_memory_lower_bound(&self, largest_graph: usize, items: usize) -> u64 {
        let [b, h, n, steps] = self.batch_memory_factors(largest_graph, items);
        [b, h, n, n, steps]
            .iter()
            .fold(4u64, |acc, &x| acc.saturating_mul(x))
    }

    /// Refuses a batch whose [`Self::batch_memory_lower_bound`] exceeds `available` bytes,
    /// naming the fields that set it.
    pub fn check_batch_memory(
        &self,
        largest_graph: usize,
        items: usize,
        available: u64,
    ) -> Result<()> {
        let need = self.batch_memory_lower_bound(largest_graph, items);
        if need > available {
            let [b, h, n, steps] = self.batch_memory_factors(largest_graph, items);
            let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
            return Err(TaskError::config(
                "batch",
                format!(
                    "one padded batch needs at least {:.1} GiB (batch {b} × heads {h} × {n}² padded tokens × {steps} descent steps × 4 bytes of attention scores) but {:.1} GiB is available; lower `batch` or `batching.max_nodes`",
                    gib(need),
                    gib(available)
                ),
            ));
        }
        Ok(())
    }

    /// Checks the front end and the block.
    pub fn validate(&self) -> Result<()> {
        if !self.batching.cls {
            return Err(TaskError::config(
                "batching.cls",
                "the classifier reads the CLS token; enable it",
            ));
        }
        if self.blocks < 1 {
            return Err(TaskError::config("blocks", "must be ≥ 1"));
        }
        crate::refuse_corrections(&self.block)?;
        if self.conv_kernel < 1 || self.conv_kernel % 2 == 0 {
            return Err(TaskError::config(
                "conv_kernel",
                format!("an odd side ≥ 1, got {}", self.conv_kernel),
            ));
        }
        if !(0.0..1.0).contains(&self.label_smoothing) {
            return Err(TaskError::config(
                "label_smoothing",
                format!("in [0, 1), got {}", self.label_smoothing),
            ));
        }
        if self.batch < 1 {
            return Err(TaskError::config("batch", "must be ≥ 1"));
        }
        if self.batching.max_nodes < 1 {
            return Err(TaskError::config("batching.max_nodes", "must be ≥ 1"));
        }
        if let Some(pe) = &self.batching.pe
            && (pe.k == 0 || pe.k > self.batching.max_nodes)
        {
            return Err(TaskError::config(
                "batching.pe.k",
                format!(
                    "between 1 and the node cap ({}), got {}",
                    self.batching.max_nodes, pe.k
                ),
            ));
        }
        if !(0.0..1.0).contains(&self.readout_dropout) {
            return Err(TaskError::config(
                "readout_dropout",
                format!("in [0, 1), got {}", self.readout_dropout),
            ));
        }
        if self.readout_hidden.is_some_and(|h| h < 1) {
            return Err(TaskError::config("readout_hidden", "must be ≥ 1"));
        }
        if !(self.readout_init_gain >= 0.0 && self.readout_init_gain.is_finite()) {
            return Err(TaskError::config(
                "readout_init_gain",
                format!("a finite number ≥ 0, got {}", self.readout_init_gain),
            ));
        }
        if self.degree_encoding.is_some_and(|m| m < 1) {
            return Err(TaskError::config("degree_encoding", "must be ≥ 1"));
        }
        if self.readout_classes.is_some_and(|c| c < 2) {
            return Err(TaskError::config("readout_classes", "must be ≥ 2"));
        }
        if self.sparse_attention && self.adjacency == AdjacencyMode::ReferenceMultiply {
            return Err(TaskError::config(
                "sparse_attention",
                "reference-multiply lets Â reach every pair; use dense attention with it",
            ));
        }
        if !(self.edge_reconstruction >= 0.0 && self.edge_reconstruction.is_finite()) {
            return Err(TaskError::config(
                "edge_reconstruction",
                format!("a finite weight ≥ 0, got {}", self.edge_reconstruction),
            ));
        }
        if self.edge_reconstruction > 0.0
            && (self.sparse_attention
                || !self.batching.dense_edge_features
                || self.heads().is_none()
                || self.adjacency == AdjacencyMode::MaskOnly)
        {
            return Err(TaskError::config(
                "edge_reconstruction",
                "reconstructs the edge features from Â: needs dense attention with Â \
                 (`sparse_attention = false`, an attention term, `adjacency` other than \
                 `mask-only`) and `batching.dense_edge_features = true`",
            ));
        }
        self.block
            .validate()
            .map_err(|e| prefix_field("block", e))?;
        Ok(())
    }
}
