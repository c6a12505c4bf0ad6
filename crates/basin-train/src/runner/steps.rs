//! One epoch's optimiser steps: the mini-batch loop, data-parallel sharding of each global
//! batch, the loss and gradient reductions across ranks, the learning-rate schedule and EMA.

use std::time::Instant;

use basin_dist::ProcessGroup;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use tch::Tensor;

use super::{EpochOutput, Learner};
use crate::TrainError;
use crate::ema::Ema;
use crate::optim::AdamW;
use crate::record::Phases;
use crate::schedule::{Schedule, Unit};

/// One epoch of `learner` on `train`: the shared mini-batch loop (see [`Learner`]).
pub(crate) fn train_epoch<L: Learner + ?Sized>(
    learner: &mut L,
    train: &[usize],
    steps: &mut Steps<'_>,
    rng: &mut ChaCha8Rng,
) -> Result<EpochOutput, TrainError> {
    let batches = epoch_batches(learner, train, rng)?;
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
        // An implicit block's gradient reaches its parameters through the attached loss.
        let loss = out
            .as_ref()
            .map(|o| basin_core::implicit::attach(&o.loss, learner.blocks()));
        total += steps.step(loss.as_ref(), share, || learner.after_backward())?;
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

/// The batches of one epoch, in order: `train` shuffled with the epoch's `rng` and cut into
/// [`Learner::batch_size`] items, or all of it at once (what a loop outside the runner, the
/// Python package's, steps through to train as `basin train` does).
pub fn epoch_batches<L: Learner + ?Sized>(
    learner: &L,
    train: &[usize],
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Vec<usize>>, TrainError> {
    Ok(match learner.batch_size() {
        Some(0) => {
            return Err(TrainError::config("batch", "must be at least 1"));
        }
        Some(size) => {
            let mut order = train.to_vec();
            order.shuffle(rng);
            order.chunks(size).map(<[usize]>::to_vec).collect()
        }
        None => vec![train.to_vec()],
    })
}

/// The process's group when it has more than one rank.
pub(super) fn data_parallel() -> Option<std::sync::Arc<ProcessGroup>> {
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
    pub(super) opt: &'a mut AdamW,
    pub(super) schedule: Option<&'a (Schedule, Unit)>,
    /// The weights' average, updated after each optimiser step.
    pub(super) ema: Option<&'a mut Ema>,
    pub(super) epoch: usize,
    /// Backward and optimiser time so far this epoch (and the learner's share, see
    /// [`train_epoch`]).
    pub(super) phases: Phases,
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
