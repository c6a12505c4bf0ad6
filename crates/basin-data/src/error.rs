//! The crate's error type: every failure names the file or the dataset and what was expected.

use std::path::{Path, PathBuf};

/// Result alias for this crate.
pub type Result<T, E = DataError> = std::result::Result<T, E>;

/// What can go wrong while finding, fetching or verifying a dataset.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        source: std::io::Error,
    },
    /// A file that should be there is not.
    #[error("{path}: missing file ({what})")]
    MissingFile {
        /// The path that was looked for.
        path: PathBuf,
        /// What the file should hold.
        what: String,
    },
    /// A file (the manifest, an archive) does not hold what its format promises.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        message: String,
    },
    /// A name or setting is invalid.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// The name or field.
        what: String,
        /// Why it is invalid.
        message: String,
    },
    /// A registered dataset is not in the data directory.
    #[error("dataset `{name}` not found at {looked}; {hint}", looked = looked.display())]
    MissingDataset {
        /// The dataset's registered name.
        name: String,
        /// Where it was looked for.
        looked: PathBuf,
        /// How to get it.
        hint: String,
    },
    /// A download failed.
    #[error("fetching {dataset}{at}: {message}", at = if url.is_empty() { String::new() } else { format!(" from {url}") })]
    Fetch {
        /// The dataset or file.
        dataset: String,
        /// The source.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A downloaded or present file is not the one the manifest records.
    #[error("{file} (from {source_url}): expected {expected}, got {found}; nothing was written")]
    Checksum {
        /// The file, relative to the data directory.
        file: String,
        /// Where it came from.
        source_url: String,
        /// What the manifest records.
        expected: String,
        /// What arrived.
        found: String,
    },
}

impl DataError {
    /// An I/O error on `path` (a missing file says so).
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

    /// An invalid name or setting.
    pub fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }
}
