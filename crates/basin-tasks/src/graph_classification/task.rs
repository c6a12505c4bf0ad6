//! Graph classification as a run file names it (`task = "graph-classification"`): a graph
//! dataset, the classifier's configuration and a cross-validation.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use basin_graph::GraphDataset;
use basin_graph::laplacian::LaplacianPe;
use basin_graph::source::{Dataset, open};
use basin_graph::tu::NodeFeatures;
use basin_train::protocol::{CrossValidation, PlannedRun, TargetView};
use basin_train::runner::{Learner, Validation};
use serde::{Deserialize, Serialize};
use tch::Device;

use super::{
    AdjacencyMode, GraphClassifierConfig, GraphClassifierLearner, SPARSE_MEAN_NODES, dataset_pe,
    graph_classes, large_graphs,
};
use crate::task::Task;
use crate::{Result, TaskError};

/// Graph classification under stratified k-fold cross-validation with an inner validation
/// split (ET Table 2, leak-free).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRun {
    /// Dataset name (a TU folder such as `MUTAG`, `pattern`, `cluster`) or path.
    pub data: String,
    /// The model (absent: [`GraphClassifierConfig::default`]; the families' presets are in
    /// basin-et and basin-cdat, and `basin train --example` prints them whole).
    #[serde(default)]
    pub architecture: GraphClassifierConfig,
    /// Folds, repeats, training (default: 10 folds, 1 repeat).
    #[serde(default)]
    pub protocol: CrossValidation,
    /// What the nodes carry: `auto` (the default: the published features, else the one-hot
    /// degree for a set that publishes none), `published`, `degree` or `constant`
    /// ([`NodeFeatures`]).
    #[serde(default, skip_serializing_if = "is_auto")]
    pub node_features: NodeFeatures,
}

fn is_auto(f: &NodeFeatures) -> bool {
    *f == NodeFeatures::Auto
}

/// A graph dataset with what every fold shares: each graph's class and its Laplacian
/// encodings, computed once.
#[derive(Debug)]
pub struct GraphData {
    /// The graphs.
    pub data: Arc<GraphDataset>,
    /// Each graph's class, as the protocol scores it.
    pub target: Vec<f64>,
    /// The encodings of every graph (none when the model takes none).
    pub pe: Option<Arc<Vec<LaplacianPe>>>,
}

/// The graph-level dataset `spec` (an error for a node-level one).
pub fn graph_dataset(spec: &str, data_dir: Option<&Path>) -> Result<GraphDataset> {
    match open(spec, data_dir)? {
        Dataset::Graphs(d) => Ok(d),
        Dataset::Nodes(_) => Err(TaskError::config(
            "data",
            format!("`{spec}` is a node-level dataset; this task needs many labelled graphs"),
        )),
    }
}

impl Task for GraphRun {
    const NAME: &'static str = "graph-classification";
    type Protocol = CrossValidation;
    type Data = GraphData;
    type Learner = GraphClassifierLearner;

    fn data_name(&self) -> &str {
        &self.data
    }

    fn protocol(&self) -> &CrossValidation {
        &self.protocol
    }

    fn validate(&self) -> Result<()> {
        self.architecture.validate()?;
        Ok(basin_train::protocol::Protocol::validate(
            &self.protocol,
            "protocol",
        )?)
    }

    /// The graphs, their classes and encodings; on the CPU a batch that cannot fit in memory is
    /// refused before any work.
    fn load(&self, data_dir: Option<&Path>, device: Device) -> Result<GraphData> {
        let data = graph_dataset(&self.data, data_dir)?;
        let data = Arc::new(self.node_features.apply(data)?);
        let target: Vec<f64> = graph_classes(&data)?.0.iter().map(|&c| c as f64).collect();
        if device == Device::Cpu
            && let Some(available) = basin_core::device::available_memory_bytes()
        {
            let largest = data
                .graphs
                .iter()
                .map(|g| g.adjacency.num_nodes())
                .max()
                .unwrap_or(0);
            self.architecture
                .check_batch_memory(largest, data.graphs.len(), available)
                .map_err(|e| TaskError::config("architecture", e.to_string()))?;
        }
        let arch = &self.architecture;
        if large_graphs(&data)
            && !arch.sparse_attention
            && arch.adjacency != AdjacencyMode::ReferenceMultiply
        {
            tracing::info!(
                "{}: graphs of {SPARSE_MEAN_NODES} or more nodes on average; `sparse_attention = true` in [architecture] runs the same model over the edges, faster on graphs this large",
                data.name
            );
        }
        let pe = dataset_pe(&data, &arch.batching)?.map(Arc::new);
        Ok(GraphData { data, target, pe })
    }

    fn title(&self, data: &GraphData) -> String {
        data.data.name.clone()
    }

    fn data_notes(&self, data: &GraphData) -> Vec<String> {
        data.data
            .node_features
            .iter()
            .map(|made| format!("node features: {made}"))
            .collect()
    }

    fn targets<'a>(&self, data: &'a GraphData) -> &'a [f64] {
        &data.target
    }

    fn learner(
        &self,
        data: &GraphData,
        run: &PlannedRun,
        device: Device,
    ) -> Result<GraphClassifierLearner> {
        GraphClassifierLearner::new(
            data.data.clone(),
            data.pe.clone(),
            &self.architecture,
            &run.train(),
            run.seed,
            device,
        )
    }

    /// The protocol's metric on the test fold, as `test_<metric>`.
    fn rescore(
        &self,
        data: &GraphData,
        learner: &mut GraphClassifierLearner,
        run: &PlannedRun,
        _: &Validation,
    ) -> Result<BTreeMap<String, f64>> {
        let test = run.test();
        let metric = self.protocol.metric;
        let value = metric.score(
            &learner.predict(&test)?,
            TargetView::PerItem(&data.target),
            &test,
        )?;
        Ok(BTreeMap::from([(format!("test_{}", metric.name()), value)]))
    }

    /// Each block's energy per step over the first 64 test graphs.
    fn figures(
        &self,
        _: &GraphData,
        learner: &GraphClassifierLearner,
        run: &PlannedRun,
        _: &Path,
    ) -> Result<Vec<(String, Vec<f64>)>> {
        let sample: Vec<usize> = run.test().into_iter().take(64).collect();
        Ok(learner
            .energy_per_step(&sample)?
            .into_iter()
            .enumerate()
            .map(|(b, e)| (format!("block {b}"), e))
            .collect())
    }

    fn describe(&self) -> Option<String> {
        Some(self.architecture.describe())
    }
}

crate::register_task!(GraphRun);
