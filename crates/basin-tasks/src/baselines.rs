//! Baselines every classification report carries, trained by the same protocols on the same
//! splits as the energy models, so a table shows at a glance whether a model learned the graph:
//!
//! - [`PooledFeaturesLearner`]: **no graph** — per graph, the mean and standard deviation of
//!   its node attributes (one-hot label columns give the label histogram), its node and edge
//!   counts and degree statistics, standardised on the training graphs, into a small MLP.
//! - [`GinLearner`]: **message passing** — GIN (Xu et al., ICLR 2019) as PyTorch Geometric
//!   builds it: `h ← ReLU(BN(MLP((1 + ε) h + Σ_{neighbours} h)))`, MLP = Linear → BN → ReLU →
//!   Linear, for L layers, a sum readout of every layer (the input included) through its own
//!   linear head, summed; linears and batch norms initialised as PyTorch's
//!   ([`basin_core::init`]), the norms over the batch's nodes; messages as PyG
//!   passes them, gathered along an edge list and scattered into the receiving rows, so the
//!   work grows with the edges (not the square of the largest graph) and no graph is cut.
//! - [`NeighbourMeanLearner`]: the node-anomaly floor — each node's attributes with the mean of
//!   its 1-hop and its 2-hop neighbours' (GADBench's finding: simple neighbourhood aggregation
//!   with a plain classifier beats most GNNs), into an MLP with the weighted BCE of ET eq. 22.

use std::sync::Arc;

use basin_core::init::DenseInit;
use basin_core::norm::BatchNorm1d;
use basin_graph::batch::{BatchConfig, make_batch};
use basin_graph::features::Standardizer;
use basin_graph::{GraphDataset, NodeDataset};
use basin_train::TrainError;
use basin_train::loss::{anomaly_weight, cross_entropy, weighted_bce};
use basin_train::runner::{Learner, Scores, StepOutput};
use ndarray::Array2;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module, ModuleT};
use tch::{Device, Kind, Tensor};

use crate::graph_classification::graph_classes;
use crate::transformer::{Transformer, TransformerConfig};
use crate::{Result, TaskError, index_tensor};

/// A two-layer MLP's size and regularisation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MlpConfig {
    /// Hidden width.
    pub hidden: i64,
    /// Dropout after the hidden layer (training only).
    pub dropout: f64,
    /// Items per batch (`0`: the whole training set at once).
    pub batch: usize,
}

impl Default for MlpConfig {
    fn default() -> Self {
        Self {
            hidden: 64,
            dropout: 0.2,
            batch: 32,
        }
    }
}

/// A two-layer MLP over fixed feature rows, one row per item: the two floors' model.
struct RowMlp {
    vs: nn::VarStore,
    net: nn::SequentialT,
    x: Tensor,
}

impl std::fmt::Debug for RowMlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowMlp").field("x", &self.x.size()).finish()
    }
}

impl RowMlp {
    /// The MLP `x.ncols() → hidden → out` (ReLU, dropout) over the rows of `x`.
    fn new(x: &Array2<f32>, out: i64, cfg: &MlpConfig, device: Device) -> Self {
        let vs = nn::VarStore::new(device);
        let path = vs.root();
        let (n, f) = x.dim();
        let dropout = cfg.dropout;
        let net = nn::seq_t()
            .add(nn::linear(
                &path / "l1",
                f as i64,
                cfg.hidden,
                Default::default(),
            ))
            .add_fn(|t| t.relu())
            .add_fn_t(move |t, train| t.dropout(dropout, train))
            .add(nn::linear(
                &path / "l2",
                cfg.hidden,
                out,
                Default::default(),
            ));
        let rows: Vec<f32> = x.iter().copied().collect();
        let x = Tensor::from_slice(&rows)
            .view([n as i64, f as i64])
            .to_device(device);
        Self { vs, net, x }
    }

    /// The outputs `[items, out]` of the rows of `items`.
    fn forward(&self, items: &[usize], train: bool) -> Tensor {
        let idx = index_tensor(items, self.vs.device());
        self.net.forward_t(&self.x.index_select(0, &idx), train)
    }

    /// `t`'s rows of `items` (targets stored per item).
    fn rows(&self, t: &Tensor, items: &[usize]) -> Tensor {
        t.index_select(0, &index_tensor(items, self.vs.device()))
    }
}

/// The pooled description of every graph: attribute means and standard deviations, node and
/// edge counts, degree mean, standard deviation and maximum (`[G, 2F + 5]`).
pub fn pooled_features(data: &GraphDataset) -> Array2<f32> {
    let f = data.graphs.first().map_or(0, |g| g.node_features.ncols());
    let mut out = Array2::<f32>::zeros((data.graphs.len(), 2 * f + 5));
    for (i, g) in data.graphs.iter().enumerate() {
        let n = g.node_features.nrows().max(1) as f64;
        for j in 0..f {
            let col = g.node_features.column(j);
            let mean = col.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let var = col
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / n;
            out[[i, j]] = mean as f32;
            out[[i, f + j]] = var.sqrt() as f32;
        }
        let deg: Vec<f64> = g
            .adjacency
            .indptr()
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64)
            .collect();
        let dn = deg.len().max(1) as f64;
        let dmean = deg.iter().sum::<f64>() / dn;
        let dstd = (deg.iter().map(|d| (d - dmean).powi(2)).sum::<f64>() / dn).sqrt();
        let dmax = deg.iter().copied().fold(0.0, f64::max);
        let base = 2 * f;
        out[[i, base]] = g.node_features.nrows() as f32;
        out[[i, base + 1]] = g.adjacency.indices().len() as f32;
        out[[i, base + 2]] = dmean as f32;
        out[[i, base + 3]] = dstd as f32;
        out[[i, base + 4]] = dmax as f32;
    }
    out
}

/// No-graph baseline: pooled node features of each graph into an MLP.
#[derive(Debug)]
pub struct PooledFeaturesLearner {
    mlp: RowMlp,
    y: Tensor,
    batch: usize,
}

impl PooledFeaturesLearner {
    /// A learner on `data`, its pooled features standardised on the graphs `fit_on`.
    pub fn new(
        data: &GraphDataset,
        cfg: &MlpConfig,
        fit_on: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let (labels, classes) = graph_classes(data)?;
        let mut x = pooled_features(data);
        Standardizer::fit_rows(&x, fit_on).apply(&mut x);
        Ok(Self {
            mlp: RowMlp::new(&x, classes, cfg, device),
            y: Tensor::from_slice(&labels).to_device(device),
            batch: cfg.batch,
        })
    }
}

impl Learner for PooledFeaturesLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.mlp.vs
    }
    fn batch_size(&self) -> Option<usize> {
        (self.batch > 0).then_some(self.batch)
    }
    fn train_step(
        &mut self,
        items: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        let logits = self.mlp.forward(items, true);
        Ok(StepOutput::loss(cross_entropy(
            &logits,
            &self.mlp.rows(&self.y, items),
            0.0,
        )))
    }
    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let p = tch::no_grad(|| self.mlp.forward(items, false).softmax(-1, Kind::Double));
        Scores::from_tensor(&p)
    }
}

/// GIN's size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GinConfig {
    /// Message-passing layers L.
    pub layers: usize,
    /// Hidden width.
    pub hidden: i64,
    /// Dropout on the readout (training only).
    pub dropout: f64,
    /// Graphs per batch.
    pub batch: usize,
    /// `Some(m)`: only each graph's first m nodes (and the edges between them) are kept; `None`
    /// (the default): whole graphs, as PyTorch Geometric runs GIN.
    pub max_nodes: Option<usize>,
}

impl Default for GinConfig {
    /// 5 layers of width 64, dropout 0.5, batch 32 (Xu et al.; Errica et al.'s fair protocol).
    fn default() -> Self {
        Self {
            layers: 5,
            hidden: 64,
            dropout: 0.5,
            batch: 32,
            max_nodes: None,
        }
    }
}

/// One GIN layer: ε, the MLP (Linear → BN → ReLU → Linear) and the norm after it.
struct GinLayer {
    eps: Tensor,
    l1: nn::Linear,
    bn1: BatchNorm1d,
    l2: nn::Linear,
    bn2: BatchNorm1d,
}

/// A batch of graphs as PyTorch Geometric holds one: every node a row, the edges as index
/// pairs, each node's graph.
struct NodeBatch {
    /// Node attributes `[M, F]`, standardised.
    x: Tensor,
    /// `target[e]` receives the message of `source[e]` (the row and column of an adjacency
    /// entry; self loops and repeated entries dropped, as the dense mask drops them).
    source: Tensor,
    target: Tensor,
    /// The batch position of each node's graph.
    graph: Tensor,
}

/// What the graph-level neural baselines read: the graphs, each one's class, the node
/// attributes' width and their scaling fitted on the training graphs.
struct GraphInputs {
    data: Arc<GraphDataset>,
    labels: Vec<i64>,
    classes: i64,
    width: i64,
    scaling: Standardizer,
}

impl GraphInputs {
    /// The inputs of `data`, attributes standardised on the graphs `fit_on`; seeds libtorch's
    /// generator with `seed` first, so that the learner's weights drawn next depend on it.
    fn new(data: Arc<GraphDataset>, fit_on: &[usize], seed: u64) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let (labels, classes) = graph_classes(&data)?;
        let width = crate::node_width(
            &data.name,
            data.graphs.first().map_or(1, |g| g.node_features.ncols()),
        )?;
        Ok(Self {
            scaling: Standardizer::fit_graphs(&data, fit_on),
            data,
            labels,
            classes,
            width,
        })
    }

    /// The classes of the graphs `ids` on `device`.
    fn targets(&self, ids: &[usize], device: Device) -> Tensor {
        Tensor::from_slice(&ids.iter().map(|&i| self.labels[i]).collect::<Vec<_>>())
            .to_device(device)
    }
}

/// Message-passing baseline: GIN with a sum readout of every layer.
pub struct GinLearner {
    vs: nn::VarStore,
    layers: Vec<GinLayer>,
    heads: Vec<nn::Linear>,
    inputs: GraphInputs,
    cfg: GinConfig,
}

impl std::fmt::Debug for GinLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GinLearner")
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl GinLearner {
    /// A learner on `data` with attributes standardised on the graphs `fit_on`.
    pub fn new(
        data: Arc<GraphDataset>,
        cfg: &GinConfig,
        fit_on: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        let inputs = GraphInputs::new(data, fit_on, seed)?;
        let (f, classes) = (inputs.width, inputs.classes);
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let mut layers = Vec::new();
        let mut heads = vec![DenseInit::Torch.linear(&root / "head0", f, classes, true)];
        let mut width = f;
        for l in 0..cfg.layers {
            let p = &root / format!("layer{l}");
            layers.push(GinLayer {
                eps: p.zeros("eps", &[1]),
                l1: DenseInit::Torch.linear(&p / "l1", width, cfg.hidden, true),
                bn1: BatchNorm1d::new(&p / "bn1", cfg.hidden),
                l2: DenseInit::Torch.linear(&p / "l2", cfg.hidden, cfg.hidden, true),
                bn2: BatchNorm1d::new(&p / "bn2", cfg.hidden),
            });
            heads.push(DenseInit::Torch.linear(
                &root / format!("head{}", l + 1),
                cfg.hidden,
                classes,
                true,
            ));
            width = cfg.hidden;
        }
        Ok(Self {
            vs,
            layers,
            heads,
            inputs,
            cfg: cfg.clone(),
        })
    }

    /// The graphs `ids` as one [`NodeBatch`] on the learner's device.
    fn node_batch(&self, ids: &[usize]) -> Result<NodeBatch> {
        let GraphInputs { data, scaling, .. } = &self.inputs;
        let width = scaling.mean.len();
        let (mut x, mut source, mut target, mut graph) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut offset = 0i64;
        for (j, &i) in ids.iter().enumerate() {
            let g = data.graphs.get(i).ok_or_else(|| {
                TaskError::config("batch", format!("graph {i} of {}", data.graphs.len()))
            })?;
            let n = g.num_nodes().min(self.cfg.max_nodes.unwrap_or(usize::MAX));
            let mut rows = g.node_features.slice(ndarray::s![..n, ..]).to_owned();
            if rows.ncols() != width {
                return Err(TaskError::config(
                    "batch",
                    format!("graph {i} has {} attributes, not {width}", rows.ncols()),
                ));
            }
            scaling.apply(&mut rows);
            x.extend(rows.iter().copied());
            for q in 0..n {
                let mut last = None;
                for &k in g.adjacency.row(q) {
                    let k = k as usize;
                    if k != q && k < n && last != Some(k) {
                        target.push(offset + q as i64);
                        source.push(offset + k as i64);
                    }
                    last = Some(k);
                }
            }
            graph.extend(std::iter::repeat_n(j as i64, n));
            offset += n as i64;
        }
        let dev = self.vs.device();
        let index = |v: &[i64]| Tensor::from_slice(v).to_device(dev);
        Ok(NodeBatch {
            x: Tensor::from_slice(&x)
                .view([offset, width as i64])
                .to_device(dev),
            source: index(&source),
            target: index(&target),
            graph: index(&graph),
        })
    }

    fn logits(&self, ids: &[usize], train: bool) -> Result<Tensor> {
        let b = self.node_batch(ids)?;
        let pool = |h: &Tensor| {
            Tensor::zeros([ids.len() as i64, h.size()[1]], (h.kind(), h.device()))
                .index_add(0, &b.graph, h)
        };
        let mut h = b.x;
        let mut out = self.heads[0]
            .forward(&pool(&h))
            .dropout(self.cfg.dropout, train);
        for (layer, head) in self.layers.iter().zip(&self.heads[1..]) {
            let messages = h.index_select(0, &b.source);
            let agg = (&h * (&layer.eps + 1.0)).index_add(0, &b.target, &messages);
            let z = layer.bn1.forward_t(&layer.l1.forward(&agg), train)?.relu();
            h = layer.bn2.forward_t(&layer.l2.forward(&z), train)?.relu();
            out = out + head.forward(&pool(&h)).dropout(self.cfg.dropout, train);
        }
        Ok(out)
    }
}

impl Learner for GinLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        Some(basin_train::runner::ModelConfig::of(&self.cfg))
    }
    fn batch_size(&self) -> Option<usize> {
        Some(self.cfg.batch)
    }
    fn train_step(
        &mut self,
        items: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        let logits = self.logits(items, true)?;
        Ok(StepOutput::loss(cross_entropy(
            &logits,
            &self.inputs.targets(items, self.vs.device()),
            0.0,
        )))
    }
    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rows = Vec::with_capacity(items.len());
        for ids in items.chunks(self.cfg.batch.max(1)) {
            let p = tch::no_grad(|| self.logits(ids, false).map(|l| l.softmax(-1, Kind::Double)))?;
            rows.extend(Scores::from_tensor(&p)?.0);
        }
        Ok(Scores(rows))
    }
}

/// `x ‖ mean of 1-hop neighbours' x ‖ mean of 2-hop` (the row-normalised adjacency applied
/// once and twice; isolated nodes get zeros), `[N, 3F]`.
pub fn neighbour_means(data: &NodeDataset, x: &Array2<f32>) -> Array2<f32> {
    let adj = &data.graph.adjacency;
    let (n, f) = x.dim();
    let mean_of = |src: &Array2<f32>| {
        let mut out = Array2::<f32>::zeros((n, f));
        for (i, w) in adj.indptr().windows(2).enumerate() {
            let nbrs = &adj.indices()[w[0]..w[1]];
            if nbrs.is_empty() {
                continue;
            }
            let mut row = out.row_mut(i);
            for &j in nbrs {
                row += &src.row(j as usize);
            }
            row /= nbrs.len() as f32;
        }
        out
    };
    let one = mean_of(x);
    let two = mean_of(&one);
    ndarray::concatenate(ndarray::Axis(1), &[x.view(), one.view(), two.view()])
        .unwrap_or_else(|_| x.clone())
}

/// Node-anomaly floor: features and neighbour means into an MLP (full batch, weighted BCE).
#[derive(Debug)]
pub struct NeighbourMeanLearner {
    mlp: RowMlp,
    y: Tensor,
    labels: Vec<bool>,
}

impl NeighbourMeanLearner {
    /// A learner on `data`, attributes standardised on the nodes `fit_on` before averaging.
    pub fn new(
        data: &NodeDataset,
        cfg: &MlpConfig,
        fit_on: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let mut x = data.graph.node_features.clone();
        Standardizer::fit_rows(&x, fit_on).apply(&mut x);
        let x = neighbour_means(data, &x);
        let labels: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
        let y: Vec<f32> = labels.iter().map(|&b| f32::from(u8::from(b))).collect();
        Ok(Self {
            mlp: RowMlp::new(&x, 1, cfg, device),
            y: Tensor::from_slice(&y).to_device(device),
            labels,
        })
    }
}

impl Learner for NeighbourMeanLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.mlp.vs
    }
    fn batch_size(&self) -> Option<usize> {
        None
    }
    fn train_step(
        &mut self,
        items: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        let logits = self.mlp.forward(items, true).squeeze_dim(-1);
        let omega = anomaly_weight(&items.iter().map(|&i| self.labels[i]).collect::<Vec<_>>());
        Ok(StepOutput::loss(weighted_bce(
            &logits,
            &self.mlp.rows(&self.y, items),
            omega,
        )))
    }
    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let p = tch::no_grad(|| {
            self.mlp
                .forward(items, false)
                .squeeze_dim(-1)
                .sigmoid()
                .to_kind(Kind::Double)
        });
        Scores::from_tensor(&p)
    }
}

/// A plain graph transformer's size (CDAT Table 4's "GT"): pre-norm layers of masked softmax
/// attention over each node's neighbours (and the CLS token) and a feed-forward block, on the
/// graph classifier's front end (encoder, CLS, projected Laplacian encodings), CLS readout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphTransformerConfig {
    /// Token width D.
    pub dim: i64,
    /// Heads (D must be a multiple).
    pub heads: i64,
    /// Layers.
    pub layers: usize,
    /// Feed-forward width as a multiple of D.
    pub ffn: i64,
    /// Graphs per batch.
    pub batch: usize,
    /// Batching (CLS, cap, encodings).
    pub batching: BatchConfig,
}

impl Default for GraphTransformerConfig {
    /// D = 128, 8 heads, 4 layers, FFN 4·D (about a million parameters, as CDAT's GT).
    fn default() -> Self {
        Self {
            dim: 128,
            heads: 8,
            layers: 4,
            ffn: 4,
            batch: 64,
            batching: BatchConfig::et_graph(),
        }
    }
}

/// The graph transformer baseline.
pub struct GraphTransformerLearner {
    vs: nn::VarStore,
    encoder: nn::Linear,
    cls: Tensor,
    pe_proj: Option<nn::Linear>,
    layers: Transformer,
    readout: nn::Linear,
    inputs: GraphInputs,
    pe: Option<Arc<Vec<basin_graph::laplacian::LaplacianPe>>>,
    cfg: GraphTransformerConfig,
}

impl std::fmt::Debug for GraphTransformerLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphTransformerLearner")
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl GraphTransformerLearner {
    /// A learner on `data` (encodings `pe` as the graph classifier's), attributes standardised
    /// on the graphs `fit_on`.
    pub fn new(
        data: Arc<GraphDataset>,
        pe: Option<Arc<Vec<basin_graph::laplacian::LaplacianPe>>>,
        cfg: &GraphTransformerConfig,
        fit_on: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        if cfg.heads < 1 || cfg.dim % cfg.heads != 0 || !cfg.batching.cls {
            return Err(crate::TaskError::config(
                "gt",
                "dim a multiple of heads, and a CLS token to read out",
            ));
        }
        let inputs = GraphInputs::new(data, fit_on, seed)?;
        let (f, classes) = (inputs.width, inputs.classes);
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let d = cfg.dim;
        let layers = Transformer::new(
            &root,
            &TransformerConfig {
                dim: d,
                heads: cfg.heads,
                layers: cfg.layers,
                ffn: cfg.ffn,
                shared: false,
                bias: true,
            },
        )?;
        Ok(Self {
            encoder: nn::linear(&root / "encoder", f, d, Default::default()),
            cls: crate::graph_classification::cls_token(&root, d),
            pe_proj: cfg
                .batching
                .pe
                .as_ref()
                .map(|p| nn::linear(&root / "pe_proj", p.k as i64, d, Default::default())),
            layers,
            readout: nn::linear(&root / "readout", d, classes, Default::default()),
            vs,
            inputs,
            pe,
            cfg: cfg.clone(),
        })
    }

    fn logits(&self, ids: &[usize], rng: &mut ChaCha8Rng, train: bool) -> Result<Tensor> {
        let mut bcfg = self.cfg.batching.clone();
        if !train {
            bcfg.sign_flip = basin_graph::laplacian::SignFlip::None;
        }
        let mut b = make_batch(
            &self.inputs.data,
            ids,
            &bcfg,
            self.pe.as_ref().map(|p| p.as_slice()),
            rng,
        )?;
        self.inputs.scaling.apply_batch(&mut b, true);
        let batch = crate::graph_classification::GraphBatchOnDevice::new(&b, self.vs.device())?;
        let (features, pe, padding, mask) = batch.parts();
        let mut x =
            crate::graph_classification::with_cls(&self.encoder.forward(features), &self.cls);
        let n = x.size()[1];
        if let (Some(proj), Some(pe)) = (&self.pe_proj, pe) {
            x = x + proj.forward(pe);
        }
        // Each token attends its neighbours, the CLS token and itself; padded rows get no keys.
        let eye = Tensor::eye(n, (Kind::Bool, x.device())).unsqueeze(0);
        let allowed = (mask.logical_or(&eye)).logical_and(&padding.unsqueeze(1));
        let blocked = allowed.logical_not().unsqueeze(1); // [B, 1, N, N]
        let real = padding.to_kind(x.kind()).unsqueeze(-1);
        let x = self.layers.forward(&x, Some(&blocked), Some(&real));
        Ok(self.readout.forward(&x.select(1, 0)))
    }

    /// The number of trainable parameters.
    pub fn parameters(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum()
    }
}

impl Learner for GraphTransformerLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        Some(basin_train::runner::ModelConfig::of(&self.cfg))
    }
    fn batch_size(&self) -> Option<usize> {
        Some(self.cfg.batch)
    }
    fn train_step(
        &mut self,
        items: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        // One forward per size bucket (as the graph classifier it is compared with).
        let (mut logits, mut y) = (Vec::new(), Vec::new());
        // Its attention is dense (a masked `[B, H, N, N]` softmax).
        for ids in self.cfg.batching.buckets(&self.inputs.data, items, true) {
            logits.push(self.logits(&ids, rng, true)?);
            y.push(self.inputs.targets(&ids, self.vs.device()));
        }
        let y = Tensor::cat(&y, 0);
        Ok(StepOutput::loss(cross_entropy(
            &Tensor::cat(&logits, 0),
            &y,
            0.0,
        )))
    }
    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
        let (batch, batching, data) = (
            self.cfg.batch,
            self.cfg.batching.clone(),
            self.inputs.data.clone(),
        );
        crate::graph_classification::predict_in_buckets(
            &data,
            (&batching, true),
            items,
            batch,
            false,
            |ids| {
                tch::no_grad(|| {
                    self.logits(ids, &mut rng, false)
                        .map(|l| l.softmax(-1, Kind::Double))
                })
            },
        )
    }
}
