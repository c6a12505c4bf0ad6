//! [`GpsModel`] on a graph dataset, for basin-train's protocols. Items are graphs; what is
//! scored follows the dataset's targets:
//!
//! - multi-label graphs (Peptides-func): one row of sigmoid scores per graph, the masked BCE of
//!   LRGB, scored by mean AP ([`TargetView::Labels`]);
//! - node classes (PATTERN, CLUSTER): one row of class probabilities per node, the GPS
//!   per-batch weighted cross-entropy, one output for two classes
//!   (`weighted_cross_entropy.py`), scored by `accuracy_SBM` ([`TargetView::PerNode`]);
//! - graph classes: softmax rows per graph, cross-entropy;
//! - real-valued graph targets (Peptides-struct): one row of predictions per graph, the L1 loss
//!   of GraphGPS's config (`loss_fun: l1`), scored by MAE over every target
//!   ([`TargetView::Labels`], [`basin_train::protocol::Metric::Mae`]);
//! - links (PCQM-Contact; GraphGPS `inductive_edge` with `edge_decoding: dot`): node-level
//!   outputs of the model's width (the head is GraphGym's `Linear(d, d)` post-MP layer), a pair's
//!   score is the dot product of its two nodes, trained by BCE on the file's labelled pairs
//!   (GraphGym's `cross_entropy` for one output; the published runs resample negatives each
//!   epoch, this trains on the pairs as stored), scored by MRR over each graph's positive links
//!   against every other node of the graph ([`TargetView::Ranking`]).
//!
//! The positional statistics (LapPE eigenpairs, RWSE) are computed once per dataset
//! ([`GpsData::new`], in parallel) and shared by every run.

use std::sync::Arc;

use basin_graph::GraphDataset;
use basin_graph::cache::EncodingCache;
use basin_graph::posenc::GpsLaplacian;
use basin_train::TrainError;
use basin_train::loss::{batch_weighted_cross_entropy, cross_entropy, masked_bce_with_logits};
use basin_train::protocol::TargetView;
use basin_train::runner::{Learner, Scores, StepOutput};
use ndarray::Array2;
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor, nn};

use crate::gps::GraphBatchTensors;
use crate::model::{EdgeEncoder, GpsInputs, GpsModel, GpsModelConfig, Level, NodeEncoder};

/// What the dataset's targets are, as the learner sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// One class per graph.
    GraphClasses(i64),
    /// Several binary labels per graph.
    MultiLabel(i64),
    /// One class per node.
    NodeClasses(i64),
    /// Several real values per graph.
    Regression(i64),
    /// Labelled node pairs per graph (link ranking).
    Links,
}

impl TaskKind {
    /// Outputs of the head for a model of width `dim` (1 for two node classes, as GraphGym's
    /// binary head; `dim` per node for links, whose pairs are scored by dot products).
    pub fn outputs(self, dim: i64) -> i64 {
        match self {
            Self::GraphClasses(c) | Self::MultiLabel(c) | Self::Regression(c) => c,
            Self::NodeClasses(2) => 1,
            Self::NodeClasses(c) => c,
            Self::Links => dim,
        }
    }
}

/// A dataset with its precomputed positional statistics.
#[derive(Debug)]
pub struct GpsData {
    /// The graphs.
    pub data: Arc<GraphDataset>,
    /// LapPE statistics per graph (when the model asks for frequencies).
    pub laplacian: Option<Vec<GpsLaplacian>>,
    /// RWSE per graph.
    pub rwse: Option<Vec<Array2<f32>>>,
    /// The task.
    pub task: TaskKind,
    /// Per item: a class per node, or the label vector (for [`TargetView`]).
    rows: Vec<Vec<f64>>,
    /// Per item: its class (graph classes).
    classes: Vec<f64>,
    /// Per item: its labelled node pairs (links).
    links: Vec<basin_graph::LinkTargets>,
    /// Per item: its positive pairs (links).
    positives: Vec<usize>,
}

impl GpsData {
    /// Computes `k` Laplacian frequencies and `steps` RWSE walk lengths (0: none) per graph, or
    /// reads them from the user's [`EncodingCache`].
    pub fn new(data: Arc<GraphDataset>, k: usize, steps: usize) -> Result<Self, TrainError> {
        let adjs: Vec<_> = data.graphs.iter().map(|g| &g.adjacency).collect();
        let cache = EncodingCache::user();
        let started = std::time::Instant::now();
        let (mut laplacian, mut rwse, mut cached) = (None, None, true);
        if k > 0 {
            let (found, hit) = cache.gps_laplacian(&adjs, k).map_err(TrainError::learner)?;
            (laplacian, cached) = (Some(found), hit);
        }
        if steps > 0 {
            let (found, hit) = cache.rwse(&adjs, steps).map_err(TrainError::learner)?;
            (rwse, cached) = (Some(found), cached && hit);
        }
        if k > 0 || steps > 0 {
            tracing::info!(
                "{}: positional statistics of {} graphs (LapPE k = {k}, RWSE {steps} steps) {} in {:.1} s",
                data.name,
                adjs.len(),
                if cached {
                    "read from the cache"
                } else {
                    "computed"
                },
                started.elapsed().as_secs_f64()
            );
        }
        let (mut rows, mut classes, mut links) = (Vec::new(), Vec::new(), Vec::new());
        let task = match &data.targets {
            basin_graph::Targets::Classes {
                labels,
                num_classes,
            } => {
                classes = labels.iter().map(|&c| c as f64).collect();
                TaskKind::GraphClasses(*num_classes as i64)
            }
            basin_graph::Targets::MultiLabel(y) => {
                rows = label_rows(y);
                TaskKind::MultiLabel(y.ncols() as i64)
            }
            basin_graph::Targets::Regression(y) => {
                rows = label_rows(y);
                TaskKind::Regression(y.ncols() as i64)
            }
            basin_graph::Targets::NodeClasses { num_classes } => {
                for (i, g) in data.graphs.iter().enumerate() {
                    let labels = g.node_labels.as_ref().ok_or_else(|| {
                        TrainError::learner(basin_core::CoreError::config(
                            format!("{} graph {i}", data.name),
                            "node-class targets need node labels",
                        ))
                    })?;
                    rows.push(labels.iter().map(|&c| c as f64).collect());
                }
                TaskKind::NodeClasses(*num_classes as i64)
            }
            basin_graph::Targets::Links(l) => {
                links = l.clone();
                TaskKind::Links
            }
        };
        let positives = links
            .iter()
            .map(|l| l.labels.iter().filter(|&&v| v > 0.5).count())
            .collect();
        Ok(Self {
            data,
            laplacian,
            rwse,
            task,
            rows,
            classes,
            links,
            positives,
        })
    }

    /// What the protocol scores each item against.
    pub fn targets(&self) -> TargetView<'_> {
        match self.task {
            TaskKind::GraphClasses(_) => TargetView::PerItem(&self.classes),
            TaskKind::MultiLabel(_) | TaskKind::Regression(_) => TargetView::Labels(&self.rows),
            TaskKind::Links => TargetView::Ranking(&self.positives),
            TaskKind::NodeClasses(_) => TargetView::PerNode(&self.rows),
        }
    }

    /// The model's inputs for graphs `ids` on `device`.
    pub fn inputs(
        &self,
        cfg: &GpsModelConfig,
        ids: &[usize],
        device: Device,
    ) -> Result<GpsInputs, TrainError> {
        let bad = |field: String, msg: &str| {
            TrainError::learner(basin_core::CoreError::config(field, msg.to_string()))
        };
        let columns = match cfg.node {
            NodeEncoder::Atom => crate::encoders::ATOM_VOCAB.len(),
            NodeEncoder::OneHot { .. } => 1,
            NodeEncoder::Linear { features } => features.max(0) as usize,
        };
        let edge_columns = match cfg.edge {
            EdgeEncoder::Bond => crate::encoders::BOND_VOCAB.len(),
            EdgeEncoder::Linear { features } => features.max(0) as usize,
            EdgeEncoder::Dummy => 0,
        };
        let real = matches!(cfg.node, NodeEncoder::Linear { .. });
        let k = cfg.pe.frequencies();
        let steps = cfg.pe.walk_steps();
        let (mut sizes, mut x, mut src, mut dst, mut attr) = (
            Vec::new(),
            Vec::<f32>::new(),
            Vec::new(),
            Vec::new(),
            Vec::<f32>::new(),
        );
        let (mut vecs, mut vals, mut walks) = (Vec::new(), Vec::new(), Vec::new());
        let mut offset = 0i64;
        for &i in ids {
            let g = self
                .data
                .graphs
                .get(i)
                .ok_or_else(|| bad(format!("item {i}"), "no such graph"))?;
            let n = g.adjacency.num_nodes();
            if g.node_features.ncols() < columns {
                return Err(bad(
                    format!("{} graph {i} node features", self.data.name),
                    "fewer columns than the node encoder reads",
                ));
            }
            for r in g.node_features.rows() {
                x.extend(r.iter().take(columns));
            }
            let edge_features = if edge_columns > 0 {
                let e = g.edge_features.as_ref().ok_or_else(|| {
                    bad(
                        format!("{} graph {i}", self.data.name),
                        "the edge encoder needs edge features",
                    )
                })?;
                if e.nrows() != g.adjacency.nnz() || e.ncols() < edge_columns {
                    return Err(bad(
                        format!("{} graph {i} edge features", self.data.name),
                        &format!("one row of {edge_columns} columns per edge expected"),
                    ));
                }
                Some(e)
            } else {
                None
            };
            let indices = g.adjacency.indices();
            for (r, w) in g.adjacency.indptr().windows(2).enumerate() {
                for (entry, &c) in indices.iter().enumerate().take(w[1]).skip(w[0]) {
                    src.push(offset + r as i64);
                    dst.push(offset + i64::from(c));
                    if let Some(e) = edge_features {
                        attr.extend(e.row(entry).iter().take(edge_columns));
                    }
                }
            }
            if k > 0 {
                let lap = self
                    .laplacian
                    .as_ref()
                    .and_then(|l| l.get(i))
                    .filter(|l| l.values.len() >= k)
                    .ok_or_else(|| bad("pe.k".into(), "more frequencies than were computed"))?;
                for r in 0..n {
                    vecs.extend((0..k).map(|j| lap.vectors[(r, j)]));
                    vals.extend(lap.values.iter().take(k));
                }
            }
            if steps > 0 {
                let w = self
                    .rwse
                    .as_ref()
                    .and_then(|w| w.get(i))
                    .filter(|w| w.ncols() >= steps)
                    .ok_or_else(|| {
                        bad("pe.steps".into(), "more walk lengths than were computed")
                    })?;
                for r in 0..n {
                    walks.extend((0..steps).map(|j| w[(r, j)]));
                }
            }
            sizes.push(n as i64);
            offset += n as i64;
        }
        let m = offset;
        let t = |v: &[f32], cols: usize| {
            Tensor::from_slice(v)
                .view([m, cols as i64])
                .to_device(device)
        };
        let src = Tensor::from_slice(&src).to_device(device);
        let dst = Tensor::from_slice(&dst).to_device(device);
        let edges = src.size()[0];
        // Atom, bond and one-hot encoders read category indices (stored as floats).
        let indices = |t: Tensor| t.round().to_kind(Kind::Int64);
        let x = Tensor::from_slice(&x).view([m, columns as i64]);
        let edge_attr = (edge_columns > 0).then(|| {
            let a = Tensor::from_slice(&attr).view([edges, edge_columns as i64]);
            if cfg.edge == EdgeEncoder::Bond {
                indices(a)
            } else {
                a
            }
            .to_device(device)
        });
        Ok(GpsInputs {
            graphs: GraphBatchTensors::new(&sizes, src, dst, Kind::Float),
            x: if real { x } else { indices(x) }.to_device(device),
            edge_attr,
            eig_vecs: (k > 0).then(|| t(&vecs, k)),
            eig_vals: (k > 0).then(|| t(&vals, k)),
            rwse: (steps > 0).then(|| t(&walks, steps)),
        })
    }
}

/// A [`GpsModel`] on a [`GpsData`]; items are graph indices.
pub struct GpsLearner {
    vs: nn::VarStore,
    model: GpsModel,
    data: Arc<GpsData>,
}

impl std::fmt::Debug for GpsLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpsLearner")
            .field("cfg", self.model.config())
            .finish()
    }
}

impl GpsLearner {
    /// A fresh model seeded by `seed`.
    pub fn new(
        data: Arc<GpsData>,
        cfg: &GpsModelConfig,
        seed: u64,
        device: Device,
    ) -> Result<Self, TrainError> {
        if data.task == TaskKind::Links && cfg.level != Level::Node {
            return Err(TrainError::learner(basin_core::CoreError::config(
                "architecture.level",
                "link targets score pairs of node outputs: the level must be \"node\"",
            )));
        }
        tch::manual_seed(seed as i64);
        let vs = nn::VarStore::new(device);
        let model = GpsModel::new(&vs.root(), cfg, data.task.outputs(cfg.dim()))
            .map_err(TrainError::learner)?;
        Ok(Self { vs, model, data })
    }

    /// The model.
    pub fn model(&self) -> &GpsModel {
        &self.model
    }

    /// Trainable parameters.
    pub fn parameters(&self) -> i64 {
        self.vs
            .trainable_variables()
            .iter()
            .map(Tensor::numel)
            .map(|n| n as i64)
            .sum()
    }

    fn inputs(&self, ids: &[usize]) -> Result<GpsInputs, TrainError> {
        self.data.inputs(self.model.config(), ids, self.vs.device())
    }

    /// Each layer's solver trace on the graphs `items` in evaluation mode (see
    /// [`GpsModel::flow_traces`]).
    pub fn flow_traces(&self, items: &[usize]) -> Result<Vec<(Vec<f64>, f64)>, TrainError> {
        let b = self.inputs(items)?;
        tch::no_grad(|| self.model.flow_traces(&b)).map_err(TrainError::learner)
    }

    /// The flows of graph `item` in evaluation mode, one `[n, n]` map per layer and head (rows
    /// are queries), as `f64` rows; empty without a global branch (the paper's Fig. 4).
    pub fn attention_maps(&self, item: usize) -> Result<Vec<Vec<Vec<f64>>>, TrainError> {
        let b = self.inputs(&[item])?;
        let n = b.graphs.max_nodes;
        let flows = tch::no_grad(|| self.model.flows(&b)).map_err(TrainError::learner)?;
        let mut maps = Vec::new();
        for z in flows {
            for h in 0..z.size()[1] {
                let m = z.get(0).get(h).to_kind(Kind::Double).view([n * n]);
                let v = Vec::<f64>::try_from(&m).map_err(TrainError::learner)?;
                maps.push(v.chunks(n as usize).map(<[f64]>::to_vec).collect());
            }
        }
        Ok(maps)
    }

    /// The share of flow entries between real nodes below 10⁻⁸ (the paper's threshold, Fig. 4)
    /// over every layer and head, on the graphs `items` in evaluation mode; `None` without a
    /// global branch.
    pub fn zero_share(&self, items: &[usize]) -> Result<Option<f64>, TrainError> {
        let (mut zeros, mut total) = (0.0, 0.0);
        for ids in items.chunks(self.model.config().batch.max(1)) {
            let b = self.inputs(ids)?;
            let flows = tch::no_grad(|| self.model.flows(&b)).map_err(TrainError::learner)?;
            let m = b.graphs.mask.to_kind(Kind::Float);
            let pair = (m.unsqueeze(2) * m.unsqueeze(1)).unsqueeze(1); // [B, 1, N, N]
            for z in flows {
                let real = pair.expand_as(&z);
                zeros += (z.lt(1e-8).to_kind(Kind::Float) * &real)
                    .sum(Kind::Double)
                    .double_value(&[]);
                total += real.sum(Kind::Double).double_value(&[]);
            }
        }
        Ok((total > 0.0).then(|| zeros / total))
    }
}

/// The rows of a `[G, T]` label array as `f64` vectors.
fn label_rows(y: &Array2<f32>) -> Vec<Vec<f64>> {
    y.rows()
        .into_iter()
        .map(|r| r.iter().map(|&v| f64::from(v)).collect())
        .collect()
}

impl GpsLearner {
    /// The label vectors of the graphs `items`, `[items, T]` on the learner's device.
    fn label_tensor(&self, items: &[usize]) -> Tensor {
        let y: Vec<f32> = items
            .iter()
            .flat_map(|&i| self.data.rows[i].iter().map(|&v| v as f32))
            .collect();
        Tensor::from_slice(&y)
            .view([items.len() as i64, -1])
            .to_device(self.vs.device())
    }

    /// One row per positive link of the graphs `ids` (node outputs `h` in batch order): the
    /// link's dot-product score, then those of its source with every other node of the graph
    /// (GraphGPS `compute_mrr`).
    fn link_rankings(&self, ids: &[usize], h: &Tensor) -> Result<Vec<Vec<f64>>, TrainError> {
        let mut rows = Vec::new();
        let mut offset = 0i64;
        for &i in ids {
            let n = self.data.data.graphs[i].num_nodes() as i64;
            let hg = h.narrow(0, offset, n).to_kind(Kind::Double);
            offset += n;
            let scores = hg.matmul(&hg.tr()).view([n * n]);
            let scores = Vec::<f64>::try_from(&scores).map_err(TrainError::learner)?;
            let l = &self.data.links[i];
            for (p, _) in l.pairs.iter().zip(&l.labels).filter(|(_, y)| **y > 0.5) {
                let (src, dst) = (p[0] as usize, p[1] as usize);
                let row = &scores[src * n as usize..(src + 1) * n as usize];
                let mut r = Vec::with_capacity(n as usize);
                r.push(row[dst]);
                r.extend(
                    row.iter()
                        .enumerate()
                        .filter(|&(k, _)| k != dst)
                        .map(|(_, &v)| v),
                );
                rows.push(r);
            }
        }
        Ok(rows)
    }
}

impl Learner for GpsLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        Some(basin_train::runner::ModelConfig::of(self.model.config()))
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.model.config().batch)
    }

    fn train_step(
        &mut self,
        items: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> Result<StepOutput, TrainError> {
        let t0 = std::time::Instant::now();
        let b = self.inputs(items)?;
        let device = self.vs.device();
        basin_core::device::synchronize(device);
        let data = t0.elapsed().as_secs_f64();
        let logits = self.model.forward(&b, true).map_err(TrainError::learner)?;
        let loss = match self.data.task {
            TaskKind::GraphClasses(_) => {
                let y: Vec<i64> = items.iter().map(|&i| self.data.classes[i] as i64).collect();
                cross_entropy(&logits, &Tensor::from_slice(&y).to_device(device), 0.0)
            }
            TaskKind::MultiLabel(_) => masked_bce_with_logits(&logits, &self.label_tensor(items)),
            TaskKind::Regression(_) => {
                logits.l1_loss(&self.label_tensor(items), tch::Reduction::Mean)
            }
            TaskKind::NodeClasses(_) => {
                let y: Vec<i64> = items
                    .iter()
                    .flat_map(|&i| self.data.rows[i].iter().map(|&v| v as i64))
                    .collect();
                batch_weighted_cross_entropy(&logits, &Tensor::from_slice(&y).to_device(device))
            }
            TaskKind::Links => {
                let (mut a, mut b, mut y) = (Vec::new(), Vec::new(), Vec::new());
                let mut offset = 0i64;
                for &i in items {
                    let l = &self.data.links[i];
                    for (p, &label) in l.pairs.iter().zip(&l.labels) {
                        a.push(offset + i64::from(p[0]));
                        b.push(offset + i64::from(p[1]));
                        y.push(label);
                    }
                    offset += self.data.data.graphs[i].num_nodes() as i64;
                }
                let pick =
                    |v: &[i64]| logits.index_select(0, &Tensor::from_slice(v).to_device(device));
                let scores =
                    (pick(&a) * pick(&b)).sum_dim_intlist(&[1i64][..], true, logits.kind());
                let y = Tensor::from_slice(&y).view([-1, 1]).to_device(device);
                masked_bce_with_logits(&scores, &y)
            }
        };
        Ok(StepOutput::loss(loss).with_data_seconds(data))
    }

    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        let mut rows = Vec::new();
        for ids in items.chunks(self.model.config().batch.max(1)) {
            let b = self.inputs(ids)?;
            let logits =
                tch::no_grad(|| self.model.forward(&b, false)).map_err(TrainError::learner)?;
            if self.data.task == TaskKind::Links {
                rows.extend(self.link_rankings(ids, &logits)?);
                continue;
            }
            let p = match self.data.task {
                TaskKind::MultiLabel(_) => logits.sigmoid(),
                TaskKind::Regression(_) => logits,
                TaskKind::NodeClasses(2) => {
                    let p = logits.sigmoid();
                    Tensor::cat(&[p.ones_like() - &p, p], 1)
                }
                _ => logits.softmax(-1, Kind::Float),
            };
            rows.extend(Scores::from_tensor(&p.to_kind(Kind::Double))?.0);
        }
        Ok(Scores(rows))
    }
}
