//! The crate's error type: every failure names the file (and line, where there is one) and
//! what was expected, so a malformed dataset is fixed by reading the message.

use std::path::{Path, PathBuf};

/// Result alias for this crate.
pub type Result<T, E = GraphError> = std::result::Result<T, E>;

/// Everything that can go wrong while loading or preprocessing graph data.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        source: std::io::Error,
    },
    /// A file the format requires is not there.
    #[error("{path}: missing file ({what})")]
    MissingFile {
        /// The path that was looked for.
        path: PathBuf,
        /// What the file should hold.
        what: String,
    },
    /// A line holds the wrong number of comma-separated values.
    #[error("{path}:{line}: expected {expected} column(s), found {found}")]
    ColumnCount {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Columns expected.
        expected: usize,
        /// Columns found.
        found: usize,
    },
    /// A value could not be parsed.
    #[error("{path}:{line}: expected {expected}, found {found:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0 when the format has no lines).
        line: usize,
        /// What was expected (e.g. "an integer node id").
        expected: String,
        /// The offending text.
        found: String,
    },
    /// An id lies outside the range the other files define.
    #[error("{path}:{line}: {what} {value} is out of range (expected {lo}..={hi})")]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0 when the format has no lines).
        line: usize,
        /// What the value is (e.g. "node id").
        what: String,
        /// The value found.
        value: i64,
        /// Smallest allowed value.
        lo: i64,
        /// Largest allowed value.
        hi: i64,
    },
    /// Two files (or two arrays) disagree on a count.
    #[error("{path}: expected {expected} {what}, found {found}")]
    CountMismatch {
        /// The file whose count is wrong.
        path: PathBuf,
        /// What is counted (e.g. "lines (one per node)").
        what: String,
        /// The count the other files imply.
        expected: usize,
        /// The count found.
        found: usize,
    },
    /// A line of a text file is malformed (a message that fits no narrower variant).
    #[error("{path}:{line}: {message}", path = path.display())]
    AtLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A binary container (npz, mat, cache) does not hold what the format promises.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        message: String,
    },
    /// An argument or configuration value is invalid (not tied to a file).
    #[error("invalid {what}: {message}")]
    Invalid {
        /// The argument or config field.
        what: String,
        /// Why it is invalid.
        message: String,
    },
    /// From finding, fetching or verifying a dataset (basin-data).
    #[error(transparent)]
    Data(#[from] basin_data::DataError),
    /// A numerical routine did not converge.
    #[error("{what} did not converge: {message}")]
    NoConvergence {
        /// The routine.
        what: String,
        /// Details (iterations, residuals).
        message: String,
    },
}

impl GraphError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            return Self::MissingFile {
                path: path.to_path_buf(),
                what: source.to_string(),
            };
        }
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A format error on `path`.
    pub fn format(path: &Path, message: impl Into<String>) -> Self {
        Self::Format {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// An invalid argument.
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }
}
