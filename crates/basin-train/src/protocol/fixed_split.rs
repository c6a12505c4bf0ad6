//! A published train/val/test split (the GNN Benchmark, LRGB) with best-validation-epoch
//! selection, as GraphGPS and SFi-Former evaluate.

use basin_data::split::Split;
use serde::{Deserialize, Serialize};

use super::fit::fold_runs;
use super::metric::{Metric, TargetView};
use super::selection::Selection;
use super::{PlannedRun, Protocol, ProtocolReport, config_of, split_err};
use crate::TrainError;
use crate::context::RunContext;
use crate::runner::{Learner, TrainConfig};

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

/// What a fixed-split protocol scores against: the published split and each item's target.
#[derive(Clone, Copy, Debug)]
pub struct PublishedSplit<'a> {
    /// The split.
    pub split: &'a Split,
    /// What item `i` is scored against (one class or value, a class per node, a label vector).
    pub target: TargetView<'a>,
}

impl Protocol for FixedSplitProtocol {
    type Targets<'a> = PublishedSplit<'a>;

    fn kind(&self) -> &'static str {
        "fixed-split"
    }

    /// The training's settings (the split is the data's).
    fn validate(&self, field: &str) -> Result<(), TrainError> {
        self.train.validate(&format!("{field}.train"))
    }

    /// The runs on the published split: seeds `seed, seed + 1, …`, directories `run-<r>`.
    fn plan(&self, targets: PublishedSplit<'_>) -> Result<Vec<PlannedRun>, TrainError> {
        let split = targets.split;
        split.check_disjoint().map_err(split_err)?;
        Ok((0..self.runs.max(1))
            .map(|r| PlannedRun::new(format!("run-{r}"), split.clone(), self.seed + r as u64))
            .collect())
    }

    fn run<L: Learner>(
        &self,
        targets: PublishedSplit<'_>,
        mut make: impl FnMut(&PlannedRun) -> Result<L, TrainError>,
        mut finished: impl FnMut(&PlannedRun, &mut L) -> Result<(), TrainError>,
        ctx: &RunContext,
    ) -> Result<ProtocolReport, TrainError> {
        let config = config_of(self)?;
        let PublishedSplit { split, target } = targets;
        let mut runs = Vec::new();
        for run in ctx.owned_runs(self.plan(targets)?) {
            let mut learner = make(&run)?;
            let runner = ctx.runner(&run, self.train.clone(), config.clone());
            runs.push(fold_runs(
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
            self.kind(),
            &ctx.name,
            runs,
            vec![format!(
                "published split (hash {})",
                &split.hash[..12.min(split.hash.len())]
            )],
        ))
    }
}
