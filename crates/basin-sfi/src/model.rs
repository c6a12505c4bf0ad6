//! The whole GPS-family model (SFi-Former §4, Tables 5 and 6, on the GraphGPS code's encoders
//! and GraphGym heads): input encoders, a stack
//! of [`GpsLayer`]s and a GraphGym head. One model serves GraphGPS (Transformer branch), DFi-Former
//! (`dense` flow with the adjacency), SFi-Former (`prox-bb` flow) and the MPNN alone (no global
//! branch): they differ in [`GpsConfig`] only.
//!
//! - Nodes: OGB atom columns ([`NodeEncoder::Atom`]), a one-hot integer column through a
//!   Linear ([`NodeEncoder::OneHot`], GraphGym's `LinearNode` on PATTERN's 3 and CLUSTER's 7
//!   feature values) or real columns through a Linear ([`NodeEncoder::Linear`]: superpixels,
//!   VOC/COCO-SP), to `d − dim_pe` when a LapPE or RWSE encoding is concatenated, else `d`.
//! - Edges: OGB bond columns, real columns through a Linear, or one learned vector for every
//!   edge (`DummyEdge`).
//! - Head: GraphGym's MLP, `(layers − 1) × [Linear(d, d) → ReLU → row-wise L2 normalisation]`
//!   then `Linear(d, out)`, on the mean of each graph's nodes or on every node.
//!   Binary targets have one output (GraphGym's `dim_out = 1`).

use basin_core::init::DenseInit;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

use crate::attention::Adjacency;
use crate::encoders::{
    ATOM_VOCAB, BOND_VOCAB, ColumnEmbedding, EsLapPe, LapPe, LapSignFlip, PeModel, Rwse,
};
use crate::gps::{GpsConfig, GpsLayer, GraphBatchTensors};

/// How node features enter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum NodeEncoder {
    /// OGB's atom encoder on the 9 integer columns (Peptides-func).
    Atom,
    /// The first feature column as a class in `0..classes`, one-hot, through a Linear.
    OneHot {
        /// Feature values (PATTERN 3, CLUSTER 7).
        classes: i64,
    },
    /// The first `features` real columns through a Linear (GraphGym `LinearNode` on the MNIST
    /// and CIFAR10 superpixels' 3 and 5 columns, GPS `VOCNode` on PascalVOC/COCO-SP's 14).
    Linear {
        /// Feature columns read.
        features: i64,
    },
}

/// How edges are embedded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeEncoder {
    /// OGB's bond encoder on the 3 integer columns.
    Bond,
    /// One learned vector for every edge (graphs without edge features).
    Dummy,
    /// The first `features` real edge columns through a Linear (GraphGym `LinearEdge` on the
    /// superpixels' 1 column, GPS `VOCEdge` on PascalVOC/COCO-SP's 2).
    Linear {
        /// Feature columns read.
        features: i64,
    },
}

/// The positional or structural encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PosEnc {
    /// None.
    None,
    /// LapPE of `k` frequencies to `dim` features, concatenated to the nodes.
    LapPe {
        /// Frequencies.
        k: usize,
        /// Width.
        dim: i64,
        /// DeepSet (default) or Transformer across the frequencies.
        #[serde(default)]
        model: PeModel,
        /// Training sign flips shared by the batch (default, the GPS code) or per graph.
        #[serde(default)]
        sign_flip: LapSignFlip,
    },
    /// EquivStable LapPE of `k` frequencies, used by the GatedGCN gates (sets `es_gate`).
    EsLapPe {
        /// Frequencies.
        k: usize,
    },
    /// RWSE of `steps` walk lengths to `dim` features, concatenated to the nodes.
    Rwse {
        /// Walk lengths 1..=steps.
        steps: usize,
        /// Width.
        dim: i64,
    },
}

impl PosEnc {
    /// Laplacian frequencies the data must provide (0 for none).
    pub fn frequencies(&self) -> usize {
        match *self {
            Self::LapPe { k, .. } | Self::EsLapPe { k } => k,
            _ => 0,
        }
    }

    /// RWSE walk lengths the data must provide (0 for none).
    pub fn walk_steps(&self) -> usize {
        match *self {
            Self::Rwse { steps, .. } => steps,
            _ => 0,
        }
    }

    fn concat_dim(&self) -> i64 {
        match *self {
            Self::LapPe { dim, .. } | Self::Rwse { dim, .. } => dim,
            _ => 0,
        }
    }
}

/// What the head predicts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// The mean of each graph's nodes (GraphGym `GNNGraphHead`, `mean` pooling).
    Graph,
    /// Every node (GPS `inductive_node`).
    Node,
}

/// Settings of [`GpsModel`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpsModelConfig {
    /// Node features.
    pub node: NodeEncoder,
    /// Edge features.
    pub edge: EdgeEncoder,
    /// Positional encoding.
    pub pe: PosEnc,
    /// Number of GPS layers (0: encoders and head only, the model that ignores the graph).
    pub layers: usize,
    /// Every layer (its attention's `dim` is the width d).
    pub layer: GpsConfig,
    /// Head level.
    pub level: Level,
    /// Head depth (GraphGym `layers_post_mp`).
    pub head_layers: usize,
    /// Row-wise L2 normalisation after each hidden head layer (GraphGym's default, `has_l2norm`).
    pub head_l2norm: bool,
    /// Items per optimiser step.
    pub batch: usize,
}

impl Default for GpsModelConfig {
    fn default() -> Self {
        Self {
            node: NodeEncoder::Atom,
            edge: EdgeEncoder::Bond,
            pe: PosEnc::None,
            layers: 2,
            layer: GpsConfig::default(),
            level: Level::Graph,
            head_layers: 1,
            head_l2norm: true,
            batch: 32,
        }
    }
}

impl GpsModelConfig {
    /// The width d.
    pub fn dim(&self) -> i64 {
        self.layer.attention.dim
    }

    /// Refuses settings that cannot run, naming the field.
    pub fn validate(&self) -> basin_core::Result<()> {
        let bad = |field: &str, msg: String| Err(basin_core::CoreError::config(field, msg));
        let d = self.dim();
        let a = &self.layer.attention;
        if d < 1 {
            return bad("layer.attention.dim", format!("must be ≥ 1, got {d}"));
        }
        if a.heads < 1 || a.head_dim < 1 {
            return bad(
                "layer.attention",
                format!(
                    "heads and head_dim must be ≥ 1, got {} and {}",
                    a.heads, a.head_dim
                ),
            );
        }
        if a.multihead_init && a.adjacency == Adjacency::Only {
            return bad(
                "layer.attention.multihead_init",
                "`adjacency = only` has no queries or keys to start as multi-head attention's"
                    .into(),
            );
        }
        if let PosEnc::LapPe {
            dim,
            model: PeModel::Transformer { layers, heads },
            ..
        } = self.pe
            && (layers < 1 || heads < 1 || dim % heads != 0)
        {
            return bad(
                "pe.model",
                format!(
                    "a Transformer LapPE needs ≥ 1 layer and heads dividing pe.dim = {dim}, got {layers} layer(s), {heads} head(s)"
                ),
            );
        }
        if self.pe.concat_dim() >= d || self.pe.concat_dim() < 0 {
            return bad(
                "pe.dim",
                format!(
                    "must lie in 1..{d} (the width), got {}",
                    self.pe.concat_dim()
                ),
            );
        }
        if matches!(
            self.pe,
            PosEnc::LapPe { k: 0, .. } | PosEnc::EsLapPe { k: 0 }
        ) || matches!(self.pe, PosEnc::Rwse { steps: 0, .. })
        {
            return bad("pe", "k (or steps) must be ≥ 1".into());
        }
        if let NodeEncoder::OneHot { classes } = self.node
            && classes < 1
        {
            return bad("node.classes", format!("must be ≥ 1, got {classes}"));
        }
        if let NodeEncoder::Linear { features } = self.node
            && features < 1
        {
            return bad("node.features", format!("must be ≥ 1, got {features}"));
        }
        if let EdgeEncoder::Linear { features } = self.edge
            && features < 1
        {
            return bad("edge.features", format!("must be ≥ 1, got {features}"));
        }
        if self.head_layers < 1 {
            return bad("head_layers", "must be ≥ 1".into());
        }
        if self.batch < 1 {
            return bad("batch", "must be ≥ 1".into());
        }
        for (name, p) in [
            ("layer.dropout", self.layer.dropout),
            ("layer.attention.attn_dropout", a.attn_dropout),
        ] {
            if !(0.0..1.0).contains(&p) {
                return bad(name, format!("must lie in [0, 1), got {p}"));
            }
        }
        a.flow.validate()
    }
}

/// Inputs of one batch on the model's device.
#[derive(Debug)]
pub struct GpsInputs {
    /// Graph structure (edges, mask, Ã).
    pub graphs: GraphBatchTensors,
    /// Node features `[M, F]` (int64 for atom and one-hot encoders, float for `Linear`).
    pub x: Tensor,
    /// Edge features: `[E, 3]` int64 for the bond encoder, `[E, P]` float for `Linear`.
    pub edge_attr: Option<Tensor>,
    /// Eigenvector entries `[M, k]` (NaN past a graph's frequencies).
    pub eig_vecs: Option<Tensor>,
    /// Eigenvalues per node `[M, k]`.
    pub eig_vals: Option<Tensor>,
    /// RWSE `[M, steps]`.
    pub rwse: Option<Tensor>,
}

enum PeEncoder {
    None,
    LapPe(LapPe),
    Es(EsLapPe),
    Rwse(Rwse),
}

enum NodeIn {
    Atom(ColumnEmbedding),
    OneHot(i64, nn::Linear),
    Linear(nn::Linear),
}

enum EdgeIn {
    Bond(ColumnEmbedding),
    Linear(nn::Linear),
    Dummy(Tensor),
}

/// A GPS-family model.
pub struct GpsModel {
    cfg: GpsModelConfig,
    node: NodeIn,
    edge: EdgeIn,
    pe: PeEncoder,
    layers: Vec<GpsLayer>,
    head: Vec<nn::Linear>,
}

impl std::fmt::Debug for GpsModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpsModel").field("cfg", &self.cfg).finish()
    }
}

impl GpsModel {
    /// A model with `out` outputs under `path` (1 for a binary target).
    pub fn new(path: &nn::Path, cfg: &GpsModelConfig, out: i64) -> basin_core::Result<Self> {
        cfg.validate()?;
        let d = cfg.dim();
        let d_node = d - cfg.pe.concat_dim();
        let node = match cfg.node {
            NodeEncoder::Atom => {
                NodeIn::Atom(ColumnEmbedding::new(&(path / "atom"), &ATOM_VOCAB, d_node))
            }
            NodeEncoder::OneHot { classes } => NodeIn::OneHot(
                classes,
                DenseInit::Torch.linear(path / "node", classes, d_node, true),
            ),
            NodeEncoder::Linear { features } => {
                NodeIn::Linear(DenseInit::Torch.linear(path / "node", features, d_node, true))
            }
        };
        let edge = match cfg.edge {
            EdgeEncoder::Bond => {
                EdgeIn::Bond(ColumnEmbedding::new(&(path / "bond"), &BOND_VOCAB, d))
            }
            EdgeEncoder::Linear { features } => {
                EdgeIn::Linear(DenseInit::Torch.linear(path / "edge", features, d, true))
            }
            EdgeEncoder::Dummy => EdgeIn::Dummy(path.var(
                "dummy_edge",
                &[d],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 1.0,
                },
            )),
        };
        let pe = match cfg.pe {
            PosEnc::None => PeEncoder::None,
            PosEnc::LapPe { dim, model, .. } => {
                PeEncoder::LapPe(LapPe::new(&(path / "lap_pe"), dim, model))
            }
            PosEnc::EsLapPe { k } => {
                PeEncoder::Es(EsLapPe::new(&(path / "es_lap_pe"), k as i64, d))
            }
            PosEnc::Rwse { steps, dim } => {
                PeEncoder::Rwse(Rwse::new(&(path / "rwse"), steps as i64, dim))
            }
        };
        let layer_cfg = GpsConfig {
            es_gate: matches!(cfg.pe, PosEnc::EsLapPe { .. }),
            ..cfg.layer.clone()
        };
        let layers = (0..cfg.layers)
            .map(|l| GpsLayer::new(&(path / format!("layer{l}")), &layer_cfg))
            .collect();
        let mut head: Vec<nn::Linear> = (0..cfg.head_layers - 1)
            .map(|l| DenseInit::Torch.linear(path / format!("head{l}"), d, d, true))
            .collect();
        head.push(DenseInit::Torch.linear(path / "head_out", d, out, true));
        Ok(Self {
            cfg: cfg.clone(),
            node,
            edge,
            pe,
            layers,
            head,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GpsModelConfig {
        &self.cfg
    }

    fn missing(what: &str) -> basin_core::CoreError {
        basin_core::CoreError::config("inputs", format!("the configuration needs {what}"))
    }

    /// Encoded nodes `[M, d]`, edges `[E, d]` and the gates' positional embeddings.
    fn encode(
        &self,
        b: &GpsInputs,
        train: bool,
    ) -> basin_core::Result<(Tensor, Tensor, Option<Tensor>)> {
        let mut h = match &self.node {
            NodeIn::Atom(e) => e.forward(&b.x)?,
            NodeIn::OneHot(classes, lin) => {
                let col = b.x.select(1, 0);
                if col.numel() > 0 {
                    let (lo, hi) = (col.min().int64_value(&[]), col.max().int64_value(&[]));
                    if lo < 0 || hi >= *classes {
                        return Err(basin_core::CoreError::config(
                            "node.classes",
                            format!("feature values must lie in 0..{classes}, found {lo}..={hi}"),
                        ));
                    }
                }
                col.one_hot(*classes).to_kind(Kind::Float).apply(lin)
            }
            NodeIn::Linear(lin) => b.x.to_kind(Kind::Float).apply(lin),
        };
        let mut es = None;
        match &self.pe {
            PeEncoder::None => {}
            PeEncoder::LapPe(enc) => {
                let (Some(v), Some(l)) = (&b.eig_vecs, &b.eig_vals) else {
                    return Err(Self::missing("Laplacian eigenpairs"));
                };
                let per_graph = matches!(
                    self.cfg.pe,
                    PosEnc::LapPe {
                        sign_flip: LapSignFlip::PerGraph,
                        ..
                    }
                );
                let graph_of = per_graph.then_some(&b.graphs.batch);
                h = Tensor::cat(&[h, enc.forward(v, l, train, graph_of)], 1);
            }
            PeEncoder::Es(enc) => {
                let Some(v) = &b.eig_vecs else {
                    return Err(Self::missing("Laplacian eigenvectors"));
                };
                es = Some(enc.forward(v));
            }
            PeEncoder::Rwse(enc) => {
                let Some(r) = &b.rwse else {
                    return Err(Self::missing("RWSE statistics"));
                };
                h = Tensor::cat(&[h, enc.forward(r)], 1);
            }
        }
        let edges = b.graphs.src.size()[0];
        let e = match &self.edge {
            EdgeIn::Bond(enc) => {
                let Some(attr) = &b.edge_attr else {
                    return Err(Self::missing("bond features"));
                };
                enc.forward(attr)?
            }
            EdgeIn::Linear(lin) => {
                let Some(attr) = &b.edge_attr else {
                    return Err(Self::missing("edge features"));
                };
                attr.to_kind(Kind::Float).apply(lin)
            }
            EdgeIn::Dummy(v) => v.unsqueeze(0).expand([edges, self.cfg.dim()], false),
        };
        Ok((h, e, es))
    }

    /// Node states after the layers `[M, d]`.
    pub fn nodes(&self, b: &GpsInputs, train: bool) -> basin_core::Result<Tensor> {
        let (mut h, mut e, es) = self.encode(b, train)?;
        for layer in &self.layers {
            (h, e) = layer.forward(&h, &e, &b.graphs, es.as_ref(), train)?;
        }
        Ok(h)
    }

    /// Every layer's flows `Z` `[B, H, N*, N*]` in evaluation mode (for the sparsity report).
    pub fn flows(&self, b: &GpsInputs) -> basin_core::Result<Vec<Tensor>> {
        let (mut h, mut e, es) = self.encode(b, false)?;
        let mut out = Vec::new();
        for layer in &self.layers {
            if let Some(z) = layer.flows(&h, &b.graphs) {
                out.push(z);
            }
            (h, e) = layer.forward(&h, &e, &b.graphs, es.as_ref(), false)?;
        }
        Ok(out)
    }

    /// Each layer's solver trace in evaluation mode: the energy of eq. 9 (mean over graphs and
    /// heads) at each iterate, and at the exact minimiser (empty without flows).
    pub fn flow_traces(&self, b: &GpsInputs) -> basin_core::Result<Vec<(Vec<f64>, f64)>> {
        let (mut h, mut e, es) = self.encode(b, false)?;
        let mut out = Vec::new();
        for layer in &self.layers {
            out.extend(layer.flow_trace(&h, &b.graphs));
            (h, e) = layer.forward(&h, &e, &b.graphs, es.as_ref(), false)?;
        }
        Ok(out)
    }

    /// Logits: `[B, out]` for graph level, `[M, out]` for node level.
    pub fn forward(&self, b: &GpsInputs, train: bool) -> basin_core::Result<Tensor> {
        let h = self.nodes(b, train)?;
        let mut z = match self.cfg.level {
            Level::Node => h,
            Level::Graph => {
                let g = b.graphs.graphs;
                let sum = Tensor::zeros([g, h.size()[1]], (h.kind(), h.device())).index_add(
                    0,
                    &b.graphs.batch,
                    &h,
                );
                let count = Tensor::zeros([g], (h.kind(), h.device()))
                    .index_add(0, &b.graphs.batch, &h.ones_like().select(1, 0))
                    .clamp_min(1.0);
                sum / count.unsqueeze(1)
            }
        };
        let last = self.head.len() - 1;
        for (i, lin) in self.head.iter().enumerate() {
            z = z.apply(lin);
            if i < last {
                z = z.relu();
                if self.cfg.head_l2norm {
                    let norm = z
                        .square()
                        .sum_dim_intlist(&[1i64][..], true, z.kind())
                        .sqrt();
                    z = z / norm.clamp_min(1e-12);
                }
            }
        }
        Ok(z)
    }
}
