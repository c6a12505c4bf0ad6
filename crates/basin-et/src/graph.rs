//! `EtGraphClassifier`: graph classification with stacked ET blocks (paper Section 5,
//! Appendix D; reference-implementations §2).
//!
//! Node features are encoded, a learned CLS token is prepended, and a linear projection of the
//! k smallest non-trivial Laplacian eigenvectors of the CLS-augmented graph (eq. 23) is added to
//! every token. The attention of each head is modulated by the parameterised adjacency
//! `Â = Conv2D(X ⊗ X) ⊙ A′` (eq. 24), computed once from the initial tokens; non-edges are
//! masked out of the attention as eq. 25 says. S blocks, each with its own LayerNorm and weights,
//! run T steps of Langevin descent (eq. 27: noise in training); the CLS token of the last block
//! is read out linearly; label-smoothed cross-entropy trains it.
//!
//! Switches for the reference code: `adjacency = "reference-multiply"` (Â multiplies the logits
//! of every pair, so after training non-edges are no longer masked), `noise_in_eval`, and the
//! batch settings of basin-graph (`sink` padding, per-entry sign flips).

use basin_core::{
    AttentionConfig, BlockConfig, DynamicsConfig, EnergyBlock, HopfieldConfig, NormConfig,
    Structure, TermConfig, TraceOptions,
};
use basin_graph::batch::{BatchConfig, GraphBatch, batch_indices, make_batch};
use basin_graph::laplacian::{LaplacianPe, laplacian_pe_many};
use basin_graph::{Csr, GraphDataset};
use basin_train::TrainError;
use basin_train::loss::cross_entropy;
use basin_train::runner::{EpochOutput, Learner, Scores, Steps};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

use crate::EtError;

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
}

/// Configuration of an [`EtGraphClassifier`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EtGraphConfig {
    /// Token width D.
    pub dim: i64,
    /// Heads H.
    pub heads: i64,
    /// Head width Y.
    pub head_dim: i64,
    /// Hopfield memories K (the reference: 4·D).
    pub memories: i64,
    /// Stacked blocks S.
    pub blocks: usize,
    /// Steps per block T.
    pub steps: usize,
    /// Step size α.
    pub alpha: f64,
    /// Langevin noise σ (eq. 27; the reference: 0.02).
    pub noise: f64,
    /// Also add the noise in evaluation (the reference does).
    pub noise_in_eval: bool,
    /// Side of the Conv2D kernel on X ⊗ X.
    pub conv_kernel: i64,
    /// How Â enters the attention.
    pub adjacency: AdjacencyMode,
    /// Label smoothing of the cross-entropy (the reference: 0.05).
    pub label_smoothing: f64,
    /// Graphs per batch.
    pub batch: usize,
    /// Batching (CLS, cap, padding, encodings, sign flips).
    pub batching: BatchConfig,
}

impl Default for EtGraphConfig {
    fn default() -> Self {
        Self::tu_paper()
    }
}

impl EtGraphConfig {
    /// ET Table 9 (TU datasets): D = 128, 12 heads of 64 (β learned), K = 512, 4 blocks × 1
    /// step, α = 0.01, k = 15, σ = 0.02, label smoothing 0.05, batch 32; basin's masked
    /// padding. (The reference notebooks use α = 0.1 and batch 64.)
    pub fn tu_paper() -> Self {
        Self {
            dim: 128,
            heads: 12,
            head_dim: 64,
            memories: 512,
            blocks: 4,
            steps: 1,
            alpha: 0.01,
            noise: 0.02,
            noise_in_eval: false,
            conv_kernel: 3,
            adjacency: AdjacencyMode::Masked,
            label_smoothing: 0.05,
            batch: 32,
            batching: BatchConfig::et_graph(),
        }
    }

    /// A CPU-scale version: D = 32, 4 heads of 8, K = 128, 2 blocks × 2 steps.
    pub fn tu_cpu() -> Self {
        Self {
            dim: 32,
            heads: 4,
            head_dim: 8,
            memories: 128,
            blocks: 2,
            steps: 2,
            batch: 32,
            ..Self::tu_paper()
        }
    }

    fn block(&self) -> BlockConfig {
        BlockConfig {
            dim: self.dim,
            steps: self.steps,
            norm: NormConfig::default(),
            terms: vec![
                TermConfig::Attention(AttentionConfig {
                    heads: self.heads,
                    head_dim: self.head_dim,
                    learn_beta: true,
                    ..AttentionConfig::default()
                }),
                TermConfig::Hopfield(HopfieldConfig {
                    memories: self.memories,
                    ..HopfieldConfig::default()
                }),
            ],
            dynamics: DynamicsConfig::Langevin {
                alpha: self.alpha,
                sigma: self.noise,
                decay: None,
                in_eval: self.noise_in_eval,
            },
        }
    }
}

/// The model.
#[derive(Debug)]
pub struct EtGraphClassifier {
    cfg: EtGraphConfig,
    encoder: nn::Linear,
    cls: Tensor,
    pe_proj: Option<nn::Linear>,
    conv: nn::Conv2D,
    adj_proj: nn::Linear,
    blocks: Vec<EnergyBlock>,
    readout: nn::Linear,
}

/// A batch on the device.
#[derive(Debug)]
pub struct DeviceGraphBatch {
    features: Tensor,
    pe: Option<Tensor>,
    padding: Tensor,
    mask: Tensor,
}

impl DeviceGraphBatch {
    /// The same batch with its float tensors (features, encodings) in `kind` (e.g. float64
    /// for exact checks; the model's weights must match).
    pub fn to_kind(self, kind: Kind) -> Self {
        Self {
            features: self.features.to_kind(kind),
            pe: self.pe.map(|p| p.to_kind(kind)),
            ..self
        }
    }

    /// Moves a basin-graph batch to `device`.
    pub fn new(b: &GraphBatch, device: Device) -> Self {
        let t3 = |a: &ndarray::Array3<f32>| {
            let s = a.shape();
            let v: Vec<f32> = a.iter().copied().collect();
            Tensor::from_slice(&v)
                .view([s[0] as i64, s[1] as i64, s[2] as i64])
                .to_device(device)
        };
        let (bs, n) = (b.padding.nrows() as i64, b.padding.ncols() as i64);
        let padding: Vec<bool> = b.padding.iter().copied().collect();
        let mask: Vec<bool> = b.mask.iter().copied().collect();
        Self {
            features: t3(&b.features),
            pe: b.pe.as_ref().map(t3),
            padding: Tensor::from_slice(&padding).view([bs, n]).to_device(device),
            mask: Tensor::from_slice(&mask).view([bs, n, n]).to_device(device),
        }
    }
}

impl EtGraphClassifier {
    /// Builds the model for `features` node features and `classes` classes.
    pub fn new(
        path: &nn::Path,
        cfg: &EtGraphConfig,
        features: i64,
        classes: i64,
    ) -> Result<Self, EtError> {
        if !cfg.batching.cls {
            return Err(EtError::Config {
                field: "batching.cls".into(),
                message: "the classifier reads the CLS token; enable it".into(),
            });
        }
        let d = cfg.dim;
        let blocks = (0..cfg.blocks)
            .map(|s| EnergyBlock::new(&(path / format!("block{s}")), &cfg.block()))
            .collect::<Result<Vec<_>, _>>()?;
        let pad = cfg.conv_kernel / 2;
        Ok(Self {
            encoder: nn::linear(path / "encoder", features, d, Default::default()),
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
                .map(|pe| nn::linear(path / "pe_proj", pe.k as i64, d, Default::default())),
            conv: nn::conv2d(
                path / "conv",
                1,
                cfg.heads,
                cfg.conv_kernel,
                nn::ConvConfig {
                    padding: pad,
                    bias: false,
                    ..Default::default()
                },
            ),
            adj_proj: nn::linear(
                path / "adj_proj",
                1,
                cfg.heads,
                nn::LinearConfig {
                    bs_init: Some(nn::Init::Const(0.0)),
                    ..Default::default()
                },
            ),
            blocks,
            readout: nn::linear(path / "readout", d, classes, Default::default()),
            cfg: cfg.clone(),
        })
    }

    /// The stacked blocks, in order.
    pub fn blocks(&self) -> &[EnergyBlock] {
        &self.blocks
    }

    /// Class logits `[B, C]`.
    pub fn forward(&self, b: &DeviceGraphBatch, train: bool) -> Tensor {
        let (mut x, structure) = self.tokens_and_structure(b);
        for block in &self.blocks {
            x = block.forward(&x, &structure, train);
        }
        self.readout.forward(&x.select(1, 0))
    }

    /// Each block's energy at each of its steps (evaluation mode), averaged over the batch.
    pub fn energy_per_step(&self, b: &DeviceGraphBatch) -> Vec<Vec<f64>> {
        tch::no_grad(|| {
            let (mut x, structure) = self.tokens_and_structure(b);
            let mut curves = Vec::with_capacity(self.blocks.len());
            for block in &self.blocks {
                let (next, trace) = block.run(&x, &structure, false, Some(TraceOptions::default()));
                curves.push(trace.map(|t| t.mean_total()).unwrap_or_default());
                x = next;
            }
            curves
        })
    }

    /// The initial tokens (CLS in slot 0, projected encodings added) and the attention
    /// structure with the parameterised adjacency of eq. 24.
    pub fn tokens_and_structure(&self, b: &DeviceGraphBatch) -> (Tensor, Structure) {
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
        // Â = Conv2D(X ⊗ X) ⊙ A′ (eq. 24), from the initial tokens, per head: [B, H, N, N].
        // Padded tokens are zeroed in X ⊗ X: the 3×3 convolution would otherwise carry them
        // into the real pairs at the graph's border, and a graph's output would depend on the
        // batch it is in. Zeros are what the convolution's own padding sees without them.
        let xr = &x * b.padding.to_kind(x.kind()).unsqueeze(-1);
        let outer = xr.matmul(&xr.transpose(1, 2)).unsqueeze(1);
        let adj = b.mask.to_kind(x.kind()).unsqueeze(-1); // the CLS-augmented adjacency as one channel
        let a_prime = self.adj_proj.forward(&adj).permute([0, 3, 1, 2]);
        let a_hat = self.conv.forward(&outer) * a_prime;
        let structure = match self.cfg.adjacency {
            AdjacencyMode::Masked => Structure::mask(b.mask.shallow_clone()),
            AdjacencyMode::ReferenceMultiply => Ok(Structure::full()),
        }
        .and_then(|s| {
            s.with_self_attention(self.cfg.batching.self_loops)
                .with_padding(b.padding.shallow_clone())
        })
        .and_then(|s| s.with_scale(a_hat));
        let structure = match structure {
            Ok(s) => s,
            // Shapes come from basin-graph's batch, which is consistent by construction.
            Err(e) => panic!("EtGraphClassifier: inconsistent batch: {e}"),
        };
        (x, structure)
    }
}

/// An [`EtGraphClassifier`] on a graph dataset; items are graph indices.
pub struct GraphLearner {
    vs: nn::VarStore,
    model: EtGraphClassifier,
    data: std::sync::Arc<GraphDataset>,
    labels: Vec<i64>,
    pe: Option<std::sync::Arc<Vec<LaplacianPe>>>,
    cfg: EtGraphConfig,
}

impl std::fmt::Debug for GraphLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphLearner")
            .field("cfg", &self.cfg)
            .finish()
    }
}

/// The encodings of every graph of a dataset (computed once, in parallel).
pub fn dataset_pe(
    data: &GraphDataset,
    cfg: &EtGraphConfig,
) -> Result<Option<Vec<LaplacianPe>>, EtError> {
    match &cfg.batching.pe {
        Some(pe) => {
            let adjs: Vec<&Csr> = data.graphs.iter().map(|g| &g.adjacency).collect();
            Ok(Some(laplacian_pe_many(&adjs, pe).map_err(EtError::from)?))
        }
        None => Ok(None),
    }
}

impl GraphLearner {
    /// A learner; `pe` are the dataset's encodings from [`dataset_pe`] (shared between folds).
    pub fn new(
        data: std::sync::Arc<GraphDataset>,
        pe: Option<std::sync::Arc<Vec<LaplacianPe>>>,
        cfg: &EtGraphConfig,
        seed: u64,
        device: Device,
    ) -> Result<Self, EtError> {
        tch::manual_seed(seed as i64);
        let labels: Vec<i64> = data
            .targets
            .classes()
            .ok_or_else(|| EtError::Config {
                field: "targets".into(),
                message: "graph classification needs one class per graph".into(),
            })?
            .iter()
            .map(|&c| c as i64)
            .collect();
        let classes = labels.iter().copied().max().map_or(2, |m| m + 1).max(2);
        let features = data
            .graphs
            .first()
            .map_or(1, |g| g.node_features.ncols() as i64);
        let vs = nn::VarStore::new(device);
        let model = EtGraphClassifier::new(&vs.root(), cfg, features, classes)?;
        Ok(Self {
            vs,
            model,
            data,
            labels,
            pe,
            cfg: cfg.clone(),
        })
    }

    fn batch(
        &self,
        ids: &[usize],
        train: bool,
        rng: &mut ChaCha8Rng,
    ) -> Result<(DeviceGraphBatch, Tensor), TrainError> {
        let mut bcfg = self.cfg.batching.clone();
        if !train {
            bcfg.sign_flip = basin_graph::laplacian::SignFlip::None;
        }
        let pe = self.pe.as_ref().map(|p| p.as_slice());
        let b = make_batch(&self.data, ids, &bcfg, pe, rng)
            .map_err(|e| TrainError::State(e.to_string()))?;
        let y = Tensor::from_slice(&ids.iter().map(|&i| self.labels[i]).collect::<Vec<_>>())
            .to_device(self.vs.device());
        Ok((DeviceGraphBatch::new(&b, self.vs.device()), y))
    }
}

impl GraphLearner {
    /// Each block's energy at each step, averaged over the graphs `items` (evaluation mode).
    pub fn energy_per_step(&self, items: &[usize]) -> Result<Vec<Vec<f64>>, TrainError> {
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
        let (b, _) = self.batch(items, false, &mut rng)?;
        Ok(self.model.energy_per_step(&b))
    }
}

impl Learner for GraphLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }

    fn train_epoch(
        &mut self,
        train: &[usize],
        steps: &mut Steps<'_>,
        rng: &mut ChaCha8Rng,
    ) -> Result<EpochOutput, TrainError> {
        let batches = batch_indices(train, self.cfg.batch, false, Some(&mut *rng))
            .map_err(|e| TrainError::State(e.to_string()))?;
        let (mut total, mut n) = (0.0, 0);
        for ids in batches {
            let (b, y) = self.batch(&ids, true, rng)?;
            let logits = self.model.forward(&b, true);
            total += steps.step(&cross_entropy(&logits, &y, self.cfg.label_smoothing))?;
            n += 1;
        }
        Ok(EpochOutput {
            loss: total / f64::from(n.max(1)),
            pre_step_scores: None,
        })
    }

    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        let mut rng = <ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
        let mut rows = Vec::with_capacity(items.len());
        for ids in items.chunks(self.cfg.batch.max(1)) {
            let (b, _) = self.batch(ids, false, &mut rng)?;
            let p = tch::no_grad(|| self.model.forward(&b, false).softmax(-1, Kind::Double));
            rows.extend(Scores::from_tensor(&p)?.0);
        }
        Ok(Scores(rows))
    }
}
