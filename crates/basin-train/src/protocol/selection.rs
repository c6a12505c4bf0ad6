//! How a run's epoch is chosen on its validation items ([`Selection`]).

use serde::{Deserialize, Serialize};

/// How a run's epoch is chosen on its validation items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// The highest validation metric; ties keep the earlier epoch.
    Metric,
    /// The highest validation metric; ties go to the lower validation cross-entropy
    /// (`val_loss`), then to the earlier epoch. On small sets accuracy takes few values, so its
    /// maximum can span many epochs, warm-up ones among them; the loss ranks those. Metrics
    /// without a cross-entropy (MAE, mean AP, MRR) keep the earlier epoch.
    #[default]
    MetricThenLoss,
    /// The lowest validation cross-entropy, the metric only recorded (early stopping on the
    /// validation loss); equal losses keep the earlier epoch. Metrics without a cross-entropy
    /// select by the metric.
    Loss,
}

impl std::str::FromStr for Selection {
    type Err = String;

    /// The run files' names: `metric`, `metric-then-loss`, `loss`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "metric" => Ok(Self::Metric),
            "metric-then-loss" => Ok(Self::MetricThenLoss),
            "loss" => Ok(Self::Loss),
            _ => Err(format!(
                "`{s}`: expected `metric`, `metric-then-loss` or `loss`"
            )),
        }
    }
}
