//! The crate's error type: every failure names the file (and line, where there is one) and
//! what was expected, so a malformed dataset is fixed by reading the message.

use std::path::{Path, PathBuf};

use basin_data::DataError;

/// Result alias for this crate.
pub type Result<T, E = GraphError> = std::result::Result<T, E>;

/// Everything that can go wrong while loading or preprocessing graph data.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
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
    /// From finding, fetching or verifying a dataset, and a file that cannot be read, is
    /// missing or is not in its format (basin-data's, shared with the other data crates).
    #[error(transparent)]
    Data(#[from] DataError),
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
    /// A [`GraphError::OutOfRange`]: `value`, read at `line` (or entry, 1-based) of `path`, is
    /// not in `lo..=hi`; `what` says what the value is.
    pub fn out_of_range(
        path: &Path,
        line: usize,
        what: impl Into<String>,
        value: i64,
        (lo, hi): (i64, i64),
    ) -> Self {
        Self::OutOfRange {
            path: path.to_path_buf(),
            line,
            what: what.into(),
            value,
            lo,
            hi,
        }
    }

    /// `Ok` when the count `found` in `path` is the `expected` one, else a
    /// [`GraphError::CountMismatch`] saying `what` is counted.
    pub fn check_count(
        path: &Path,
        what: impl Into<String>,
        expected: usize,
        found: usize,
    ) -> Result<(), Self> {
        if found == expected {
            return Ok(());
        }
        Err(Self::CountMismatch {
            path: path.to_path_buf(),
            what: what.into(),
            expected,
            found,
        })
    }

    /// An I/O error on `path` (a missing file says so): basin-data's, which every file error of
    /// the data crates is.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Data(DataError::io(path, source))
    }

    /// A file that should be there is not: `what` it should hold.
    pub fn missing_file(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self::Data(DataError::MissingFile {
            path: path.into(),
            what: what.into(),
        })
    }

    /// A binary container (npz, mat, cache) does not hold what the format promises.
    pub fn format(path: &Path, message: impl Into<String>) -> Self {
        Self::Data(DataError::format(path, message))
    }

    /// An argument or configuration value is invalid (not tied to a file).
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Data(DataError::invalid(what, message))
    }
}
