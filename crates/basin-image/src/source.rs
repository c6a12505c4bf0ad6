//! Opening an image dataset by path or by registered name, both its splits: a registered name
//! (`fashion-mnist`, `cifar10`) under the data directory, or a path (a folder of IDX files, or
//! a tar of `train/` and `test/` class folders).

use std::path::Path;

use basin_data::registry::DataKind;
use basin_data::source::{Source, resolve};

use crate::error::{ImageError, Result};
use crate::set::ImageSet;

/// The training and test splits of `spec` (`data_dir`, else `BASIN_DATA_DIR`, else the user
/// cache, for a registered name).
pub fn open(spec: &str, data_dir: Option<&Path>) -> Result<(ImageSet, ImageSet)> {
    let (kind, path) = match resolve(spec, data_dir) {
        Source::Path(path) if path.is_dir() => (DataKind::IdxImages, path),
        Source::Path(path) => (DataKind::ImageTar, path),
        Source::Registered { info, data_dir } => (info.kind, info.require(&data_dir)?),
        Source::Unknown { name, data_dir } => {
            return Err(ImageError::invalid(
                "data",
                format!(
                    "`{name}` is neither a path nor a registered dataset (data directory {}; `basin data list` shows the registered ones)",
                    data_dir.display()
                ),
            ));
        }
    };
    match kind {
        DataKind::IdxImages => Ok((
            crate::idx::load_fashion_mnist(&path, true)?,
            crate::idx::load_fashion_mnist(&path, false)?,
        )),
        DataKind::ImageTar => Ok((
            crate::folder::load_tar(&path, "train", false)?,
            crate::folder::load_tar(&path, "test", false)?,
        )),
        other => Err(ImageError::invalid(
            "data",
            format!(
                "`{spec}` is a {} dataset; image tasks read fashion-mnist, cifar10, an IDX folder or an image tar",
                other.as_str()
            ),
        )),
    }
}
