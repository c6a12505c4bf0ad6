//! Node anomaly detection with an energy block whose attention is restricted to each node's
//! neighbours (ET Section 4, Appendix C; CDAT Section 2.2 runs the same task with
//! its own block).
//!
//! `x_A = E y_A + λ_A` (eq. 14; λ a learned embedding per node, off in the reference code:
//! `positional = false`), T steps of descent of the block — ET: sparse energy attention over the
//! graph's edges plus a ReLU Hopfield memory (eq. 20), `basin_et::anomaly` — then an MLP with a
//! sigmoid reads `g¹ ‖ gᵀ` (eq. 21) and the weighted likelihood of eq. 22 trains it. Heterogeneous graphs run
//! the block on each relation and aggregate by max-pooling or concatenation (Appendix E).
//! Self loops: the paper's neighbourhoods are the graph's edges (`self_loops = false`); the
//! reference adds a self loop to every node (`self_loops = true`).
//!
//! Two switches reproduce the CDAT anomaly code: an output layer
//! (`output_layer = p`: one more energy step with its own weights, `h = LN′(x_T) −
//! dropout_p(∂E′/∂g′)`, the code's `layers_out`), and a linear readout (`readout = "linear"`:
//! `Linear(D → 2)` on the final state, whose logit difference under the weighted likelihood is
//! the code's two-class weighted cross-entropy).

use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Device, Tensor};

use basin_core::init::DenseInit;
use basin_core::{BlockConfig, EnergyBlock, SparseEdges, Structure, TraceOptions};
use basin_graph::Csr;
use basin_graph::features::FeatureScaling;

use crate::prefix_field;
use crate::{Result, TaskError};

mod learner;
mod task;

pub use learner::NodeAnomalyLearner;
pub use task::{AnomalyData, AnomalyRun, node_dataset};

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
    /// How the encoder and readout layers start: `tch` (the default, as every run recorded
    /// without this field) or `torch` as both reference codes, ET's and CDAT's anomaly code
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
        crate::refuse_corrections(&self.block)?;
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
                    gradient: Default::default(),
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

    /// The descent on the first relation drawn over its energy landscape, beside plain gradient
    /// flow of step `alpha` (CDAT Figures 1 and 3; [`basin_core::landscape`]).
    pub fn landscape(
        &self,
        features: &Tensor,
        structures: &[Structure],
        alpha: f64,
        grid: usize,
    ) -> Option<basin_core::landscape::Landscape> {
        let s = structures.first()?;
        let x0 = tch::no_grad(|| self.tokens(features, None));
        Some(basin_core::landscape::landscape(
            &self.block,
            &x0,
            s,
            alpha,
            grid,
        ))
    }

    /// The graph's energy at each descent step (evaluation mode), one curve per relation.
    pub fn energy_per_step(&self, features: &Tensor, structures: &[Structure]) -> Vec<Vec<f64>> {
        self.traces(features, structures)
            .iter()
            .map(basin_core::Trace::mean_total)
            .collect()
    }

    /// Each node's share of the energy ([`EnergyBlock::token_energy`]) at every step of the
    /// descent on the first relation (evaluation mode), `[T + 1][N]`; `None` when a term of the
    /// block does not split over tokens.
    pub fn node_energies(
        &self,
        features: &Tensor,
        structures: &[Structure],
    ) -> Option<Vec<Vec<f64>>> {
        let s = structures.first()?;
        tch::no_grad(|| {
            let x0 = self.tokens(features, None);
            let keep = TraceOptions {
                states: true,
                term_grads: false,
            };
            let (_, trace) = self.block.run(&x0, s, false, Some(keep));
            trace?
                .states
                .iter()
                .map(|x| {
                    let e = self
                        .block
                        .token_energy(x, s)?
                        .get(0)
                        .to_kind(tch::Kind::Double);
                    Vec::<f64>::try_from(&e.to_device(tch::Device::Cpu)).ok()
                })
                .collect()
        })
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
