//! The contract of a task as a run file names it (`task = "graph-classification"`): what
//! `basin train` trains and `basin eval` scores again. A [`Task`] is the run file's own type
//! (the dataset, the model's configuration, the protocol); it loads its data once, says what
//! the protocol scores against, builds the learner of each planned run, and re-scores a
//! trained one. The run-file layer (basin-repro) is then one generic loop over any task.

use std::collections::BTreeMap;
use std::path::Path;

use basin_train::protocol::{PlannedRun, Protocol};
use basin_train::runner::{Learner, Validation};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tch::Device;

use crate::Result;

/// A task, as its run file holds it.
pub trait Task: Clone + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned {
    /// Its name in run files (`task = "…"`).
    const NAME: &'static str;
    /// The protocol the task runs under.
    type Protocol: Protocol;
    /// The dataset, loaded and prepared once for every run.
    type Data;
    /// The learner of one planned run.
    type Learner: Learner + Send;

    /// The dataset name or path the run file gives.
    fn data_name(&self) -> &str;
    /// The run file's protocol.
    fn protocol(&self) -> &Self::Protocol;
    /// Checks the model and the protocol (nothing that needs data); errors name the field
    /// (`architecture.…`, `protocol.…`).
    fn validate(&self) -> Result<()>;
    /// Loads and prepares the dataset (under `data_dir` for a registered name), refusing what
    /// cannot run on `device` before anything trains.
    fn load(&self, data_dir: Option<&Path>, device: Device) -> Result<Self::Data>;
    /// What the evaluation is named in reports: the dataset's name by default, the last
    /// component of a path (run names are `<title>/<run>`, so a title has no `/`).
    fn title(&self, data: &Self::Data) -> String {
        let _ = data;
        let name = self.data_name();
        Path::new(name)
            .file_name()
            .map_or(name.to_owned(), |f| f.to_string_lossy().into_owned())
    }
    /// What a report must say about the data as it was loaded (node features made for a set
    /// that publishes none, say). The default: nothing.
    fn data_notes(&self, data: &Self::Data) -> Vec<String> {
        let _ = data;
        Vec::new()
    }
    /// What the protocol scores the items of `data` against.
    fn targets<'a>(&self, data: &'a Self::Data) -> <Self::Protocol as Protocol>::Targets<'a>;
    /// A fresh learner for `run` (its training items only for any fitted statistics).
    fn learner(&self, data: &Self::Data, run: &PlannedRun, device: Device)
    -> Result<Self::Learner>;
    /// The held-out metrics of a trained learner on `run`'s test items, its selected weights
    /// restored and `selected` the validation of its selected epoch (the anomaly threshold):
    /// what `basin eval` writes, under the keys the run's record uses (`test_<metric>`).
    fn rescore(
        &self,
        data: &Self::Data,
        learner: &mut Self::Learner,
        run: &PlannedRun,
        selected: &Validation,
    ) -> Result<BTreeMap<String, f64>>;
    /// A trained learner's energy per descent step on some of `run`'s test items, one curve per
    /// block or relation or term; pictures the task draws of it go into `dir`.
    fn figures(
        &self,
        data: &Self::Data,
        learner: &Self::Learner,
        run: &PlannedRun,
        dir: &Path,
    ) -> Result<Vec<(String, Vec<f64>)>>;
    /// One line on the model for the report, if the task has one.
    fn describe(&self) -> Option<String> {
        None
    }
}
