//! A GPS-family model as a run file names it (`task = "gps"`): SFi-Former, DFi-Former,
//! GraphGPS or GatedGCN on a dataset's published split, best validation epoch.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use basin_graph::Split;
use basin_tasks::graph_classification::graph_dataset;
use basin_tasks::task::Task;
use basin_tasks::{Result, TaskError};
use basin_train::protocol::{FixedSplitProtocol, PlannedRun, Protocol, PublishedSplit};
use basin_train::runner::{Learner, Validation};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::learner::{GpsData, GpsLearner};
use crate::model::GpsModelConfig;

/// A GPS-family model on a dataset with a published split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpsRun {
    /// Dataset name (`peptides-func`, `pattern`, `cluster`, …) or path; it must have a split.
    pub data: String,
    /// Use only this many training, validation and test items of the split (seeded draws;
    /// absent: all of it).
    #[serde(default)]
    pub subset: Option<[usize; 3]>,
    /// The model (absent: [`GpsModelConfig::default`]; `crate::presets` has the papers').
    #[serde(default)]
    pub architecture: GpsModelConfig,
    /// Runs, metric, training.
    #[serde(default)]
    pub protocol: FixedSplitProtocol,
}

/// The dataset of a GPS run with its statistics, and its published split (or the run's subset
/// of it, whose graphs alone are kept).
#[derive(Debug)]
pub struct GpsRunData {
    /// The graphs, encodings and targets.
    pub data: Arc<GpsData>,
    /// The split the runs use.
    pub split: Split,
}

impl Task for GpsRun {
    const NAME: &'static str = "gps";
    type Protocol = FixedSplitProtocol;
    type Data = GpsRunData;
    type Learner = GpsLearner;

    fn data_name(&self) -> &str {
        &self.data
    }

    fn protocol(&self) -> &FixedSplitProtocol {
        &self.protocol
    }

    fn validate(&self) -> Result<()> {
        self.architecture.validate()?;
        Ok(self.protocol.validate("protocol")?)
    }

    fn load(&self, data_dir: Option<&Path>, _: Device) -> Result<GpsRunData> {
        let ds = graph_dataset(&self.data, data_dir)?;
        let split = ds.official_split.clone().ok_or_else(|| {
            TaskError::config(
                "data",
                format!(
                    "`{}` has no published split; GPS runs use fixed splits",
                    self.data
                ),
            )
        })?;
        // A subset keeps only its graphs, so statistics are computed for them alone.
        let (ds, split) = match self.subset {
            Some([a, b, c]) => {
                let sub = split.subset([Some(a), Some(b), Some(c)], 0);
                let order: Vec<u32> = sub
                    .train
                    .iter()
                    .chain(&sub.val)
                    .chain(&sub.test)
                    .copied()
                    .collect();
                let (a, b) = (sub.train.len() as u32, sub.val.len() as u32);
                let c = sub.test.len() as u32;
                let split = Split::new(
                    (0..a).collect(),
                    (a..a + b).collect(),
                    (a + b..a + b + c).collect(),
                );
                (ds.select(&order)?, split)
            }
            None => (ds, split),
        };
        let pe = &self.architecture.pe;
        let data = GpsData::new(Arc::new(ds), pe.frequencies(), pe.walk_steps())?;
        Ok(GpsRunData {
            data: Arc::new(data),
            split,
        })
    }

    fn title(&self, data: &GpsRunData) -> String {
        data.data.data.name.clone()
    }

    fn targets<'a>(&self, data: &'a GpsRunData) -> PublishedSplit<'a> {
        PublishedSplit {
            split: &data.split,
            target: data.data.targets(),
        }
    }

    fn learner(&self, data: &GpsRunData, run: &PlannedRun, device: Device) -> Result<GpsLearner> {
        Ok(GpsLearner::new(
            data.data.clone(),
            &self.architecture,
            run.seed,
            device,
        )?)
    }

    /// The protocol's metric on the test items, as `test_<metric>`.
    fn rescore(
        &self,
        data: &GpsRunData,
        learner: &mut GpsLearner,
        run: &PlannedRun,
        _: &Validation,
    ) -> Result<BTreeMap<String, f64>> {
        let test = run.test();
        let metric = self.protocol.metric;
        let value = metric.score(&learner.predict(&test)?, data.data.targets(), &test)?;
        Ok(BTreeMap::from([(format!("test_{}", metric.name()), value)]))
    }

    /// Each SFi layer's energy of eq. 9 per unrolled solver iteration, on the first 16 test
    /// graphs (nothing for models without flows).
    fn figures(
        &self,
        _: &GpsRunData,
        learner: &GpsLearner,
        run: &PlannedRun,
        _: &Path,
    ) -> Result<Vec<(String, Vec<f64>)>> {
        let few: Vec<usize> = run.test().into_iter().take(16).collect();
        Ok(learner
            .flow_traces(&few)?
            .into_iter()
            .enumerate()
            .map(|(l, (t, _))| (format!("layer {l} flow energy (eq. 9)"), t))
            .collect())
    }
}

basin_tasks::register_task!(GpsRun);
