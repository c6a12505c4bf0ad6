//! How one planned run is fitted and scored, shared by the protocols: selected on its
//! validation items ([`fold_runs`]), kept at its final epoch ([`final_epoch_run`]), or scored
//! after every epoch to choose an epoch count on inner folds ([`inner_run`], [`inner_choice`]).

use std::collections::BTreeMap;

use basin_data::split::Split;

use super::metric::{Metric, TargetView};
use super::selection::Selection;
use crate::TrainError;
use crate::plan::ids;
use crate::record::RunRecord;
use crate::runner::{Learner, Runner, Validation};

/// A run fitted on the split's training items, its epoch selected on the validation items and
/// scored on the test items; with `curves`, every epoch also scores the training and the test
/// items (evaluation mode) as `curve_train_<metric>` and `curve_test_<metric>`, for
/// generalisation-gap figures. Selection never reads them.
pub(crate) fn fold_runs<'a, L: Learner>(
    split: &Split,
    target: impl Into<TargetView<'a>>,
    metric: Metric,
    selection: Selection,
    runner: &Runner,
    learner: &mut L,
    curves: bool,
) -> Result<RunRecord, TrainError> {
    let target = target.into();
    let (train, val, test) = (ids(&split.train), ids(&split.val), ids(&split.test));
    let (train_y, val_y, test_y) = (
        curves.then(|| target.pick(&train)),
        target.pick(&val),
        target.pick(&test),
    );
    let key = metric.name();
    runner.fit(
        learner,
        &train,
        &[("train", &train), ("val", &val), ("test", &test)],
        |l, _, _| {
            let scores = l.predict(&val)?;
            let (v, score) = metric.eval(&scores, &val_y)?;
            let mut metrics = BTreeMap::from([(format!("val_{key}"), v)]);
            let loss = metric.log_loss(&scores, &val_y)?;
            if let Some(loss) = loss {
                metrics.insert("val_loss".into(), loss);
            }
            let (score, tie_break) = match (selection, loss) {
                (Selection::MetricThenLoss, Some(loss)) => (score, -loss),
                (Selection::Loss, Some(loss)) => (-loss, 0.0),
                _ => (score, 0.0),
            };
            if let Some(train_y) = &train_y {
                let t = metric.eval(&l.predict(&train)?, train_y)?.0;
                metrics.insert(format!("curve_train_{key}"), t);
                let t = metric.eval(&l.predict(&test)?, &test_y)?.0;
                metrics.insert(format!("curve_test_{key}"), t);
            }
            Ok(Validation {
                metrics,
                score,
                tie_break,
                ..Validation::default()
            })
        },
        |l, _| {
            Ok(BTreeMap::from([(
                format!("test_{key}"),
                metric.eval(&l.predict(&test)?, &test_y)?.0,
            )]))
        },
    )
}

/// Trains on `train` with no validation and keeps the final epoch (the CDAT code's CV, and the
/// final model of nested CV with inner-fold epochs); its summary has the final test score and
/// `extra` (written into the record), and with `curve` every epoch's record has the test score
/// too (evaluation mode), for selection on inner folds only.
#[allow(clippy::too_many_arguments)]
pub(crate) fn final_epoch_run<L: Learner>(
    train: &[usize],
    test: &[usize],
    curve: bool,
    extra: &BTreeMap<String, f64>,
    target: &[f64],
    metric: Metric,
    runner: &Runner,
    learner: &mut L,
) -> Result<RunRecord, TrainError> {
    let key = metric.name();
    let targets = TargetView::from(target);
    let test_y = targets.pick(test);
    runner.fit(
        learner,
        train,
        &[("train", train), ("test", test)],
        |l, epoch, _| {
            let mut metrics = BTreeMap::new();
            if curve {
                let v = metric.eval(&l.predict(test)?, &test_y)?.0;
                metrics.insert(format!("curve_test_{key}"), v);
            }
            Ok(Validation {
                metrics,
                // The last epoch is kept.
                score: epoch as f64,
                ..Validation::default()
            })
        },
        |l, _| {
            let mut summary = extra.clone();
            summary.insert(
                format!("test_{key}"),
                metric.eval(&l.predict(test)?, &test_y)?.0,
            );
            Ok(summary)
        },
    )
}

/// One inner run of [`super::CrossValidation::inner_plan`]: trains on `split.train` for every epoch
/// (the last is kept) and scores `split.test` after each, as `inner_test_<metric>`,
/// `inner_score` (higher is better) and `inner_test_loss` (where the metric has a
/// cross-entropy); the summary holds the last epoch's `inner_test_<metric>`.
pub(crate) fn inner_run<L: Learner>(
    split: &Split,
    target: &[f64],
    metric: Metric,
    runner: &Runner,
    learner: &mut L,
) -> Result<RunRecord, TrainError> {
    let key = format!("inner_test_{}", metric.name());
    let (train, test) = (ids(&split.train), ids(&split.test));
    let test_y = TargetView::from(target).pick(&test);
    runner.fit(
        learner,
        &train,
        &[("train", &train), ("inner_test", &test)],
        |l, epoch, _| {
            let scores = l.predict(&test)?;
            let (v, score) = metric.eval(&scores, &test_y)?;
            let mut metrics = BTreeMap::from([(key.clone(), v), ("inner_score".into(), score)]);
            if let Some(loss) = metric.log_loss(&scores, &test_y)? {
                metrics.insert("inner_test_loss".into(), loss);
            }
            Ok(Validation {
                metrics,
                score: epoch as f64,
                ..Validation::default()
            })
        },
        |_, v| {
            Ok(v.metrics
                .get(&key)
                .map(|&x| BTreeMap::from([(key.clone(), x)]))
                .unwrap_or_default())
        },
    )
}

/// The number of epochs (≥ 1) whose mean over `records` (inner runs) is best under
/// `selection`, and the mean metric there: the highest mean score, ties to the lower mean loss
/// under `metric-then-loss` and to the earlier epoch; under `loss` the lowest mean loss.
/// Metrics without a loss select by the score.
pub(crate) fn inner_choice(
    records: &[RunRecord],
    metric: Metric,
    selection: Selection,
) -> (usize, f64) {
    let len = records.iter().map(|r| r.epochs.len()).min().unwrap_or(0);
    let mean = |e: usize, k: &str| -> Option<f64> {
        let v: Option<Vec<f64>> = records
            .iter()
            .map(|r| r.epochs[e].metrics.get(k).copied())
            .collect();
        v.map(|v| v.iter().sum::<f64>() / v.len().max(1) as f64)
    };
    let mut best: Option<(usize, f64, f64)> = None; // (epoch, score, tie-break)
    for e in 0..len {
        let score = mean(e, "inner_score").unwrap_or(f64::NEG_INFINITY);
        let loss = mean(e, "inner_test_loss").filter(|_| metric.has_loss());
        let (rank, tie) = match (selection, loss) {
            (Selection::MetricThenLoss, Some(l)) => (score, -l),
            (Selection::Loss, Some(l)) => (-l, 0.0),
            _ => (score, 0.0),
        };
        if best.is_none_or(|(_, r, t)| rank > r || (rank == r && tie > t)) {
            best = Some((e, rank, tie));
        }
    }
    match best {
        Some((e, _, _)) => (
            e + 1,
            mean(e, &format!("inner_test_{}", metric.name())).unwrap_or(f64::NAN),
        ),
        None => (1, f64::NAN),
    }
}
