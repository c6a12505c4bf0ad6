//! Node anomaly detection with an energy block whose attention is restricted to each node's
//! neighbours (ET Section 4, Appendix C; reference-implementations §3; CDAT §2.2 runs the same
//! task with its own block).
//!
//! `x_A = E y_A + λ_A` (eq. 14; λ a learned embedding per node, off in the reference code:
//! `positional = false`), T steps of descent of the block — ET: sparse energy attention over the
//! graph's edges plus a ReLU Hopfield memory (eq. 20), `basin_et::anomaly` — then an MLP with a
//! sigmoid reads `g¹ ‖ gᵀ` (eq. 21) and the weighted likelihood of eq. 22 trains it. Heterogeneous graphs run
//! the block on each relation and aggregate by max-pooling or concatenation (Appendix E).
//! Self loops: the paper's neighbourhoods are the graph's edges (`self_loops = false`); the
//! reference adds a self loop to every node (`self_loops = true`).
//!
//! Two switches reproduce the CDAT anomaly code (`research/cdat-spec.md` A13): an output layer
//! (`output_layer = p`: one more energy step with its own weights, `h = LN′(x_T) −
//! dropout_p(∂E′/∂g′)`, the code's `layers_out`), and a linear readout (`readout = "linear"`:
//! `Linear(D → 2)` on the final state, whose logit difference under the weighted likelihood is
//! the code's two-class weighted cross-entropy).

use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

use basin_core::init::DenseInit;
use basin_core::{BlockConfig, EnergyBlock, SparseEdges, Structure, TraceOptions};
use basin_graph::features::{FeatureScaling, Standardizer};
use basin_graph::{Csr, NodeDataset};
use basin_train::TrainError;
use basin_train::loss::{anomaly_weight, weighted_bce};
use basin_train::runner::{Learner, Scores, StepOutput};
use rand_chacha::ChaCha8Rng;

use crate::graph_classification::prefix_field;
use crate::{Result, TaskError, index_tensor};

/// How relation representations are combined (Appendix E).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RelationPool {
    /// Element-wise maximum over relations.
    #[default]
    Max,
    /// Concatenation.
    Concat,
}

/// What the anomaly score is read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnomalyReadout {
    /// ET eq. 21: an MLP on `g¹ ‖ gᵀ` (the first and last normalised states).
    #[default]
    Mlp,
    /// `Linear(D → 2)` on the final state, scored by the logit difference (the CDAT code).
    Linear,
}

/// Configuration of a [`NodeAnomaly`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeAnomalyConfig {
    /// The energy block (its `dim` is the token width D).
    pub block: BlockConfig,
    /// Learned positional embedding per node (eq. 14); the reference code has none.
    pub positional: bool,
    /// Add a self loop to every node (the reference code does).
    pub self_loops: bool,
    /// Hidden width of the readout MLP.
    pub readout_hidden: i64,
    /// Use the relation subgraphs (heterogeneous case) when the dataset has them.
    pub heterogeneous: bool,
    /// How relation representations are combined.
    pub relation_pool: RelationPool,
    /// Train each epoch on the subgraph induced by this share of the training nodes (Appendix
    /// C.2: 5 % for T-Finance and T-Social); `None` trains on the whole graph.
    pub subgraph_ratio: Option<f64>,
    /// Node attributes standardised with the training nodes' statistics (default) or raw, as
    /// the reference code feeds them.
    pub features: FeatureScaling,
    /// The readout.
    pub readout: AnomalyReadout,
    /// `Some(p)`: an output layer after the descent, one energy step with its own weights and
    /// dropout `p` on its gradient in training (the CDAT code's `layers_out`).
    pub output_layer: Option<f64>,
    /// How the encoder and readout layers start: `tch` (the default, every result recorded
    /// before this switch) or `torch` as both reference codes, ET's and CDAT's anomaly code
    /// (PyTorch), start their `nn.Linear` layers (`basin_core::init`; `flax` is there too).
    pub dense_init: DenseInit,
}

impl Default for NodeAnomalyConfig {
    fn default() -> Self {
        Self {
            block: BlockConfig::default(),
            positional: true,
            self_loops: false,
            readout_hidden: 64,
            heterogeneous: false,
            relation_pool: RelationPool::Max,
            subgraph_ratio: None,
            features: FeatureScaling::Standardize,
            readout: AnomalyReadout::Mlp,
            output_layer: None,
            dense_init: DenseInit::Tch,
        }
    }
}

impl NodeAnomalyConfig {
    /// Checks the front end and the block.
    pub fn validate(&self) -> Result<()> {
        if self.readout_hidden < 1 {
            return Err(TaskError::config("readout_hidden", "must be ≥ 1"));
        }
        if let Some(r) = self.subgraph_ratio
            && !(r > 0.0 && r <= 1.0)
        {
            return Err(TaskError::config(
                "subgraph_ratio",
                format!("in (0, 1], got {r}"),
            ));
        }
        if let Some(p) = self.output_layer
            && !(0.0..1.0).contains(&p)
        {
            return Err(TaskError::config(
                "output_layer",
                format!("a dropout in [0, 1), got {p}"),
            ));
        }
        self.block.validate().map_err(|e| prefix_field("block", e))
    }
}

/// The model, for one graph (its node count fixes the positional embeddings).
#[derive(Debug)]
pub struct NodeAnomaly {
    cfg: NodeAnomalyConfig,
    encoder: nn::Linear,
    positional: Option<Tensor>,
    block: EnergyBlock,
    output: Option<EnergyBlock>,
    readout: nn::Sequential,
}

/// A sparse structure over one graph's nodes (`[1, N]` tokens).
pub fn neighbour_structure(adj: &Csr, self_loops: bool, device: Device) -> Result<Structure> {
    let n = adj.num_nodes();
    let mut query = Vec::with_capacity(adj.indices().len());
    for (i, w) in adj.indptr().windows(2).enumerate() {
        query.extend(std::iter::repeat_n(i as i64, w[1] - w[0]));
    }
    let key: Vec<i64> = adj.indices().iter().map(|&k| i64::from(k)).collect();
    let edges = SparseEdges::new(
        &Tensor::from_slice(&query),
        &Tensor::from_slice(&key),
        n as i64,
    )?;
    Ok(Structure::sparse(edges.to_device(device)).with_self_attention(self_loops))
}

impl NodeAnomaly {
    /// Builds the model for `nodes` nodes with `features` input features and `relations`
    /// relation subgraphs (1 for a homogeneous graph); the block's parameters live under
    /// `block`.
    pub fn new(
        path: &nn::Path,
        cfg: &NodeAnomalyConfig,
        features: i64,
        nodes: i64,
        relations: i64,
    ) -> Result<Self> {
        cfg.validate()?;
        let block = || {
            EnergyBlock::new(&(path / "block"), &cfg.block).map_err(|e| prefix_field("block", e))
        };
        Self::with_block(path, cfg, features, nodes, relations, block)
    }

    /// The front end of `cfg` around a block that `block()` builds (a family's own, or a
    /// user's; called once, after the readout is created); its width must be `cfg.block.dim`.
    pub fn with_block(
        path: &nn::Path,
        cfg: &NodeAnomalyConfig,
        features: i64,
        nodes: i64,
        relations: i64,
        block: impl FnOnce() -> Result<EnergyBlock>,
    ) -> Result<Self> {
        let d = cfg.block.dim;
        let width = match cfg.relation_pool {
            RelationPool::Concat => d * relations.max(1),
            RelationPool::Max => d,
        };
        let lin = |name: &str, i: i64, o: i64| cfg.dense_init.linear(path / name, i, o, true);
        let readout = match cfg.readout {
            AnomalyReadout::Mlp => nn::seq()
                .add(lin("readout1", 2 * width, cfg.readout_hidden))
                .add_fn(|t| t.relu())
                .add(lin("readout2", cfg.readout_hidden, 1)),
            // Two logits; their difference is the anomaly logit.
            AnomalyReadout::Linear => nn::seq()
                .add(lin("readout", width, 2))
                .add_fn(|l| l.select(-1, 1) - l.select(-1, 0))
                .add_fn(|t| t.unsqueeze(-1)),
        };
        // The output layer is one gradient evaluation, no dynamics: its block gets the
        // parameter-free gradient flow, so it does not allocate a second W or ω.
        let output = match cfg.output_layer {
            Some(_) => {
                let out = BlockConfig {
                    dynamics: basin_core::DynamicsConfig::gradient_flow(1.0),
                    ..cfg.block.clone()
                };
                Some(
                    EnergyBlock::new(&(path / "output"), &out)
                        .map_err(|e| prefix_field("block", e))?,
                )
            }
            None => None,
        };
        Ok(Self {
            encoder: lin("encoder", features, d),
            positional: cfg.positional.then(|| {
                path.var(
                    "positional",
                    &[nodes, d],
                    nn::Init::Randn {
                        mean: 0.0,
                        stdev: 0.02,
                    },
                )
            }),
            block: block()?,
            output,
            readout,
            cfg: cfg.clone(),
        })
    }

    /// The energy block.
    pub fn block(&self) -> &EnergyBlock {
        &self.block
    }

    /// The output layer (`output_layer = Some(_)`).
    pub fn output_layer(&self) -> Option<&EnergyBlock> {
        self.output.as_ref()
    }

    /// Anomaly logits of every node `[N]` for features `[N, F]` under one structure per relation.
    pub fn forward(&self, features: &Tensor, structures: &[Structure], train: bool) -> Tensor {
        self.forward_nodes(features, None, structures, train)
    }

    /// The initial tokens `[1, N, D]`: embedded features plus positional embeddings (eq. 10).
    fn tokens(&self, features: &Tensor, nodes: Option<&Tensor>) -> Tensor {
        let mut x0 = self.encoder.forward(features);
        if let Some(p) = &self.positional {
            x0 = match nodes {
                Some(ids) => x0 + p.index_select(0, ids),
                None => x0 + p,
            };
        }
        x0.unsqueeze(0)
    }

    /// The graph's energy at each descent step (evaluation mode), one curve per relation.
    pub fn energy_per_step(&self, features: &Tensor, structures: &[Structure]) -> Vec<Vec<f64>> {
        self.traces(features, structures)
            .iter()
            .map(basin_core::Trace::mean_total)
            .collect()
    }

    /// The trace of the descent on each relation (evaluation mode).
    pub fn traces(&self, features: &Tensor, structures: &[Structure]) -> Vec<basin_core::Trace> {
        tch::no_grad(|| {
            let x0 = self.tokens(features, None);
            structures
                .iter()
                .filter_map(|s| {
                    self.block
                        .run(&x0, s, false, Some(TraceOptions::default()))
                        .1
                })
                .collect()
        })
    }

    /// Logits of a subset of the nodes: `features` are theirs and `nodes` their global ids,
    /// which select the positional embeddings (`None` = all nodes in order).
    pub fn forward_nodes(
        &self,
        features: &Tensor,
        nodes: Option<&Tensor>,
        structures: &[Structure],
        train: bool,
    ) -> Tensor {
        let x0 = self.tokens(features, nodes);
        let finals: Vec<Tensor> = structures
            .iter()
            .map(|s| {
                let x = self.block.forward(&x0, s, train);
                let x = match (&self.output, self.cfg.output_layer) {
                    (Some(out), Some(p)) => {
                        let grad = out.energy_grad(&x, s);
                        out.norm.forward(&x) - grad.dropout(p, train)
                    }
                    _ => x,
                };
                match self.cfg.readout {
                    AnomalyReadout::Mlp => self.block.norm.forward(&x),
                    AnomalyReadout::Linear => x,
                }
            })
            .collect();
        let gt = match self.cfg.relation_pool {
            RelationPool::Max => finals
                .iter()
                .skip(1)
                .fold(finals[0].shallow_clone(), |a, b| a.maximum(b)),
            RelationPool::Concat => Tensor::cat(&finals, -1),
        };
        if self.cfg.readout == AnomalyReadout::Linear {
            return self.readout.forward(&gt).squeeze_dim(-1).squeeze_dim(0);
        }
        let g1 = self.block.norm.forward(&x0);
        let g1 = if self.cfg.relation_pool == RelationPool::Concat {
            g1.repeat([1, 1, finals.len() as i64])
        } else {
            g1
        };
        self.readout
            .forward(&Tensor::cat(&[g1, gt], -1))
            .squeeze_dim(-1)
            .squeeze_dim(0)
    }
}

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
        let (n, f) = (x.nrows() as i64, x.ncols() as i64);
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

    /// The CDAT anomaly code's epochs (`research/cdat-spec.md` §2.2 steps 2 and 9, A16): each
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
    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.cfg).unwrap_or_default()
    }
    fn read_config(&self, recorded: &serde_json::Value) -> serde_json::Value {
        basin_train::runner::with_defaults::<NodeAnomalyConfig>(recorded)
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
            )?;
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
                basin_graph::sample::induced_by_ratio(&self.graph, Some(&pool), ratio, false, rng)?;
            let (ids, logits) = self.subgraph_logits(&sub, self.cfg.self_loops)?;
            let labels: Vec<bool> = sub
                .nodes
                .iter()
                .map(|&i| self.label_vec[i as usize])
                .collect();
            return Ok(StepOutput::loss(weighted_bce(
                &logits,
                &self.labels.index_select(0, &ids),
                anomaly_weight(&labels),
            )));
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
