//! The reference codes' own procedures, each under its own name so that no one mistakes it
//! for a cross-validation: the ET paper's TU procedure ([`EtPaperProtocol`], ET Section 5:
//! training-set accuracies) and the CDAT code's k-fold ([`CodeCrossValidation`]).

use std::collections::BTreeMap;

use basin_data::split::Split;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::fit::final_epoch_run;
use super::metric::Metric;
use super::{PlannedRun, Protocol, ProtocolReport, at_least, config_of};
use crate::TrainError;
use crate::context::RunContext;
use crate::metrics;
use crate::plan::ids;
use crate::runner::{Learner, TrainConfig, Validation};

// ---------------------------------------------------------------------------- code-cv

/// The CDAT classification code's evaluation (its `eval_nfold`),
/// under its own name: plain (not stratified) shuffled k-fold, a fresh model per fold trained
/// on the other folds for the configured epochs with **no validation** (the final epoch's
/// weights), tested once on its fold; mean ± population std over folds. It is leak-free but
/// selects nothing; the code's KFold uses numpy's generator with seed 42, basin its own seeded
/// shuffle, so the folds differ, and the code averages accuracy per batch, basin per graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CodeCrossValidation {
    /// Folds (the code: 10).
    pub folds: usize,
    /// Shuffle seed (the code: 42).
    pub seed: u64,
    /// Training.
    pub train: TrainConfig,
}

impl Default for CodeCrossValidation {
    fn default() -> Self {
        Self {
            folds: 10,
            seed: 42,
            train: TrainConfig::default(),
        }
    }
}

impl Protocol for CodeCrossValidation {
    type Targets<'a> = &'a [f64];

    fn kind(&self) -> &'static str {
        "code-cv"
    }

    /// The folds and the training; the folds against the items are checked in `plan`.
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        at_least(field, "folds", self.folds, 2)?;
        self.train.validate(&format!("{field}.train"))
    }

    /// The folds of the items: a seeded shuffle cut into `folds` parts (the first `n % k`
    /// one longer, as scikit-learn's KFold), directories `code-cv/fold-<f>`.
    fn plan(&self, target: &[f64]) -> Result<Vec<PlannedRun>, TrainError> {
        let items = target.len();
        if self.folds < 2 || self.folds > items {
            return Err(TrainError::config(
                "folds",
                format!("between 2 and {items} (the items), got {}", self.folds),
            ));
        }
        let mut order: Vec<u32> = (0..items as u32).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(self.seed));
        let (k, n) = (self.folds, items);
        let mut start = 0;
        let mut plan = Vec::with_capacity(k);
        for f in 0..k {
            let len = n / k + usize::from(f < n % k);
            let test = order[start..start + len].to_vec();
            let train: Vec<u32> = order[..start]
                .iter()
                .chain(&order[start + len..])
                .copied()
                .collect();
            let seed = self.seed.wrapping_mul(1000).wrapping_add(f as u64);
            plan.push(PlannedRun::new(
                format!("code-cv/fold-{f}"),
                Split::new(train, Vec::new(), test),
                seed,
            ));
            start += len;
        }
        Ok(plan)
    }

    /// Runs every fold; `target[i]` is item `i`'s class.
    fn run<L: Learner>(
        &self,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        let name = &ctx.name;
        let config = config_of(self)?;
        let mut runs = Vec::new();
        for run in ctx.owned_runs(self.plan(target)?) {
            let (train, test) = (ids(&run.split.train), ids(&run.split.test));
            let mut learner = make(&run)?;
            let runner = ctx.runner(&run, self.train.clone(), config.clone());
            // No validation: the last epoch is kept.
            let mut record = final_epoch_run(
                &train,
                &test,
                false,
                &BTreeMap::new(),
                target,
                Metric::Accuracy,
                &runner,
                &mut learner,
            )?;
            record.selected_epoch = record.epochs.len().checked_sub(1);
            finished(&run, &mut learner)?;
            runs.push(record);
        }
        Ok(ProtocolReport::new(
            self.kind(),
            name,
            runs,
            vec![format!(
                "cdat-code-cv: {}-fold shuffled (not stratified) cross-validation, final-epoch weights, no validation — the CDAT code's evaluation",
                self.folds
            )],
        ))
    }
}

/// The ET paper's TU procedure as its public code runs it, under its own name:
/// the model is trained on **every** graph for the configured epochs (no validation, final
/// weights), then, `repeats` times, a shuffled 10-fold partition is drawn and each fold is
/// scored on the first ⌊0.1·|train part|⌋ items of its training part together with as many
/// items of its test part; the accuracy averaged over the folds is one repeat's number. Every
/// scored graph was seen in training: these are training-set accuracies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EtPaperProtocol {
    /// Repeats of the 10-fold scoring (the paper: 100).
    pub repeats: usize,
    /// Seed of the model and of the fold draws.
    pub seed: u64,
    /// Training (the reference: 300 epochs).
    pub train: TrainConfig,
}

impl Default for EtPaperProtocol {
    fn default() -> Self {
        Self {
            repeats: 100,
            seed: 0,
            train: TrainConfig {
                epochs: 300,
                ..TrainConfig::default()
            },
        }
    }
}

impl Protocol for EtPaperProtocol {
    type Targets<'a> = &'a [f64];

    fn kind(&self) -> &'static str {
        "et-paper"
    }

    /// The repeats and the training.
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        at_least(field, "repeats", self.repeats, 1)?;
        self.train.validate(&format!("{field}.train"))
    }

    /// The one run: every graph in training, directory `et-paper`.
    fn plan(&self, target: &[f64]) -> Result<Vec<PlannedRun>, TrainError> {
        let all = Split::new((0..target.len() as u32).collect(), Vec::new(), Vec::new());
        Ok(vec![PlannedRun::new("et-paper", all, self.seed)])
    }

    /// Runs the procedure; `target[i]` is graph `i`'s class.
    fn run<L: Learner>(
        &self,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        let name = &ctx.name;
        let all: Vec<usize> = (0..target.len()).collect();
        let classes: Vec<i64> = target.iter().map(|&t| t as i64).collect();
        let plan = self.plan(target)?.remove(0);
        if !ctx.owns(0) {
            return Ok(ProtocolReport::new(
                self.kind(),
                name,
                Vec::new(),
                Vec::new(),
            ));
        }
        let mut learner = make(&plan)?;
        let runner = ctx.runner(&plan, self.train.clone(), config_of(self)?);
        let repeats = self.repeats;
        let seed = self.seed;
        let mut record = runner.fit(
            &mut learner,
            &all,
            &[("train", &all)],
            // No validation: the last epoch is selected (scores increase with the epoch).
            |_, epoch, _| {
                Ok(Validation {
                    score: epoch as f64,
                    ..Validation::default()
                })
            },
            |l, _| {
                let pred = l.predict(&all)?.argmax();
                let mut per_repeat = Vec::with_capacity(repeats);
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED);
                for _ in 0..repeats {
                    let mut order = all.clone();
                    order.shuffle(&mut rng);
                    let folds: Vec<&[usize]> = order.chunks(order.len().div_ceil(10)).collect();
                    let mut accs = Vec::new();
                    for (f, test) in folds.iter().enumerate() {
                        let train: Vec<usize> = folds
                            .iter()
                            .enumerate()
                            .filter(|&(j, _)| j != f)
                            .flat_map(|(_, v)| v.iter().copied())
                            .collect();
                        let k = train.len() / 10;
                        let scored: Vec<usize> = train
                            .iter()
                            .take(k)
                            .chain(test.iter().take(k))
                            .copied()
                            .collect();
                        if scored.is_empty() {
                            continue;
                        }
                        let (y, p): (Vec<i64>, Vec<i64>) =
                            scored.iter().map(|&i| (classes[i], pred[i])).unzip();
                        accs.push(metrics::accuracy(&y, &p)?);
                    }
                    per_repeat.push(accs.iter().sum::<f64>() / accs.len().max(1) as f64);
                }
                let (m, s) = metrics::mean_std(&per_repeat);
                Ok(BTreeMap::from([
                    ("et_paper_accuracy".into(), m),
                    ("et_paper_accuracy_std_over_repeats".into(), s),
                ]))
            },
        )?;
        record.selected_epoch = record.epochs.len().checked_sub(1);
        finished(&plan, &mut learner)?;
        let notes = vec![
            "et-paper: the ET reference's TU procedure — trained on every graph, scored on subsets of the same graphs; these are training-set accuracies, not cross-validation".into(),
        ];
        let mut report = ProtocolReport::new(self.kind(), name, vec![record], notes);
        // One model: the spread is over the repeats of the scoring, as the paper reports it.
        if let (Some(m), Some(s)) = (
            report.runs[0].summary.get("et_paper_accuracy").copied(),
            report.runs[0]
                .summary
                .get("et_paper_accuracy_std_over_repeats")
                .copied(),
        ) {
            report.aggregate.insert("et_paper_accuracy".into(), (m, s));
        }
        Ok(report)
    }
}
