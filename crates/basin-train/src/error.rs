//! Errors of basin-train.

/// What can stop a training run or a protocol.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A configuration value is invalid.
    #[error("config field `{field}`: {message}")]
    Config {
        /// Dotted path of the field.
        field: String,
        /// What was expected.
        message: String,
    },
    /// A command-line flag is invalid (`--shard 3/2`).
    #[error("{flag}: {message}")]
    Flag {
        /// The flag, e.g. `--shard`.
        flag: String,
        /// What was expected.
        message: String,
    },
    /// A NaN or infinity appeared; the run stops where it happened.
    #[error("non-finite {what}{}{}", epoch.map(|e| format!(" at epoch {e}")).unwrap_or_default(), step.map(|s| format!(", step {s}")).unwrap_or_default())]
    NonFinite {
        /// What was not finite (loss, gradient of which parameter, model output).
        what: String,
        /// Epoch, if known.
        epoch: Option<usize>,
        /// Optimiser step, if known.
        step: Option<i64>,
    },
    /// A saved state (checkpoint, optimiser state) does not fit.
    #[error("{0}")]
    State(String),
    /// A run's checkpoint or record cannot be read (truncated, corrupt): it is not another
    /// run, and the message says how to go on.
    #[error("{path}: {message}; this run's files are damaged: the same command with --restart-damaged retrains exactly the damaged runs and keeps every finished one (or remove {path} yourself)", path = path.display())]
    Damaged {
        /// The file that could not be read.
        path: std::path::PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A stop was asked for (SIGINT, SIGTERM): the run stopped before a step, its finished
    /// epochs saved.
    #[error("interrupted: every finished epoch is saved, and the same command resumes the run")]
    Interrupted,
    /// Two sets of runs cannot be paired (not the same folds, a run without its splits).
    #[error("{0}")]
    Unpaired(String),
    /// From loading or preparing data (splits, batches, loaders).
    #[error(transparent)]
    Data(#[from] basin_data::DataError),
    /// From a learner's own code (a task or model crate's error, with its source chain).
    #[error(transparent)]
    Learner(Box<dyn std::error::Error + Send + Sync>),
    /// A metric could not be computed.
    #[error(transparent)]
    Metric(#[from] crate::metrics::MetricError),
    /// An error from basin-core (files, tensors).
    #[error(transparent)]
    Core(#[from] basin_core::CoreError),
    /// An error from libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// Data-parallel communication failed (a peer died, ranks disagree).
    #[error(transparent)]
    Dist(#[from] basin_dist::DistError),
    /// Writing a record or checkpoint failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl TrainError {
    /// `Ok` when a checkpoint restored every tensor of `what` (e.g. "the weights' average");
    /// else the state error naming the `missing` ones (absent or of another shape).
    pub(crate) fn restored(missing: &[String], what: &str) -> Result<(), Self> {
        if missing.is_empty() {
            return Ok(());
        }
        Err(Self::State(format!(
            "checkpoint lacks or misshapes {what}: {}",
            missing.join(", ")
        )))
    }

    /// A configuration error at the dotted path `field`.
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Wraps a learner's own error.
    pub fn learner(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Learner(Box::new(e))
    }
}
