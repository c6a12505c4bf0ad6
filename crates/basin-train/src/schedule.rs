//! Learning-rate schedules, stepped per optimiser step or per epoch.
//!
//! `WarmupCosine` is `optax.warmup_cosine_decay_schedule(init, peak, warmup, total, end)`:
//! linear from `start` to `peak` over `warmup` units, then a half cosine from `peak` to `end`
//! at `total` (ET Tables 4, 9, 10). `HoldCosine` holds `lr` for `hold` units and then decays
//! by a half cosine to `end` at `total` (the graph ET's CIFAR-10/MNIST runs).

use serde::{Deserialize, Serialize};

use crate::TrainError;

/// What the schedule counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// Optimiser steps.
    #[default]
    Step,
    /// Epochs.
    Epoch,
}

/// A learning-rate schedule; `lr(t)` for t counted in [`Unit`]s from 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Schedule {
    /// A constant rate.
    Constant {
        /// The rate.
        lr: f64,
    },
    /// Linear warm-up then half-cosine decay.
    WarmupCosine {
        /// Rate at t = 0.
        start: f64,
        /// Rate at the end of the warm-up.
        peak: f64,
        /// Rate at `total` and after.
        end: f64,
        /// Warm-up length.
        warmup: u64,
        /// Total length (warm-up included).
        total: u64,
    },
    /// Constant then half-cosine decay.
    HoldCosine {
        /// Rate held.
        lr: f64,
        /// Length of the hold.
        hold: u64,
        /// Rate at `total` and after.
        end: f64,
        /// Total length (hold included).
        total: u64,
    },
}

impl Schedule {
    /// The rate at `t`.
    pub fn lr(&self, t: u64) -> f64 {
        let cosine = |from: f64, to: f64, done: u64, len: u64| {
            if len == 0 {
                return to;
            }
            let frac = (done.min(len)) as f64 / len as f64;
            to + (from - to) * 0.5 * (1.0 + (std::f64::consts::PI * frac).cos())
        };
        match *self {
            Self::Constant { lr } => lr,
            Self::WarmupCosine {
                start,
                peak,
                end,
                warmup,
                total,
            } => {
                if t < warmup {
                    start + (peak - start) * t as f64 / warmup as f64
                } else {
                    cosine(peak, end, t - warmup, total.saturating_sub(warmup))
                }
            }
            Self::HoldCosine {
                lr,
                hold,
                end,
                total,
            } => {
                if t < hold {
                    lr
                } else {
                    cosine(lr, end, t - hold, total.saturating_sub(hold))
                }
            }
        }
    }

    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        let rates: Vec<f64> = match *self {
            Self::Constant { lr } => vec![lr],
            Self::WarmupCosine {
                start,
                peak,
                end,
                warmup,
                total,
            } => {
                if warmup > total {
                    return Err(TrainError::Config {
                        field: format!("{field}.warmup"),
                        message: format!("warm-up ({warmup}) is longer than the total ({total})"),
                    });
                }
                vec![start, peak, end]
            }
            Self::HoldCosine {
                lr,
                hold,
                end,
                total,
            } => {
                if hold > total {
                    return Err(TrainError::Config {
                        field: format!("{field}.hold"),
                        message: format!("hold ({hold}) is longer than the total ({total})"),
                    });
                }
                vec![lr, end]
            }
        };
        if rates.iter().any(|r| !(r.is_finite() && *r >= 0.0)) {
            return Err(TrainError::Config {
                field: field.into(),
                message: format!("rates must be ≥ 0 and finite: {rates:?}"),
            });
        }
        Ok(())
    }
}
