//! The papers' evaluation protocols, each behind one contract, [`Protocol`]: it plans its runs
//! (splits and seeds, known before anything trains) and runs them under a
//! [`RunContext`], owning its splits and its model selection so that an evaluation cannot leak
//! by accident.
//!
//! | protocol | module | what |
//! |---|---|---|
//! | [`AnomalyProtocol`] | [`anomaly`] | node anomaly detection as in BWGNN/ET/CDAT: one stratified split with a fixed seed, val:test 1:2, the threshold swept on validation, the best-validation epoch |
//! | [`CrossValidation`] | [`cross_validation`] | stratified k-fold with selection on an inner validation split (or on inner folds), repeated with seeds |
//! | [`FixedSplitProtocol`] | [`fixed_split`] | a published train/val/test split (GNN Benchmark, LRGB) |
//! | [`EtPaperProtocol`], [`CodeCrossValidation`] | [`mod@reference`] | the ET paper's own TU procedure (training-set accuracies, labelled so) and the CDAT code's k-fold, under their own names |
//! | [`GridSearch`] over [`NestedCrossValidation`] | [`nested`] | hyperparameters chosen inside each outer training part (the Hopfield MIL protocol) |
//! | [`ImageProtocol`] | [`image`] | masked image completion on seeded draws, test over several masking seeds |
//!
//! What they score with lives beside them: [`metric`] (the metric of a run file and what the
//! items are scored against) and [`selection`] (how a run's epoch is chosen).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::context::RunContext;
use crate::metrics;
pub use crate::plan::PlannedRun;
use crate::record::RunRecord;
use crate::runner::Learner;

pub mod anomaly;
pub mod cross_validation;
mod fit;
pub mod fixed_split;
pub mod image;
pub mod metric;
pub mod nested;
pub mod reference;
pub mod selection;

pub use anomaly::{
    AnomalyProtocol, AnomalyTargets, ScoreMode, anomaly_metrics, recorded_threshold,
};
pub use cross_validation::CrossValidation;
pub use fixed_split::{FixedSplitProtocol, PublishedSplit};
pub use image::{ImageProtocol, ImageTargets};
pub use metric::{Metric, TargetView};
pub use nested::{Candidate, EpochChoice, GridSearch, NestedCrossValidation};
pub use reference::{CodeCrossValidation, EtPaperProtocol};
pub use selection::Selection;

/// An evaluation protocol: the runs it plans for what the items are scored against, and how it
/// trains and scores each of them. `make` builds a fresh learner for a planned run (it may fit
/// feature statistics on the run's training items only); `finished` sees it trained, with its
/// selected weights restored; each run writes under `ctx.out/<run dir>` and this process trains
/// only the runs its shard owns.
pub trait Protocol: Serialize {
    /// What the items are scored against (classes, anomaly labels, a published split, …).
    type Targets<'a>: Copy;

    /// Its name in reports (`cross-validation`, `anomaly`, …).
    fn kind(&self) -> &'static str;

    /// Checks what needs no data; errors name the field under `field` (e.g. `protocol`).
    fn validate(&self, field: &str) -> Result<(), TrainError>;

    /// The runs, known before anything trains: `basin eval` gets the same list to find each run
    /// again.
    fn plan(&self, targets: Self::Targets<'_>) -> Result<Vec<PlannedRun>, TrainError>;

    /// Trains and scores the planned runs this process owns; the report of those runs.
    fn run<L: Learner>(
        &self,
        targets: Self::Targets<'_>,
        make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError>;
}

/// A `finished` callback for [`Protocol::run`] that does nothing.
pub fn nothing_after<L>(_: &PlannedRun, _: &mut L) -> Result<(), TrainError> {
    Ok(())
}

pub(crate) fn split_err(e: basin_data::DataError) -> TrainError {
    field_err("split")(e)
}

/// A split error named as the protocol field it comes from.
pub(crate) fn field_err(field: &'static str) -> impl Fn(basin_data::DataError) -> TrainError {
    move |e| TrainError::config(field, e.to_string())
}

/// An error naming `{field}.{name}` unless the count `value` is at least `min`.
pub(crate) fn at_least(
    field: &str,
    name: &str,
    value: usize,
    min: usize,
) -> Result<(), TrainError> {
    if value < min {
        return Err(TrainError::config(
            format!("{field}.{name}"),
            format!("must be ≥ {min}, got {value}"),
        ));
    }
    Ok(())
}

/// A protocol's configuration as JSON, the identity its runs record.
pub(crate) fn config_of(p: &impl Serialize) -> Result<serde_json::Value, TrainError> {
    serde_json::to_value(p).map_err(|e| TrainError::State(e.to_string()))
}

/// Mean ± std (population) of each summary metric over runs.
pub type Aggregate = BTreeMap<String, (f64, f64)>;

/// The result of a protocol: every run's record and the aggregate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProtocolReport {
    /// Protocol name ([`Protocol::kind`]).
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

    /// The mean and standard deviation of a metric, if the runs have it.
    pub fn mean_std(&self, metric: &str) -> Option<(f64, f64)> {
        self.aggregate.get(metric).copied()
    }

    /// `mean ± std` of a metric, scaled (e.g. by 100 for percentages); one run's value alone
    /// (a spread of one run is no spread).
    pub fn show(&self, metric: &str, scale: f64) -> String {
        match self.aggregate.get(metric) {
            Some((m, _)) if self.runs.len() == 1 => format!("{:.2}", m * scale),
            Some((m, s)) => format!("{:.2} ± {:.2}", m * scale, s * scale),
            None => "–".into(),
        }
    }

    /// A Markdown section: the aggregate table, the notes, and one row per run.
    pub fn to_markdown(&self) -> String {
        // One run has a value, not a spread.
        let one = self.runs.len() == 1;
        let mut md = format!(
            "### {} — {}\n\n| metric | {} |\n|---|---|\n",
            self.name,
            self.protocol,
            if one { "value" } else { "mean ± std" }
        );
        for (k, (m, s)) in &self.aggregate {
            md.push_str(&if one {
                format!("| {k} | {m:.4} |\n")
            } else {
                format!("| {k} | {m:.4} ± {s:.4} |\n")
            });
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(values: &[f64]) -> Vec<RunRecord> {
        values
            .iter()
            .map(|&v| {
                let mut r = RunRecord::new("run", serde_json::Value::Null, 0, "cpu".into());
                r.summary.insert("test_auc".into(), v);
                r
            })
            .collect()
    }

    /// One run has no spread to show; several show theirs.
    #[test]
    fn one_run_shows_its_value_alone() {
        let one = ProtocolReport::new("fixed-split", "x", runs(&[0.5818]), Vec::new());
        assert_eq!(one.show("test_auc", 100.0), "58.18");
        let two = ProtocolReport::new("fixed-split", "x", runs(&[0.5, 0.7]), Vec::new());
        assert_eq!(two.show("test_auc", 100.0), "60.00 ± 10.00");
        assert_eq!(two.show("missing", 100.0), "–");
    }
}
