//! The learner the anomaly protocol drives: one graph, full-batch training, scores per node.

use tch::nn;
use tch::{Device, Kind, Tensor};

use basin_core::Structure;
use basin_graph::features::{FeatureScaling, Standardizer};
use basin_graph::{Csr, NodeDataset};
use basin_train::TrainError;
use basin_train::loss::{anomaly_weight, weighted_bce};
use basin_train::runner::{Learner, Scores, StepOutput};
use rand_chacha::ChaCha8Rng;

use crate::{Result, TaskError, index_tensor};

use super::{NodeAnomaly, NodeAnomalyConfig, neighbour_structure};
/// A [`NodeAnomaly`] on one node dataset (full-batch training, as the reference).
pub struct NodeAnomalyLearner {
    vs: nn::VarStore,
    model: NodeAnomaly,
    graph: basin_graph::Graph,
    cfg: NodeAnomalyConfig,
    features: Tensor,
    labels: Tensor,
    label_vec: Vec<bool>,
    structures: Vec<Structure>,
    relation_names: Vec<String>,
    /// Validation and test nodes sampled into every epoch's subgraph (the CDAT code).
    eval_nodes: Option<(Vec<u32>, Vec<u32>)>,
}

impl std::fmt::Debug for NodeAnomalyLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeAnomalyLearner")
            .field("cfg", &self.model.cfg)
            .finish()
    }
}

impl NodeAnomalyLearner {
    /// A learner for `data` with `cfg`, seeded by `seed`; attribute statistics are fitted on
    /// the nodes `fit_on` (a split's training nodes) when `cfg.features` standardises.
    pub fn new(
        data: &NodeDataset,
        cfg: &NodeAnomalyConfig,
        fit_on: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let mut x = data.graph.node_features.clone();
        if cfg.features == FeatureScaling::Standardize {
            Standardizer::fit_rows(&x, fit_on).apply(&mut x);
        }
        let (n, f) = (x.nrows() as i64, crate::node_width(&data.name, x.ncols())?);
        let flat: Vec<f32> = x.iter().copied().collect();
        let features = Tensor::from_slice(&flat).view([n, f]).to_device(device);
        let (adjacencies, relation_names): (Vec<&Csr>, Vec<String>) =
            if cfg.heterogeneous && !data.relations.is_empty() {
                data.relations
                    .iter()
                    .map(|r| (&r.adjacency, r.name.clone()))
                    .unzip()
            } else {
                (vec![&data.graph.adjacency], vec!["homogeneous".into()])
            };
        if cfg.subgraph_ratio.is_some() && adjacencies.len() > 1 {
            return Err(TaskError::config(
                "subgraph_ratio",
                "subgraph sampling is implemented for homogeneous graphs; set heterogeneous = false",
            ));
        }
        let structures = adjacencies
            .iter()
            .map(|a| neighbour_structure(a, cfg.self_loops, device))
            .collect::<Result<Vec<_>, _>>()?;
        let vs = nn::VarStore::new(device);
        let model = NodeAnomaly::new(&vs.root(), cfg, f, n, structures.len() as i64)?;
        let label_vec: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
        let labels = Tensor::from_slice(
            &label_vec
                .iter()
                .map(|&b| f32::from(u8::from(b)))
                .collect::<Vec<f32>>(),
        )
        .to_device(device);
        Ok(Self {
            vs,
            model,
            graph: data.graph.clone(),
            cfg: cfg.clone(),
            features,
            labels,
            label_vec,
            structures,
            relation_names,
            eval_nodes: None,
        })
    }

    /// The learner of one planned run of an anomaly protocol scored by `score`: with
    /// `reference-subsample` its epochs also sample the run's validation and test nodes
    /// ([`NodeAnomalyLearner::with_reference_subsample`]).
    pub fn for_run(
        data: &NodeDataset,
        cfg: &NodeAnomalyConfig,
        run: &basin_train::protocol::PlannedRun,
        score: basin_train::protocol::ScoreMode,
        device: Device,
    ) -> Result<Self> {
        let learner = Self::new(data, cfg, &run.train(), run.seed, device)?;
        if score != basin_train::protocol::ScoreMode::ReferenceSubsample {
            return Ok(learner);
        }
        let ids = |v: &[u32]| v.iter().map(|&i| i as usize).collect::<Vec<_>>();
        learner.with_reference_subsample(&ids(&run.split.val), &ids(&run.split.test))
    }

    /// The CDAT anomaly code's epochs (its training loop): each
    /// epoch's subgraph is induced by `subgraph_ratio` of the training, `val` and `test` nodes
    /// (part after part, self loops added), the loss is taken on its training nodes with the
    /// class weight of the whole training split, and the training-mode scores of its
    /// validation and test nodes are returned as `pre_step_scores` (NaN for every other node),
    /// for the protocol's `score = "reference-subsample"`. Needs `subgraph_ratio`.
    pub fn with_reference_subsample(mut self, val: &[usize], test: &[usize]) -> Result<Self> {
        if self.cfg.subgraph_ratio.is_none() || self.structures.len() > 1 {
            return Err(TaskError::config(
                "subgraph_ratio",
                "reference subsampling needs a sampling ratio and a homogeneous graph",
            ));
        }
        let ids = |v: &[usize]| v.iter().map(|&i| i as u32).collect();
        self.eval_nodes = Some((ids(val), ids(test)));
        Ok(self)
    }

    /// The whole graph's descent on its first relation over the energy landscape, beside plain
    /// gradient flow at the block's step size (CDAT Figures 1 and 3), on a `grid × grid`
    /// lattice; evaluation mode.
    pub fn landscape(&self, grid: usize) -> Option<basin_core::landscape::Landscape> {
        let alpha = self.cfg.block.dynamics.alpha().unwrap_or(0.1);
        self.model
            .landscape(&self.features, &self.structures, alpha, grid)
    }

    /// The graph's energy at each descent step, named by relation (`homogeneous` for one),
    /// followed (for dynamics with a storage functional) by V, named `<relation> V`.
    pub fn energy_per_step(&self) -> Vec<(String, Vec<f64>)> {
        let traces = self.model.traces(&self.features, &self.structures);
        let names: Vec<String> = if self.structures.len() == self.relation_names.len() {
            self.relation_names.clone()
        } else {
            vec!["homogeneous".into()]
        };
        let mut curves: Vec<(String, Vec<f64>)> = names
            .iter()
            .cloned()
            .zip(traces.iter().map(basin_core::Trace::mean_total))
            .collect();
        for (n, t) in names.iter().zip(&traces) {
            if let Some(v) = t.mean_storage() {
                curves.push((format!("{n} V"), v));
            }
        }
        curves
    }

    /// The energy of the nodes `items` along the descent (first relation, evaluation mode),
    /// anomalous and normal apart: per group, the quartiles at each step; `None` when a term of
    /// the block does not split over tokens.
    pub fn node_energy_by_class(
        &self,
        items: &[usize],
        is_anomaly: &[bool],
    ) -> Option<Vec<basin_train::quartiles::StepQuartiles>> {
        let per_step = self.model.node_energies(&self.features, &self.structures)?;
        let values: Vec<Vec<f64>> = per_step
            .iter()
            .map(|all| items.iter().filter_map(|&i| all.get(i).copied()).collect())
            .collect();
        let groups: Vec<String> = items
            .iter()
            .map(|&i| {
                if is_anomaly.get(i).copied().unwrap_or(false) {
                    "anomalous".to_owned()
                } else {
                    "normal".to_owned()
                }
            })
            .collect();
        Some(basin_train::quartiles::by_group(&values, &groups))
    }

    /// The global ids `[n]` of a sampled subgraph's nodes and their training-mode logits.
    fn subgraph_logits(
        &self,
        sub: &basin_graph::sample::Subgraph,
        self_loops: bool,
    ) -> Result<(Tensor, Tensor)> {
        let device = self.vs.device();
        let structure = neighbour_structure(&sub.graph.adjacency, self_loops, device)?;
        let ids = Tensor::from_slice(&sub.nodes.iter().map(|&i| i64::from(i)).collect::<Vec<_>>())
            .to_device(device);
        let logits = self.model.forward_nodes(
            &self.features.index_select(0, &ids),
            Some(&ids),
            &[structure],
            true,
        );
        Ok((ids, logits))
    }

    /// The model.
    pub fn model(&self) -> &NodeAnomaly {
        &self.model
    }
}

impl Learner for NodeAnomalyLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        Some(basin_train::runner::ModelConfig::of(&self.cfg))
    }

    fn batch_size(&self) -> Option<usize> {
        None
    }

    fn train_step(
        &mut self,
        train: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        if let (Some(ratio), Some((val, test))) = (self.cfg.subgraph_ratio, &self.eval_nodes) {
            let pool: Vec<u32> = train.iter().map(|&i| i as u32).collect();
            let (sub, counts) = basin_graph::sample::reference_subsample(
                &self.graph,
                &[&pool, val, test],
                ratio,
                rng,
            )
            .map_err(TaskError::from)?;
            let device = self.vs.device();
            // The sample already carries its self loops.
            let (ids, logits) = self.subgraph_logits(&sub, false)?;
            let n_train = counts[0] as i64;
            let omega =
                anomaly_weight(&train.iter().map(|&i| self.label_vec[i]).collect::<Vec<_>>());
            let loss = weighted_bce(
                &logits.narrow(0, 0, n_train),
                &self.labels.index_select(0, &ids.narrow(0, 0, n_train)),
                omega,
            );
            let rest = ids.narrow(0, n_train, ids.size()[0] - n_train);
            let scored = logits
                .detach()
                .narrow(0, n_train, ids.size()[0] - n_train)
                .sigmoid()
                .to_kind(Kind::Double);
            let all = Tensor::full(
                [self.label_vec.len() as i64],
                f64::NAN,
                (Kind::Double, device),
            )
            .index_put(&[Some(rest)], &scored, false);
            return Ok(StepOutput {
                pre_step_scores: Some(Scores::from_tensor(&all)?),
                ..StepOutput::loss(loss)
            });
        }
        if let Some(ratio) = self.cfg.subgraph_ratio {
            // Appendix C.2: a fresh subgraph induced by a share of the training nodes each epoch.
            let pool: Vec<u32> = train.iter().map(|&i| i as u32).collect();
            let sub =
                basin_graph::sample::induced_by_ratio(&self.graph, Some(&pool), ratio, false, rng)
                    .map_err(TaskError::from)?;
            let (ids, logits) = self.subgraph_logits(&sub, self.cfg.self_loops)?;
            let labels: Vec<bool> = sub
                .nodes
                .iter()
                .map(|&i| self.label_vec[i as usize])
                .collect();
            let loss = weighted_bce(
                &logits,
                &self.labels.index_select(0, &ids),
                anomaly_weight(&labels),
            );
            return Ok(StepOutput::loss(loss));
        }
        let logits = self.model.forward(&self.features, &self.structures, true);
        let pre = Scores::from_tensor(&logits.detach().sigmoid())?;
        let idx = index_tensor(train, self.vs.device());
        let omega = anomaly_weight(&train.iter().map(|&i| self.label_vec[i]).collect::<Vec<_>>());
        let loss = weighted_bce(
            &logits.index_select(0, &idx),
            &self.labels.index_select(0, &idx),
            omega,
        );
        Ok(StepOutput {
            pre_step_scores: Some(pre),
            ..StepOutput::loss(loss)
        })
    }

    fn blocks(&self) -> Vec<&basin_core::EnergyBlock> {
        vec![self.model.block()]
    }

    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let p = tch::no_grad(|| {
            self.model
                .forward(&self.features, &self.structures, false)
                .sigmoid()
        });
        Scores::from_tensor(
            &p.index_select(0, &index_tensor(items, self.vs.device()))
                .to_kind(Kind::Double),
        )
    }
}
