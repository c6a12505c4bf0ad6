//! Errors of basin-image: each names the file (and entry) and what was expected.

use std::path::PathBuf;

/// Result alias of basin-image.
pub type Result<T, E = ImageError> = std::result::Result<T, E>;

/// What can go wrong reading or preparing images.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Reading a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file (or an entry inside an archive) is not what it should be.
    #[error("{}: {what}", path.display())]
    Format {
        /// The file, or `archive.tar/entry`.
        path: PathBuf,
        /// What is wrong and what was expected.
        what: String,
    },
    /// From finding a dataset (basin-data).
    #[error(transparent)]
    Data(#[from] basin_data::DataError),
    /// An argument is out of range (a patch size that does not divide the image, …).
    #[error("{what}: {message}")]
    Invalid {
        /// The argument.
        what: String,
        /// What was expected.
        message: String,
    },
}

impl ImageError {
    pub(crate) fn format(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self::Format {
            path: path.into(),
            what: what.into(),
        }
    }
    pub(crate) fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
