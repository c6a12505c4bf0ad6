//! Node anomaly detection as in BWGNN/ET/CDAT (ET Section 4; CDAT Section 4.2): one
//! stratified split with a fixed seed (train ratio, the rest val:test = 1:2), several runs with
//! different model seeds; each epoch the threshold is swept on validation (0.05…0.95) and the
//! epoch with the best validation macro-F1 is selected; its weights and threshold give the test
//! macro-F1, AUC and AP; mean ± std over runs. The public reference code scores the
//! *training-mode logits computed before the optimiser step* and reads the test metrics from
//! every epoch's logits: that is [`ScoreMode::ReferencePreStep`], off by default.

use std::collections::BTreeMap;

use basin_data::split::{SplitConfig, stratified_split};
use serde::{Deserialize, Serialize};

use super::{PlannedRun, Protocol, ProtocolReport, at_least, config_of, split_err};
use crate::TrainError;
use crate::context::RunContext;
use crate::metrics::{self, MetricError};
use crate::plan::ids;
use crate::runner::{Learner, TrainConfig, Validation};

/// Which scores the anomaly protocol evaluates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScoreMode {
    /// Evaluation-mode scores after the epoch's step; the test set is scored once, with the
    /// selected epoch's weights and threshold.
    #[default]
    EvalAfterStep,
    /// The reference code's quirk: the training-mode scores computed before the optimiser
    /// step, for validation and (every epoch) test; the learner must return
    /// `pre_step_scores`.
    ReferencePreStep,
    /// The CDAT anomaly code's evaluation: as `reference-pre-step`, but the
    /// learner scores only the epoch's samples of the validation and test nodes (NaN
    /// elsewhere), and each epoch is scored on those samples.
    ReferenceSubsample,
}

/// Node anomaly detection (BWGNN/ET/CDAT protocol).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnomalyProtocol {
    /// The split (train ratio, val:test, fixed seed).
    pub split: SplitConfig,
    /// Number of runs (model seeds `seed, seed + 1, …`); ET reports 5.
    pub runs: usize,
    /// Base model seed.
    pub seed: u64,
    /// Scores evaluated.
    pub score: ScoreMode,
    /// Training (ET: 100 epochs of Adam at 1e-3).
    pub train: TrainConfig,
}

impl Default for AnomalyProtocol {
    fn default() -> Self {
        Self {
            split: SplitConfig::bwgnn(0.4),
            runs: 5,
            seed: 0,
            score: ScoreMode::EvalAfterStep,
            train: TrainConfig {
                epochs: 100,
                ..TrainConfig::default()
            },
        }
    }
}

/// What the anomaly protocol scores against: the node ids with a label (Amazon: all but the
/// first 3305) and the label of every node.
#[derive(Clone, Copy, Debug)]
pub struct AnomalyTargets<'a> {
    /// The labelled node ids.
    pub labelled: &'a [u32],
    /// `is_anomaly[i]`: the label of node `i`.
    pub is_anomaly: &'a [bool],
}

impl Protocol for AnomalyProtocol {
    type Targets<'a> = AnomalyTargets<'a>;

    fn kind(&self) -> &'static str {
        "anomaly"
    }

    /// Checks what needs no data: runs ≥ 1, both split fractions inside (0, 1). `field` prefixes
    /// the names in errors (e.g. `protocol`).
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        let bad = |f: &str, m: String| TrainError::config(format!("{field}.{f}"), m);
        at_least(field, "runs", self.runs, 1)?;
        for (f, v) in [
            ("split.train_ratio", self.split.train_ratio),
            (
                "split.test_fraction_of_rest",
                self.split.test_fraction_of_rest,
            ),
        ] {
            if !(v > 0.0 && v < 1.0) {
                return Err(bad(f, format!("inside (0, 1), got {v}")));
            }
        }
        self.train.validate(&format!("{field}.train"))
    }

    /// The runs: one stratified split (fixed seed) shared by every run, model seeds
    /// `seed, seed + 1, …`, directories `run-<r>`.
    fn plan(&self, targets: AnomalyTargets<'_>) -> Result<Vec<PlannedRun>, TrainError> {
        let AnomalyTargets {
            labelled,
            is_anomaly,
        } = targets;
        let labels: Vec<usize> = labelled
            .iter()
            .map(|&i| is_anomaly.get(i as usize).map(|&a| usize::from(a)))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                TrainError::Data(basin_data::DataError::invalid(
                    "labelled nodes",
                    "a node id is beyond the labels",
                ))
            })?;
        let split = stratified_split(labelled, &labels, &self.split).map_err(split_err)?;
        Ok((0..self.runs)
            .map(|r| PlannedRun::new(format!("run-{r}"), split.clone(), self.seed + r as u64))
            .collect())
    }

    fn run<L: Learner>(
        &self,
        targets: AnomalyTargets<'_>,
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        let is_anomaly = targets.is_anomaly;
        let name = &ctx.name;
        let config = config_of(self)?;
        let plan = self.plan(targets)?;
        let hash = plan
            .first()
            .map(|r| r.split.hash.clone())
            .unwrap_or_default();
        let mut runs = Vec::new();
        for run in ctx.owned_runs(plan) {
            let split = &run.split;
            let (train, val, test) = (ids(&split.train), ids(&split.val), ids(&split.test));
            let truth =
                |items: &[usize]| items.iter().map(|&i| is_anomaly[i]).collect::<Vec<bool>>();
            let (val_y, test_y) = (truth(&val), truth(&test));
            let mut learner = make(&run)?;
            let runner = ctx.runner(&run, self.train.clone(), config.clone());
            let mode = self.score;
            let record = runner.fit(
                &mut learner,
                &train,
                &[("train", &train), ("val", &val), ("test", &test)],
                |l, _, out| {
                    let (val_p, test_now) = match mode {
                        ScoreMode::EvalAfterStep => (l.predict(&val)?.positive(), None),
                        ScoreMode::ReferencePreStep | ScoreMode::ReferenceSubsample => {
                            let all = out.pre_step_scores.as_ref().ok_or_else(|| {
                                TrainError::State(
                                    "reference scoring needs a learner that returns pre_step_scores"
                                        .into(),
                                )
                            })?;
                            (
                                all.select(&val).positive(),
                                Some(all.select(&test).positive()),
                            )
                        }
                    };
                    // The sampled entries only (every entry outside `reference-subsample`).
                    let scored = |y: &[bool], p: Vec<f64>| -> (Vec<bool>, Vec<f64>) {
                        if mode != ScoreMode::ReferenceSubsample {
                            return (y.to_vec(), p);
                        }
                        y.iter()
                            .zip(p)
                            .filter(|(_, p)| p.is_finite())
                            .map(|(&y, p)| (y, p))
                            .unzip()
                    };
                    let (vy, val_p) = scored(&val_y, val_p);
                    let (threshold, f1) = metrics::best_threshold(&vy, &val_p)?;
                    let mut val_metrics = BTreeMap::from([
                        ("val_macro_f1".into(), f1),
                        ("threshold".into(), threshold),
                    ]);
                    match metrics::roc_auc(&vy, &val_p) {
                        Ok(auc) => {
                            val_metrics.insert("val_auc".into(), auc);
                        }
                        // A small sample of a rare class may hold no anomaly: the epoch is
                        // still selected by macro-F1, its validation AUC left out.
                        Err(MetricError::OneClass) if mode == ScoreMode::ReferenceSubsample => {}
                        Err(e) => return Err(e.into()),
                    }
                    let test_now = match test_now {
                        Some(p) => {
                            let (ty, p) = scored(&test_y, p);
                            Some(match anomaly_metrics(&ty, &p, threshold) {
                                // Likewise a test sample: its AUC and AP are undefined and left
                                // out of the epoch's test metrics; its macro-F1 is kept.
                                Err(MetricError::OneClass)
                                    if mode == ScoreMode::ReferenceSubsample =>
                                {
                                    one_class_metrics(&ty, &p, threshold)?
                                }
                                m => m?,
                            })
                        }
                        None => None,
                    };
                    Ok(Validation {
                        metrics: val_metrics,
                        score: f1,
                        for_test: BTreeMap::from([("threshold".into(), threshold)]),
                        test_now,
                        ..Validation::default()
                    })
                },
                |l, v| {
                    let threshold = recorded_threshold(v)?;
                    Ok(anomaly_metrics(
                        &test_y,
                        &l.predict(&test)?.positive(),
                        threshold,
                    )?)
                },
            )?;
            finished(&run, &mut learner)?;
            runs.push(record);
        }
        let one_class = runs
            .iter()
            .filter(|r| {
                r.summary.contains_key("test_macro_f1") && !r.summary.contains_key("test_auc")
            })
            .count();
        let mut notes = vec![format!(
            "split: stratified, train ratio {}, val:test = {:.2}:{:.2} of the rest, seed {} (hash {})",
            self.split.train_ratio,
            1.0 - self.split.test_fraction_of_rest,
            self.split.test_fraction_of_rest,
            self.split.seed,
            &hash[..12.min(hash.len())]
        )];
        match self.score {
            ScoreMode::ReferencePreStep => notes.push("score = reference-pre-step: training-mode logits from before each optimiser step, test read every epoch (the reference code's behaviour)".into()),
            ScoreMode::ReferenceSubsample => notes.push("score = reference-subsample: training-mode logits from before each optimiser step on the epoch's sampled validation and test nodes, test read every epoch (the CDAT code's behaviour)".into()),
            ScoreMode::EvalAfterStep => {}
        }
        if one_class > 0 {
            notes.push(format!(
                "{one_class} of {} runs: the selected epoch's test sample held one class, so their AUC and AP are undefined and the means are over the other runs",
                runs.len()
            ));
        }
        Ok(ProtocolReport::new(self.kind(), name, runs, notes))
    }
}

/// The threshold the selected epoch chose on validation, which a record of this protocol
/// keeps; a validation without one (a record of another protocol) is an error, never 0.5.
pub fn recorded_threshold(v: &Validation) -> Result<f64, TrainError> {
    v.for_test.get("threshold").copied().ok_or_else(|| {
        TrainError::State(
            "the selected epoch recorded no threshold (not a run of the anomaly protocol)".into(),
        )
    })
}

/// The anomaly protocol's test metrics (macro-F1 at `threshold`, AUC, AP) of scores `p`.
pub fn anomaly_metrics(
    y: &[bool],
    p: &[f64],
    threshold: f64,
) -> Result<BTreeMap<String, f64>, MetricError> {
    let mut m = one_class_metrics(y, p, threshold)?;
    m.insert("test_auc".into(), metrics::roc_auc(y, p)?);
    m.insert("test_ap".into(), metrics::average_precision(y, p)?);
    Ok(m)
}

/// [`anomaly_metrics`] of a sample that holds one class: macro-F1 at `threshold` only (AUC and
/// AP need both classes).
fn one_class_metrics(
    y: &[bool],
    p: &[f64],
    threshold: f64,
) -> Result<BTreeMap<String, f64>, MetricError> {
    let truth: Vec<i64> = y.iter().map(|&b| i64::from(b)).collect();
    Ok(BTreeMap::from([
        (
            "test_macro_f1".into(),
            metrics::macro_f1(&truth, &metrics::threshold(p, threshold))?,
        ),
        ("threshold".into(), threshold),
    ]))
}
