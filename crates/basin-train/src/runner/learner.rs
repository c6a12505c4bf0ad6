//! What a model gives the training loop: the [`Learner`] trait and the outputs of its steps.

use std::collections::BTreeMap;

use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use tch::{Tensor, nn::VarStore};

use crate::TrainError;
use crate::record::Phases;

/// Per-item scores from a learner: one row per item (class probabilities or logits, or a single
/// probability for binary tasks, or a regression value).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scores(pub Vec<Vec<f64>>);

impl Scores {
    /// The probability of the positive class: the only column, or the second of two.
    pub fn positive(&self) -> Vec<f64> {
        self.0
            .iter()
            .map(|r| {
                if r.len() >= 2 {
                    r[1]
                } else {
                    r.first().copied().unwrap_or(f64::NAN)
                }
            })
            .collect()
    }

    /// The arg-max class of each row (the first on ties).
    pub fn argmax(&self) -> Vec<i64> {
        self.0
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .fold((0usize, f64::NEG_INFINITY), |b, (i, &v)| {
                        if v > b.1 { (i, v) } else { b }
                    })
                    .0 as i64
            })
            .collect()
    }

    /// The rows of the given items, from scores over all items.
    pub fn select(&self, items: &[usize]) -> Self {
        Self(items.iter().map(|&i| self.0[i].clone()).collect())
    }

    /// Scores from a `[N, C]` (or `[N]`) tensor.
    pub fn from_tensor(t: &Tensor) -> Result<Self, TrainError> {
        let t = t
            .detach()
            .to_kind(tch::Kind::Double)
            .to_device(tch::Device::Cpu);
        let t = if t.dim() == 1 { t.unsqueeze(1) } else { t };
        Ok(Self(Vec::<Vec<f64>>::try_from(&t)?))
    }
}

/// What a learner reports for one training epoch.
#[derive(Clone, Debug, Default)]
pub struct EpochOutput {
    /// Mean training loss.
    pub loss: f64,
    /// Training-mode scores of every item computed before the epoch's optimiser step, for the
    /// anomaly reference quirk (full-batch learners only).
    pub pre_step_scores: Option<Scores>,
    /// Where the epoch's training time went (evaluation is added by the runner).
    pub phases: Phases,
}

/// What one training step of a learner produces.
#[derive(Debug)]
pub struct StepOutput {
    /// The loss to backpropagate (a scalar tensor with a graph).
    pub loss: Tensor,
    /// Training-mode scores of every item from the same forward pass, before the step (the
    /// anomaly reference quirk; full-batch learners only).
    pub pre_step_scores: Option<Scores>,
    /// Seconds of the step spent preparing the batch (the rest counts as the forward pass).
    pub data_seconds: f64,
}

impl StepOutput {
    /// A step with just a loss.
    pub fn loss(loss: Tensor) -> Self {
        Self {
            loss,
            pre_step_scores: None,
            data_seconds: 0.0,
        }
    }

    /// The same step, with `seconds` of it spent preparing the batch.
    pub fn with_data_seconds(mut self, seconds: f64) -> Self {
        self.data_seconds = seconds;
        self
    }
}

/// A model the protocols can train and evaluate; items (nodes, graphs, images) are indices.
///
/// The mini-batch loop is the runner's, not the learner's: each epoch the training items are
/// shuffled with the epoch's `rng` and cut into batches of [`Learner::batch_size`] (or taken
/// all at once), and [`Learner::train_step`] gives each batch's loss.
pub trait Learner {
    /// The model's parameters (optimised and checkpointed).
    fn vars(&self) -> &VarStore;
    /// Items per optimiser step; `None` for one full-batch step per epoch on the training
    /// items in their given order.
    fn batch_size(&self) -> Option<usize>;
    /// The training-mode loss of one batch of items. Draw every random choice from `rng` or
    /// libtorch's generator (both reseeded per epoch).
    fn train_step(
        &mut self,
        items: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> Result<StepOutput, TrainError>;
    /// Evaluation-mode scores of `items`, one row per item, in order.
    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError>;
    /// Called after the loss's `backward` and before the optimiser step: the place to finish a
    /// backward pass the loss's graph does not reach, such as a block trained with recomputed
    /// activations ([`basin_core::Recompute`]). The default does nothing.
    fn after_backward(&mut self) {}
    /// The model's energy blocks. The runner attaches the implicit gradients of their settling
    /// forwards to each training step's loss ([`basin_core::implicit::attach`]) and adds their
    /// settling statistics to each epoch's record ([`basin_core::SettleStats::metrics`]), so no
    /// learner can forget either. The default has none.
    fn blocks(&self) -> Vec<&basin_core::EnergyBlock> {
        Vec::new()
    }
    /// The model's configuration (architecture and switches), recorded with each run, and how
    /// its type reads an earlier record ([`ModelConfig`]): a run directory holding a checkpoint
    /// of another model is refused rather than resumed into this one. The default reports none,
    /// and then nothing is checked.
    fn config(&self) -> Option<ModelConfig> {
        None
    }
    /// Metrics of `items` that the model computes itself, where one row of scores per item does
    /// not say it: masked image completion scores its reconstructions under the masks of
    /// `mask_seeds` (`mse`, `psnr`, `ssim`, …), the image protocol's validation and test
    /// ([`crate::protocol::ImageProtocol`]). The default has none: an error.
    fn reconstruction(
        &mut self,
        items: &[usize],
        mask_seeds: &[u64],
    ) -> Result<BTreeMap<String, f64>, TrainError> {
        let _ = (items, mask_seeds);
        Err(TrainError::State(
            "this learner is scored by `predict`, not by its reconstructions".into(),
        ))
    }
}

/// A model's configuration as a run records it (`model` in `record.json`), with the reader of
/// its type ([`with_defaults`]) that an earlier record is compared through on resume.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The configuration as JSON.
    pub value: serde_json::Value,
    /// Reads a recorded configuration as this one's type would (the identity for an untyped
    /// one).
    pub read: fn(&serde_json::Value) -> serde_json::Value,
}

impl ModelConfig {
    /// `cfg`, recorded and read back as a `C`.
    pub fn of<C: Serialize + serde::de::DeserializeOwned>(cfg: &C) -> Self {
        Self {
            value: serde_json::to_value(cfg).unwrap_or_default(),
            read: with_defaults::<C>,
        }
    }
}

/// `recorded` read as a `C` and written out again: a field added to `C` since the record was
/// written takes its serde default, which a switch's default must keep as the behaviour from
/// before it (true of each added since records carry models: `dense_init`, `multihead_init`;
/// the `recorded_starts` test of basin-repro pins the tables' models' starts). `recorded`
/// unchanged where it does not read as a `C` (then any difference still refuses a resume).
pub fn with_defaults<C: Serialize + serde::de::DeserializeOwned>(
    recorded: &serde_json::Value,
) -> serde_json::Value {
    serde_json::from_value::<C>(recorded.clone())
        .ok()
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or_else(|| recorded.clone())
}
