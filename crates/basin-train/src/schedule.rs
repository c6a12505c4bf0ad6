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
    /// The schedule as two phases: a linear head from `start` to `peak` over `head` steps (the
    /// warm-up, or the hold with `start = peak`), then a half-cosine to `end` at `total`; with
    /// the name of the head's field, for errors.
    fn phases(&self) -> Phases {
        match *self {
            Self::Constant { lr } => Phases {
                start: lr,
                peak: lr,
                head: 0,
                head_field: "",
                end: lr,
                total: 0,
            },
            Self::WarmupCosine {
                start,
                peak,
                end,
                warmup,
                total,
            } => Phases {
                start,
                peak,
                head: warmup,
                head_field: "warmup",
                end,
                total,
            },
            Self::HoldCosine {
                lr,
                hold,
                end,
                total,
            } => Phases {
                start: lr,
                peak: lr,
                head: hold,
                head_field: "hold",
                end,
                total,
            },
        }
    }

    /// The rate at `t`.
    pub fn lr(&self, t: u64) -> f64 {
        let p = self.phases();
        if t < p.head {
            return p.start + (p.peak - p.start) * t as f64 / p.head as f64;
        }
        let len = p.total.saturating_sub(p.head);
        if len == 0 {
            return p.end;
        }
        let frac = (t - p.head).min(len) as f64 / len as f64;
        p.end + (p.peak - p.end) * 0.5 * (1.0 + (std::f64::consts::PI * frac).cos())
    }

    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        let p = self.phases();
        if p.head > p.total {
            return Err(TrainError::config(
                format!("{field}.{}", p.head_field),
                format!(
                    "{} ({}) is longer than the total ({})",
                    p.head_field, p.head, p.total
                ),
            ));
        }
        let rates = [p.start, p.peak, p.end];
        if rates.iter().any(|r| !(r.is_finite() && *r >= 0.0)) {
            return Err(TrainError::config(
                field,
                format!("rates must be ≥ 0 and finite: {rates:?}"),
            ));
        }
        Ok(())
    }
}

/// [`Schedule::phases`].
struct Phases {
    start: f64,
    peak: f64,
    head: u64,
    head_field: &'static str,
    end: f64,
    total: u64,
}
