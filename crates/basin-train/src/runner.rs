//! The training loop every protocol shares: epochs of optimiser steps, validation-based model
//! selection, checkpoints after every epoch and exact resume, NaN/Inf guards, progress bars.
//!
//! Model selection never sees the test set: after the last epoch the best validation epoch's
//! weights are restored and the test closure runs once. (The anomaly protocol's reference quirk,
//! which scores the test set from every epoch's training-mode logits, is the one exception, and
//! it is a named switch of that protocol.)
//!
//! Determinism: at the start of epoch e, libtorch's generator and the learner's `rng` are both
//! seeded from `(seed, e)`, so an interrupted run resumed from its last checkpoint produces the
//! same record as a straight run.
//!
//! Data parallelism: when the process belongs to a group ([`basin_dist::current`], set up from
//! `torchrun`'s variables by `basin train`), every rank cuts the epoch's permutation into the
//! same global batches and takes its contiguous shard of each ([`basin_dist::shard`]: disjoint
//! and covering); the loss is reduced across ranks before `backward` (so a non-finite loss
//! stops every rank at once), and gradients are averaged with each rank weighted by its share
//! of the batch before the optimiser step, which makes a step the global batch's step exactly
//! for losses that are means over items. Rank r > 0 draws its randomness (dropout, noise,
//! masks) from streams of its own; batch statistics (BatchNorm) are per rank, as in DDP without
//! SyncBatchNorm. Validation and test run whole on every rank (identical replicas, identical
//! selection); only rank 0 writes records and checkpoints, and every rank resumes from rank
//! 0's checkpoint (the run directory must be shared).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use basin_dist::{ProcessGroup, ReduceOp};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn::VarStore};

use crate::TrainError;
use crate::ema::Ema;
use crate::optim::{AdamW, OptimConfig};
use crate::record::{EpochRecord, Phases, RunRecord, RunStatus, split_hash};
use crate::schedule::{Schedule, Unit};

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
    /// The model's configuration (architecture and switches), recorded with each run: a run
    /// directory holding a checkpoint of another model is refused rather than resumed into
    /// this one. The default reports none (null), and then nothing is checked.
    fn config(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// `recorded`, the `model` of an earlier run's record, as this learner's configuration type
    /// reads it ([`with_defaults`]), so that a run recorded before a switch existed resumes
    /// under the switch's default. The default returns it unchanged.
    fn read_config(&self, recorded: &serde_json::Value) -> serde_json::Value {
        recorded.clone()
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

/// One epoch of `learner` on `train`: the shared mini-batch loop (see [`Learner`]).
pub(crate) fn train_epoch<L: Learner + ?Sized>(
    learner: &mut L,
    train: &[usize],
    steps: &mut Steps<'_>,
    rng: &mut ChaCha8Rng,
) -> Result<EpochOutput, TrainError> {
    let batches: Vec<Vec<usize>> = match learner.batch_size() {
        Some(0) => {
            return Err(TrainError::Config {
                field: "batch".into(),
                message: "must be at least 1".into(),
            });
        }
        Some(size) => {
            let mut order = train.to_vec();
            order.shuffle(rng);
            order.chunks(size).map(<[usize]>::to_vec).collect()
        }
        None => vec![train.to_vec()],
    };
    let group = data_parallel();
    if let Some(g) = &group {
        // Rank r > 0 draws its batches' randomness from a stream of its own.
        rng.set_stream(g.rank() as u64);
    }
    let (mut total, mut n) = (0.0, 0usize);
    let mut pre_step_scores = None;
    let device = learner.vars().device();
    for batch in &batches {
        if crate::interrupt::requested() {
            return Err(TrainError::Interrupted);
        }
        let items = match &group {
            Some(g) => &batch[basin_dist::shard(batch.len(), g.rank(), g.world_size())],
            None => batch.as_slice(),
        };
        let t0 = Instant::now();
        let out = if items.is_empty() {
            None
        } else {
            Some(learner.train_step(items, rng)?)
        };
        basin_core::device::synchronize(device);
        let step = t0.elapsed().as_secs_f64();
        let data = out.as_ref().map_or(0.0, |o| o.data_seconds);
        steps.phases.data += data;
        steps.phases.forward += (step - data).max(0.0);
        let share = group.as_deref().map(|g| Share {
            group: g,
            items: items.len(),
            batch: batch.len(),
        });
        let loss = out.as_ref().map(|o| &o.loss);
        total += steps.step(loss, share, || learner.after_backward())?;
        n += 1;
        if let Some(scores) = out.and_then(|o| o.pre_step_scores) {
            pre_step_scores = Some(scores);
        }
    }
    Ok(EpochOutput {
        loss: total / n.max(1) as f64,
        pre_step_scores,
        phases: std::mem::take(&mut steps.phases),
    })
}

/// The process's group when it has more than one rank.
fn data_parallel() -> Option<std::sync::Arc<ProcessGroup>> {
    basin_dist::current().filter(|g| g.world_size() > 1)
}

/// A rank's part of one global batch.
pub(crate) struct Share<'g> {
    group: &'g ProcessGroup,
    /// Items this rank trained on.
    items: usize,
    /// Items of the global batch.
    batch: usize,
}

/// The optimiser steps of one epoch.
pub(crate) struct Steps<'a> {
    opt: &'a mut AdamW,
    schedule: Option<&'a (Schedule, Unit)>,
    /// The weights' average, updated after each optimiser step.
    ema: Option<&'a mut Ema>,
    epoch: usize,
    /// Backward and optimiser time so far this epoch (and the learner's share, see
    /// [`train_epoch`]).
    phases: Phases,
}

impl Steps<'_> {
    /// The learning rate the next step uses.
    pub fn lr(&self) -> f64 {
        match self.schedule {
            Some((s, Unit::Step)) => s.lr(self.opt.steps() as u64),
            Some((s, Unit::Epoch)) => s.lr(self.epoch as u64),
            None => self.opt.config().lr,
        }
    }

    /// Backpropagates `loss`, runs `after_backward` ([`Learner::after_backward`]) and takes
    /// one optimiser step; returns the loss value. A NaN or infinite loss or gradient stops
    /// the run, naming the epoch and step. In a data-parallel step (`share`) the loss is this
    /// rank's (none when its shard of the batch is empty), the value returned is the global
    /// batch's, and gradients are averaged across ranks before the optimiser.
    pub fn step(
        &mut self,
        loss: Option<&Tensor>,
        share: Option<Share<'_>>,
        after_backward: impl FnOnce(),
    ) -> Result<f64, TrainError> {
        let (epoch, step) = (Some(self.epoch), Some(self.opt.steps()));
        let local = loss.map_or(0.0, |l| l.double_value(&[]));
        let t_comm = Instant::now();
        let value = match &share {
            None => local,
            Some(s) => {
                let bad = !local.is_finite();
                let weighted = if bad { 0.0 } else { local * s.items as f64 };
                let sums = s.group.sum(&[weighted, f64::from(u8::from(bad))])?;
                if sums[1] > 0.0 {
                    f64::NAN
                } else {
                    sums[0] / s.batch.max(1) as f64
                }
            }
        };
        self.phases.communication += t_comm.elapsed().as_secs_f64();
        if !value.is_finite() {
            return Err(TrainError::NonFinite {
                what: format!("loss ({value})"),
                epoch,
                step,
            });
        }
        let lr = self.lr();
        self.opt.zero_grad();
        let device = loss.map_or(tch::Device::Cpu, Tensor::device);
        let t0 = Instant::now();
        if let Some(loss) = loss {
            loss.backward();
            after_backward();
        }
        basin_core::device::synchronize(device);
        let t1 = Instant::now();
        self.phases.backward += (t1 - t0).as_secs_f64();
        if let Some(s) = &share {
            let weight = s.items as f64 / s.batch.max(1) as f64;
            basin_dist::all_reduce_gradients(s.group, &self.opt.parameters(), weight)?;
            self.phases.communication += t1.elapsed().as_secs_f64();
        }
        let t2 = Instant::now();
        let stepped = self.opt.step(lr);
        if let (Ok(_), Some(ema)) = (&stepped, self.ema.as_deref_mut()) {
            ema.update(self.opt.steps());
        }
        basin_core::device::synchronize(device);
        self.phases.optimiser += t2.elapsed().as_secs_f64();
        match stepped {
            Err(TrainError::NonFinite { what, .. }) => {
                Err(TrainError::NonFinite { what, epoch, step })
            }
            other => other.map(|_| value),
        }
    }
}

/// How a run trains.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Number of epochs.
    pub epochs: usize,
    /// The optimiser.
    pub optim: OptimConfig,
    /// Learning-rate schedule (else the optimiser's constant `lr`).
    pub schedule: Option<Schedule>,
    /// What the schedule counts.
    pub schedule_unit: Unit,
    /// Decay of an exponential moving average of the weights ([`Ema`]), updated after every
    /// optimiser step; validation, model selection and the test then use the average. `None`
    /// (the default, left out of files): the live weights, as before it existed. A protocol
    /// that scores the test from training steps ([`Validation::test_now`], the anomaly
    /// protocol's `reference-pre-step`) keeps those scores, which are the live weights'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ema: Option<f64>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            epochs: 100,
            optim: OptimConfig::default(),
            schedule: None,
            schedule_unit: Unit::Step,
            ema: None,
        }
    }
}

impl TrainConfig {
    /// Checks the values before anything trains; `field` is the config path for errors.
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        if self.epochs == 0 {
            return Err(TrainError::Config {
                field: format!("{field}.epochs"),
                message: "must be ≥ 1".into(),
            });
        }
        self.optim.validate(&format!("{field}.optim"))?;
        if let Some(s) = &self.schedule {
            s.validate(&format!("{field}.schedule"))?;
        }
        if let Some(d) = self.ema
            && !(0.0..1.0).contains(&d)
        {
            return Err(TrainError::Config {
                field: format!("{field}.ema"),
                message: format!("{d}: the average's decay must be in [0, 1), e.g. 0.99"),
            });
        }
        Ok(())
    }
}

/// The result of validating one epoch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    /// Metrics for the epoch record (e.g. `val_macro_f1`, `val_auc`).
    pub metrics: BTreeMap<String, f64>,
    /// The selection score: the best epoch has the highest.
    pub score: f64,
    /// Ranks epochs of equal `score`: the higher wins (equal ones keep the earlier epoch).
    /// Checkpoints written before it existed read 0.
    #[serde(default)]
    pub tie_break: f64,
    /// Values the test step needs (e.g. the threshold chosen on validation).
    pub for_test: BTreeMap<String, f64>,
    /// Test metrics computed now, for protocols whose reference scores the test set every
    /// epoch (a named quirk); when present they become the summary if this epoch is selected.
    pub test_now: Option<BTreeMap<String, f64>>,
}

/// Runs epochs for one model on one split, with checkpoints in `dir` (if any).
#[derive(Debug)]
pub struct Runner {
    /// Run name (written in the record).
    pub name: String,
    /// Training configuration.
    pub train: TrainConfig,
    /// The seed everything in the run derives from.
    pub seed: u64,
    /// Directory for `record.json`, `checkpoint.safetensors` and `best.safetensors`; without
    /// one nothing is written and a crash loses the run.
    pub dir: Option<PathBuf>,
    /// Device description for the record.
    pub device: String,
    /// The whole configuration to record (model, protocol, switches).
    pub config: serde_json::Value,
    /// Show a progress bar (it stays hidden when stderr is not a terminal).
    pub progress: bool,
    /// Retrain from the start a run whose checkpoint cannot be read (truncated, corrupt)
    /// instead of stopping with [`TrainError::Damaged`] (`--restart-damaged`).
    pub restart_damaged: bool,
}

/// A per-epoch seed from the run seed (SplitMix64 of seed and epoch).
pub fn epoch_seed(seed: u64, epoch: usize) -> u64 {
    let mut z = seed
        ^ (epoch as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn named(prefix: &str, vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (format!("{prefix}{n}"), t))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Copies every variable of `vs` found in `from` under `prefix` with the same shape; returns
/// the names absent from `from` and those present with another shape.
fn copy_matching(
    vs: &VarStore,
    from: &HashMap<String, Tensor>,
    prefix: &str,
) -> (Vec<String>, Vec<String>) {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut absent, mut misshaped) = (Vec::new(), Vec::new());
    tch::no_grad(|| {
        for (name, var) in &vars {
            match from.get(&format!("{prefix}{name}")) {
                Some(t) if t.size() == var.size() => {
                    var.shallow_clone()
                        .copy_(&t.to_kind(var.kind()).to_device(var.device()));
                }
                Some(_) => misshaped.push(format!("{prefix}{name}")),
                None => absent.push(format!("{prefix}{name}")),
            }
        }
    });
    (absent, misshaped)
}

/// [`copy_matching`] where every variable must be there.
fn copy_into(
    vs: &VarStore,
    from: &HashMap<String, Tensor>,
    prefix: &str,
) -> Result<(), TrainError> {
    let (mut missing, misshaped) = copy_matching(vs, from, prefix);
    missing.extend(misshaped);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TrainError::State(format!(
            "checkpoint lacks or misshapes: {}",
            missing.join(", ")
        )))
    }
}

impl Runner {
    /// Where `file` of the run goes; `None` without a directory, and on every rank but 0 of a
    /// data-parallel run (rank 0 alone writes; all ranks read its checkpoint to resume).
    fn path(&self, file: &str) -> Option<PathBuf> {
        if !basin_dist::is_writer() {
            return None;
        }
        self.dir.as_ref().map(|d| d.join(file))
    }

    /// Trains `learner` on `train` for the configured epochs, validating after each with
    /// `validate`, then restores the best epoch's weights and calls `test` once. `splits` are
    /// hashed into the record. Resumes from `dir/checkpoint.safetensors` when it holds the same
    /// run (same config and seed); returns the finished record.
    pub fn fit<L: Learner>(
        &self,
        learner: &mut L,
        train: &[usize],
        splits: &[(&str, &[usize])],
        mut validate: impl FnMut(&mut L, usize, &EpochOutput) -> Result<Validation, TrainError>,
        mut test: impl FnMut(&mut L, &Validation) -> Result<BTreeMap<String, f64>, TrainError>,
    ) -> Result<RunRecord, TrainError> {
        let started = Instant::now();
        self.train.validate("train")?;
        let mut opt = AdamW::new(learner.vars(), self.train.optim.clone())?;
        let schedule = self
            .train
            .schedule
            .clone()
            .map(|s| (s, self.train.schedule_unit));
        if let Some((s, _)) = &schedule {
            s.validate("schedule")?;
        }
        let group = data_parallel();
        let rank = group.as_ref().map_or(0, |g| g.rank());
        let device = match &group {
            Some(g) => format!(
                "{} (data-parallel: {} ranks, gloo)",
                self.device,
                g.world_size()
            ),
            None => self.device.clone(),
        };
        let mut record = RunRecord::new(&self.name, self.config.clone(), self.seed, device);
        record.model = learner.config();
        for (name, idx) in splits {
            record
                .split_hashes
                .insert((*name).to_owned(), split_hash(idx));
        }
        let mut best: Option<(Validation, Vec<(String, Tensor)>)> = None;
        if let (Some(dir), 0) = (&self.dir, rank) {
            basin_core::fsio::remove_stale_temporaries(dir);
        }
        let mut ema = self.train.ema.map(|d| Ema::new(learner.vars(), d));
        if let Some(resumed) = self.resume(learner, &mut opt, ema.as_mut(), &record)? {
            (record, best) = resumed;
        }
        if let Some(g) = &group {
            // Every rank must start from the same epoch (rank 0's checkpoint, seen by all) and
            // the same weights.
            let at = [record.epochs.len() as f64];
            let (lo, hi) = (g.reduce(&at, ReduceOp::Min)?, g.reduce(&at, ReduceOp::Max)?);
            if lo != hi {
                return Err(basin_dist::DistError::Mismatch(format!(
                    "ranks resume from epochs {} to {}: the run directory must be shared by all ranks",
                    lo[0], hi[0]
                ))
                .into());
            }
            let vars: Vec<Tensor> = named("", learner.vars())
                .into_iter()
                .map(|(_, t)| t)
                .collect();
            basin_dist::broadcast_parameters(g, &vars)?;
            if record.epochs.is_empty()
                && let Some(e) = ema.as_mut()
            {
                // The average starts from the broadcast weights, rank 0's, on every rank.
                e.restart();
            }
        }
        let prior_wall = record.wall_seconds;
        let show = self.progress && rank == 0;
        let bar = if show {
            ProgressBar::new(self.train.epochs as u64)
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} {bar:30} {pos}/{len} epochs [{elapsed_precise} < {eta_precise}] {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        // Without a terminal (CI logs, `nohup`) the bar is hidden: one plain line per epoch then.
        let lines = show && bar.is_hidden();
        bar.set_prefix(self.name.clone());
        bar.set_position(record.epochs.len() as u64);

        for epoch in record.epochs.len()..self.train.epochs {
            let t0 = Instant::now();
            let seed = epoch_seed(self.seed, epoch);
            // Rank r draws dropout and noise from seed + r (rank 0: the single-process draws).
            tch::manual_seed(seed.wrapping_add(rank as u64) as i64);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut steps = Steps {
                opt: &mut opt,
                schedule: schedule.as_ref(),
                ema: ema.as_mut(),
                epoch,
                phases: Phases::default(),
            };
            let lr = steps.lr();
            let out = train_epoch(learner, train, &mut steps, &mut rng)
                .inspect_err(|e| self.fail(&mut record, e))?;
            if !out.loss.is_finite() {
                let e = TrainError::NonFinite {
                    what: format!("epoch loss ({})", out.loss),
                    epoch: Some(epoch),
                    step: Some(opt.steps()),
                };
                self.fail(&mut record, &e);
                return Err(e);
            }
            let t_eval = Instant::now();
            // With an average, evaluation (and the weights kept if this epoch is chosen) uses
            // it; the live weights come back before the next epoch and the checkpoint.
            if let Some(e) = ema.as_mut() {
                e.swap();
            }
            let v = tch::no_grad(|| validate(learner, epoch, &out))
                .inspect_err(|e| self.fail(&mut record, e))?;
            let mut phases = out.phases.clone();
            phases.evaluation = t_eval.elapsed().as_secs_f64();
            let mut metrics = v.metrics.clone();
            metrics.insert("train_loss".into(), out.loss);
            if best.as_ref().is_none_or(|(b, _)| {
                v.score > b.score || (v.score == b.score && v.tie_break > b.tie_break)
            }) {
                let weights = named("", learner.vars())
                    .into_iter()
                    .map(|(n, t)| (n, t.detach().copy()))
                    .collect();
                if let Some(summary) = &v.test_now {
                    record.summary = summary.clone();
                }
                record.selected_epoch = Some(epoch);
                best = Some((v, weights));
            }
            if let Some(e) = ema.as_mut() {
                e.swap();
            }
            record.epochs.push(EpochRecord {
                epoch,
                lr,
                metrics,
                seconds: t0.elapsed().as_secs_f64(),
                phases,
            });
            record.wall_seconds = prior_wall + started.elapsed().as_secs_f64();
            self.checkpoint(learner, &opt, ema.as_ref(), &record, best.as_ref())?;
            let val = record
                .epochs
                .last()
                .and_then(|e| e.metrics.iter().find(|(k, _)| k.starts_with("val_")))
                .map(|(k, v)| format!(", {k} {v:.4}"))
                .unwrap_or_default();
            bar.set_message(format!("loss {:.4}{val}", out.loss));
            bar.inc(1);
            if lines {
                let done = record.epochs.len();
                let per = record.wall_seconds / done.max(1) as f64;
                tracing::info!(
                    "{} epoch {done}/{}: loss {:.4}{val} ({:.1} s; about {:.0} s left)",
                    self.name,
                    self.train.epochs,
                    out.loss,
                    t0.elapsed().as_secs_f64(),
                    per * (self.train.epochs - done) as f64
                );
            }
        }
        bar.finish_and_clear();

        // Restore the selected epoch's weights and test once.
        if let Some((v, weights)) = &best {
            let map: HashMap<String, Tensor> = weights
                .iter()
                .map(|(n, t)| (n.clone(), t.shallow_clone()))
                .collect();
            copy_into(learner.vars(), &map, "")?;
            if v.test_now.is_none() {
                record.summary =
                    tch::no_grad(|| test(learner, v)).inspect_err(|e| self.fail(&mut record, e))?;
            }
            for (k, x) in &v.metrics {
                record.summary.entry(format!("selected_{k}")).or_insert(*x);
            }
        }
        record.status = RunStatus::Finished;
        record.wall_seconds = prior_wall + started.elapsed().as_secs_f64();
        if let Some(p) = self.path("record.json") {
            record.write(&p)?;
        }
        Ok(record)
    }

    fn fail(&self, record: &mut RunRecord, e: &TrainError) {
        record.status = RunStatus::Failed {
            error: e.to_string(),
        };
        if let Some(p) = self.path("record.json") {
            let _ = record.write(&p);
        }
    }

    fn checkpoint<L: Learner>(
        &self,
        learner: &L,
        opt: &AdamW,
        ema: Option<&Ema>,
        record: &RunRecord,
        best: Option<&(Validation, Vec<(String, Tensor)>)>,
    ) -> Result<(), TrainError> {
        let (Some(ckpt), Some(rec)) = (
            self.path("checkpoint.safetensors"),
            self.path("record.json"),
        ) else {
            return Ok(());
        };
        let mut tensors = named("model.", learner.vars());
        tensors.extend(opt.state());
        if let Some(e) = ema {
            tensors.extend(e.state());
        }
        let mut meta = HashMap::new();
        meta.insert("record".to_owned(), to_json(record)?);
        if let Some((v, weights)) = best {
            tensors.extend(
                weights
                    .iter()
                    .map(|(n, t)| (format!("best.{n}"), t.shallow_clone())),
            );
            meta.insert("best".to_owned(), to_json(v)?);
        }
        basin_core::checkpoint::write_tensors(&ckpt, &tensors, Some(meta))?;
        record.write(&rec)
    }

    /// Loads `dir/checkpoint.safetensors` if it belongs to this run.
    #[allow(clippy::type_complexity)]
    fn resume<L: Learner>(
        &self,
        learner: &mut L,
        opt: &mut AdamW,
        ema: Option<&mut Ema>,
        fresh: &RunRecord,
    ) -> Result<Option<(RunRecord, Option<(Validation, Vec<(String, Tensor)>)>)>, TrainError> {
        // Every rank reads rank 0's checkpoint.
        let Some(ckpt) = self.dir.as_ref().map(|d| d.join("checkpoint.safetensors")) else {
            return Ok(None);
        };
        if !ckpt.exists() {
            return Ok(None);
        }
        // What cannot be read is damage, not another run: the run is retrained under
        // `restart_damaged` (nothing has been loaded into the learner yet), and refused with the
        // way on otherwise.
        let read = || -> Result<_, TrainError> {
            let (tensors, meta) = basin_core::checkpoint::read_file(&ckpt)?;
            let entry = |key: &str| -> Result<String, TrainError> {
                meta.get(key).cloned().ok_or_else(|| {
                    TrainError::State(format!("no `{key}` in the checkpoint metadata"))
                })
            };
            let record: RunRecord = serde_json::from_str(&entry("record")?)
                .map_err(|e| TrainError::State(format!("bad record: {e}")))?;
            let best: Option<Validation> = match meta.get("best") {
                Some(b) => Some(
                    serde_json::from_str(b)
                        .map_err(|e| TrainError::State(format!("bad best-epoch entry: {e}")))?,
                ),
                None => None,
            };
            Ok((tensors, record, best))
        };
        let (tensors, record, best_validation) = match read() {
            Ok(read) => read,
            Err(e) => return self.damaged(&ckpt, e),
        };
        let there = as_identity(&record.config, &fresh.config);
        if there != fresh.config
            || record.seed != fresh.seed
            || record.split_hashes != fresh.split_hashes
        {
            let mut what = json_differences(&there, &fresh.config, "config");
            if record.seed != fresh.seed {
                what.push(format!("seed: {} there, {} here", record.seed, fresh.seed));
            }
            if record.split_hashes != fresh.split_hashes {
                what.push("the splits".into());
            }
            return Err(TrainError::State(format!(
                "{} holds another run (different config, seed or splits: {}); remove it or choose another directory",
                ckpt.display(),
                what.join("; ")
            )));
        }
        // A record without a model (written before models were recorded, or by a learner that
        // reports none) is taken on trust.
        let recorded = learner.read_config(&record.model);
        if !recorded.is_null() && !fresh.model.is_null() && recorded != fresh.model {
            return Err(TrainError::State(format!(
                "{} holds a run of another model (its `model` in record.json differs from this one's: {}); remove it or choose another directory",
                ckpt.display(),
                json_differences(&recorded, &fresh.model, "model").join("; ")
            )));
        }
        let mut record = record;
        record.model = fresh.model.clone();
        let map: HashMap<String, Tensor> = tensors.into_iter().collect();
        copy_into(learner.vars(), &map, "model.")?;
        opt.load_state(&map)?;
        if let Some(e) = ema {
            e.load_state(&map)?;
        }
        let best = match best_validation {
            Some(v) => {
                let weights = named("", learner.vars())
                    .into_iter()
                    .map(|(n, _)| {
                        let t = map.get(&format!("best.{n}")).map(|t| t.shallow_clone());
                        t.map(|t| (n.clone(), t))
                            .ok_or_else(|| TrainError::State(format!("checkpoint lacks best.{n}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Some((v, weights))
            }
            None => None,
        };
        tracing::info!("resuming {} at epoch {}", self.name, record.epochs.len());
        Ok(Some((record, best)))
    }

    /// A checkpoint that cannot be read: under [`Runner::restart_damaged`] the run's files are
    /// removed and it trains from the start (a line says so); otherwise the error names the
    /// file and the way on.
    #[allow(clippy::type_complexity)]
    fn damaged(
        &self,
        checkpoint: &Path,
        e: TrainError,
    ) -> Result<Option<(RunRecord, Option<(Validation, Vec<(String, Tensor)>)>)>, TrainError> {
        if !self.restart_damaged {
            return Err(TrainError::Damaged {
                path: checkpoint.to_path_buf(),
                message: e.to_string(),
            });
        }
        tracing::warn!(
            "{}: {e}; retraining {} from its first epoch (--restart-damaged)",
            checkpoint.display(),
            self.name
        );
        if basin_dist::is_writer()
            && let Some(dir) = &self.dir
        {
            for file in ["checkpoint.safetensors", "record.json", "record.csv"] {
                let path = dir.join(file);
                if let Err(e) = std::fs::remove_file(&path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(TrainError::Io { path, source: e });
                }
            }
        }
        Ok(None)
    }
}

/// A recorded run's config as `here`, this run's, identifies runs: cross-validation folds leave
/// out the number of repeats (it says how many runs there are, not what one is), and records
/// written before they did still carry it at the top level, which is then dropped. Where
/// `here` has `repeats` (the et-paper procedure, whose scores depend on it) nothing is.
fn as_identity(there: &serde_json::Value, here: &serde_json::Value) -> serde_json::Value {
    let mut there = there.clone();
    let is_cv = here.get("folds").is_some_and(serde_json::Value::is_object);
    if is_cv
        && here.get("repeats").is_none()
        && let Some(fields) = there.as_object_mut()
    {
        fields.remove("repeats");
    }
    there
}

/// Where two recorded JSON values differ, as `path: A there, B here` (the first five; a field
/// one side lacks reads `absent`): what a refused resume names, so that a changed setting, or a
/// field added since the run, is found without diffing the files by hand.
fn json_differences(
    there: &serde_json::Value,
    here: &serde_json::Value,
    path: &str,
) -> Vec<String> {
    fn walk(
        a: Option<&serde_json::Value>,
        b: Option<&serde_json::Value>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        use serde_json::Value;
        if out.len() >= 5 || a == b {
            return;
        }
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    walk(x.get(k), y.get(k), &format!("{path}.{k}"), out);
                }
            }
            _ => {
                let show = |v: Option<&Value>| v.map_or("absent".to_owned(), Value::to_string);
                out.push(format!("{path}: {} there, {} here", show(a), show(b)));
            }
        }
    }
    let mut out = Vec::new();
    walk(Some(there), Some(here), path, &mut out);
    out
}

fn to_json<T: Serialize>(value: &T) -> Result<String, TrainError> {
    serde_json::to_string(value).map_err(|e| TrainError::State(format!("cannot serialise: {e}")))
}

/// Warm start: copies the selected epoch's weights of the run at `checkpoint` into every
/// variable of `vars` that it holds under the same name and shape (SFi-Former+ starts from a
/// trained DFi-Former). Returns the names left as initialised; a name held with another shape
/// is an error.
pub fn warm_start(checkpoint: &Path, vars: &VarStore) -> Result<Vec<String>, TrainError> {
    let (tensors, meta) = basin_core::checkpoint::read_file(checkpoint)?;
    if !meta.contains_key("best") {
        return Err(TrainError::State(format!(
            "{}: no selected epoch to start from",
            checkpoint.display()
        )));
    }
    let map: HashMap<String, Tensor> = tensors.into_iter().collect();
    let (absent, misshaped) = copy_matching(vars, &map, "best.");
    if !misshaped.is_empty() {
        return Err(TrainError::State(format!(
            "{}: another shape there for {}",
            checkpoint.display(),
            misshaped.join(", ")
        )));
    }
    Ok(absent
        .into_iter()
        .map(|n| n.strip_prefix("best.").unwrap_or(&n).to_owned())
        .collect())
}

/// Loads the selected epoch's weights of a finished or interrupted run from its
/// `checkpoint.safetensors` into `vars`, and returns that epoch's validation (with what the
/// test step needs, e.g. the threshold). This is how a trained run is evaluated again.
pub fn load_best(checkpoint: &Path, vars: &VarStore) -> Result<Validation, TrainError> {
    let (tensors, meta) = basin_core::checkpoint::read_file(checkpoint)?;
    let best = meta.get("best").ok_or_else(|| {
        TrainError::State(format!(
            "{}: no selected epoch in the checkpoint (the run stopped before its first epoch ended)",
            checkpoint.display()
        ))
    })?;
    let v: Validation = serde_json::from_str(best).map_err(|e| {
        TrainError::State(format!(
            "{}: bad best-epoch entry: {e}",
            checkpoint.display()
        ))
    })?;
    let map: HashMap<String, Tensor> = tensors.into_iter().collect();
    copy_into(vars, &map, "best.")
        .map_err(|e| TrainError::State(format!("{}: {e}", checkpoint.display())))?;
    Ok(v)
}
