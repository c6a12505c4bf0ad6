//! Hyperparameters chosen **inside** each outer training part (the MIL protocol of the
//! Hopfield slides): repeated stratified k-fold cross-validation whose every outer fold scores
//! each candidate of a grid by an inner stratified k-fold over its training part only; the best
//! candidate is retrained on the outer training part and tested once on the outer fold.

use std::collections::BTreeMap;

use basin_data::split::{KFoldConfig, Split, stratified_kfold};
use serde::{Deserialize, Serialize};

use super::fit::{final_epoch_run, fold_runs};
use super::metric::Metric;
use super::selection::Selection;
use super::{PlannedRun, Protocol, ProtocolReport, at_least, config_of, split_err};
use crate::TrainError;
use crate::context::RunContext;
use crate::metrics;
use crate::runner::{Learner, Runner, TrainConfig};

// ---------------------------------------------------------------------- nested selection

/// One candidate of a [`NestedCrossValidation`] grid: model hyperparameters that may also set
/// their own training (a learning rate searched beside the model's widths, say).
pub trait Candidate: Serialize {
    /// The training of this candidate, given the protocol's (default: the protocol's as is).
    fn train(&self, protocol: &TrainConfig) -> TrainConfig {
        protocol.clone()
    }
}

/// Repeated stratified k-fold cross-validation with hyperparameter selection **inside** each
/// training part (the MIL protocol of the Hopfield paper): for every outer fold, each candidate
/// of `grid` is scored by an inner stratified k-fold over the outer training part only; the best
/// candidate is retrained on the outer training part (its validation split picks the epoch) and
/// tested once on the outer fold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NestedCrossValidation {
    /// Outer folds; `val_ratio` is the share of each outer training part used to pick the
    /// final model's epoch. Repeat `r` uses seed `outer.seed + r`.
    pub outer: KFoldConfig,
    /// Inner folds scoring each candidate.
    pub inner_folds: usize,
    /// Repeats of the whole procedure (the paper: 5).
    pub repeats: usize,
    /// Metric for selection and report.
    pub metric: Metric,
    /// Training.
    pub train: TrainConfig,
    /// How the final model's number of epochs is chosen.
    pub epochs: EpochChoice,
}

/// How [`NestedCrossValidation`] chooses the final model's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EpochChoice {
    /// The best epoch on a validation split (`outer.val_ratio`) of the outer training part;
    /// the inner folds score each candidate at its own validation-chosen epoch.
    #[default]
    ValidationSplit,
    /// The epoch count is a hyperparameter: each candidate is scored at the epoch where its mean
    /// curve over the inner test folds peaks, and the final model trains on the whole outer
    /// training part for that many epochs (no split is held back; with a few dozen bags a
    /// 10 % validation split holds a handful).
    InnerFolds,
}

impl Default for NestedCrossValidation {
    fn default() -> Self {
        Self {
            outer: KFoldConfig {
                folds: 10,
                val_ratio: 0.1,
                seed: 0,
            },
            inner_folds: 3,
            repeats: 5,
            metric: Metric::Auc,
            train: TrainConfig::default(),
            epochs: EpochChoice::default(),
        }
    }
}

/// A grid of candidates under a [`NestedCrossValidation`]: the protocol that runs. `make` gets
/// each run with its [`PlannedRun::candidate`] ([`GridSearch::candidate`] finds it in the
/// grid) and builds a fresh learner on the run's training items. Nothing is written: the runs
/// are many and quick, and the report holds every outer fold's record.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct GridSearch<'g, H> {
    /// The procedure.
    pub protocol: &'g NestedCrossValidation,
    /// The candidates.
    pub grid: &'g [H],
}

impl<H> GridSearch<'_, H> {
    /// The candidate `run` trains (the first when it names none).
    pub fn candidate(&self, run: &PlannedRun) -> &H {
        &self.grid[run
            .candidate
            .unwrap_or(0)
            .min(self.grid.len().saturating_sub(1))]
    }

    /// The seed of repeat `r`'s fold `f` (its inner runs and its final model share it).
    fn seed(&self, r: usize, f: usize) -> u64 {
        (self.protocol.outer.seed + r as u64)
            .wrapping_mul(1_000_003)
            .wrapping_add(f as u64)
    }
}

impl<H: Candidate> Protocol for GridSearch<'_, H> {
    type Targets<'a> = &'a [f64];

    fn kind(&self) -> &'static str {
        "nested-cross-validation"
    }

    /// A grid of at least one candidate; repeats, folds and inner folds that can run.
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        let bad = |f: &str, m: &str| TrainError::config(format!("{field}.{f}"), m);
        let p = self.protocol;
        if self.grid.is_empty() {
            return Err(bad("grid", "no candidate hyperparameters"));
        }
        at_least(field, "repeats", p.repeats, 1)?;
        if p.outer.folds < 2 || p.inner_folds < 2 {
            return Err(bad("inner_folds", "outer and inner folds must be ≥ 2"));
        }
        p.train.validate(&format!("{field}.train"))
    }

    /// The outer folds of every repeat (`repeat-<r>/fold-<f>`, repeat `r` seeded
    /// `outer.seed + r`); which candidate each trains is chosen inside it.
    fn plan(&self, target: &[f64]) -> Result<Vec<PlannedRun>, TrainError> {
        let p = self.protocol;
        let items: Vec<u32> = (0..target.len() as u32).collect();
        let classes: Vec<usize> = target.iter().map(|&t| t.max(0.0) as usize).collect();
        let mut plan = Vec::new();
        for r in 0..p.repeats {
            let outer = stratified_kfold(
                &items,
                &classes,
                &KFoldConfig {
                    seed: p.outer.seed + r as u64,
                    ..p.outer.clone()
                },
            )
            .map_err(split_err)?;
            for (f, split) in outer.into_iter().enumerate() {
                plan.push(PlannedRun::new(
                    format!("repeat-{r}/fold-{f}"),
                    split,
                    self.seed(r, f),
                ));
            }
        }
        Ok(plan)
    }

    /// Runs the procedure; `target[i]` is item `i`'s class.
    fn run<L: Learner>(
        &self,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        self.validate("protocol")?;
        let (p, grid) = (self.protocol, self.grid);
        let name = &ctx.name;
        let ctx = ctx.writing_to(None).with_progress(false);
        let classes: Vec<usize> = target.iter().map(|&t| t.max(0.0) as usize).collect();
        let key = p.metric.name();
        let config = config_of(self)?;
        let inner_epochs = p.epochs == EpochChoice::InnerFolds;
        let joined = |s: &Split| -> Split {
            Split::new(
                s.train.iter().chain(&s.val).copied().collect(),
                Vec::new(),
                s.test.clone(),
            )
        };
        // Every run trains one split, to its last epoch (recording the test curve or not) or
        // to the epoch its validation split picks.
        let to_last_epoch = |run: &PlannedRun, curve: bool, runner: &Runner, learner: &mut L| {
            let (train, test) = (run.train(), run.test());
            final_epoch_run(
                &train,
                &test,
                curve,
                &BTreeMap::new(),
                target,
                p.metric,
                runner,
                learner,
            )
        };
        let to_selected_epoch = |run: &PlannedRun, runner: &Runner, learner: &mut L| {
            fold_runs(
                &run.split,
                target,
                p.metric,
                Selection::Metric,
                runner,
                learner,
                false,
            )
        };
        let mut runs = Vec::new();
        for outer in self.plan(target)? {
            let split = &outer.split;
            let seed = outer.seed;
            // Inner selection on the outer training part (train + val) only.
            let pool: Vec<u32> = split.train.iter().chain(&split.val).copied().collect();
            let pool_classes: Vec<usize> = pool.iter().map(|&i| classes[i as usize]).collect();
            let inner = stratified_kfold(
                &pool,
                &pool_classes,
                &KFoldConfig {
                    folds: p.inner_folds,
                    val_ratio: p.outer.val_ratio,
                    seed,
                },
            )
            .map_err(split_err)?;
            let mut scores = Vec::with_capacity(grid.len());
            let mut epochs = Vec::with_capacity(grid.len());
            let sign = if p.metric == Metric::Mae { -1.0 } else { 1.0 };
            // A single candidate needs no scoring, unless its epochs are chosen here.
            let score_inner = grid.len() > 1 || inner_epochs;
            for (c, cand) in grid.iter().enumerate().filter(|_| score_inner) {
                let mut vals = Vec::new();
                let mut curves: Vec<Vec<f64>> = Vec::new();
                for (i, isplit) in inner.iter().enumerate() {
                    // Under inner-fold epochs the inner run trains on its validation part too.
                    let run = PlannedRun {
                        dir: format!("{}/candidate-{c}/inner-{i}", outer.dir),
                        split: if inner_epochs {
                            joined(isplit)
                        } else {
                            isplit.clone()
                        },
                        seed,
                        candidate: Some(c),
                    };
                    let mut learner = make(&run)?;
                    let runner = ctx.runner(&run, cand.train(&p.train), config.clone());
                    if inner_epochs {
                        let rec = to_last_epoch(&run, true, &runner, &mut learner)?;
                        let curve_key = format!("curve_test_{key}");
                        curves.push(
                            rec.epochs
                                .iter()
                                .map(|e| e.metrics.get(&curve_key).copied().unwrap_or(f64::NAN))
                                .collect(),
                        );
                        continue;
                    }
                    let rec = to_selected_epoch(&run, &runner, &mut learner)?;
                    vals.push(
                        rec.summary
                            .get(&format!("test_{key}"))
                            .copied()
                            .unwrap_or(f64::NAN),
                    );
                }
                if inner_epochs {
                    // The mean curve over the inner folds; its peak (the earliest of ties).
                    let len = curves.iter().map(Vec::len).min().unwrap_or(0);
                    let mean: Vec<f64> = (0..len)
                        .map(|e| {
                            sign * curves.iter().map(|c| c[e]).sum::<f64>() / curves.len() as f64
                        })
                        .collect();
                    let peak = mean
                        .iter()
                        .enumerate()
                        .fold(0, |b, (e, &v)| if v > mean[b] { e } else { b });
                    scores.push(mean.get(peak).copied().unwrap_or(f64::NAN));
                    epochs.push(peak + 1);
                } else {
                    let mean = vals.iter().sum::<f64>() / vals.len().max(1) as f64;
                    scores.push(sign * mean);
                }
            }
            let best = scores
                .iter()
                .enumerate()
                .fold(0, |b, (i, &s)| if s > scores[b] { i } else { b });
            let mut train = grid[best].train(&p.train);
            let chosen_epochs = epochs.get(best).copied();
            if let Some(n) = chosen_epochs {
                train.epochs = n;
            }
            // The whole outer training part for the inner folds' epoch count; else its
            // validation split picks the epoch.
            let run = PlannedRun {
                split: if chosen_epochs.is_some() {
                    joined(split)
                } else {
                    split.clone()
                },
                candidate: Some(best),
                ..outer.clone()
            };
            let runner = ctx.runner(&run, train, config.clone());
            let mut learner = make(&run)?;
            let mut rec = if let Some(n) = chosen_epochs {
                let mut rec = to_last_epoch(&run, false, &runner, &mut learner)?;
                rec.summary.insert("chosen_epochs".into(), n as f64);
                rec
            } else {
                to_selected_epoch(&run, &runner, &mut learner)?
            };
            finished(&run, &mut learner)?;
            rec.summary.insert("chosen_candidate".into(), best as f64);
            if let Some(&score) = scores.get(best) {
                rec.summary.insert("inner_score_of_chosen".into(), score);
            }
            tracing::info!(
                "{name} {}: candidate {best}, test {key} {:.4}",
                outer.dir,
                rec.summary
                    .get(&format!("test_{key}"))
                    .copied()
                    .unwrap_or(f64::NAN)
            );
            runs.push(rec);
        }
        let notes = vec![format!(
            "{} × stratified {}-fold cross-validation; hyperparameters ({} candidates) chosen by an inner stratified {}-fold cross-validation of each outer training part; the outer test folds are used once",
            p.repeats,
            p.outer.folds,
            grid.len(),
            p.inner_folds
        )];
        let mut report = ProtocolReport::new(self.kind(), name, runs, notes);
        // The papers' "mean ± std" is over repeats: the std of the repeats' fold means.
        let per_fold = p.outer.folds.max(1);
        let repeat_means: Vec<f64> = report
            .runs
            .chunks(per_fold)
            .map(|c| {
                c.iter()
                    .filter_map(|r| r.summary.get(&format!("test_{key}")).copied())
                    .sum::<f64>()
                    / c.len() as f64
            })
            .collect();
        report.aggregate.insert(
            format!("test_{key}_over_repeats"),
            metrics::mean_std(&repeat_means),
        );
        Ok(report)
    }
}
