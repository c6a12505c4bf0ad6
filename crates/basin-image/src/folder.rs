//! Image files with class sub-folders — `root/<split>/<class>/<name>.jpg|png` — read from a
//! directory or straight from a tar archive (CIFAR-10 as JPEG). Decoding runs in parallel;
//! images are ordered by class, then by file name, so a load is deterministic.

use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{ImageError, Result};
use crate::set::ImageSet;

/// One undecoded file: its class name, its path (for errors) and its bytes.
struct Encoded {
    class: String,
    path: PathBuf,
    bytes: Vec<u8>,
}

fn is_image(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".jpg", ".jpeg", ".png"].iter().any(|e| lower.ends_with(e))
}

/// Decodes every file (in parallel) into one [`ImageSet`]; all images must share a size.
fn decode_all(mut files: Vec<Encoded>, grey: bool) -> Result<ImageSet> {
    if files.is_empty() {
        return Err(ImageError::invalid(
            "image folder",
            "no .jpg/.jpeg/.png files found under class sub-folders",
        ));
    }
    files.sort_by(|a, b| (&a.class, &a.path).cmp(&(&b.class, &b.path)));
    let mut classes: Vec<String> = files.iter().map(|f| f.class.clone()).collect();
    classes.dedup();
    let decoded: Vec<(usize, usize, Vec<u8>)> = files
        .par_iter()
        .map(|f| {
            let img = image::load_from_memory(&f.bytes).map_err(|e| {
                ImageError::format(&f.path, format!("cannot decode the image: {e}"))
            })?;
            let (w, h) = (img.width() as usize, img.height() as usize);
            let px = if grey {
                img.into_luma8().into_raw()
            } else {
                img.into_rgb8().into_raw()
            };
            Ok((w, h, px))
        })
        .collect::<Result<_>>()?;
    let (w, h) = (decoded[0].0, decoded[0].1);
    if let Some(i) = decoded.iter().position(|d| (d.0, d.1) != (w, h)) {
        return Err(ImageError::format(
            &files[i].path,
            format!(
                "{}×{} pixels, the first image is {w}×{h}",
                decoded[i].0, decoded[i].1
            ),
        ));
    }
    let labels = files
        .iter()
        .map(|f| classes.binary_search(&f.class).unwrap_or(0) as i64)
        .collect();
    let pixels = decoded.into_iter().flat_map(|d| d.2).collect();
    ImageSet::new(w, h, if grey { 1 } else { 3 }, pixels, labels, classes)
}

/// Images under `dir/<class>/…` (a generic image folder, e.g. an ImageNet-style split).
pub fn load_folder(dir: &Path, grey: bool) -> Result<ImageSet> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| ImageError::io(dir, e))?;
    for class in entries {
        let class = class.map_err(|e| ImageError::io(dir, e))?;
        if !class.path().is_dir() {
            continue;
        }
        let name = class.file_name().to_string_lossy().into_owned();
        for f in std::fs::read_dir(class.path()).map_err(|e| ImageError::io(class.path(), e))? {
            let f = f.map_err(|e| ImageError::io(class.path(), e))?;
            let path = f.path();
            if path.is_file() && is_image(&f.file_name().to_string_lossy()) {
                let bytes = std::fs::read(&path).map_err(|e| ImageError::io(&path, e))?;
                files.push(Encoded {
                    class: name.clone(),
                    path,
                    bytes,
                });
            }
        }
    }
    decode_all(files, grey)
}

/// A complete tar archive is whole 512-byte blocks ending in two zero blocks; a truncated one
/// would otherwise just look shorter (the reader stops at the cut without an error).
fn check_tar_end(archive: &Path) -> Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::File::open(archive).map_err(|e| ImageError::io(archive, e))?;
    let len = f.metadata().map_err(|e| ImageError::io(archive, e))?.len();
    let mut tail = [0u8; 1024];
    let whole = len >= 1024 && len.is_multiple_of(512);
    if whole {
        f.seek(SeekFrom::End(-1024))
            .map_err(|e| ImageError::io(archive, e))?;
        f.read_exact(&mut tail)
            .map_err(|e| ImageError::io(archive, e))?;
    }
    if !whole || tail.iter().any(|&b| b != 0) {
        return Err(ImageError::format(
            archive,
            "truncated tar archive: it does not end with the two zero blocks of a complete archive",
        ));
    }
    Ok(())
}

/// Images under `<split>/<class>/…` inside a tar archive (e.g. `train` or `test` of
/// `CIFAR-10-images_jpg.tar`).
pub fn load_tar(archive: &Path, split: &str, grey: bool) -> Result<ImageSet> {
    check_tar_end(archive)?;
    let file = std::fs::File::open(archive).map_err(|e| ImageError::io(archive, e))?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    let mut files = Vec::new();
    let entries = tar
        .entries()
        .map_err(|e| ImageError::format(archive, format!("not a tar archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| {
            ImageError::format(archive, format!("corrupt or truncated tar archive: {e}"))
        })?;
        let path = entry
            .path()
            .map_err(|e| ImageError::format(archive, format!("bad entry name: {e}")))?
            .into_owned();
        let parts: Vec<String> = path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let parts: Vec<&str> = parts
            .iter()
            .map(String::as_str)
            .filter(|p| *p != ".")
            .collect();
        // Accept `split/class/file` possibly under one top-level folder.
        let tail = if parts.len() >= 3 {
            &parts[parts.len() - 3..]
        } else {
            continue;
        };
        if tail[0] != split || !is_image(tail[2]) || !entry.header().entry_type().is_file() {
            continue;
        }
        let mut bytes = Vec::with_capacity(entry.size() as usize);
        let shown = archive.join(&path);
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| ImageError::format(&shown, format!("truncated entry: {e}")))?;
        files.push(Encoded {
            class: tail[1].to_owned(),
            path: shown,
            bytes,
        });
    }
    if files.is_empty() {
        return Err(ImageError::format(
            archive,
            format!("no images under `{split}/<class>/` in the archive"),
        ));
    }
    decode_all(files, grey)
}
