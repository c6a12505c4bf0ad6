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

mod config;
mod learner;
mod resume;
mod steps;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Instant;

use basin_dist::ReduceOp;
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tch::Tensor;

pub(crate) use config::is_zero;
pub use config::{TrainConfig, Validation};
pub use learner::{EpochOutput, Learner, ModelConfig, Scores, StepOutput, with_defaults};
use resume::{copy_into, named};
pub use resume::{load_best, warm_start};
pub use steps::epoch_batches;
use steps::{Steps, data_parallel, train_epoch};

use crate::TrainError;
use crate::ema::Ema;
use crate::optim::AdamW;
use crate::record::{EpochRecord, Phases, RunRecord, RunStatus, split_hash};

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

/// The start of epoch `epoch` of a run seeded `seed`: libtorch's generator reseeded (rank `r`
/// of a data-parallel run draws dropout and noise from seed + r; rank 0 the single-process
/// draws) and the epoch's generator of batch orders and other random choices returned.
pub fn epoch_start(seed: u64, epoch: usize, rank: usize) -> ChaCha8Rng {
    let seed = epoch_seed(seed, epoch);
    tch::manual_seed(seed.wrapping_add(rank as u64) as i64);
    ChaCha8Rng::seed_from_u64(seed)
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
        record.model = learner
            .config()
            .map_or(serde_json::Value::Null, |c| c.value);
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
            for block in learner.blocks() {
                block.set_warm_up(epoch < self.train.implicit_warmup);
            }
            let mut rng = epoch_start(self.seed, epoch, rank);
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
            metrics.extend(basin_core::implicit::take_stats(learner.blocks()).metrics());
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
        // The test descends as the last epoch did.
        for block in learner.blocks() {
            block.set_warm_up(self.train.implicit_warmup >= self.train.epochs);
        }

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
}
