//! Errors of basin-core: every message names the file, tensor or field and what was expected.

use std::path::PathBuf;

/// Result alias used throughout basin-core.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;

/// What can go wrong in basin-core when user input (a file, a config, a tensor) is involved.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not in the expected format (e.g. a safetensors header that does not parse).
    #[error("{}: {reason}", path.display())]
    Format {
        /// The file involved.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A checkpoint does not fit the model: every missing, unexpected or misshapen tensor is listed.
    #[error("{}: checkpoint does not match the model:\n  - {}", path.display(), problems.join("\n  - "))]
    Mismatch {
        /// The checkpoint file.
        path: PathBuf,
        /// One line per problem, each naming the tensor.
        problems: Vec<String>,
    },
    /// A configuration value is invalid.
    #[error("config field `{field}`: {message}")]
    Config {
        /// Dotted path of the field, e.g. `terms[1].beta`.
        field: String,
        /// What was expected.
        message: String,
    },
    /// An input tensor has the wrong shape, dtype or content.
    #[error("tensor `{name}`: expected {expected}, got {got}")]
    Tensor {
        /// The tensor's name (checkpoint or input name).
        name: String,
        /// What was expected, e.g. `shape [B, N, 64]`.
        expected: String,
        /// What was found.
        got: String,
    },
    /// Another process is writing the directory (its lock file names it).
    #[error("{}: another process is writing this directory: pid {pid} (`{command}`); wait for it to end, or choose another --out", path.display())]
    Busy {
        /// The directory.
        path: PathBuf,
        /// The process holding it.
        pid: u32,
        /// Its command line.
        command: String,
    },
    /// An environment variable holds a value basin cannot use.
    #[error("environment variable {name}: {message}")]
    Environment {
        /// The variable, e.g. `BASIN_DEVICE`.
        name: String,
        /// What was expected.
        message: String,
    },
    /// The requested device cannot be used.
    #[error("device: {0}")]
    Device(String),
    /// An error reported by libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

impl CoreError {
    /// Shorthand for a [`CoreError::Config`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Shorthand for a [`CoreError::Tensor`].
    pub fn tensor(
        name: impl Into<String>,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) -> Self {
        Self::Tensor {
            name: name.into(),
            expected: expected.into(),
            got: got.into(),
        }
    }

    /// Shorthand for a [`CoreError::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Ok` when `v` is finite and > 0, else a config error naming `field.name`.
pub(crate) fn positive(field: &str, name: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(CoreError::config(
            format!("{field}.{name}"),
            format!("must be > 0, got {v}"),
        ))
    }
}
