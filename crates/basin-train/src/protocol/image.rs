//! Masked image completion (ET Section 3): one run on seeded draws of training, validation and
//! test images, trained with ET Table 4's optimiser and warm-up + cosine schedule; the best
//! validation epoch is kept (masked-patch MSE under fixed masks) and the test draw is scored
//! once over several masking seeds. The learner scores itself
//! ([`Learner::reconstruction`]); which images are drawn is the data side's (basin-tasks).

use std::collections::BTreeMap;

use basin_data::split::Split;
use serde::{Deserialize, Serialize};

use super::{PlannedRun, Protocol, ProtocolReport, at_least, config_of};
use crate::TrainError;
use crate::context::RunContext;
use crate::optim::OptimConfig;
use crate::runner::{Learner, TrainConfig, Validation};
use crate::schedule::{Schedule, Unit};

/// How much of an image dataset trains, validates and tests, and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageProtocol {
    /// Training images (a seeded random draw from the training split).
    pub train_images: usize,
    /// Validation images (another draw from the training split).
    pub val_images: usize,
    /// Test images (a seeded random draw from the test split).
    pub test_images: usize,
    /// Epochs.
    pub epochs: usize,
    /// Images per batch.
    pub batch: usize,
    /// Masking seeds at test time (ET: 10).
    pub mask_seeds: usize,
    /// Peak learning rate (warm-up over the first tenth, then cosine; ET Table 4's shape).
    pub lr: f64,
    /// Seed of the draws and the model.
    pub seed: u64,
    /// Epochs a block trained at its attractor first descends unrolled
    /// ([`TrainConfig::implicit_warmup`]); 0 (the default, left out of files): none.
    #[serde(default, skip_serializing_if = "crate::runner::is_zero")]
    pub implicit_warmup: usize,
}

impl Default for ImageProtocol {
    /// Minutes on two cores: 2,000 training images, 3 epochs.
    fn default() -> Self {
        Self {
            train_images: 2_000,
            val_images: 250,
            test_images: 500,
            epochs: 3,
            batch: 64,
            mask_seeds: 4,
            lr: 2e-3,
            seed: 0,
            implicit_warmup: 0,
        }
    }
}

/// What the image protocol runs on: the drawn images' parts, and what identifies the draw (which
/// source images, their pixel statistics), recorded so that a checkpoint of another draw never
/// resumes.
#[derive(Clone, Copy, Debug)]
pub struct ImageTargets<'a> {
    /// Training, validation and test items of the drawn set.
    pub split: &'a Split,
    /// The draw's identity.
    pub drawn: &'a serde_json::Value,
}

/// The one run's directory.
pub const IMAGE_RUN: &str = "run-0";

impl ImageProtocol {
    /// The masking seeds of the test (the validation masks with seed 0).
    pub fn test_seeds(&self) -> Vec<u64> {
        (0..self.mask_seeds as u64).map(|s| 1000 + s).collect()
    }

    /// The training of `train_items` images: ET Table 4's AdamW at this peak learning rate,
    /// warmed up over the first tenth of the steps, then cosine to 1/1000 of it.
    pub fn train_config(&self, train_items: usize) -> TrainConfig {
        let steps_per_epoch = train_items.div_ceil(self.batch.max(1)) as u64;
        let total = steps_per_epoch * self.epochs as u64;
        let warmup = (total / 10).max(1).min(total);
        TrainConfig {
            epochs: self.epochs,
            optim: OptimConfig {
                lr: self.lr,
                ..OptimConfig::et_image()
            },
            schedule: Some(Schedule::WarmupCosine {
                start: self.lr * 1e-3,
                peak: self.lr,
                end: self.lr * 1e-3,
                warmup,
                total,
            }),
            schedule_unit: Unit::Step,
            ema: None,
            implicit_warmup: self.implicit_warmup,
        }
    }
}

/// `metrics` with every key prefixed (`mse` → `test_mse`).
fn prefixed(prefix: &str, metrics: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    metrics
        .into_iter()
        .map(|(k, v)| (format!("{prefix}{k}"), v))
        .collect()
}

impl Protocol for ImageProtocol {
    type Targets<'a> = ImageTargets<'a>;

    fn kind(&self) -> &'static str {
        "image-completion"
    }

    /// Counts of at least 1 and a positive, finite learning rate.
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        let positive = [
            ("train_images", self.train_images),
            ("val_images", self.val_images),
            ("test_images", self.test_images),
            ("epochs", self.epochs),
            ("batch", self.batch),
            ("mask_seeds", self.mask_seeds),
        ];
        for (name, v) in positive {
            at_least(field, name, v, 1)?;
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(TrainError::config(
                format!("{field}.lr"),
                format!("must be a positive number, got {}", self.lr),
            ));
        }
        Ok(())
    }

    /// The one run, [`IMAGE_RUN`], on the drawn parts.
    fn plan(&self, targets: ImageTargets<'_>) -> Result<Vec<PlannedRun>, TrainError> {
        targets.split.check_disjoint().map_err(super::split_err)?;
        Ok(vec![PlannedRun::new(
            IMAGE_RUN,
            targets.split.clone(),
            self.seed,
        )])
    }

    fn run<L: Learner>(
        &self,
        targets: ImageTargets<'_>,
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        let mut runs = Vec::new();
        for run in ctx.owned_runs(self.plan(targets)?) {
            let (train, val, test) = (run.train(), run.val(), run.test());
            let config =
                serde_json::json!({ "protocol": config_of(self)?, "drawn": targets.drawn });
            let runner = ctx.runner(&run, self.train_config(train.len()), config);
            let mut learner = make(&run)?;
            let seeds = self.test_seeds();
            let record = runner.fit(
                &mut learner,
                &train,
                &[("train", &train), ("val", &val), ("test", &test)],
                |l, _, _| {
                    let mse = l
                        .reconstruction(&val, &[0])?
                        .get("mse")
                        .copied()
                        .unwrap_or(f64::NAN);
                    Ok(Validation {
                        metrics: BTreeMap::from([("val_mse".into(), mse)]),
                        score: -mse,
                        ..Validation::default()
                    })
                },
                |l, _| Ok(prefixed("test_", l.reconstruction(&test, &seeds)?)),
            )?;
            finished(&run, &mut learner)?;
            runs.push(record);
        }
        let notes = vec![format!(
            "seeded draws (seed {}); the best validation epoch by masked-patch MSE under fixed masks; the test draw scored once over {} masking seeds",
            self.seed, self.mask_seeds
        )];
        Ok(ProtocolReport::new(self.kind(), &ctx.name, runs, notes))
    }
}
