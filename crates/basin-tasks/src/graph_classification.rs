//! Graph classification with stacked energy blocks (ET Section 5, Appendix D;
//! reference-implementations §2; CDAT §2.1 runs the same front end with its own block).
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

use std::collections::HashMap;
use std::sync::Arc;

use basin_core::init::DenseInit;
use basin_core::{BlockConfig, EnergyBlock, Structure, TraceOptions};
use basin_graph::batch::{BatchConfig, GraphBatch, make_batch};
use basin_graph::features::{FeatureScaling, Standardizer};
use basin_graph::laplacian::{LaplacianPe, SignFlip, laplacian_pe_many};
use basin_graph::{Csr, GraphDataset};
use basin_train::TrainError;
use basin_train::loss::cross_entropy;
use basin_train::runner::{Learner, Scores, StepOutput};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

use crate::{Result, TaskError};

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

/// Configuration of a [`GraphClassifier`].
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
    /// which is what the pooled-feature baseline sees. Off in the presets: on ET's CPU preset
    /// (10-fold CV, paired over folds) it moved MUTAG by +0.19 ± 1.56 (fold seeds 0–2, 30
    /// folds), ENZYMES by +1.50 ± 1.69 and PROTEINS by +0.09 ± 0.51 (74.40 → 74.48 %), within
    /// noise.
    pub readout_initial: bool,
    /// The readout also sees four numbers about the graph's structure, each as ln(1 + ·): its
    /// node count and the mean, standard deviation and maximum of its nodes' degrees
    /// ([`structure_statistics`]; not in the papers). Masked softmax attention averages over a
    /// node's neighbours and cannot count them, while the pooled-feature baseline reads these
    /// counts directly: on PROTEINS a logistic regression on label fractions and ln(n + 1)
    /// gains 0.72 ± 0.28 points from the degrees' standard deviation
    /// (`crates/basin-repro/scripts/proteins_pooled_features.py`). Off in the presets, as ET's
    /// CPU preset scored no higher with it (fold seed 0, paired over folds): PROTEINS 75.03 →
    /// 74.49, −0.54 ± 0.76; ENZYMES 66.33 → 62.83, −3.50 ± 1.76; MUTAG (fold seeds 0–2) 86.17 →
    /// 84.75, −1.42 ± 1.20 (`crates/basin-repro/RESULTS.md`).
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
    /// default, every result recorded before this switch), or `flax` as the ET reference code
    /// starts them (`nn.Dense`: lecun-normal weights, zero biases; tch's weights have √2
    /// that standard deviation), or `torch`. A′'s bias starts at 0 under each, as the
    /// reference's (non-edges masked at the start). The presets keep `tch`: on MUTAG (`basin
    /// train` with the `et-graph` run file, fold seeds 0–2, 30 folds, paired) `flax` scored
    /// 83.64 against 83.14 %, +0.50 ± 1.20 (10 / 13 / 7 folds), within noise.
    pub dense_init: DenseInit,
    /// `Some(m)`: Graphormer's centrality encoding (Ying et al. 2021, eq. 5; not in the ET or
    /// CDAT papers): a learned embedding of each node's degree in the batch's graph, degrees
    /// ≥ m sharing the last row, added to its initial token. Masked attention normalises over
    /// neighbours, so without it a token sees its degree only through the Laplacian encodings,
    /// while the pooled-feature baseline and GIN's sums see degrees directly. Off in the
    /// presets, as it helps on NCI1 alone (ET's CPU preset, 10-fold CV, fold seed 0, paired
    /// over folds): NCI1 (m = 8) 73.36 → 76.25 %, +2.90 ± 0.98 (8 of 10 folds up); ENZYMES
    /// (m = 8) 62.67 → 63.00, +0.33 ± 1.95; PROTEINS (m = 16) 74.76 → 74.49 (CDAT 73.77 →
    /// 74.22); MUTAG (m = 8, fold seeds 0–2, 30 folds) 82.44 → 81.38, −1.05 ± 1.72. With
    /// `readout = "cls-moments"` and k = 8 on PROTEINS (m = 16, fold seed 0): 75.03 → 74.22,
    /// −0.81 ± 0.58.
    pub degree_encoding: Option<i64>,
    /// Attention over the mask's pairs as an edge list (basin-core's sparse structure, with Â
    /// computed at each edge only) instead of dense `[B, H, N', N']` scores: the same energies
    /// and gradients up to rounding, in work that grows with the edges rather than the square
    /// of the padded tokens. For large sparse graphs (DD: 284 nodes and 1,431 directed edges
    /// per graph on average, so dense scores are about 98 % masked pairs); not with
    /// `adjacency = "reference-multiply"`, whose Â reaches every pair.
    pub sparse_attention: bool,
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
        }
    }
}

impl GraphClassifierConfig {
    /// This model with the front end and readout of ET's and CDAT's CPU presets, one
    /// definition for both families: k = 8 Laplacian eigenvectors (`BatchConfig::tu_cpu`),
    /// [`Readout::ClsMoments`] (neither in the papers; measured in the presets' docs), and
    /// attention over the edges ([`Self::sparse_attention`], the same model): at this size it
    /// is the faster form on every TU set here, not only on large graphs ([`SPARSE_MEAN_NODES`]).
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
        self.block
            .validate()
            .map_err(|e| prefix_field("block", e))?;
        Ok(())
    }
}

/// A core config error with `prefix.` in front of its field.
pub(crate) fn prefix_field(prefix: &str, e: basin_core::CoreError) -> TaskError {
    match e {
        basin_core::CoreError::Config { field, message } => TaskError::Config {
            field: format!("{prefix}.{field}"),
            message,
        },
        other => other.into(),
    }
}

/// A basin-graph batch on the device: features and encodings `[B, N', F]`, padding `[B, N']`,
/// the CLS-augmented adjacency `[B, N', N']` and, when the batch was built with them, the dense
/// edge features `[B, N', N', P]`.
#[derive(Debug)]
pub struct GraphBatchOnDevice {
    features: Tensor,
    pe: Option<Tensor>,
    padding: Tensor,
    mask: Tensor,
    edge_features: Option<Tensor>,
}

impl GraphBatchOnDevice {
    /// Moves a basin-graph batch to `device`; errors if its arrays disagree on their shapes.
    pub fn new(b: &GraphBatch, device: Device) -> Result<Self> {
        let (bs, n) = b.padding.dim();
        let (fb, fn_, _) = b.features.dim();
        let (mb, mn, mn2) = b.mask.dim();
        if (fb, fn_) != (bs, n) || (mb, mn, mn2) != (bs, n, n) {
            return Err(TaskError::config(
                "batch",
                format!(
                    "inconsistent graph batch: padding {:?}, features {:?}, mask {:?}",
                    b.padding.dim(),
                    b.features.dim(),
                    b.mask.dim()
                ),
            ));
        }
        if let Some(pe) = &b.pe {
            let (pb, pn, _) = pe.dim();
            if (pb, pn) != (bs, n) {
                return Err(TaskError::config(
                    "batch",
                    format!("encodings {:?} for {bs} graphs of {n} tokens", pe.dim()),
                ));
            }
        }
        let t3 = |a: &ndarray::Array3<f32>| {
            let s = a.shape();
            let v: Vec<f32> = a.iter().copied().collect();
            Tensor::from_slice(&v)
                .view([s[0] as i64, s[1] as i64, s[2] as i64])
                .to_device(device)
        };
        let edge_features = match &b.edge_features {
            Some(e) => {
                let s = e.shape();
                if (s[0], s[1], s[2]) != (bs, n, n) {
                    return Err(TaskError::config(
                        "batch",
                        format!("edge features {:?} for {bs} graphs of {n} tokens", e.dim()),
                    ));
                }
                let v: Vec<f32> = e.iter().copied().collect();
                Some(
                    Tensor::from_slice(&v)
                        .view([s[0] as i64, s[1] as i64, s[2] as i64, s[3] as i64])
                        .to_device(device),
                )
            }
            None => None,
        };
        let (bs, n) = (bs as i64, n as i64);
        let padding: Vec<bool> = b.padding.iter().copied().collect();
        let mask: Vec<bool> = b.mask.iter().copied().collect();
        Ok(Self {
            features: t3(&b.features),
            pe: b.pe.as_ref().map(t3),
            padding: Tensor::from_slice(&padding).view([bs, n]).to_device(device),
            mask: Tensor::from_slice(&mask).view([bs, n, n]).to_device(device),
            edge_features,
        })
    }

    /// Its tensors: features `[B, N', F]`, encodings `[B, N', k]`, padding `[B, N']` (true for
    /// real tokens) and the CLS-augmented adjacency `[B, N', N']`.
    pub fn parts(&self) -> (&Tensor, Option<&Tensor>, &Tensor, &Tensor) {
        (&self.features, self.pe.as_ref(), &self.padding, &self.mask)
    }

    /// The dense edge features `[B, N', N', P]`, if the batch was built with them.
    pub fn edge_features(&self) -> Option<&Tensor> {
        self.edge_features.as_ref()
    }

    /// The same batch with its float tensors (features, encodings, edge features) in `kind`
    /// (e.g. float64 for exact checks; the model's weights must match).
    pub fn to_kind(self, kind: Kind) -> Self {
        Self {
            features: self.features.to_kind(kind),
            pe: self.pe.map(|p| p.to_kind(kind)),
            edge_features: self.edge_features.map(|e| e.to_kind(kind)),
            ..self
        }
    }
}

/// What a dataset gives the model of each graph: the width of its node features and, if it
/// has edge features, theirs. A bare `i64` converts to node features alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputWidths {
    /// Node features F.
    pub nodes: i64,
    /// Edge features P, where the dataset has them.
    pub edges: Option<i64>,
}

impl InputWidths {
    /// The widths of `data`'s features (its first graph's node features, at least 1; the edge
    /// features of the first graph that has them).
    pub fn of(data: &GraphDataset) -> Self {
        Self {
            nodes: data
                .graphs
                .first()
                .map_or(1, |g| g.node_features.ncols() as i64),
            edges: data
                .graphs
                .iter()
                .find_map(|g| g.edge_features.as_ref())
                .map(|e| e.ncols() as i64),
        }
    }
}

impl From<i64> for InputWidths {
    fn from(nodes: i64) -> Self {
        Self { nodes, edges: None }
    }
}

/// The model: encoder, CLS, projected encodings, Â, S blocks, linear readout of CLS.
#[derive(Debug)]
pub struct GraphClassifier {
    cfg: GraphClassifierConfig,
    encoder: nn::Linear,
    cls: Tensor,
    pe_proj: Option<nn::Linear>,
    degree: Option<nn::Embedding>,
    adjacency: Option<(nn::Conv2D, nn::Linear)>,
    /// The edge-feature channels A′ projects (`None`: the adjacency, one channel).
    edge_channels: Option<i64>,
    blocks: Vec<EnergyBlock>,
    readout: nn::Sequential,
}

impl GraphClassifier {
    /// Builds the model for inputs of `features` (node features, or [`InputWidths`] with the
    /// edge features) and `classes` classes (unless `cfg.readout_classes` says otherwise),
    /// with `cfg.blocks` blocks of `cfg.block` under `block0`, `block1`, …
    pub fn new(
        path: &nn::Path,
        cfg: &GraphClassifierConfig,
        features: impl Into<InputWidths>,
        classes: i64,
    ) -> Result<Self> {
        cfg.validate()?;
        let blocks = (0..cfg.blocks)
            .map(|s| {
                EnergyBlock::with_shared(
                    &(path / format!("block{s}")),
                    &(path / "shared"),
                    &cfg.block,
                )
            })
            .collect::<basin_core::Result<Vec<_>>>()
            .map_err(|e| prefix_field("block", e))?;
        Self::with_blocks(path, cfg, features, classes, blocks)
    }

    /// The front end of `cfg` around prebuilt `blocks` (a family's own, or a user's); the
    /// blocks' width must be `cfg.block.dim`.
    pub fn with_blocks(
        path: &nn::Path,
        cfg: &GraphClassifierConfig,
        features: impl Into<InputWidths>,
        classes: i64,
        blocks: Vec<EnergyBlock>,
    ) -> Result<Self> {
        cfg.validate()?;
        if blocks.is_empty() {
            return Err(TaskError::config("blocks", "at least one block"));
        }
        let inputs = features.into();
        // A′ (eq. 24) projects the edge features where there are some and the batches carry
        // them; else the adjacency, as one channel.
        let edge_channels = inputs
            .edges
            .filter(|&p| p > 0 && cfg.batching.dense_edge_features);
        let d = cfg.block.dim;
        let pad = cfg.conv_kernel / 2;
        let dense = cfg.dense_init;
        Ok(Self {
            encoder: dense.linear(path / "encoder", inputs.nodes, d, true),
            cls: path.var(
                "cls",
                &[d],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                },
            ),
            pe_proj: cfg
                .batching
                .pe
                .as_ref()
                .map(|pe| dense.linear(path / "pe_proj", pe.k as i64, d, true)),
            // Graphormer's initialisation: N(0, 0.02²).
            degree: cfg.degree_encoding.map(|m| {
                nn::embedding(
                    path / "degree",
                    m + 1,
                    d,
                    nn::EmbeddingConfig {
                        ws_init: nn::Init::Randn {
                            mean: 0.0,
                            stdev: 0.02,
                        },
                        ..Default::default()
                    },
                )
            }),
            adjacency: cfg
                .heads()
                .filter(|_| cfg.adjacency != AdjacencyMode::MaskOnly)
                .map(|heads| {
                    (
                        nn::conv2d(
                            path / "conv",
                            1,
                            heads,
                            cfg.conv_kernel,
                            nn::ConvConfig {
                                padding: pad,
                                bias: false,
                                ..Default::default()
                            },
                        ),
                        dense.linear_zero_bias(
                            path / "adj_proj",
                            edge_channels.unwrap_or(1),
                            heads,
                        ),
                    )
                }),
            edge_channels,
            blocks,
            readout: {
                let pooled = match cfg.readout {
                    Readout::Cls | Readout::Nodes => d,
                    Readout::ClsMean => 2 * d,
                    Readout::ClsMeanSize => 3 * d,
                    Readout::ClsMoments => 5 * d,
                };
                let seen = if cfg.readout_initial {
                    2 * pooled
                } else {
                    pooled
                } + if cfg.readout_degrees { 4 } else { 0 };
                let classes = cfg.readout_classes.unwrap_or(classes);
                let gain = cfg.readout_init_gain;
                let last = |vs: nn::Path, seen| {
                    let mut layer = dense.linear(vs, seen, classes, true);
                    tch::no_grad(|| {
                        let _ = layer.ws.g_mul_scalar_(gain);
                        if let Some(bs) = layer.bs.as_mut() {
                            let _ = bs.g_mul_scalar_(gain);
                        }
                    });
                    layer
                };
                match cfg.readout_hidden {
                    None => nn::seq().add(last(path / "readout", seen)),
                    Some(h) => nn::seq()
                        .add(dense.linear(path / "readout_hidden", seen, h, true))
                        .add_fn(|t| t.relu())
                        .add(last(path / "readout", h)),
                }
            },
            cfg: cfg.clone(),
        })
    }

    /// The stacked blocks, in order.
    pub fn blocks(&self) -> &[EnergyBlock] {
        &self.blocks
    }

    /// The configuration.
    pub fn config(&self) -> &GraphClassifierConfig {
        &self.cfg
    }

    /// Class logits `[B, C]` (`[M, C]` for every real node with [`Readout::Nodes`]).
    pub fn forward(&self, b: &GraphBatchOnDevice, train: bool) -> Result<Tensor> {
        let (x0, structure) = self.tokens_and_structure(b)?;
        let mut x = x0.shallow_clone();
        for block in &self.blocks {
            x = block.forward(&x, &structure, train);
        }
        let mut seen = pool(self.cfg.readout, &x, &b.padding);
        if self.cfg.readout_initial {
            seen = Tensor::cat(&[seen, pool(self.cfg.readout, &x0, &b.padding)], -1);
        }
        if self.cfg.readout_degrees {
            let stats = structure_statistics(&b.mask, &b.padding).to_kind(seen.kind());
            seen = Tensor::cat(&[seen, stats], -1);
        }
        let seen = if self.cfg.readout_dropout > 0.0 {
            seen.dropout(self.cfg.readout_dropout, train)
        } else {
            seen
        };
        Ok(self.readout.forward(&seen))
    }

    /// Each block's energy at each of its steps (evaluation mode), averaged over the batch.
    pub fn energy_per_step(&self, b: &GraphBatchOnDevice) -> Result<Vec<Vec<f64>>> {
        Ok(self
            .traces(b)?
            .into_iter()
            .map(|t| t.mean_total())
            .collect())
    }

    /// Each block's trace of its descent (evaluation mode).
    pub fn traces(&self, b: &GraphBatchOnDevice) -> Result<Vec<basin_core::Trace>> {
        tch::no_grad(|| {
            let (mut x, structure) = self.tokens_and_structure(b)?;
            let mut traces = Vec::with_capacity(self.blocks.len());
            for block in &self.blocks {
                let (next, trace) = block.run(&x, &structure, false, Some(TraceOptions::default()));
                traces.extend(trace);
                x = next;
            }
            Ok(traces)
        })
    }

    /// The initial tokens (CLS in slot 0, projected encodings added) and the attention
    /// structure with the parameterised adjacency of eq. 24.
    pub fn tokens_and_structure(&self, b: &GraphBatchOnDevice) -> Result<(Tensor, Structure)> {
        let mut x = self.encoder.forward(&b.features);
        let n = x.size()[1];
        // Slot 0 is the CLS token.
        let is_cls = Tensor::arange(n, (Kind::Int64, x.device()))
            .eq(0)
            .view([1, n, 1]);
        x = self
            .cls
            .view([1, 1, -1])
            .expand_as(&x)
            .where_self(&is_cls, &x);
        if let (Some(proj), Some(pe)) = (&self.pe_proj, &b.pe) {
            x = x + proj.forward(pe);
        }
        if let (Some(embedding), Some(max)) = (&self.degree, self.cfg.degree_encoding) {
            let (degree, nodes) = node_degrees(&b.mask, &b.padding);
            let degree = degree.clamp_max(max);
            let nodes = nodes.unsqueeze(-1).to_kind(x.kind());
            x = x + embedding.forward(&degree) * nodes;
        }
        let structure = if self.cfg.sparse_attention {
            self.sparse_structure(&x, b)?
        } else {
            self.dense_structure(&x, b)?
        };
        Ok((x, structure))
    }

    /// The tokens X ⊗ X is taken of: the initial tokens with padding zeroed (the kernel would
    /// otherwise carry padded tokens into the real pairs at a graph's border, and a graph's
    /// output would depend on its batch; zeros are what the convolution's own padding sees),
    /// over their norms with [`Gram::Cosine`].
    fn gram_tokens(&self, x: &Tensor, padding: &Tensor) -> Tensor {
        let xr = x * padding.to_kind(x.kind()).unsqueeze(-1);
        match self.cfg.gram {
            Gram::Dot => xr,
            Gram::Cosine => {
                let norm = xr.norm_scalaropt_dim(2.0, [-1], true).clamp_min(1e-12);
                xr / norm
            }
        }
    }

    /// What A′ projects (eq. 24's text), `[B, N', N', P]`: the edge features where the model has
    /// edge channels, else the adjacency as one channel. With `at` (flat indices into the
    /// `B·N'·N'` pairs) only those pairs, `[E, P]`.
    fn a_prime_input(
        &self,
        b: &GraphBatchOnDevice,
        kind: Kind,
        at: Option<&Tensor>,
    ) -> Result<Tensor> {
        let pick = |t: &Tensor| match at {
            Some(at) => {
                let channels = t.size()[3];
                t.reshape([-1, channels]).index_select(0, at).to_kind(kind)
            }
            None => t.to_kind(kind),
        };
        match (self.edge_channels, &b.edge_features) {
            (None, _) => Ok(pick(&b.mask.unsqueeze(-1))),
            (Some(p), Some(e)) if e.size().get(3) == Some(&p) => Ok(pick(e)),
            (Some(p), e) => Err(TaskError::config(
                "batching.dense_edge_features",
                format!(
                    "A′ projects {p} edge-feature channels; the batch has {}",
                    e.as_ref()
                        .map_or("none".to_owned(), |e| format!("{:?}", e.size()))
                ),
            )),
        }
    }

    /// The dense structure: the mask (or every pair), padding, and Â `[B, H, N', N']`.
    fn dense_structure(&self, x: &Tensor, b: &GraphBatchOnDevice) -> Result<Structure> {
        let structure = match self.cfg.adjacency {
            AdjacencyMode::Masked | AdjacencyMode::MaskOnly => {
                Structure::mask(b.mask.shallow_clone())?
            }
            AdjacencyMode::ReferenceMultiply => Structure::full(),
        }
        .with_self_attention(self.cfg.batching.self_loops)
        .with_padding(b.padding.shallow_clone())?;
        let Some((conv, adj_proj)) = &self.adjacency else {
            return Ok(structure);
        };
        // Â = Conv2D(X ⊗ X) ⊙ A′ (eq. 24), from the initial tokens, per head.
        let xr = self.gram_tokens(x, &b.padding);
        let outer = xr.matmul(&xr.transpose(1, 2)).unsqueeze(1);
        let a_prime = adj_proj
            .forward(&self.a_prime_input(b, x.kind(), None)?)
            .permute([0, 3, 1, 2]);
        Ok(structure.with_scale(conv.forward(&outer) * a_prime)?)
    }

    /// The sparse structure: the mask's pairs as an edge list over the flattened `B·N'`
    /// tokens, padding, and Â at each edge only: the kernel's window of X ⊗ X around the edge,
    /// `Σ_ij w_hij ⟨x_{q+i−p}, x_{k+j−p}⟩` (zero outside the graph's slots, as the dense
    /// convolution's zero padding), times A′ of the edge. The same values as
    /// [`Self::dense_structure`]'s at the edges, without its `[B, H, N', N']` convolution.
    fn sparse_structure(&self, x: &Tensor, b: &GraphBatchOnDevice) -> Result<Structure> {
        let size = x.size();
        let (bs, n) = (size[0], size[1]);
        let pairs = b.mask.nonzero(); // [E, 3]: graph, query, key
        let (graph, query, key) = (pairs.select(1, 0), pairs.select(1, 1), pairs.select(1, 2));
        let edges =
            basin_core::SparseEdges::new(&(&graph * n + &query), &(&graph * n + &key), bs * n)?;
        let structure = Structure::sparse(edges)
            .with_self_attention(self.cfg.batching.self_loops)
            .with_padding(b.padding.shallow_clone())?;
        let Some((conv, adj_proj)) = &self.adjacency else {
            return Ok(structure);
        };
        let Some(edges) = structure.sparse_edges() else {
            return Ok(structure);
        };
        let e = edges.len();
        let (tq, tk) = (edges.query(), edges.key());
        let graph = tq.divide_scalar_mode(n, "floor");
        let (qi, ki) = (tq.remainder(n), tk.remainder(n));
        let kernel = self.cfg.conv_kernel;
        let p = kernel / 2;
        // X ⊗ X per graph, zero-padded by p on each side as the convolution pads it (the batch's
        // mask is N' × N' per graph already): entry (q + i − p, k + j − p) of graph g is entry
        // g·S² + (q + i)·S + k + j of the flattened padded map, S = N' + 2p. Gathering the
        // kernel's window from it costs far less than per-edge products of token windows,
        // whose batched 3 × 3 matmuls are slow to differentiate.
        let xr = self.gram_tokens(x, &b.padding);
        let side = n + 2 * p;
        let gram = xr
            .matmul(&xr.transpose(1, 2))
            .constant_pad_nd([p, p, p, p])
            .reshape([-1]);
        let steps = Tensor::arange(kernel, (Kind::Int64, x.device()));
        let window = (steps.view([kernel, 1]) * side + steps.view([1, kernel])).view([1, -1]);
        let corner = (&graph * side * side + &qi * side + &ki).view([e, 1]);
        let windows = gram
            .index_select(0, &(corner + window).view([-1]))
            .view([e, kernel * kernel]);
        let heads = conv.ws.size()[0];
        let conv_at = windows.matmul(&conv.ws.view([heads, kernel * kernel]).tr());
        let flat = (&graph * n + &qi) * n + &ki;
        let a_prime = adj_proj.forward(&self.a_prime_input(b, x.kind(), Some(&flat))?);
        Ok(structure.with_edge_scale(conv_at * a_prime)?)
    }
}

/// Mean nodes per graph from which the TU tables run a dense-attention model over the edges
/// (`sparse_attention`), the same model: of the TU sets here only DD (284 nodes on average) is
/// above it, and there one training epoch of ET's CPU model took 9.9 s sparse against 26–27 s
/// dense (one thread, fold 0's first two epochs, their losses equal to four decimals). It was
/// set for DD; the CPU presets have since gone sparse everywhere
/// ([`GraphClassifierConfig::with_tu_cpu_front_end`]), as the edge list was faster on every TU
/// set for their D = 32 model (one thread, mean of epochs 2–3, fold 0: PROTEINS 1.7×, ENZYMES
/// 1.4×, NCI1 and Mutagenicity 1.3×, MUTAG level). The papers' presets (D = 128, meant for a
/// GPU) keep the threshold; for them the balance of the two forms was not measured.
pub const SPARSE_MEAN_NODES: f64 = 100.0;

/// Whether `data`'s graphs have [`SPARSE_MEAN_NODES`] or more nodes on average.
pub fn large_graphs(data: &GraphDataset) -> bool {
    let nodes: usize = data.graphs.iter().map(|g| g.num_nodes()).sum();
    nodes as f64 >= SPARSE_MEAN_NODES * data.graphs.len().max(1) as f64
}

/// The encodings of every graph of a dataset as the batches see it (computed once, in
/// parallel), if `batching` asks for them: a graph above the node cap is encoded cut to it, as
/// [`make_batch`] would encode it (else every batch holding it would recompute its encoding:
/// DD has graphs of up to 5,748 nodes under a cap of 500).
pub fn dataset_pe(data: &GraphDataset, batching: &BatchConfig) -> Result<Option<Vec<LaplacianPe>>> {
    match &batching.pe {
        Some(pe) => {
            let cut: Vec<(usize, basin_graph::Graph)> = data
                .graphs
                .iter()
                .enumerate()
                .filter(|(_, g)| g.num_nodes() > batching.max_nodes)
                .map(|(i, g)| (i, g.truncated(batching.max_nodes)))
                .collect();
            let mut adjs: Vec<&Csr> = data.graphs.iter().map(|g| &g.adjacency).collect();
            for (i, g) in &cut {
                adjs[*i] = &g.adjacency;
            }
            let t0 = std::time::Instant::now();
            tracing::info!(
                "{}: Laplacian encodings of {} graphs (k = {})…",
                data.name,
                adjs.len(),
                pe.k
            );
            let out = laplacian_pe_many(&adjs, pe)?;
            tracing::info!(
                "{}: encodings done in {:.1} s",
                data.name,
                t0.elapsed().as_secs_f64()
            );
            Ok(Some(out))
        }
        None => Ok(None),
    }
}

/// The class of every graph (as model labels), and the number of classes (at least 2).
pub fn graph_classes(data: &GraphDataset) -> Result<(Vec<i64>, i64)> {
    let labels: Vec<i64> = data
        .targets
        .classes()
        .ok_or_else(|| {
            TaskError::config(
                "data",
                format!(
                    "{}: graph classification needs one class per graph",
                    data.name
                ),
            )
        })?
        .iter()
        .map(|&c| c as i64)
        .collect();
    let classes = labels.iter().copied().max().map_or(2, |m| m + 1).max(2);
    Ok((labels, classes))
}

/// A [`GraphClassifier`] on a graph dataset; items are graph indices.
pub struct GraphClassifierLearner {
    vs: nn::VarStore,
    model: GraphClassifier,
    data: Arc<GraphDataset>,
    labels: Labels,
    pe: Option<Arc<Vec<LaplacianPe>>>,
    scaling: Standardizer,
}

/// What the learner trains on: a class per graph, or a class per node of each graph.
#[derive(Debug)]
enum Labels {
    Graphs(Vec<i64>),
    Nodes(Vec<Vec<i64>>),
}

/// The class of every node of every graph (node-class targets), and the number of classes.
pub fn node_classes(data: &GraphDataset) -> Result<(Vec<Vec<i64>>, i64)> {
    let basin_graph::Targets::NodeClasses { num_classes } = data.targets else {
        return Err(TaskError::config(
            "readout",
            format!("{}: `nodes` needs a class per node", data.name),
        ));
    };
    let labels = data
        .graphs
        .iter()
        .enumerate()
        .map(|(i, g)| {
            g.node_labels.clone().ok_or_else(|| {
                TaskError::config(format!("{} graph {i}", data.name), "no node labels")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((labels, (num_classes as i64).max(2)))
}

impl std::fmt::Debug for GraphClassifierLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphClassifierLearner")
            .field("cfg", &self.model.cfg)
            .finish()
    }
}

impl GraphClassifierLearner {
    /// A learner seeded by `seed`; `pe` are the dataset's encodings from [`dataset_pe`]
    /// (computed once and shared between folds); attribute statistics are fitted on the graphs
    /// `fit_on` (a split's training items) when `cfg.features` standardises.
    pub fn new(
        data: Arc<GraphDataset>,
        pe: Option<Arc<Vec<LaplacianPe>>>,
        cfg: &GraphClassifierConfig,
        fit_on: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let width = data.graphs.first().map_or(0, |g| g.node_features.ncols());
        let scaling = match cfg.features {
            FeatureScaling::Standardize => Standardizer::fit_graphs(&data, fit_on),
            FeatureScaling::Raw => Standardizer::identity(width),
        };
        let (labels, classes) = if cfg.readout == Readout::Nodes {
            let (l, c) = node_classes(&data)?;
            (Labels::Nodes(l), c)
        } else {
            let (l, c) = graph_classes(&data)?;
            (Labels::Graphs(l), c)
        };
        if cfg.readout_classes.is_some_and(|r| r < classes) {
            return Err(TaskError::config(
                "readout_classes",
                format!("{} has {classes} classes", data.name),
            ));
        }
        // Continuous edge attributes are scaled like the nodes' (a copy of the dataset; one-hot
        // edge labels need none).
        let scale_edges =
            cfg.features == FeatureScaling::Standardize && cfg.batching.dense_edge_features;
        let edges = scale_edges
            .then(|| Standardizer::fit_edges(&data, fit_on))
            .flatten();
        let data = match edges {
            Some(edges) if !edges.is_identity() => Arc::new(edges.scale_edges(&data)),
            _ => data,
        };
        let vs = nn::VarStore::new(device);
        let model = GraphClassifier::new(&vs.root(), cfg, InputWidths::of(&data), classes)?;
        Ok(Self {
            vs,
            model,
            data,
            labels,
            pe,
            scaling,
        })
    }

    /// The model.
    pub fn model(&self) -> &GraphClassifier {
        &self.model
    }

    fn batch(
        &self,
        ids: &[usize],
        train: bool,
        rng: &mut ChaCha8Rng,
    ) -> Result<(GraphBatchOnDevice, Tensor)> {
        let mut bcfg = self.model.cfg.batching.clone();
        if !train {
            bcfg.sign_flip = SignFlip::None;
        }
        let pe = self.pe.as_ref().map(|p| p.as_slice());
        let mut b = make_batch(&self.data, ids, &bcfg, pe, rng)?;
        self.scaling.apply_batch(&mut b, bcfg.cls);
        let y: Vec<i64> = match &self.labels {
            Labels::Graphs(l) => ids.iter().map(|&i| l[i]).collect(),
            Labels::Nodes(l) => ids.iter().flat_map(|&i| l[i].iter().copied()).collect(),
        };
        let b = GraphBatchOnDevice::new(&b, self.vs.device())?;
        if let Labels::Nodes(_) = self.labels {
            let cls = i64::from(bcfg.cls);
            let real = b.padding.sum(Kind::Int64).int64_value(&[]) - cls * ids.len() as i64;
            if real != y.len() as i64 {
                return Err(TaskError::config(
                    "batching.max_nodes",
                    format!(
                        "node readout needs every node in the batch: {real} of {} fit",
                        y.len()
                    ),
                ));
            }
        }
        Ok((b, Tensor::from_slice(&y).to_device(self.vs.device())))
    }

    /// Each block's energy at each step, averaged over the graphs `items` (evaluation mode).
    pub fn energy_per_step(&self, items: &[usize]) -> Result<Vec<Vec<f64>>> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (b, _) = self.batch(items, false, &mut rng)?;
        self.model.energy_per_step(&b)
    }

    /// Named curves over the graphs `items` (evaluation mode): each block's energy per step,
    /// `block s E`, and for dynamics with a storage functional its V, `block s V`.
    pub fn energy_curves(&self, items: &[usize]) -> Result<Vec<(String, Vec<f64>)>> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (b, _) = self.batch(items, false, &mut rng)?;
        let mut curves = Vec::new();
        for (s, t) in self.model.traces(&b)?.iter().enumerate() {
            curves.push((format!("block {s} E"), t.mean_total()));
            if let Some(v) = t.mean_storage() {
                curves.push((format!("block {s} V"), v));
            }
        }
        Ok(curves)
    }
}

/// Class probabilities of `items` in their order, computed `batch` graphs at a time and, within
/// those, per size bucket of `batching` by `probabilities(ids)` (rows in the order of `ids`: one
/// per graph, or one per node when `nodes`).
pub(crate) fn predict_in_buckets(
    data: &GraphDataset,
    batching: &BatchConfig,
    items: &[usize],
    batch: usize,
    nodes: bool,
    mut probabilities: impl FnMut(&[usize]) -> Result<Tensor>,
) -> std::result::Result<Scores, TrainError> {
    let mut rows: HashMap<usize, Vec<Vec<f64>>> = HashMap::with_capacity(items.len());
    for chunk in items.chunks(batch.max(1)) {
        for ids in batching.buckets(data, chunk) {
            let mut out = Scores::from_tensor(&probabilities(&ids)?)?.0.into_iter();
            for &i in &ids {
                let n = if nodes {
                    data.graphs.get(i).map_or(0, basin_graph::Graph::num_nodes)
                } else {
                    1
                };
                rows.insert(i, out.by_ref().take(n).collect());
            }
        }
    }
    Ok(Scores(
        items
            .iter()
            .flat_map(|i| rows.get(i).cloned().unwrap_or_default())
            .collect(),
    ))
}

impl Learner for GraphClassifierLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(self.model.config()).unwrap_or_default()
    }
    fn read_config(&self, recorded: &serde_json::Value) -> serde_json::Value {
        basin_train::runner::with_defaults::<GraphClassifierConfig>(recorded)
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.model.cfg.batch)
    }

    fn train_step(
        &mut self,
        items: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        // One forward per size bucket; the loss over their rows is the batch's.
        let (mut logits, mut ys, mut data) = (Vec::new(), Vec::new(), 0.0);
        for ids in self.model.cfg.batching.buckets(&self.data, items) {
            let t0 = std::time::Instant::now();
            let (b, y) = self.batch(&ids, true, rng)?;
            basin_core::device::synchronize(self.vs.device());
            data += t0.elapsed().as_secs_f64();
            logits.push(self.model.forward(&b, true)?);
            ys.push(y);
        }
        let (logits, y) = (Tensor::cat(&logits, 0), Tensor::cat(&ys, 0));
        Ok(StepOutput::loss(match self.labels {
            // The GNN Benchmark's per-batch class-weighted cross-entropy.
            Labels::Nodes(_) => basin_train::loss::batch_weighted_cross_entropy(&logits, &y),
            Labels::Graphs(_) => cross_entropy(&logits, &y, self.model.cfg.label_smoothing),
        })
        .with_data_seconds(data))
    }

    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let nodes = matches!(self.labels, Labels::Nodes(_));
        let (batch, batching) = (self.model.cfg.batch, self.model.cfg.batching.clone());
        predict_in_buckets(&self.data, &batching, items, batch, nodes, |ids| {
            let (b, _) = self.batch(ids, false, &mut rng)?;
            tch::no_grad(|| {
                self.model
                    .forward(&b, false)
                    .map(|l| l.softmax(-1, Kind::Double))
            })
        })
    }
}

/// Each token's degree in its graph, `[B, N]` (Int64), and which tokens are the graph's nodes
/// (`[B, N]`, Bool), from the batch's attention mask `[B, N, N]` and `padding` `[B, N]` (true
/// for real tokens, CLS in slot 0): a node's degree counts the real nodes other than itself
/// that it may attend (CLS, padding and a self-loop of the mask are not edges of the graph);
/// CLS and padding read 0.
pub fn node_degrees(mask: &Tensor, padding: &Tensor) -> (Tensor, Tensor) {
    let n = padding.size()[1];
    let device = padding.device();
    let not_cls = Tensor::arange(n, (Kind::Int64, device)).gt(0);
    let nodes = padding.logical_and(&not_cls.unsqueeze(0));
    let others = Tensor::eye(n, (Kind::Bool, device)).logical_not();
    let degree = mask
        .logical_and(&nodes.unsqueeze(1))
        .logical_and(&others)
        .logical_and(&nodes.unsqueeze(-1))
        .sum_dim_intlist(-1, false, Kind::Int64);
    (degree, nodes)
}

/// `[B, 4]` (float64): ln(1 + ·) of each graph's node count and of the mean, standard
/// deviation (population) and maximum of its nodes' degrees ([`node_degrees`]); 0 for a graph
/// without nodes. What [`GraphClassifierConfig::readout_degrees`] gives the readout.
pub fn structure_statistics(mask: &Tensor, padding: &Tensor) -> Tensor {
    let (degree, nodes) = node_degrees(mask, padding);
    let degree = degree.to_kind(Kind::Double);
    let nodes = nodes.to_kind(Kind::Double);
    let count = nodes.sum_dim_intlist(1, false, Kind::Double);
    let per = count.clamp_min(1.0);
    let mean = degree.sum_dim_intlist(1, false, Kind::Double) / &per;
    let centred = (&degree - mean.unsqueeze(1)) * &nodes;
    let std = ((&centred * &centred).sum_dim_intlist(1, false, Kind::Double) / &per).sqrt();
    let max = degree.amax(1, false);
    Tensor::stack(&[count, mean, std, max], 1).log1p()
}

/// What the readout sees of the final tokens `x: [B, N, D]` (CLS in slot 0, `padding` `[B, N]`
/// true for real tokens): `[B, D]`, `[B, 2D]`, `[B, 3D]` or `[B, 5D]` per graph, or `[M, D]`
/// for every real node with [`Readout::Nodes`], graph by graph.
pub fn pool(readout: Readout, x: &Tensor, padding: &Tensor) -> Tensor {
    let cls = x.select(1, 0);
    let n = x.size()[1];
    let not_cls = Tensor::arange(n, (Kind::Int64, x.device())).gt(0);
    match readout {
        Readout::Cls => cls,
        Readout::Nodes => x.index(&[Some(&padding.logical_and(&not_cls.unsqueeze(0)))]),
        Readout::ClsMean | Readout::ClsMeanSize | Readout::ClsMoments => {
            let real = padding.logical_and(&not_cls.unsqueeze(0));
            let nodes = real.to_kind(x.kind()).unsqueeze(-1);
            let count = nodes.sum_dim_intlist(1, false, x.kind()).clamp_min(1.0);
            let mean = (x * &nodes).sum_dim_intlist(1, false, x.kind()) / &count;
            let mut seen = vec![cls, mean.shallow_clone()];
            if readout != Readout::ClsMean {
                seen.push(&mean * (&count + 1.0).log());
            }
            if readout == Readout::ClsMoments {
                let centred = (x - mean.unsqueeze(1)) * &nodes;
                // ε keeps the gradient of the square root finite on one-node graphs.
                let var = (&centred * &centred).sum_dim_intlist(1, false, x.kind()) / &count;
                seen.push((var + 1e-5).sqrt());
                seen.push(
                    x.masked_fill(&real.logical_not().unsqueeze(-1), f64::NEG_INFINITY)
                        .amax(1, false)
                        // A graph without nodes reads 0, as its mean does.
                        .masked_fill(&real.any_dim(1, true).logical_not(), 0.0),
                );
            }
            Tensor::cat(&seen, 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path of three nodes (degrees 1, 2, 1) padded beside a graph of one node, CLS attending
    /// everything and a self-loop in the mask: the statistics count only the graph's edges.
    #[test]
    fn structure_statistics_count_the_graphs_own_edges() {
        let padding =
            Tensor::from_slice(&[true, true, true, true, true, true, false, false]).view([2, 4]);
        let mut m = vec![false; 2 * 16];
        let mut link = |g: usize, a: usize, b: usize| {
            m[g * 16 + a * 4 + b] = true;
            m[g * 16 + b * 4 + a] = true;
        };
        for g in 0..2 {
            for t in 0..4 {
                link(g, 0, t); // CLS with every slot, itself included
                link(g, t, t); // self-loops
            }
        }
        link(0, 1, 2);
        link(0, 2, 3);
        let mask = Tensor::from_slice(&m).view([2, 4, 4]);
        let (degree, _) = node_degrees(&mask, &padding);
        assert_eq!(
            Vec::<i64>::try_from(degree.view([-1])).unwrap(),
            [0, 1, 2, 1, 0, 0, 0, 0]
        );
        let stats = Vec::<f64>::try_from(structure_statistics(&mask, &padding).view([-1])).unwrap();
        let std = (2.0f64 / 9.0).sqrt();
        let want = [3.0, 4.0 / 3.0, std, 2.0, 1.0, 0.0, 0.0, 0.0].map(|v: f64| v.ln_1p());
        for (got, want) in stats.iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{stats:?} against {want:?}");
        }
    }

    #[test]
    fn the_size_readout_tells_apart_graphs_whose_mean_token_is_equal() {
        // Two graphs of 3 and 6 nodes whose node tokens are all equal, padded to 7 slots + CLS.
        let x = Tensor::ones([2, 7, 4], (Kind::Double, Device::Cpu)) * 0.5;
        let _ = x.select(1, 0).fill_(2.0);
        let padding = Tensor::from_slice(&[
            true, true, true, true, false, false, false, // CLS + 3 nodes
            true, true, true, true, true, true, true, // CLS + 6 nodes
        ])
        .view([2, 7]);
        let mean = pool(Readout::ClsMean, &x, &padding);
        assert_eq!(mean.size(), [2, 8]);
        assert!(
            mean.get(0).allclose(&mean.get(1), 0.0, 1e-12, false),
            "the mean should not see the size"
        );
        let sized = pool(Readout::ClsMeanSize, &x, &padding);
        assert_eq!(sized.size(), [2, 12]);
        for (row, n) in [(0, 3.0f64), (1, 6.0)] {
            let amplified = sized.get(row).narrow(0, 8, 4);
            let want = Tensor::full([4], 0.5 * (n + 1.0).ln(), (Kind::Double, Device::Cpu));
            assert!(
                amplified.allclose(&want, 0.0, 1e-12, false),
                "graph of {n} nodes"
            );
        }
    }

    #[test]
    fn the_moments_readout_is_the_std_and_max_of_the_real_nodes_only() {
        // Graph 0: CLS + nodes 1, 3 + one padded slot holding 100; graph 1: CLS + nodes −2, 0, 5.
        let x = Tensor::from_slice(&[9.0f64, 1.0, 3.0, 100.0, 9.0, -2.0, 0.0, 5.0]).view([2, 4, 1]);
        let padding =
            Tensor::from_slice(&[true, true, true, false, true, true, true, true]).view([2, 4]);
        let out = pool(Readout::ClsMoments, &x, &padding);
        assert_eq!(out.size(), [2, 5]);
        let var1 = (3.0f64.powi(2) + 1.0 + 4.0f64.powi(2)) / 3.0;
        let want = Tensor::from_slice(&[
            9.0,
            2.0,
            2.0 * 3.0f64.ln(),
            (1.0f64 + 1e-5).sqrt(),
            3.0,
            9.0,
            1.0,
            4.0f64.ln(),
            (var1 + 1e-5).sqrt(),
            5.0,
        ])
        .view([2, 5]);
        assert!(out.allclose(&want, 1e-12, 1e-12, false), "{out}");
        // The padded slot's value must not reach the output or take any gradient.
        let x = x.set_requires_grad(true);
        pool(Readout::ClsMoments, &x, &padding)
            .sum(Kind::Double)
            .backward();
        let g = x.grad();
        assert_eq!(g.double_value(&[0, 3, 0]), 0.0);
        assert!(g.isfinite().all().int64_value(&[]) == 1);
        // A graph of CLS alone reads finite values (max 0, std √ε), not −∞ or NaN.
        let empty =
            Tensor::from_slice(&[true, false, false, false, true, true, true, true]).view([2, 4]);
        let out = pool(Readout::ClsMoments, &x.detach(), &empty);
        assert!(out.isfinite().all().int64_value(&[]) == 1, "{out}");
        assert_eq!(out.double_value(&[0, 4]), 0.0);
    }

    #[test]
    fn the_batch_memory_bound_counts_the_attention_scores_of_every_step() {
        let mut cfg = GraphClassifierConfig {
            batch: 8,
            blocks: 2,
            ..GraphClassifierConfig::default()
        };
        cfg.block.steps = 3;
        let h = cfg.heads().unwrap_or(1) as u64;
        // 99 nodes + CLS = 100 tokens; the batch is capped by the items there are.
        assert_eq!(
            cfg.batch_memory_lower_bound(99, 100),
            4 * 8 * h * 100 * 100 * 6
        );
        assert_eq!(
            cfg.batch_memory_lower_bound(99, 2),
            4 * 2 * h * 100 * 100 * 6
        );
        // The node cap bounds N'.
        cfg.batching.max_nodes = 49;
        assert_eq!(
            cfg.batch_memory_lower_bound(10_000, 100),
            4 * 8 * h * 50 * 50 * 6
        );
        let need = cfg.batch_memory_lower_bound(10_000, 100);
        assert!(cfg.check_batch_memory(10_000, 100, need).is_ok());
        let err = cfg
            .check_batch_memory(10_000, 100, need - 1)
            .expect_err("too big");
        assert!(err.to_string().contains("batch"), "{err}");
        // Without an attention term only the X ⊗ X map counts, once.
        cfg.block.terms.retain(|t| !t.params.contains_key("heads"));
        assert_eq!(cfg.heads(), None);
        assert_eq!(cfg.batch_memory_lower_bound(10_000, 100), 4 * 8 * 50 * 50);
        // No overflow on absurd sizes.
        cfg.batching.max_nodes = usize::MAX - 1;
        assert_eq!(
            cfg.batch_memory_lower_bound(usize::MAX - 1, usize::MAX),
            u64::MAX
        );
    }

    /// A graph above the node cap is encoded as the batches see it: cut to the cap.
    #[test]
    fn dataset_encodings_of_large_graphs_are_those_of_the_cut_graph() {
        let cycle = |n: u32| {
            let src: Vec<u32> = (0..n).collect();
            let dst: Vec<u32> = (0..n).map(|a| (a + 1) % n).collect();
            let (adj, _) = Csr::from_edges(n as usize, &src, &dst).unwrap();
            let adj = adj.symmetrized();
            basin_graph::Graph::new(adj, ndarray::Array2::zeros((n as usize, 1))).unwrap()
        };
        let data = GraphDataset {
            name: "cycles".into(),
            graphs: vec![cycle(30), cycle(8)],
            targets: basin_graph::Targets::Classes {
                labels: vec![0, 1],
                num_classes: 2,
            },
            class_values: vec![0, 1],
            official_split: None,
        };
        let batching = BatchConfig {
            max_nodes: 20,
            ..BatchConfig::et_graph()
        };
        let Some(pe_cfg) = &batching.pe else {
            panic!("the preset has encodings")
        };
        let pe = dataset_pe(&data, &batching).unwrap().unwrap();
        let cut =
            basin_graph::laplacian::laplacian_pe(&data.graphs[0].truncated(20).adjacency, pe_cfg)
                .unwrap();
        assert_eq!(pe[0].vectors, cut.vectors);
        assert_eq!(pe[1].vectors.nrows(), 9, "8 nodes and CLS, uncut");
    }

    #[test]
    fn readout_hidden_adds_a_hidden_layer_before_the_class_logits() {
        let shapes = |hidden| {
            let cfg = GraphClassifierConfig {
                readout: Readout::ClsMeanSize,
                readout_hidden: hidden,
                ..GraphClassifierConfig::default()
            };
            let vs = nn::VarStore::new(Device::Cpu);
            let _model = GraphClassifier::new(&vs.root(), &cfg, 5, 3).unwrap();
            let mut v: Vec<(String, Vec<i64>)> = vs
                .variables()
                .into_iter()
                .filter(|(n, _)| n.starts_with("readout"))
                .map(|(n, t)| (n, t.size()))
                .collect();
            v.sort();
            (cfg.block.dim, v)
        };
        // Linear (the papers): one map from CLS ⊕ mean ⊕ size-scaled mean to the classes, under
        // the name existing checkpoints use.
        let (d, linear) = shapes(None);
        assert_eq!(
            linear,
            [
                ("readout.bias".to_string(), vec![3]),
                ("readout.weight".to_string(), vec![3, 3 * d]),
            ]
        );
        let (d, mlp) = shapes(Some(16));
        assert_eq!(
            mlp,
            [
                ("readout.bias".to_string(), vec![3]),
                ("readout.weight".to_string(), vec![3, 16]),
                ("readout_hidden.bias".to_string(), vec![16]),
                ("readout_hidden.weight".to_string(), vec![16, 3 * d]),
            ]
        );
    }
}
