//! # basin-tasks
//!
//! Task front ends generic over the energy block, each with the one learner the protocols of
//! basin-train drive. A family (ET, CDAT, …) is a choice of blocks — a [`basin_core::BlockConfig`]
//! in the task's config, or prebuilt [`basin_core::EnergyBlock`]s for code users — plus presets;
//! the task owns encoding, structure, readout and loss.
//!
//! - [`task`]: the [`task::Task`] contract, a task as its run file names it; each task module
//!   below implements it and registers itself ([`register_task!`]; basin-sfi's GPS model too);
//!   [`run_file`] reads a run file of any registered task ([`overrides`]: its `--set` overrides) and
//!   [`run`] trains it into a directory and scores it again (`basin train`, `basin eval`).
//! - [`graph_classification`]: graph classification with a CLS token, Laplacian encodings and
//!   the parameterised adjacency of ET eq. 23–25 (ET Section 5; CDAT's graph model).
//! - [`node_anomaly`]: node anomaly detection with neighbour-restricted attention on sparse
//!   graphs (ET Section 4; CDAT's anomaly model).
//! - [`image_completion`]: masked image completion with one recurrent block (ET Section 3),
//!   its learner and pictures.
//! - [`baselines`]: what every report sets beside the energy models on the same splits — a
//!   no-graph baseline (pooled node features → MLP), GIN, and the node-anomaly floor (features
//!   and neighbour means → MLP).
//! - [`transformer`]: the standard pre-norm softmax Transformer (ViT) the energy blocks are
//!   compared with (the graph-transformer baseline, ET Table 15's ViT rows).
//! - `testing` (feature `testing`, for test builds): what learners' tests share (toy
//!   datasets, a trained classifier's accuracy, the check that size buckets change no answer).

pub mod baselines;
pub mod graph_classification;
pub mod image_completion;
pub mod node_anomaly;
pub mod overrides;
pub mod run;
pub mod run_file;
pub mod task;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod transformer;

/// Re-exported for [`register_task!`].
#[doc(hidden)]
pub use inventory;

/// Errors of basin-tasks (and of basin-repro, whose tables are tasks run many times).
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// A configuration value is invalid.
    #[error("config field `{field}`: {message}")]
    Config {
        /// The field.
        field: String,
        /// What was expected.
        message: String,
    },
    /// A flag, a table or a run file is invalid (the field names which).
    #[error("{field}: {message}")]
    Invalid {
        /// The flag, file or field.
        field: String,
        /// What was expected.
        message: String,
    },
    /// From the energy core.
    #[error(transparent)]
    Core(#[from] basin_core::CoreError),
    /// From training and evaluation.
    #[error(transparent)]
    Train(#[from] basin_train::TrainError),
    /// From graph data and preprocessing.
    #[error(transparent)]
    Graph(#[from] basin_graph::GraphError),
    /// From finding a dataset.
    #[error(transparent)]
    Data(#[from] basin_data::DataError),
    /// From image loading and preparation.
    #[error(transparent)]
    Image(#[from] basin_image::ImageError),
    /// From a metric (e.g. a single class in the scored part).
    #[error(transparent)]
    Metric(#[from] basin_train::metrics::MetricError),
    /// From libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

impl TaskError {
    /// Shorthand for a [`TaskError::Config`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Shorthand for a [`TaskError::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl From<TaskError> for basin_train::TrainError {
    fn from(e: TaskError) -> Self {
        match e {
            TaskError::Train(t) => t,
            other => Self::learner(other),
        }
    }
}

/// The result type of basin-tasks.
pub type Result<T, E = TaskError> = std::result::Result<T, E>;

/// Refuses fixed-point correction (`block.gradient.correction_states`) in a task whose loss
/// does not read it: its states are decoded and scored by image completion only.
pub(crate) fn refuse_corrections(block: &basin_core::BlockConfig) -> Result<()> {
    if block.gradient.correction_states > 0 {
        return Err(TaskError::config(
            "block.gradient.correction_states",
            "fixed-point correction is read by image completion only (its states are decoded and scored there); set it to 0",
        ));
    }
    Ok(())
}

/// A core config error with `prefix.` in front of its field.
pub(crate) fn prefix_field(prefix: &str, e: basin_core::CoreError) -> TaskError {
    match e {
        basin_core::CoreError::Config { field, message } => TaskError::Config {
            field: format!("{prefix}.{field}"),
            message,
        },
        other => other.into(),
    }
}

/// The width of the node features of `name`'s nodes (`width`), refused by name where it is 0:
/// no layer can read features that are not there.
pub(crate) fn node_width(name: &str, width: usize) -> Result<i64> {
    if width == 0 {
        return Err(TaskError::config(
            "data",
            format!(
                "dataset `{name}`: its nodes carry no features (width 0); a TU set can be given its nodes' degree or a constant instead (node_features = \"degree\" or \"constant\")"
            ),
        ));
    }
    Ok(width as i64)
}

/// `[n]` int64 indices on `device`.
pub(crate) fn index_tensor(items: &[usize], device: tch::Device) -> tch::Tensor {
    tch::Tensor::from_slice(&items.iter().map(|&i| i as i64).collect::<Vec<_>>()).to_device(device)
}
