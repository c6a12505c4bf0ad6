//! Multiple-instance bag classification with `HopfieldPooling` (the Hopfield MIL benchmarks).
//!
//! Instances are standardised with statistics of the training bags only, embedded by an affine
//! map and ReLU (with dropout), pooled per bag by `HopfieldPooling` (one learned query, stored
//! patterns = the bag's instances, padding ignored), and a linear head gives the bag's logit;
//! binary cross-entropy trains it.

use std::sync::Arc;

use basin_core::hopfield::{AssociationConfig, HopfieldPooling};
use basin_graph::mil::MilDataset;
use basin_train::TrainError;
use basin_train::runner::{Learner, Scores, StepOutput};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module, ModuleT};
use tch::{Device, Kind, Reduction, Tensor};

use crate::Result;

/// The model's hyperparameters (one candidate of a selection grid).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BagClassifierConfig {
    /// Embedding width.
    pub embed: i64,
    /// Heads of the pooling.
    pub heads: i64,
    /// Dropout on the embeddings.
    pub dropout: f64,
    /// Bags per batch.
    pub batch: usize,
}

/// A HopfieldPooling bag classifier on a MIL dataset; items are bag indices.
pub struct BagClassifierLearner {
    vs: nn::VarStore,
    embed: nn::Linear,
    pool: HopfieldPooling,
    head: nn::Linear,
    dropout: f64,
    data: Arc<MilDataset>,
    mean: Vec<f32>,
    std: Vec<f32>,
    batch: usize,
}

impl std::fmt::Debug for BagClassifierLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BagClassifierLearner")
            .field("dataset", &self.data.name)
            .finish()
    }
}

impl BagClassifierLearner {
    /// A learner seeded by `seed`, standardising with the instances of the `train` bags only.
    pub fn new(
        data: Arc<MilDataset>,
        cfg: &BagClassifierConfig,
        train: &[usize],
        seed: u64,
        device: Device,
    ) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let f = data.features;
        let (mut sum, mut sq, mut n) = (vec![0f64; f], vec![0f64; f], 0usize);
        for &b in train {
            for row in data.bags[b].features.chunks(f) {
                for (j, &v) in row.iter().enumerate() {
                    sum[j] += f64::from(v);
                    sq[j] += f64::from(v) * f64::from(v);
                }
                n += 1;
            }
        }
        let n = n.max(1) as f64;
        let mean: Vec<f32> = sum.iter().map(|s| (s / n) as f32).collect();
        let std: Vec<f32> = sq
            .iter()
            .zip(&mean)
            .map(|(q, &m)| ((q / n - f64::from(m).powi(2)).max(0.0).sqrt().max(1e-6)) as f32)
            .collect();
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let assoc = AssociationConfig {
            state_size: cfg.embed,
            stored_size: cfg.embed,
            heads: cfg.heads,
            ..AssociationConfig::default()
        };
        let pool = HopfieldPooling::new(&(&root / "pool"), &assoc, 1)?;
        Ok(Self {
            embed: nn::linear(&root / "embed", f as i64, cfg.embed, Default::default()),
            head: nn::linear(&root / "head", assoc.out_size(), 1, Default::default()),
            pool,
            dropout: cfg.dropout,
            vs,
            data,
            mean,
            std,
            batch: cfg.batch,
        })
    }

    /// Padded, standardised instances `[B, L, F]`, the padding mask `[B, L]` and labels `[B]`.
    fn batch_tensors(&self, bags: &[usize]) -> (Tensor, Tensor, Tensor) {
        let f = self.data.features;
        let l = bags
            .iter()
            .map(|&b| self.data.bags[b].len)
            .max()
            .unwrap_or(1);
        let mut x = vec![0f32; bags.len() * l * f];
        let mut pad = vec![true; bags.len() * l];
        for (k, &b) in bags.iter().enumerate() {
            let bag = &self.data.bags[b];
            for (i, row) in bag.features.chunks(f).enumerate() {
                pad[k * l + i] = false;
                for (j, &v) in row.iter().enumerate() {
                    x[(k * l + i) * f + j] = (v - self.mean[j]) / self.std[j];
                }
            }
        }
        let labels: Vec<f32> = bags
            .iter()
            .map(|&b| f32::from(u8::from(self.data.bags[b].label)))
            .collect();
        let b = bags.len() as i64;
        let device = self.vs.device();
        (
            Tensor::from_slice(&x)
                .view([b, l as i64, f as i64])
                .to_device(device),
            Tensor::from_slice(&pad)
                .view([b, l as i64])
                .to_device(device),
            Tensor::from_slice(&labels).to_device(device),
        )
    }

    fn logits(&self, x: &Tensor, pad: &Tensor, train: bool) -> Tensor {
        let h = self.embed.forward(x).relu().dropout(self.dropout, train);
        self.head
            .forward_t(&self.pool.forward(&h, Some(pad)), train)
            .squeeze_dim(-1)
    }
}

impl Learner for BagClassifierLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.batch)
    }

    fn train_step(
        &mut self,
        items: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        let (x, pad, y) = self.batch_tensors(items);
        Ok(StepOutput::loss(
            self.logits(&x, &pad, true)
                .binary_cross_entropy_with_logits::<Tensor>(&y, None, None, Reduction::Mean),
        ))
    }

    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rows = Vec::with_capacity(items.len());
        for chunk in items.chunks(64) {
            let (x, pad, _) = self.batch_tensors(chunk);
            let p = tch::no_grad(|| self.logits(&x, &pad, false).sigmoid());
            rows.extend(Scores::from_tensor(&p.to_kind(Kind::Double))?.0);
        }
        Ok(Scores(rows))
    }
}
