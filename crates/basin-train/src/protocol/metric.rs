//! What a run is scored with: the [`Metric`] of a run file, and what the items are scored
//! against ([`TargetView`]), flattened the way a learner's `predict` returns its rows.

use serde::{Deserialize, Serialize};

use crate::metrics::{self, MetricError};
use crate::runner::Scores;

/// How predictions are scored in classification and fixed-split protocols.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Accuracy of the arg-max class.
    #[default]
    Accuracy,
    /// Mean per-class recall (GNN Benchmark PATTERN/CLUSTER).
    BalancedAccuracy,
    /// Macro-F1 of the arg-max class.
    MacroF1,
    /// Mean absolute error (lower is better; selection uses −MAE): of the first column for
    /// one value per item, over every column for label vectors (LRGB Peptides-struct).
    Mae,
    /// ROC-AUC of the positive-class score (binary targets 0/1): `auc` in run files and
    /// records alike (`roc-auc` is read as it too).
    #[serde(alias = "roc-auc")]
    Auc,
    /// AP averaged over the tasks of multi-label targets (OGB `eval_ap`; LRGB Peptides-func):
    /// `ap` in run files and records alike (`mean-ap` is read as it too).
    #[serde(rename = "ap", alias = "mean-ap")]
    MeanAp,
    /// benchmarking-gnns' `accuracy_SBM` over the whole split (PATTERN, CLUSTER).
    AccuracySbm,
    /// Mean reciprocal rank of each graph's positive links among its nodes (LRGB PCQM-Contact;
    /// [`metrics::mean_reciprocal_rank`]), over [`TargetView::Ranking`] rows.
    Mrr,
}

/// What the items of a protocol are scored against.
#[derive(Clone, Copy, Debug)]
pub enum TargetView<'a> {
    /// One class or value per item; `predict` gives one row per item.
    PerItem(&'a [f64]),
    /// A class per node of each item (a graph; inductive node tasks); `predict` gives one row
    /// per node, the items' nodes concatenated in order.
    PerNode(&'a [Vec<f64>]),
    /// A label vector per item (multi-label, NaN = unlabelled); `predict` gives one row of
    /// per-label scores per item.
    Labels(&'a [Vec<f64>]),
    /// The number of positive links of each item (a graph); `predict` gives one row per
    /// positive link, its score first and then its candidates' (link ranking: MRR).
    Ranking(&'a [usize]),
}

impl<'a> From<&'a [f64]> for TargetView<'a> {
    fn from(t: &'a [f64]) -> Self {
        Self::PerItem(t)
    }
}

impl<'a> From<&'a Vec<f64>> for TargetView<'a> {
    fn from(t: &'a Vec<f64>) -> Self {
        Self::PerItem(t)
    }
}

/// The targets of some items, flattened the way `predict` returns its rows.
pub(crate) enum Picked {
    Values(Vec<f64>),
    Labels(Vec<Vec<f64>>),
    Groups(Vec<usize>),
}

impl TargetView<'_> {
    /// The targets of `items`, flattened as `predict` returns their rows.
    pub(crate) fn pick(&self, items: &[usize]) -> Picked {
        match self {
            Self::PerItem(t) => Picked::Values(items.iter().map(|&i| t[i]).collect()),
            Self::PerNode(t) => Picked::Values(items.iter().flat_map(|&i| t[i].clone()).collect()),
            Self::Labels(t) => Picked::Labels(items.iter().map(|&i| t[i].clone()).collect()),
            Self::Ranking(t) => Picked::Groups(items.iter().map(|&i| t[i]).collect()),
        }
    }
}

impl Metric {
    /// Its name in records (`test_<name>`, `val_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Accuracy => "accuracy",
            Self::BalancedAccuracy => "balanced_accuracy",
            Self::MacroF1 => "macro_f1",
            Self::Mae => "mae",
            Self::Auc => "auc",
            Self::MeanAp => "ap",
            Self::AccuracySbm => "accuracy_sbm",
            Self::Mrr => "mrr",
        }
    }

    /// The metric of `scores` (rows as `predict` returns them for `items`) against `target`:
    /// how a saved run is scored again (`basin eval`).
    pub fn score(
        self,
        scores: &Scores,
        target: TargetView<'_>,
        items: &[usize],
    ) -> Result<f64, MetricError> {
        Ok(self.eval(scores, &target.pick(items))?.0)
    }

    /// Whether it scores class probabilities, which have a cross-entropy (all but MAE, mean
    /// AP and MRR).
    pub(crate) fn has_loss(self) -> bool {
        !matches!(self, Self::Mae | Self::MeanAp | Self::Mrr)
    }

    /// The mean cross-entropy of class-probability rows ([`metrics::log_loss`]); `None` where
    /// the metric has none ([`Metric::has_loss`]).
    pub(crate) fn log_loss(
        self,
        scores: &Scores,
        target: &Picked,
    ) -> Result<Option<f64>, MetricError> {
        match target {
            Picked::Values(t) if self.has_loss() => {
                let classes: Vec<i64> = t.iter().map(|&t| t as i64).collect();
                metrics::log_loss(&classes, &scores.0).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The metric value and the selection score (higher is better).
    pub(crate) fn eval(self, scores: &Scores, target: &Picked) -> Result<(f64, f64), MetricError> {
        let target = match (self, target) {
            (Self::MeanAp, Picked::Labels(y)) => {
                let v = metrics::mean_average_precision(y, &scores.0)?;
                return Ok((v, v));
            }
            (Self::Mae, Picked::Labels(y)) => {
                let m = metrics::mae_multioutput(y, &scores.0)?;
                return Ok((m, -m));
            }
            (Self::Mrr, Picked::Groups(g)) => {
                let v = metrics::mean_reciprocal_rank(&scores.0, g)?;
                return Ok((v, v));
            }
            (_, Picked::Values(t)) => t,
            _ => {
                return Err(MetricError::Shape(format!(
                    "metric `{}` does not fit these targets (mean AP and MAE take label \
                     vectors, MRR link rankings, the others one value per row)",
                    self.name()
                )));
            }
        };
        if scores.0.len() != target.len() {
            return Err(MetricError::Shape(format!(
                "{} score rows for {} targets",
                scores.0.len(),
                target.len()
            )));
        }
        let classes = || target.iter().map(|&t| t as i64).collect::<Vec<i64>>();
        let v = match self {
            Self::Accuracy => metrics::accuracy(&classes(), &scores.argmax())?,
            Self::BalancedAccuracy => metrics::balanced_accuracy(&classes(), &scores.argmax())?,
            Self::AccuracySbm => metrics::accuracy_sbm(&classes(), &scores.argmax())?,
            Self::MacroF1 => metrics::macro_f1(&classes(), &scores.argmax())?,
            Self::Mae => {
                let pred: Vec<f64> = scores
                    .0
                    .iter()
                    .map(|r| r.first().copied().unwrap_or(f64::NAN))
                    .collect();
                let m = metrics::mae(target, &pred)?;
                return Ok((m, -m));
            }
            Self::Auc => {
                let truth: Vec<bool> = target.iter().map(|&t| t > 0.5).collect();
                metrics::roc_auc(&truth, &scores.positive())?
            }
            Self::MeanAp | Self::Mrr => {
                return Err(MetricError::Shape(format!(
                    "`{}` takes {} targets",
                    self.name(),
                    if self == Self::Mrr {
                        "link-ranking"
                    } else {
                        "multi-label"
                    }
                )));
            }
        };
        Ok((v, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metric is named the same in run files and in records (`test_<name>`), and older run
    /// files' `roc-auc` still reads.
    #[test]
    fn run_files_and_records_name_a_metric_alike() {
        for m in [
            Metric::Accuracy,
            Metric::BalancedAccuracy,
            Metric::MacroF1,
            Metric::Mae,
            Metric::Auc,
            Metric::MeanAp,
            Metric::AccuracySbm,
            Metric::Mrr,
        ] {
            let in_files = serde_json::to_value(m).expect("serialises");
            assert_eq!(
                in_files.as_str().map(|s| s.replace('-', "_")).as_deref(),
                Some(m.name()),
                "{m:?}"
            );
        }
        let old: Metric = serde_json::from_value("roc-auc".into()).expect("alias");
        assert_eq!(old, Metric::Auc);
    }
}
