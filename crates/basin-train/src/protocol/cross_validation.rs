//! Graph classification by stratified k-fold cross-validation (ET Section 5's task, leak-free):
//! model selection on an inner validation split of each training part, or the number of epochs
//! chosen on inner folds of it ([`CrossValidation::inner_folds`]); repeated with seeds. Test
//! folds are never seen in training or selection.

use std::collections::BTreeMap;

use basin_data::split::{KFoldConfig, Split, stratified_kfold};
use serde::{Deserialize, Serialize};

use super::fit::{final_epoch_run, fold_runs, inner_choice, inner_run};
use super::metric::Metric;
use super::selection::Selection;
use super::{PlannedRun, Protocol, ProtocolReport, at_least, config_of, field_err};
use crate::TrainError;
use crate::context::RunContext;
use crate::plan::ids;
use crate::runner::{Learner, TrainConfig};

/// Stratified k-fold cross-validation with an inner validation split (leak-free).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrossValidation {
    /// Folds and inner validation fraction; the seed of repeat `r` is `folds.seed + r`.
    pub folds: KFoldConfig,
    /// Repeats of the whole cross-validation.
    pub repeats: usize,
    /// The metric.
    pub metric: Metric,
    /// How each fold's epoch is chosen on its inner validation split.
    pub selection: Selection,
    /// Training.
    pub train: TrainConfig,
    /// 0 (the default): each fold's epoch is the best on its inner validation split. k ≥ 2:
    /// the number of epochs is chosen on k stratified folds of the fold's training part
    /// (validation split included): a model is trained on each k − 1 of them and scored on the
    /// last after every epoch, and the epoch whose mean score over the k is best under
    /// `selection` is the count; the fold's model then trains on its whole training part for
    /// that many epochs (the schedule unchanged) and is tested once. Each fold then trains
    /// k + 1 models. On small sets a validation split holds a handful of items (19 graphs of
    /// MUTAG), so its best epoch is noise and a model with a noisier curve is chosen later and
    /// worse; the mean over k inner test folds sees the whole training part. The MIL protocol
    /// chooses its epochs this way ([`super::EpochChoice::InnerFolds`]). Test folds are never seen.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub inner_folds: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

impl Default for CrossValidation {
    fn default() -> Self {
        Self {
            folds: KFoldConfig::default(),
            repeats: 1,
            metric: Metric::Accuracy,
            selection: Selection::default(),
            train: TrainConfig::default(),
            inner_folds: 0,
        }
    }
}

impl CrossValidation {
    /// The inner runs that choose the number of epochs of `fold`, a run of [`Protocol::plan`] under
    /// [`Self::inner_folds`] ≥ 2 (none otherwise): a stratified k-fold of the fold's training
    /// part, seeded by the fold's model seed, each in `<fold dir>/inner-<i>` (its record keeps
    /// its scores as `inner_test_<metric>`, so that comparisons pair only the folds' runs).
    pub fn inner_plan(
        &self,
        fold: &PlannedRun,
        target: &[f64],
    ) -> Result<Vec<PlannedRun>, TrainError> {
        if self.inner_folds < 2 {
            return Ok(Vec::new());
        }
        let pool = &fold.split.train;
        let classes: Vec<usize> = pool
            .iter()
            .map(|&i| {
                let t = target.get(i as usize).copied().unwrap_or(0.0);
                if self.metric == Metric::Mae {
                    0
                } else {
                    t.max(0.0) as usize
                }
            })
            .collect();
        let inner = stratified_kfold(
            pool,
            &classes,
            &KFoldConfig {
                folds: self.inner_folds,
                val_ratio: 0.0,
                seed: fold.seed,
            },
        )
        .map_err(field_err("inner_folds"))?;
        Ok(inner
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let split = Split::new(
                    s.train.into_iter().chain(s.val).collect(),
                    Vec::new(),
                    s.test,
                );
                PlannedRun::new(format!("{}/inner-{i}", fold.dir), split, fold.seed)
            })
            .collect())
    }
}

impl Protocol for CrossValidation {
    type Targets<'a> = &'a [f64];

    fn kind(&self) -> &'static str {
        "cross-validation"
    }

    /// Checks what needs no data: repeats ≥ 1, folds ≥ 2, the validation share inside [0, 1),
    /// inner folds 0 or ≥ 2.
    /// Folds against the dataset (its size, its smallest class) are checked when the folds are
    /// planned. `field` prefixes the names in errors (e.g. `protocol`).
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        let bad = |f: &str, m: String| TrainError::config(format!("{field}.{f}"), m);
        at_least(field, "repeats", self.repeats, 1)?;
        at_least(field, "folds.folds", self.folds.folds, 2)?;
        if !(self.folds.val_ratio >= 0.0 && self.folds.val_ratio < 1.0) {
            return Err(bad(
                "folds.val_ratio",
                format!("inside [0, 1), got {}", self.folds.val_ratio),
            ));
        }
        if self.inner_folds == 1 {
            return Err(bad(
                "inner_folds",
                "0 (the validation split picks each fold's epoch) or at least 2, got 1".into(),
            ));
        }
        self.train.validate(&format!("{field}.train"))
    }

    /// The folds: stratified k-fold of `target` (classes; one stratum for `mae`), repeat `r`
    /// seeded `folds.seed + r`, directories `repeat-<r>/fold-<f>`. Under
    /// [`Self::inner_folds`] each fold's validation split joins its training part (the fold's
    /// model trains on both; [`CrossValidation::inner_plan`] splits them again to choose its epochs).
    fn plan(&self, target: &[f64]) -> Result<Vec<PlannedRun>, TrainError> {
        let items: Vec<u32> = (0..target.len() as u32).collect();
        let classes: Vec<usize> = target
            .iter()
            .map(|&t| {
                if self.metric == Metric::Mae {
                    0
                } else {
                    t.max(0.0) as usize
                }
            })
            .collect();
        let mut plan = Vec::new();
        for r in 0..self.repeats {
            let folds = stratified_kfold(
                &items,
                &classes,
                &KFoldConfig {
                    seed: self.folds.seed + r as u64,
                    ..self.folds.clone()
                },
            )
            .map_err(field_err("folds"))?;
            let k = folds.len();
            for (f, split) in folds.into_iter().enumerate() {
                // Under inner folds the fold's model trains on its whole training part.
                let split = if self.inner_folds >= 2 {
                    let all = split.train.iter().chain(&split.val).copied().collect();
                    Split::new(all, Vec::new(), split.test)
                } else {
                    split
                };
                let seed = self
                    .folds
                    .seed
                    .wrapping_mul(1000)
                    .wrapping_add((r * k + f) as u64);
                plan.push(PlannedRun::new(format!("repeat-{r}/fold-{f}"), split, seed));
            }
        }
        Ok(plan)
    }

    /// Runs every fold of every repeat; `target[i]` is item `i`'s class (or value); `make`
    /// builds a fresh learner per fold (and per inner run, from its own training items).
    fn run<L: Learner>(
        &self,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        let name = &ctx.name;
        // A fold's run is the same whatever the number of repeats, so that number stays out of
        // its identity: a finished cross-validation grows by repeats (`--repeats 3` after
        // `--repeats 1` into the same directory) without training its folds again.
        let mut config = config_of(self)?;
        if let Some(fields) = config.as_object_mut() {
            fields.remove("repeats");
        }
        let mut runs = Vec::new();
        // Sums and counts per metric and epoch over the inner runs.
        let mut inner_sums: BTreeMap<String, Vec<(f64, usize)>> = BTreeMap::new();
        for run in ctx.owned_runs(self.plan(target)?) {
            let runner = |planned: &PlannedRun, train: TrainConfig| {
                ctx.runner(planned, train, config.clone())
            };
            let inner = self.inner_plan(&run, target)?;
            let mut learner;
            if inner.is_empty() {
                learner = make(&run)?;
                runs.push(fold_runs(
                    &run.split,
                    target,
                    self.metric,
                    self.selection,
                    &runner(&run, self.train.clone()),
                    &mut learner,
                    false,
                )?);
            } else {
                let mut records = Vec::with_capacity(inner.len());
                for planned in &inner {
                    let mut l = make(planned)?;
                    let r = runner(planned, self.train.clone());
                    let record = inner_run(&planned.split, target, self.metric, &r, &mut l)?;
                    for (e, epoch) in record.epochs.iter().enumerate() {
                        for (k, &v) in &epoch.metrics {
                            let sums = inner_sums.entry(k.clone()).or_default();
                            if sums.len() <= e {
                                sums.resize(e + 1, (0.0, 0));
                            }
                            sums[e].0 += v;
                            sums[e].1 += 1;
                        }
                    }
                    records.push(record);
                }
                let (epochs, score) = inner_choice(&records, self.metric, self.selection);
                let mut train = self.train.clone();
                train.epochs = epochs;
                learner = make(&run)?;
                // Kept in the fold's record: the count, its inner score, the inner runs' time.
                let extra = BTreeMap::from([
                    ("chosen_epochs".to_owned(), epochs as f64),
                    (format!("inner_{}", self.metric.name()), score),
                    (
                        "inner_seconds".to_owned(),
                        records.iter().map(|r| r.wall_seconds).sum(),
                    ),
                ]);
                runs.push(final_epoch_run(
                    &run.train(),
                    &ids(&run.split.test),
                    false,
                    &extra,
                    target,
                    self.metric,
                    &runner(&run, train),
                    &mut learner,
                )?);
            }
            finished(&run, &mut learner)?;
        }
        let ties = match self.selection {
            Selection::MetricThenLoss if self.metric.has_loss() => {
                "ties go to the lower validation cross-entropy"
            }
            Selection::Loss if self.metric.has_loss() => {
                "the epoch of lowest validation cross-entropy"
            }
            _ => "ties keep the earlier epoch",
        };
        let note = if self.inner_folds >= 2 {
            format!(
                "{}-fold stratified cross-validation × {} repeats; each fold's number of epochs chosen on {} inner stratified folds of its training part (the best epoch of their mean test curve; {ties}), then a model trained on the whole training part for that many epochs; test folds never seen in training or selection",
                self.folds.folds, self.repeats, self.inner_folds
            )
        } else {
            format!(
                "{}-fold stratified cross-validation × {} repeats; model selection on an inner validation split ({:.3} of each training part; {ties}); test folds never seen in training or selection",
                self.folds.folds, self.repeats, self.folds.val_ratio
            )
        };
        let mut report = ProtocolReport::new(self.kind(), name, runs, vec![note]);
        report.inner_curves = inner_sums
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().map(|(s, n)| s / n.max(1) as f64).collect()))
            .collect();
        Ok(report)
    }
}
