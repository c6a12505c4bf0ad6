//! Multiple-instance bag classification with `HopfieldPooling` (the Hopfield MIL benchmarks).
//!
//! Instances are standardised with statistics of the training bags only, embedded by an affine
//! map and ReLU (with dropout), pooled per bag by `HopfieldPooling` (one learned query, stored
//! patterns = the bag's instances, padding ignored), and a linear head gives the bag's logit;
//! binary cross-entropy trains it. The Hopfield paper's MIL search (its appendix) varied the
//! learning rate, the pooling's β, the widths, dropout and *bag dropout*; each is a field here.

use std::sync::Arc;

use crate::layers::{AssociationConfig, HopfieldPooling};
use basin_graph::mil::MilDataset;
use basin_train::TrainError;
use basin_train::protocol::Candidate;
use basin_train::runner::{Learner, Scores, StepOutput, TrainConfig};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module, ModuleT};
use tch::{Device, Kind, Reduction, Tensor};

use basin_tasks::{Result, TaskError};

/// The model's hyperparameters (one candidate of a selection grid).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BagClassifierConfig {
    /// Embedding width.
    pub embed: i64,
    /// Heads of the pooling.
    pub heads: i64,
    /// Width of each head's association space (default `embed / heads`).
    #[serde(default)]
    pub head_size: Option<i64>,
    /// The pooling's β (default `1/sqrt(head size)`, the attention scaling).
    #[serde(default)]
    pub beta: Option<f64>,
    /// Dropout on the embeddings.
    pub dropout: f64,
    /// Bag dropout: in training, each instance of a bag is left out with this probability (at
    /// least one is kept), so the pooling cannot lean on a few instances.
    #[serde(default)]
    pub bag_dropout: f64,
    /// Bags per batch.
    pub batch: usize,
    /// This candidate's learning rate (default: the protocol's).
    #[serde(default)]
    pub lr: Option<f64>,
}

impl BagClassifierConfig {
    /// A candidate with the given widths and dropout, the rest at their defaults.
    pub fn new(embed: i64, heads: i64, dropout: f64, batch: usize) -> Self {
        Self {
            embed,
            heads,
            head_size: None,
            beta: None,
            dropout,
            bag_dropout: 0.0,
            batch,
            lr: None,
        }
    }

    /// Checks the values a run file or a grid could get wrong.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, message: String| {
            Err(TaskError::config(
                format!("bag_classifier.{field}"),
                message,
            ))
        };
        if self.embed < 1 || self.heads < 1 || self.batch == 0 {
            return bad(
                "embed/heads/batch",
                format!(
                    "must be ≥ 1, got {}/{}/{}",
                    self.embed, self.heads, self.batch
                ),
            );
        }
        for (field, p) in [("dropout", self.dropout), ("bag_dropout", self.bag_dropout)] {
            if !(0.0..1.0).contains(&p) {
                return bad(field, format!("must be in [0, 1), got {p}"));
            }
        }
        if let Some(lr) = self.lr
            && !(lr.is_finite() && lr > 0.0)
        {
            return bad("lr", format!("must be > 0, got {lr}"));
        }
        Ok(())
    }
}

impl Candidate for BagClassifierConfig {
    fn train(&self, protocol: &TrainConfig) -> TrainConfig {
        let mut train = protocol.clone();
        if let Some(lr) = self.lr {
            train.optim.lr = lr;
        }
        train
    }
}

/// A HopfieldPooling bag classifier on a MIL dataset; items are bag indices.
pub struct BagClassifierLearner {
    vs: nn::VarStore,
    embed: nn::Linear,
    pool: HopfieldPooling,
    head: nn::Linear,
    dropout: f64,
    bag_dropout: f64,
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
        cfg.validate()?;
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
            hidden_size: cfg.head_size,
            beta: cfg.beta,
            ..AssociationConfig::default()
        };
        let pool = HopfieldPooling::new(&(&root / "pool"), &assoc, 1)?;
        Ok(Self {
            embed: nn::linear(&root / "embed", f as i64, cfg.embed, Default::default()),
            head: nn::linear(&root / "head", assoc.out_size(), 1, Default::default()),
            pool,
            dropout: cfg.dropout,
            bag_dropout: cfg.bag_dropout,
            vs,
            data,
            mean,
            std,
            batch: cfg.batch,
        })
    }

    /// Padded, standardised instances `[B, L, F]`, the padding mask `[B, L]` and labels `[B]`;
    /// with `drop`, bag dropout marks left-out instances as padding.
    fn batch_tensors(
        &self,
        bags: &[usize],
        mut drop: Option<&mut ChaCha8Rng>,
    ) -> (Tensor, Tensor, Tensor) {
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
            let kept: Vec<bool> = match drop.as_deref_mut() {
                Some(rng) if self.bag_dropout > 0.0 => {
                    let mut kept: Vec<bool> = (0..bag.len)
                        .map(|_| rng.random::<f64>() >= self.bag_dropout)
                        .collect();
                    if !kept.contains(&true) && bag.len > 0 {
                        kept[rng.random_range(0..bag.len)] = true;
                    }
                    kept
                }
                _ => vec![true; bag.len],
            };
            for (i, row) in bag.features.chunks(f).enumerate() {
                pad[k * l + i] = !kept[i];
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
        rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        let (x, pad, y) = self.batch_tensors(items, Some(rng));
        Ok(StepOutput::loss(
            self.logits(&x, &pad, true)
                .binary_cross_entropy_with_logits::<Tensor>(&y, None, None, Reduction::Mean),
        ))
    }

    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rows = Vec::with_capacity(items.len());
        for chunk in items.chunks(64) {
            let (x, pad, _) = self.batch_tensors(chunk, None);
            let p = tch::no_grad(|| self.logits(&x, &pad, false).sigmoid());
            rows.extend(Scores::from_tensor(&p.to_kind(Kind::Double))?.0);
        }
        Ok(Scores(rows))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use basin_graph::mil::Bag;

    #[test]
    fn bag_dropout_hides_instances_in_training_only_and_keeps_one_per_bag() {
        let bags = (0..20)
            .map(|id| Bag {
                id,
                len: 1 + id as usize % 7,
                features: vec![1.0; 3 * (1 + id as usize % 7)],
                label: id % 2 == 0,
            })
            .collect();
        let data = Arc::new(MilDataset {
            name: "toy".into(),
            features: 3,
            bags,
        });
        let cfg = BagClassifierConfig {
            bag_dropout: 0.75,
            ..BagClassifierConfig::new(8, 2, 0.0, 4)
        };
        let items: Vec<usize> = (0..20).collect();
        let learner =
            BagClassifierLearner::new(data.clone(), &cfg, &items, 0, Device::Cpu).unwrap();
        let real = |b: usize| data.bags[b].len;
        let shown = |pad: &Tensor| -> Vec<i64> {
            Vec::<i64>::try_from((pad.logical_not().to_kind(Kind::Int64)).sum_dim_intlist(
                [1].as_slice(),
                false,
                Kind::Int64,
            ))
            .unwrap()
        };
        let (_, pad, _) = learner.batch_tensors(&items, None);
        let all: Vec<i64> = items.iter().map(|&b| real(b) as i64).collect();
        assert_eq!(shown(&pad), all, "no dropout outside training");
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (_, pad, _) = learner.batch_tensors(&items, Some(&mut rng));
        let kept = shown(&pad);
        assert!(kept.iter().zip(&all).all(|(&k, &n)| k >= 1 && k <= n));
        let (k, n): (i64, i64) = (kept.iter().sum(), all.iter().sum());
        assert!(
            (k as f64) < 0.5 * n as f64,
            "{k} of {n} instances kept at p = 0.75"
        );
    }
}
