//! Node anomaly detection as a run file names it (`task = "node-anomaly"`): one graph with
//! node labels, the model's configuration and the anomaly protocol.

use std::collections::BTreeMap;
use std::path::Path;

use basin_graph::NodeDataset;
use basin_graph::source::{Dataset, open};
use basin_train::protocol::{
    AnomalyProtocol, AnomalyTargets, PlannedRun, Protocol, anomaly_metrics, recorded_threshold,
};
use basin_train::runner::{Learner, Validation};
use serde::{Deserialize, Serialize};
use tch::Device;

use super::{NodeAnomalyConfig, NodeAnomalyLearner};
use crate::task::Task;
use crate::{Result, TaskError};

/// Node anomaly detection under the BWGNN/ET/CDAT protocol (ET Table 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnomalyRun {
    /// Dataset name (`tolokers`, `reddit`, `yelpchi`, `amazon`, `planted`) or path.
    pub data: String,
    /// The model (absent: [`NodeAnomalyConfig::default`]; ET's and CDAT's presets are in
    /// basin-et and basin-cdat, and `basin train --example` prints them whole).
    #[serde(default)]
    pub architecture: NodeAnomalyConfig,
    /// Split, runs, training (default: 40 % train, 5 runs of 100 epochs).
    #[serde(default)]
    pub protocol: AnomalyProtocol,
}

/// A node dataset and each node's label as the protocol scores it.
#[derive(Debug)]
pub struct AnomalyData {
    /// The graph.
    pub data: NodeDataset,
    /// Whether node `i` is an anomaly.
    pub is_anomaly: Vec<bool>,
}

/// The node-level dataset `spec` (an error for a graph-level one).
pub fn node_dataset(spec: &str, data_dir: Option<&Path>) -> Result<NodeDataset> {
    match open(spec, data_dir)? {
        Dataset::Nodes(d) => Ok(d),
        Dataset::Graphs(_) => Err(TaskError::config(
            "data",
            format!(
                "`{spec}` is a graph-level dataset; node-anomaly needs one graph with node labels"
            ),
        )),
    }
}

impl Task for AnomalyRun {
    const NAME: &'static str = "node-anomaly";
    type Protocol = AnomalyProtocol;
    type Data = AnomalyData;
    type Learner = NodeAnomalyLearner;

    fn data_name(&self) -> &str {
        &self.data
    }

    fn protocol(&self) -> &AnomalyProtocol {
        &self.protocol
    }

    fn validate(&self) -> Result<()> {
        self.architecture.validate()?;
        Ok(self.protocol.validate("protocol")?)
    }

    fn load(&self, data_dir: Option<&Path>, _: Device) -> Result<AnomalyData> {
        let data = node_dataset(&self.data, data_dir)?;
        let is_anomaly = data.labels.iter().map(|&l| l == 1).collect();
        Ok(AnomalyData { data, is_anomaly })
    }

    fn title(&self, data: &AnomalyData) -> String {
        data.data.name.clone()
    }

    fn targets<'a>(&self, data: &'a AnomalyData) -> AnomalyTargets<'a> {
        AnomalyTargets {
            labelled: &data.data.labelled,
            is_anomaly: &data.is_anomaly,
        }
    }

    fn learner(
        &self,
        data: &AnomalyData,
        run: &PlannedRun,
        device: Device,
    ) -> Result<NodeAnomalyLearner> {
        NodeAnomalyLearner::for_run(
            &data.data,
            &self.architecture,
            run,
            self.protocol.score,
            device,
        )
    }

    /// Macro-F1 at the threshold the selected epoch chose on validation, AUC and AP.
    fn rescore(
        &self,
        data: &AnomalyData,
        learner: &mut NodeAnomalyLearner,
        run: &PlannedRun,
        selected: &Validation,
    ) -> Result<BTreeMap<String, f64>> {
        let test = run.test();
        let threshold = recorded_threshold(selected)?;
        let p = learner.predict(&test)?.positive();
        let y: Vec<bool> = test.iter().map(|&i| data.is_anomaly[i]).collect();
        Ok(anomaly_metrics(&y, &p, threshold)?)
    }

    /// The whole graph's energy per step, one curve per relation.
    fn figures(
        &self,
        _: &AnomalyData,
        learner: &NodeAnomalyLearner,
        _: &PlannedRun,
        _: &Path,
    ) -> Result<Vec<(String, Vec<f64>)>> {
        Ok(learner.energy_per_step())
    }
}

crate::register_task!(AnomalyRun);
