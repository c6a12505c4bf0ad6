//! Where a dataset named on a command line or in a run file is: an existing path, else a
//! registered name ([`crate::registry`]) under the data directory ([`crate::datadir`]). The
//! loaders of basin-graph and basin-image read what [`resolve`] finds; neither looks for
//! data another way.

use std::path::{Path, PathBuf};

use crate::datadir::data_dir;
use crate::registry::{self, DatasetInfo};

/// What a dataset name or path refers to.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// An existing file or folder, read by its shape.
    Path(PathBuf),
    /// A registered dataset and the data directory it is looked for in.
    Registered {
        /// The registry's entry.
        info: &'static DatasetInfo,
        /// The data directory.
        data_dir: PathBuf,
    },
    /// Neither: the name and the data directory, for a loader that looks further (an
    /// unregistered TU folder) or an error that says where it looked.
    Unknown {
        /// The name as given.
        name: String,
        /// The data directory.
        data_dir: PathBuf,
    },
}

/// Resolves `spec`: an existing path first, then a registered name (case-insensitive, with
/// its aliases) under `data_dir` (else `BASIN_DATA_DIR`, else the user cache).
pub fn resolve(spec: &str, data_dir_flag: Option<&Path>) -> Source {
    let as_path = Path::new(spec);
    if as_path.exists() {
        return Source::Path(as_path.to_path_buf());
    }
    let dir = data_dir(data_dir_flag);
    match registry::find(spec) {
        Some(info) => Source::Registered {
            info,
            data_dir: dir,
        },
        None => Source::Unknown {
            name: spec.to_owned(),
            data_dir: dir,
        },
    }
}
