//! The papers' evaluation protocols as runners that own their splits and their model selection,
//! so that an evaluation cannot leak by accident.
//!
//! - [`AnomalyProtocol`]: node anomaly detection as in BWGNN/ET/CDAT (reference-implementations
//!   §3.4, §5): one stratified split with a fixed seed (train ratio, the rest val:test = 1:2),
//!   several runs with different model seeds; each epoch the threshold is swept on validation
//!   (0.05…0.95) and the epoch with the best validation macro-F1 is selected; its weights and
//!   threshold give the test macro-F1, AUC and AP; mean ± std over runs. The reference scores
//!   the *training-mode logits computed before the optimiser step* and reads the test metrics
//!   from every epoch's logits: that is [`ScoreMode::ReferencePreStep`], off by default.
//! - [`CrossValidation`]: graph classification by stratified k-fold cross-validation, model
//!   selection on an inner validation split of each training part (leak-free; ties of the
//!   metric go to the lower validation cross-entropy, [`Selection`]), repeated with seeds.
//! - [`EtPaperProtocol`] (`et-paper`): the ET paper's own TU procedure (§2.6): train on every
//!   graph, then score subsets of those same graphs over repeated 10-fold draws. Its numbers are
//!   training-set accuracies and are labelled as such; they are offered so that the paper's
//!   table can be reproduced, never as a cross-validation.
//! - [`FixedSplitProtocol`]: a given train/val/test split (GNN Benchmark, LRGB) with selection
//!   of the best validation epoch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use basin_graph::{KFoldConfig, Split, SplitConfig, stratified_kfold, stratified_split};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::metrics::{self, MetricError};
use crate::record::RunRecord;
use crate::runner::{self, Learner, Runner, Scores, TrainConfig, Validation};

fn ids(v: &[u32]) -> Vec<usize> {
    v.iter().map(|&i| i as usize).collect()
}

fn graph_err(e: basin_graph::GraphError) -> TrainError {
    field_err("split")(e)
}

/// A split error named as the protocol field it comes from.
fn field_err(field: &'static str) -> impl Fn(basin_graph::GraphError) -> TrainError {
    move |e| TrainError::Config {
        field: field.into(),
        message: e.to_string(),
    }
}

/// Mean ± std (population) of each summary metric over runs.
pub type Aggregate = BTreeMap<String, (f64, f64)>;

/// One run (or fold) of a protocol, known before anything trains: the directory it writes
/// under the protocol's output directory, its split and its model seed. `make` gets it to
/// build the learner (which may fit feature statistics on `split.train` only), `basin eval`
/// gets the same list to find each run again; the directory names exist only here.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRun {
    /// Directory under the protocol's output, e.g. `repeat-0/fold-3` or `run-1`.
    pub dir: String,
    /// Train / validation / test items.
    pub split: Split,
    /// Model seed.
    pub seed: u64,
}

impl PlannedRun {
    /// The training items as indices.
    pub fn train(&self) -> Vec<usize> {
        ids(&self.split.train)
    }
}

/// The result of a protocol: every run's record and the aggregate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProtocolReport {
    /// Protocol name (`anomaly`, `cross-validation`, `et-paper`, `fixed-split`).
    pub protocol: String,
    /// What was evaluated (dataset, model).
    pub name: String,
    /// Every run (or fold).
    pub runs: Vec<RunRecord>,
    /// Mean and population standard deviation of each summary metric over the runs.
    pub aggregate: Aggregate,
    /// Notes a reader must see beside the numbers (switches, caveats).
    pub notes: Vec<String>,
    /// Under [`CrossValidation::inner_folds`]: per epoch, the mean over every fold's inner runs
    /// of each per-epoch metric they record (`train_loss`, `inner_test_<metric>`,
    /// `inner_test_loss`), the curves the folds' epoch counts were chosen on; every inner run
    /// trains the whole schedule. Empty otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inner_curves: BTreeMap<String, Vec<f64>>,
}

impl ProtocolReport {
    /// A report of `runs` (aggregate: mean ± std of each summary metric).
    pub fn new(protocol: &str, name: &str, runs: Vec<RunRecord>, notes: Vec<String>) -> Self {
        let mut keys: Vec<String> = runs
            .iter()
            .flat_map(|r| r.summary.keys().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        let aggregate = keys
            .into_iter()
            .map(|k| {
                let vals: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.summary.get(&k).copied())
                    .collect();
                (k, metrics::mean_std(&vals))
            })
            .collect();
        Self {
            protocol: protocol.into(),
            name: name.into(),
            runs,
            aggregate,
            notes,
            inner_curves: BTreeMap::new(),
        }
    }

    /// The runs' training time in seconds, as their records keep it (a run read back counts
    /// the time it took when trained); under inner folds a fold also counts its inner runs'.
    pub fn seconds(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.wall_seconds + r.summary.get("inner_seconds").copied().unwrap_or(0.0))
            .sum()
    }

    /// `mean ± std` of a metric, scaled (e.g. by 100 for percentages).
    pub fn show(&self, metric: &str, scale: f64) -> String {
        match self.aggregate.get(metric) {
            Some((m, s)) => format!("{:.2} ± {:.2}", m * scale, s * scale),
            None => "–".into(),
        }
    }

    /// A Markdown section: the aggregate table, the notes, and one row per run.
    pub fn to_markdown(&self) -> String {
        let mut md = format!(
            "### {} — {}\n\n| metric | mean ± std |\n|---|---|\n",
            self.name, self.protocol
        );
        for (k, (m, s)) in &self.aggregate {
            md.push_str(&format!("| {k} | {m:.4} ± {s:.4} |\n"));
        }
        md.push('\n');
        for n in &self.notes {
            md.push_str(&format!("- {n}\n"));
        }
        md.push_str("\n| run | selected epoch | summary | wall (s) |\n|---|---|---|---|\n");
        for r in &self.runs {
            let summary: Vec<String> = r
                .summary
                .iter()
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            let epoch = r.selected_epoch.map_or("–".into(), |e| e.to_string());
            md.push_str(&format!(
                "| {} | {epoch} | {} | {:.1} |\n",
                r.name,
                summary.join(", "),
                r.wall_seconds
            ));
        }
        md
    }

    /// Writes `report.json` into `dir`, atomically.
    pub fn write_json(&self, dir: &Path) -> Result<PathBuf, TrainError> {
        let path = dir.join("report.json");
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| TrainError::State(format!("cannot serialise the report: {e}")))?;
        basin_core::checkpoint::write_atomic(&path, json.as_bytes())?;
        Ok(path)
    }
}

// ------------------------------------------------------------------------------- anomaly

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
    /// The CDAT anomaly code (`research/cdat-spec.md` A16): as `reference-pre-step`, but the
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

impl AnomalyProtocol {
    /// Checks what needs no data: runs ≥ 1, both split fractions inside (0, 1). `field` prefixes
    /// the names in errors (e.g. `protocol`).
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        let bad = |f: &str, m: String| TrainError::Config {
            field: format!("{field}.{f}"),
            message: m,
        };
        if self.runs < 1 {
            return Err(bad("runs", "must be ≥ 1".into()));
        }
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

impl AnomalyProtocol {
    /// The runs: one stratified split (fixed seed) shared by every run, model seeds
    /// `seed, seed + 1, …`, directories `run-<r>`. `labelled` are the node ids with a label
    /// (Amazon: all but the first 3305), `is_anomaly[i]` the label of node `i`.
    pub fn plan(
        &self,
        labelled: &[u32],
        is_anomaly: &[bool],
    ) -> Result<Vec<PlannedRun>, TrainError> {
        let labels: Vec<usize> = labelled
            .iter()
            .map(|&i| is_anomaly.get(i as usize).map(|&a| usize::from(a)))
            .collect::<Option<_>>()
            .ok_or_else(|| TrainError::Config {
                field: "labelled".into(),
                message: "a node id is beyond the labels".into(),
            })?;
        let split = stratified_split(labelled, &labels, &self.split).map_err(graph_err)?;
        Ok((0..self.runs)
            .map(|r| PlannedRun {
                dir: format!("run-{r}"),
                split: split.clone(),
                seed: self.seed + r as u64,
            })
            .collect())
    }

    /// Runs the protocol (see [`AnomalyProtocol::plan`]). `make` builds a fresh learner per run;
    /// `finished` sees each trained learner with its selected weights restored. With `out`,
    /// each run writes its record and checkpoints under `out/<dir>`.
    #[allow(clippy::too_many_arguments)]
    pub fn run<L: Learner>(
        &self,
        name: &str,
        labelled: &[u32],
        is_anomaly: &[bool],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        out: Option<&Path>,
        device: &str,
    ) -> Result<ProtocolReport, TrainError> {
        let plan = self.plan(labelled, is_anomaly)?;
        let config = serde_json::to_value(self).map_err(|e| TrainError::State(e.to_string()))?;
        let mut runs = Vec::with_capacity(plan.len());
        for (i, run) in plan.iter().enumerate() {
            if !runner::owns_run(i) {
                continue;
            }
            tracing::info!("{name}: run {}/{} ({})", i + 1, plan.len(), run.dir);
            let split = &run.split;
            let (train, val, test) = (ids(&split.train), ids(&split.val), ids(&split.test));
            let truth =
                |items: &[usize]| items.iter().map(|&i| is_anomaly[i]).collect::<Vec<bool>>();
            let (val_y, test_y) = (truth(&val), truth(&test));
            let mut learner = make(run)?;
            let runner = Runner {
                name: format!("{name}/{}", run.dir),
                train: self.train.clone(),
                seed: run.seed,
                dir: out.map(|o| o.join(&run.dir)),
                device: device.into(),
                config: config.clone(),
                progress: true,
            };
            let mode = self.score;
            let record = runner.fit(
                &mut learner,
                &train,
                &[("train", &train), ("val", &val), ("test", &test)],
                |l, _, out| {
                    let (val_p, test_now) = match mode {
                        ScoreMode::EvalAfterStep => (l.predict(&val)?.positive(), None),
                        ScoreMode::ReferencePreStep | ScoreMode::ReferenceSubsample => {
                            let all = out.pre_step_scores.as_ref().ok_or_else(|| TrainError::Config {
                                field: "score".into(),
                                message: "reference scoring needs a learner that returns pre_step_scores".into(),
                            })?;
                            (all.select(&val).positive(), Some(all.select(&test).positive()))
                        }
                    };
                    // The sampled entries only (every entry outside `reference-subsample`).
                    let scored = |y: &[bool], p: Vec<f64>| -> (Vec<bool>, Vec<f64>) {
                        if mode != ScoreMode::ReferenceSubsample {
                            return (y.to_vec(), p);
                        }
                        y.iter().zip(p).filter(|(_, p)| p.is_finite()).map(|(&y, p)| (y, p)).unzip()
                    };
                    let (vy, val_p) = scored(&val_y, val_p);
                    let (threshold, f1) = metrics::best_threshold(&vy, &val_p)?;
                    let mut val_metrics = BTreeMap::from([("val_macro_f1".into(), f1), ("threshold".into(), threshold)]);
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
                                Err(MetricError::OneClass) if mode == ScoreMode::ReferenceSubsample => {
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
                    let threshold = v.for_test.get("threshold").copied().unwrap_or(0.5);
                    Ok(anomaly_metrics(&test_y, &l.predict(&test)?.positive(), threshold)?)
                },
            )?;
            finished(run, &mut learner)?;
            runs.push(record);
        }
        let hash = plan.first().map_or("", |r| r.split.hash.as_str());
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
        Ok(ProtocolReport::new("anomaly", name, runs, notes))
    }
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

// ------------------------------------------------------------------------- classification

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
    /// ROC-AUC of the positive-class score (binary targets 0/1).
    RocAuc,
    /// AP averaged over the tasks of multi-label targets (OGB `eval_ap`; LRGB Peptides-func).
    MeanAp,
    /// benchmarking-gnns' `accuracy_SBM` over the whole split (PATTERN, CLUSTER).
    AccuracySbm,
    /// Mean reciprocal rank of each graph's positive links among its nodes (LRGB PCQM-Contact;
    /// [`metrics::mean_reciprocal_rank`]), over [`Targets::Ranking`] rows.
    Mrr,
}

/// What the items of a protocol are scored against.
#[derive(Clone, Copy, Debug)]
pub enum Targets<'a> {
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

impl<'a> From<&'a [f64]> for Targets<'a> {
    fn from(t: &'a [f64]) -> Self {
        Self::PerItem(t)
    }
}

impl<'a> From<&'a Vec<f64>> for Targets<'a> {
    fn from(t: &'a Vec<f64>) -> Self {
        Self::PerItem(t)
    }
}

/// The targets of some items, flattened the way `predict` returns its rows.
enum Picked {
    Values(Vec<f64>),
    Labels(Vec<Vec<f64>>),
    Groups(Vec<usize>),
}

impl Targets<'_> {
    fn pick(&self, items: &[usize]) -> Picked {
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
            Self::RocAuc => "auc",
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
        target: Targets<'_>,
        items: &[usize],
    ) -> Result<f64, MetricError> {
        Ok(self.eval(scores, &target.pick(items))?.0)
    }

    /// Whether it scores class probabilities, which have a cross-entropy (all but MAE, mean
    /// AP and MRR).
    fn has_loss(self) -> bool {
        !matches!(self, Self::Mae | Self::MeanAp | Self::Mrr)
    }

    /// The mean cross-entropy of class-probability rows ([`metrics::log_loss`]); `None` where
    /// the metric has none ([`Metric::has_loss`]).
    fn log_loss(self, scores: &Scores, target: &Picked) -> Result<Option<f64>, MetricError> {
        match target {
            Picked::Values(t) if self.has_loss() => {
                let classes: Vec<i64> = t.iter().map(|&t| t as i64).collect();
                metrics::log_loss(&classes, &scores.0).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The metric value and the selection score (higher is better).
    fn eval(self, scores: &Scores, target: &Picked) -> Result<(f64, f64), MetricError> {
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
            Self::RocAuc => {
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

/// How a run's epoch is chosen on its validation items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// The highest validation metric; ties keep the earlier epoch (basin's rule before
    /// `metric-then-loss` became the default).
    Metric,
    /// The highest validation metric; ties go to the lower validation cross-entropy
    /// (`val_loss`), then to the earlier epoch. On small sets accuracy takes few values (MUTAG's
    /// inner split holds 19 graphs) and its maximum can span dozens of epochs, warm-up ones
    /// among them: the no-graph MLP's maximum spanned 1 to 99 of its 100 epochs on MUTAG's 30
    /// folds, and the earliest was chosen, often within its first 10. The loss ranks those.
    /// The class metrics have the loss (accuracy, balanced accuracy, macro-F1, ROC-AUC,
    /// `accuracy_sbm`); under MAE, mean AP and MRR there is none and ties keep the earlier epoch.
    #[default]
    MetricThenLoss,
    /// The lowest validation cross-entropy, the metric only recorded (early stopping on the
    /// validation loss, as many training scripts do); equal losses keep the earlier epoch.
    /// The loss varies continuously where a small split's accuracy moves in steps (of 1/19 on
    /// MUTAG's inner splits), so the chosen epoch depends less on which few graphs a lucky
    /// epoch got right. Metrics without a cross-entropy (MAE, mean AP, MRR) select by the
    /// metric.
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
    /// chooses its epochs this way ([`EpochChoice::InnerFolds`]). Test folds are never seen.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub inner_folds: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

impl CrossValidation {
    /// Checks what needs no data: repeats ≥ 1, folds ≥ 2, the validation share inside [0, 1),
    /// inner folds 0 or ≥ 2.
    /// Folds against the dataset (its size, its smallest class) are checked when the folds are
    /// planned. `field` prefixes the names in errors (e.g. `protocol`).
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        let bad = |f: &str, m: String| TrainError::Config {
            field: format!("{field}.{f}"),
            message: m,
        };
        if self.repeats < 1 {
            return Err(bad("repeats", "must be ≥ 1".into()));
        }
        if self.folds.folds < 2 {
            return Err(bad(
                "folds.folds",
                format!("must be ≥ 2, got {}", self.folds.folds),
            ));
        }
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

fn fold_runs<'a, L: Learner>(
    split: &Split,
    target: impl Into<Targets<'a>>,
    metric: Metric,
    selection: Selection,
    runner: &Runner,
    learner: &mut L,
) -> Result<RunRecord, TrainError> {
    fold_runs_with_curves(split, target, metric, selection, runner, learner, false)
}

/// [`fold_runs`]; with `curves`, every epoch also scores the training and the test items
/// (evaluation mode) as `curve_train_<metric>` and `curve_test_<metric>`, for generalisation-gap
/// figures. Selection never reads them.
fn fold_runs_with_curves<'a, L: Learner>(
    split: &Split,
    target: impl Into<Targets<'a>>,
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

impl CrossValidation {
    /// The folds: stratified k-fold of `target` (classes; one stratum for `mae`), repeat `r`
    /// seeded `folds.seed + r`, directories `repeat-<r>/fold-<f>`. Under
    /// [`Self::inner_folds`] each fold's validation split joins its training part (the fold's
    /// model trains on both; [`Self::inner_plan`] splits them again to choose its epochs).
    pub fn plan(&self, target: &[f64]) -> Result<Vec<PlannedRun>, TrainError> {
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
                plan.push(PlannedRun {
                    dir: format!("repeat-{r}/fold-{f}"),
                    split,
                    seed: self
                        .folds
                        .seed
                        .wrapping_mul(1000)
                        .wrapping_add((r * k + f) as u64),
                });
            }
        }
        Ok(plan)
    }

    /// The inner runs that choose the number of epochs of `fold`, a run of [`Self::plan`] under
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
            .map(|(i, s)| PlannedRun {
                dir: format!("{}/inner-{i}", fold.dir),
                split: Split::new(
                    s.train.into_iter().chain(s.val).collect(),
                    Vec::new(),
                    s.test,
                ),
                seed: fold.seed,
            })
            .collect())
    }

    /// Runs every fold of every repeat (see [`CrossValidation::plan`]). `target[i]` is item
    /// `i`'s class (or value); `make` builds a fresh learner per fold (and per inner run, from
    /// its own training items); `finished` sees each fold's trained learner with its selected
    /// weights restored.
    pub fn run<L: Learner>(
        &self,
        name: &str,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        out: Option<&Path>,
        device: &str,
    ) -> Result<ProtocolReport, TrainError> {
        // A fold's run is the same whatever the number of repeats, so that number stays out of
        // its identity: a finished cross-validation grows by repeats (`--repeats 3` after
        // `--repeats 1` into the same directory) without training its folds again.
        let mut config =
            serde_json::to_value(self).map_err(|e| TrainError::State(e.to_string()))?;
        if let Some(fields) = config.as_object_mut() {
            fields.remove("repeats");
        }
        let mut runs = Vec::new();
        let plan = self.plan(target)?;
        let total = plan.len();
        // Sums and counts per metric and epoch over the inner runs.
        let mut inner_sums: BTreeMap<String, Vec<(f64, usize)>> = BTreeMap::new();
        for (i, run) in plan.into_iter().enumerate() {
            if !runner::owns_run(i) {
                continue;
            }
            tracing::info!("{name}: run {}/{total} ({})", i + 1, run.dir);
            let runner = |planned: &PlannedRun, train: TrainConfig| Runner {
                name: format!("{name}/{}", planned.dir),
                train,
                seed: planned.seed,
                dir: out.map(|o| o.join(&planned.dir)),
                device: device.into(),
                config: config.clone(),
                progress: true,
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
        let mut report = ProtocolReport::new("cross-validation", name, runs, vec![note]);
        report.inner_curves = inner_sums
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().map(|(s, n)| s / n.max(1) as f64).collect()))
            .collect();
        Ok(report)
    }
}

/// A fixed train/val/test split (GNN Benchmark, LRGB) with best-validation-epoch selection.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FixedSplitProtocol {
    /// Runs with seeds `seed, seed + 1, …`.
    pub runs: usize,
    /// Base seed.
    pub seed: u64,
    /// The metric.
    pub metric: Metric,
    /// Training.
    pub train: TrainConfig,
    /// Also score the training and test items every epoch (`curve_train_*`, `curve_test_*`),
    /// for the train − test gap figure; selection reads only the validation metric.
    pub curves: bool,
}

impl FixedSplitProtocol {
    /// The runs on the published `split`: seeds `seed, seed + 1, …`, directories `run-<r>`.
    pub fn plan(&self, split: &Split) -> Result<Vec<PlannedRun>, TrainError> {
        split.check_disjoint().map_err(graph_err)?;
        Ok((0..self.runs.max(1))
            .map(|r| PlannedRun {
                dir: format!("run-{r}"),
                split: split.clone(),
                seed: self.seed + r as u64,
            })
            .collect())
    }

    /// Runs the protocol on the published `split`; `target` says what item `i` is scored
    /// against (one class or value, a class per node, or a label vector: [`Targets`]);
    /// `make` builds a fresh learner per run, `finished` sees it trained.
    #[allow(clippy::too_many_arguments)]
    pub fn run<'a, L: Learner>(
        &self,
        name: &str,
        split: &Split,
        target: impl Into<Targets<'a>>,
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        out: Option<&Path>,
        device: &str,
    ) -> Result<ProtocolReport, TrainError> {
        let config = serde_json::to_value(self).map_err(|e| TrainError::State(e.to_string()))?;
        let target: Targets<'a> = target.into();
        let mut runs = Vec::new();
        let plan = self.plan(split)?;
        let total = plan.len();
        for (i, run) in plan.into_iter().enumerate() {
            if !runner::owns_run(i) {
                continue;
            }
            tracing::info!("{name}: run {}/{total} ({})", i + 1, run.dir);
            let mut learner = make(&run)?;
            let runner = Runner {
                name: format!("{name}/{}", run.dir),
                train: self.train.clone(),
                seed: run.seed,
                dir: out.map(|o| o.join(&run.dir)),
                device: device.into(),
                config: config.clone(),
                progress: true,
            };
            runs.push(fold_runs_with_curves(
                split,
                target,
                self.metric,
                Selection::Metric,
                &runner,
                &mut learner,
                self.curves,
            )?);
            finished(&run, &mut learner)?;
        }
        Ok(ProtocolReport::new(
            "fixed-split",
            name,
            runs,
            vec![format!(
                "published split (hash {})",
                &split.hash[..12.min(split.hash.len())]
            )],
        ))
    }
}

// ---------------------------------------------------------------------------- code-cv

/// The CDAT classification code's evaluation (`eval_nfold`, `research/cdat-spec.md` A17),
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

impl CodeCrossValidation {
    /// The folds of `items` items: a seeded shuffle cut into `folds` parts (the first `n % k`
    /// one longer, as scikit-learn's KFold), directories `code-cv/fold-<f>`.
    pub fn plan(&self, items: usize) -> Result<Vec<PlannedRun>, TrainError> {
        if self.folds < 2 || self.folds > items {
            return Err(TrainError::Config {
                field: "folds".into(),
                message: format!("between 2 and {items} (the items), got {}", self.folds),
            });
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
            plan.push(PlannedRun {
                dir: format!("code-cv/fold-{f}"),
                split: Split::new(train, Vec::new(), test),
                seed: self.seed.wrapping_mul(1000).wrapping_add(f as u64),
            });
            start += len;
        }
        Ok(plan)
    }

    /// Runs every fold; `target[i]` is item `i`'s class; `make` builds a fresh learner.
    pub fn run<L: Learner>(
        &self,
        name: &str,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        out: Option<&Path>,
        device: &str,
    ) -> Result<ProtocolReport, TrainError> {
        let config = serde_json::to_value(self).map_err(|e| TrainError::State(e.to_string()))?;
        let mut runs = Vec::new();
        let plan = self.plan(target.len())?;
        let total = plan.len();
        for (i, run) in plan.into_iter().enumerate() {
            if !runner::owns_run(i) {
                continue;
            }
            tracing::info!("{name}: run {}/{total} ({})", i + 1, run.dir);
            let (train, test) = (ids(&run.split.train), ids(&run.split.test));
            let mut learner = make(&run)?;
            let runner = Runner {
                name: format!("{name}/{}", run.dir),
                train: self.train.clone(),
                seed: run.seed,
                dir: out.map(|o| o.join(&run.dir)),
                device: device.into(),
                config: config.clone(),
                progress: true,
            };
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
            runs.push(record);
        }
        Ok(ProtocolReport::new(
            "code-cv",
            name,
            runs,
            vec![format!(
                "cdat-code-cv: {}-fold shuffled (not stratified) cross-validation, final-epoch weights, no validation — the CDAT code's evaluation",
                self.folds
            )],
        ))
    }
}

// ------------------------------------------------------------------------------ et-paper

/// The ET paper's TU procedure, reproduced under its own name (reference-implementations §2.6):
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

impl EtPaperProtocol {
    /// The one run: every graph in training, directory `et-paper`.
    pub fn plan(&self, items: usize) -> PlannedRun {
        PlannedRun {
            dir: "et-paper".into(),
            split: Split::new((0..items as u32).collect(), Vec::new(), Vec::new()),
            seed: self.seed,
        }
    }

    /// Runs the procedure; `target[i]` is graph `i`'s class; `make` builds the learner.
    pub fn run<L: Learner>(
        &self,
        name: &str,
        target: &[f64],
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        out: Option<&Path>,
        device: &str,
    ) -> Result<ProtocolReport, TrainError> {
        let all: Vec<usize> = (0..target.len()).collect();
        let classes: Vec<i64> = target.iter().map(|&t| t as i64).collect();
        let plan = self.plan(target.len());
        if !runner::owns_run(0) {
            return Ok(ProtocolReport::new(
                "et-paper",
                name,
                Vec::new(),
                Vec::new(),
            ));
        }
        let mut learner = make(&plan)?;
        let runner = Runner {
            name: format!("{name}/{}", plan.dir),
            train: self.train.clone(),
            seed: self.seed,
            dir: out.map(|o| o.join(&plan.dir)),
            device: device.into(),
            config: serde_json::to_value(self).map_err(|e| TrainError::State(e.to_string()))?,
            progress: true,
        };
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
        let notes = vec![
            "et-paper: the ET reference's TU procedure — trained on every graph, scored on subsets of the same graphs; these are training-set accuracies, not cross-validation".into(),
        ];
        let mut report = ProtocolReport::new("et-paper", name, vec![record], notes);
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
            metric: Metric::RocAuc,
            train: TrainConfig::default(),
            epochs: EpochChoice::default(),
        }
    }
}

/// Trains on `train` with no validation and keeps the final epoch (the CDAT code's CV, and the
/// final model of nested CV with inner-fold epochs); its summary has the final test score and
/// `extra` (written into the record), and with `curve` every epoch's record has the test score
/// too (evaluation mode), for selection on inner folds only.
#[allow(clippy::too_many_arguments)]
fn final_epoch_run<L: Learner>(
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
    let targets = Targets::from(target);
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

/// One inner run of [`CrossValidation::inner_plan`]: trains on `split.train` for every epoch
/// (the last is kept) and scores `split.test` after each, as `inner_test_<metric>`,
/// `inner_score` (higher is better) and `inner_test_loss` (where the metric has a
/// cross-entropy); the summary holds the last epoch's `inner_test_<metric>`.
fn inner_run<L: Learner>(
    split: &Split,
    target: &[f64],
    metric: Metric,
    runner: &Runner,
    learner: &mut L,
) -> Result<RunRecord, TrainError> {
    let key = format!("inner_test_{}", metric.name());
    let (train, test) = (ids(&split.train), ids(&split.test));
    let test_y = Targets::from(target).pick(&test);
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
fn inner_choice(records: &[RunRecord], metric: Metric, selection: Selection) -> (usize, f64) {
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

impl NestedCrossValidation {
    /// Runs the procedure. `target[i]` is item `i`'s class; `make(candidate, train_items, seed)`
    /// builds a fresh learner (it may fit feature statistics on `train_items` only).
    pub fn run<L: Learner, H: Candidate>(
        &self,
        name: &str,
        target: &[f64],
        grid: &[H],
        mut make: impl FnMut(&H, &[usize], u64) -> Result<L, TrainError>,
        device: &str,
    ) -> Result<ProtocolReport, TrainError> {
        if grid.is_empty() {
            return Err(TrainError::Config {
                field: "grid".into(),
                message: "no candidate hyperparameters".into(),
            });
        }
        let items: Vec<u32> = (0..target.len() as u32).collect();
        let classes: Vec<usize> = target.iter().map(|&t| t.max(0.0) as usize).collect();
        let key = self.metric.name();
        let config = serde_json::json!({ "protocol": self, "grid": grid });
        let mut runs = Vec::new();
        for r in 0..self.repeats {
            let outer = stratified_kfold(
                &items,
                &classes,
                &KFoldConfig {
                    seed: self.outer.seed + r as u64,
                    ..self.outer.clone()
                },
            )
            .map_err(graph_err)?;
            for (f, split) in outer.iter().enumerate() {
                let seed = (self.outer.seed + r as u64)
                    .wrapping_mul(1_000_003)
                    .wrapping_add(f as u64);
                // Inner selection on the outer training part (train + val) only.
                let pool: Vec<u32> = split.train.iter().chain(&split.val).copied().collect();
                let pool_classes: Vec<usize> = pool.iter().map(|&i| classes[i as usize]).collect();
                let inner = stratified_kfold(
                    &pool,
                    &pool_classes,
                    &KFoldConfig {
                        folds: self.inner_folds,
                        val_ratio: self.outer.val_ratio,
                        seed,
                    },
                )
                .map_err(graph_err)?;
                let mut scores = Vec::with_capacity(grid.len());
                let mut epochs = Vec::with_capacity(grid.len());
                let sign = if self.metric == Metric::Mae {
                    -1.0
                } else {
                    1.0
                };
                // A single candidate needs no scoring, unless its epochs are chosen here.
                let score_inner = grid.len() > 1 || self.epochs == EpochChoice::InnerFolds;
                for (c, cand) in grid.iter().enumerate().filter(|_| score_inner) {
                    let mut vals = Vec::new();
                    let mut curves: Vec<Vec<f64>> = Vec::new();
                    for (i, isplit) in inner.iter().enumerate() {
                        let inner_train: Vec<usize> = if self.epochs == EpochChoice::InnerFolds {
                            ids(&isplit.train)
                                .into_iter()
                                .chain(ids(&isplit.val))
                                .collect()
                        } else {
                            ids(&isplit.train)
                        };
                        let mut learner = make(cand, &inner_train, seed)?;
                        let runner = Runner {
                            name: format!("{name}/repeat-{r}/fold-{f}/candidate-{c}/inner-{i}"),
                            train: cand.train(&self.train),
                            seed,
                            dir: None,
                            device: device.into(),
                            config: config.clone(),
                            progress: false,
                        };
                        if self.epochs == EpochChoice::InnerFolds {
                            let rec = final_epoch_run(
                                &inner_train,
                                &ids(&isplit.test),
                                true,
                                &BTreeMap::new(),
                                target,
                                self.metric,
                                &runner,
                                &mut learner,
                            )?;
                            let curve_key = format!("curve_test_{key}");
                            curves.push(
                                rec.epochs
                                    .iter()
                                    .map(|e| e.metrics.get(&curve_key).copied().unwrap_or(f64::NAN))
                                    .collect(),
                            );
                            continue;
                        }
                        let rec = fold_runs(
                            isplit,
                            target,
                            self.metric,
                            Selection::Metric,
                            &runner,
                            &mut learner,
                        )?;
                        vals.push(
                            rec.summary
                                .get(&format!("test_{key}"))
                                .copied()
                                .unwrap_or(f64::NAN),
                        );
                    }
                    if self.epochs == EpochChoice::InnerFolds {
                        // The mean curve over the inner folds; its peak (the earliest of ties).
                        let len = curves.iter().map(Vec::len).min().unwrap_or(0);
                        let mean: Vec<f64> = (0..len)
                            .map(|e| {
                                sign * curves.iter().map(|c| c[e]).sum::<f64>()
                                    / curves.len() as f64
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
                let mut train = grid[best].train(&self.train);
                let chosen_epochs = epochs.get(best).copied();
                if let Some(n) = chosen_epochs {
                    train.epochs = n;
                }
                let runner = Runner {
                    name: format!("{name}/repeat-{r}/fold-{f}"),
                    train,
                    seed,
                    dir: None,
                    device: device.into(),
                    config: config.clone(),
                    progress: false,
                };
                let mut rec = if let Some(n) = chosen_epochs {
                    // The whole outer training part, for the inner folds' epoch count.
                    let all: Vec<usize> = ids(&split.train)
                        .into_iter()
                        .chain(ids(&split.val))
                        .collect();
                    let mut learner = make(&grid[best], &all, seed)?;
                    let test = ids(&split.test);
                    let mut rec = final_epoch_run(
                        &all,
                        &test,
                        false,
                        &BTreeMap::new(),
                        target,
                        self.metric,
                        &runner,
                        &mut learner,
                    )?;
                    rec.summary.insert("chosen_epochs".into(), n as f64);
                    rec
                } else {
                    let mut learner = make(&grid[best], &ids(&split.train), seed)?;
                    fold_runs(
                        split,
                        target,
                        self.metric,
                        Selection::Metric,
                        &runner,
                        &mut learner,
                    )?
                };
                rec.summary.insert("chosen_candidate".into(), best as f64);
                if let Some(&score) = scores.get(best) {
                    rec.summary.insert("inner_score_of_chosen".into(), score);
                }
                tracing::info!(
                    "{name} repeat {r} fold {f}: candidate {best}, test {key} {:.4}",
                    rec.summary
                        .get(&format!("test_{key}"))
                        .copied()
                        .unwrap_or(f64::NAN)
                );
                runs.push(rec);
            }
        }
        let notes = vec![format!(
            "{} × stratified {}-fold cross-validation; hyperparameters ({} candidates) chosen by an inner stratified {}-fold cross-validation of each outer training part; the outer test folds are used once",
            self.repeats,
            self.outer.folds,
            grid.len(),
            self.inner_folds
        )];
        let mut report = ProtocolReport::new("nested-cross-validation", name, runs, notes);
        // The papers' "mean ± std" is over repeats: the std of the repeats' fold means.
        let per_fold = self.outer.folds.max(1);
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
