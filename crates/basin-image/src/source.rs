//! Opening an image dataset by path or by registered name, both its splits: a registered name
//! (`fashion-mnist`, `cifar10`, `imagenet-1k`) under the data directory, or a path (a folder of
//! IDX files, a tar of `train/` and `test/` class folders, or a folder of `train/` and `val/`
//! class folders of images of any size, which is streamed).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use basin_data::registry::DataKind;
use basin_data::source::{Source, resolve};

use crate::error::{ImageError, Result};
use crate::images::Images;
use crate::set::ImageSet;
use crate::stream::{ImageFolder, OnCorrupt};

/// Where `spec` is and what kind of image dataset it is.
fn locate(spec: &str, data_dir: Option<&Path>) -> Result<(DataKind, PathBuf)> {
    Ok(match resolve(spec, data_dir) {
        Source::Path(path) if path.join("train").is_dir() => (DataKind::ImageFolder, path),
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
    })
}

/// The training and evaluation splits of `spec` as [`Images`]: in memory for IDX files and
/// tars ([`open`]), streamed for an image folder (`train/` and `val/`, each image brought to
/// `side × side`, one channel where `grey`, corrupt files as `on_corrupt` says).
pub fn open_images(
    spec: &str,
    data_dir: Option<&Path>,
    (side, grey): (usize, bool),
    on_corrupt: OnCorrupt,
) -> Result<(Arc<dyn Images>, Arc<dyn Images>)> {
    let (kind, path) = locate(spec, data_dir)?;
    if kind == DataKind::ImageFolder {
        let split = |name: &str| ImageFolder::open(&path.join(name), side, grey, on_corrupt);
        let (train, val) = (split("train")?, split("val")?);
        for (name, f) in [("train", &train), ("val", &val)] {
            if !f.skipped().is_empty() {
                tracing::warn!(
                    "{}/{name}: {} unreadable files left out (first: {})",
                    path.display(),
                    f.skipped().len(),
                    f.skipped()[0].0.display()
                );
            }
        }
        return Ok((Arc::new(train), Arc::new(val)));
    }
    let (train, test) = open(spec, data_dir)?;
    Ok((Arc::new(train), Arc::new(test)))
}

/// The training and test splits of `spec` (`data_dir`, else `BASIN_DATA_DIR`, else the user
/// cache, for a registered name).
pub fn open(spec: &str, data_dir: Option<&Path>) -> Result<(ImageSet, ImageSet)> {
    let (kind, path) = locate(spec, data_dir)?;
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
                "`{spec}` is a {} dataset; image tasks read fashion-mnist, cifar10, imagenet-1k, an IDX folder, an image tar or a folder of train/ and val/ class folders",
                other.as_str()
            ),
        )),
    }
}
