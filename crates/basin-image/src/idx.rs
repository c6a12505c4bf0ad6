//! The IDX format of MNIST and Fashion-MNIST (`*-idx3-ubyte`, `*-idx1-ubyte`, gzipped or not).
//!
//! An IDX file is a 4-byte magic (`0 0 type ndim`, type 0x08 = unsigned byte), `ndim` big-endian
//! u32 dimensions, then the data.

use std::io::Read;
use std::path::Path;

use crate::error::{ImageError, Result};
use crate::set::ImageSet;

/// Reads a whole file, gunzipping it when it starts with the gzip magic.
pub(crate) fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|e| ImageError::io(path, e))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        // Deflate unpacks at most 1032:1; more is not gzip data but a malformed stream.
        let limit = (raw.len() as u64).saturating_mul(1032);
        flate2::read::GzDecoder::new(raw.as_slice())
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|e| {
                ImageError::format(path, format!("corrupt or truncated gzip data: {e}"))
            })?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Dimensions and data of an unsigned-byte IDX file with `ndim` dimensions.
fn parse(path: &Path, bytes: &[u8], ndim: usize) -> Result<(Vec<usize>, Vec<u8>)> {
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(ImageError::format(
            path,
            format!(
                "{} bytes, too short for an IDX header of {header}",
                bytes.len()
            ),
        ));
    }
    if bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] as usize != ndim {
        return Err(ImageError::format(
            path,
            format!(
                "bad IDX magic {:02x?}: expected [00, 00, 08, {ndim:02x}] (unsigned bytes, {ndim} dimensions)",
                &bytes[..4]
            ),
        ));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|d| {
            let o = 4 + 4 * d;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let data = &bytes[header..];
    let Some(n) = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) else {
        return Err(ImageError::format(
            path,
            format!(
                "the header announces {dims:?} values, more than any file holds (the file holds {})",
                data.len()
            ),
        ));
    };
    if data.len() != n {
        return Err(ImageError::format(
            path,
            format!(
                "the header announces {dims:?} = {n} bytes of data, the file holds {} (truncated or padded)",
                data.len()
            ),
        ));
    }
    Ok((dims, data.to_vec()))
}

/// Loads an images file (`idx3`) and its labels file (`idx1`) into a grey [`ImageSet`].
pub fn load_idx(images: &Path, labels_file: &Path, classes: Vec<String>) -> Result<ImageSet> {
    let (dims, pixels) = parse(images, &read_maybe_gz(images)?, 3)?;
    let (ldims, lab) = parse(labels_file, &read_maybe_gz(labels_file)?, 1)?;
    if ldims[0] != dims[0] {
        return Err(ImageError::format(
            labels_file,
            format!(
                "{} labels for {} images in {}",
                ldims[0],
                dims[0],
                images.display()
            ),
        ));
    }
    let labels: Vec<i64> = lab.into_iter().map(i64::from).collect();
    if let Some(&bad) = labels.iter().find(|&&l| l as usize >= classes.len()) {
        return Err(ImageError::format(
            labels_file,
            format!("label {bad} is not one of the {} classes", classes.len()),
        ));
    }
    ImageSet::new(dims[2], dims[1], 1, pixels, labels, classes)
}

/// The Fashion-MNIST class names.
pub fn fashion_mnist_classes() -> Vec<String> {
    [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Fashion-MNIST (or MNIST, same file names) from `dir`: `train-*` or `t10k-*`, `.gz` or not.
pub fn load_fashion_mnist(dir: &Path, train: bool) -> Result<ImageSet> {
    let prefix = if train { "train" } else { "t10k" };
    let find = |kind: &str| {
        let base = dir.join(format!("{prefix}-{kind}"));
        let gz = dir.join(format!("{prefix}-{kind}.gz"));
        if gz.exists() { gz } else { base }
    };
    load_idx(
        &find("images-idx3-ubyte"),
        &find("labels-idx1-ubyte"),
        fashion_mnist_classes(),
    )
}
