//! How a run trains ([`TrainConfig`]) and what validating one epoch gives ([`Validation`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::optim::OptimConfig;
use crate::schedule::{Schedule, Unit};

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
    /// Decay of an exponential moving average of the weights ([`Ema`](crate::ema::Ema)), updated after every
    /// optimiser step; validation, model selection and the test then use the average. `None`
    /// (the default, left out of files): the live weights, as before it existed. A protocol
    /// that scores the test from training steps ([`Validation::test_now`], the anomaly
    /// protocol's `reference-pre-step`) keeps those scores, which are the live weights'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ema: Option<f64>,
    /// A curriculum for blocks trained at their attractor (`gradient = "implicit"` or
    /// `"phantom"`): their first `implicit_warmup` epochs descend the T unrolled steps and
    /// backpropagate through them, the rest settle ([`basin_core::EnergyBlock::set_warm_up`]).
    /// 0 (the default, left out of files): none.
    #[serde(skip_serializing_if = "is_zero")]
    pub implicit_warmup: usize,
}

/// Whether `n` is 0 (a count left out of files at its default).
pub(crate) fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            epochs: 100,
            optim: OptimConfig::default(),
            schedule: None,
            schedule_unit: Unit::Step,
            ema: None,
            implicit_warmup: 0,
        }
    }
}

impl TrainConfig {
    /// Checks the values before anything trains; `field` is the config path for errors.
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        if self.epochs == 0 {
            return Err(TrainError::config(format!("{field}.epochs"), "must be ≥ 1"));
        }
        self.optim.validate(&format!("{field}.optim"))?;
        if let Some(s) = &self.schedule {
            s.validate(&format!("{field}.schedule"))?;
        }
        if let Some(d) = self.ema
            && !(0.0..1.0).contains(&d)
        {
            return Err(TrainError::config(
                format!("{field}.ema"),
                format!("{d}: the average's decay must be in [0, 1), e.g. 0.99"),
            ));
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
