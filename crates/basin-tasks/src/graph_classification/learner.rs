//! The learner the protocols drive: batches (in size buckets), the loss and the predictions.

use std::collections::HashMap;
use std::sync::Arc;

use basin_graph::GraphDataset;
use basin_graph::batch::{BatchConfig, make_batch};
use basin_graph::features::{FeatureScaling, Standardizer};
use basin_graph::laplacian::{LaplacianPe, SignFlip};
use basin_train::TrainError;
use basin_train::loss::cross_entropy;
use basin_train::runner::{Learner, Scores, StepOutput};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tch::nn;
use tch::{Device, Kind, Tensor};

use super::*;
use crate::{Result, TaskError};

/// A [`GraphClassifier`] on a graph dataset; items are graph indices.
pub struct GraphClassifierLearner {
    vs: nn::VarStore,
    model: GraphClassifier,
    data: Arc<GraphDataset>,
    labels: Labels,
    pe: Option<Arc<Vec<LaplacianPe>>>,
    scaling: Standardizer,
}

/// What the learner trains on: a class per graph, a class per node of each graph, or real
/// values per graph (`[G, T]`, e.g. ZINC's solubility: the L1 loss, as ET Appendix D.3).
#[derive(Debug)]
enum Labels {
    Graphs(Vec<i64>),
    Nodes(Vec<Vec<i64>>),
    Values(ndarray::Array2<f32>),
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
        let width = data.graphs.first().map_or(1, |g| g.node_features.ncols());
        crate::node_width(&data.name, width)?;
        let scaling = match cfg.features {
            FeatureScaling::Standardize => Standardizer::fit_graphs(&data, fit_on),
            FeatureScaling::Raw => Standardizer::identity(width),
        };
        let (labels, classes) = match &data.targets {
            _ if cfg.readout == Readout::Nodes => {
                let (l, c) = node_classes(&data)?;
                (Labels::Nodes(l), c)
            }
            basin_graph::Targets::Regression(y) => {
                if cfg.readout_classes.is_some() {
                    return Err(TaskError::config(
                        "readout_classes",
                        format!("{} has real-valued targets, not classes", data.name),
                    ));
                }
                (Labels::Values(y.clone()), y.ncols() as i64)
            }
            _ => {
                let (l, c) = graph_classes(&data)?;
                (Labels::Graphs(l), c)
            }
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
        let y = match &self.labels {
            Labels::Graphs(l) => Tensor::from_slice(&ids.iter().map(|&i| l[i]).collect::<Vec<_>>()),
            Labels::Nodes(l) => Tensor::from_slice(
                &ids.iter()
                    .flat_map(|&i| l[i].iter().copied())
                    .collect::<Vec<_>>(),
            ),
            Labels::Values(y) => {
                let rows: Vec<f32> = ids.iter().flat_map(|&i| y.row(i).to_vec()).collect();
                Tensor::from_slice(&rows).view([ids.len() as i64, y.ncols() as i64])
            }
        };
        let b = GraphBatchOnDevice::new(&b, self.vs.device())?;
        if let Labels::Nodes(_) = self.labels {
            let cls = i64::from(bcfg.cls);
            let real = b.padding.sum(Kind::Int64).int64_value(&[]) - cls * ids.len() as i64;
            let nodes = y.size()[0];
            if real != nodes {
                return Err(TaskError::config(
                    "batching.max_nodes",
                    format!("node readout needs every node in the batch: {real} of {nodes} fit"),
                ));
            }
        }
        Ok((b, y.to_device(self.vs.device())))
    }

    /// Each block's energy at each step, averaged over the graphs `items` (evaluation mode).
    pub fn energy_per_step(&self, items: &[usize]) -> Result<Vec<Vec<f64>>> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (b, _) = self.batch(items, false, &mut rng)?;
        self.model.energy_per_step(&b)
    }

    /// The first block's descent on graph `item` drawn over its energy landscape, beside plain
    /// gradient flow at the block's step size (CDAT Figures 1 and 3;
    /// [`basin_core::landscape`]), on a `grid × grid` lattice; evaluation mode.
    pub fn landscape(&self, item: usize, grid: usize) -> Result<basin_core::landscape::Landscape> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (b, _) = self.batch(&[item], false, &mut rng)?;
        let (x, structure) = tch::no_grad(|| self.model.tokens_and_structure(&b))?;
        let block = self
            .model
            .blocks()
            .first()
            .ok_or_else(|| TaskError::config("blocks", "no block to draw"))?;
        let alpha = self.model.cfg.block.dynamics.alpha().unwrap_or(0.1);
        Ok(basin_core::landscape::landscape(
            block, &x, &structure, alpha, grid,
        ))
    }

    /// The energy of each graph of `items` along the last block's descent (evaluation mode), by
    /// class (`labels[i]` item `i`'s): per class, the quartiles at each step.
    pub fn graph_energy_by_class(
        &self,
        items: &[usize],
        labels: &[f64],
    ) -> Result<Vec<basin_train::quartiles::StepQuartiles>> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut values: Vec<Vec<f64>> = Vec::new();
        for chunk in items.chunks(64) {
            let (b, _) = self.batch(chunk, false, &mut rng)?;
            let Some(last) = self.model.traces(&b)?.pop() else {
                return Ok(Vec::new());
            };
            let total: Vec<Vec<f64>> = Vec::try_from(
                &last
                    .total
                    .to_kind(tch::Kind::Double)
                    .to_device(tch::Device::Cpu),
            )?;
            values.resize(total.len(), Vec::new());
            for (step, row) in values.iter_mut().zip(total) {
                step.extend(row);
            }
        }
        let groups: Vec<String> = items
            .iter()
            .map(|&i| format!("class {}", labels.get(i).copied().unwrap_or(f64::NAN)))
            .collect();
        let mut by_class = basin_train::quartiles::by_group(&values, &groups);
        by_class.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(by_class)
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
/// those, per size bucket of `batching` (for a model whose attention is dense or not) by
/// `probabilities(ids)` (rows in the order of `ids`: one per graph, or one per node when `nodes`).
pub(crate) fn predict_in_buckets(
    data: &GraphDataset,
    (batching, dense_attention): (&BatchConfig, bool),
    items: &[usize],
    batch: usize,
    nodes: bool,
    mut probabilities: impl FnMut(&[usize]) -> Result<Tensor>,
) -> std::result::Result<Scores, TrainError> {
    let mut rows: HashMap<usize, Vec<Vec<f64>>> = HashMap::with_capacity(items.len());
    for chunk in items.chunks(batch.max(1)) {
        for ids in batching.buckets(data, chunk, dense_attention) {
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
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        Some(basin_train::runner::ModelConfig::of(self.model.config()))
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
        let mut aux = Vec::new();
        let dense = !self.model.cfg.sparse_attention;
        for ids in self.model.cfg.batching.buckets(&self.data, items, dense) {
            let t0 = std::time::Instant::now();
            let (b, y) = self.batch(&ids, true, rng)?;
            basin_core::device::synchronize(self.vs.device());
            data += t0.elapsed().as_secs_f64();
            let (l, a) = self.model.forward_with_aux(&b, true)?;
            logits.push(l);
            aux.extend(a.map(|a| a * ids.len() as f64));
            ys.push(y);
        }
        let (logits, y) = (Tensor::cat(&logits, 0), Tensor::cat(&ys, 0));
        let mut loss = match self.labels {
            // The GNN Benchmark's per-batch class-weighted cross-entropy.
            Labels::Nodes(_) => basin_train::loss::batch_weighted_cross_entropy(&logits, &y),
            Labels::Graphs(_) => cross_entropy(&logits, &y, self.model.cfg.label_smoothing),
            // ET trains ZINC with the mean absolute error.
            Labels::Values(_) => (&logits - y.to_kind(logits.kind())).abs().mean(Kind::Float),
        };
        if !aux.is_empty() {
            // The buckets' edge losses, weighted by their graphs.
            let edges = Tensor::stack(&aux, 0).sum(Kind::Float) / items.len().max(1) as f64;
            loss = loss + edges * self.model.cfg.edge_reconstruction;
        }
        Ok(StepOutput::loss(loss).with_data_seconds(data))
    }

    fn blocks(&self) -> Vec<&basin_core::EnergyBlock> {
        self.model.blocks().iter().collect()
    }

    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let nodes = matches!(self.labels, Labels::Nodes(_));
        let values = matches!(self.labels, Labels::Values(_));
        let (batch, batching) = (self.model.cfg.batch, self.model.cfg.batching.clone());
        let dense = !self.model.cfg.sparse_attention;
        predict_in_buckets(&self.data, (&batching, dense), items, batch, nodes, |ids| {
            let (b, _) = self.batch(ids, false, &mut rng)?;
            tch::no_grad(|| {
                self.model.forward(&b, false).map(|l| {
                    if values {
                        l.to_kind(Kind::Double)
                    } else {
                        l.softmax(-1, Kind::Double)
                    }
                })
            })
        })
    }
}
