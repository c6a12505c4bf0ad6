//! A folder of JPEG/PNG files of any sizes in class sub-folders (ImageNet-1k's
//! `train/<class>/*.JPEG`), read as batches need them: opening lists the files and reads each
//! one's header in parallel (so that a broken file is known before training starts); a batch
//! decodes only its own files, and the pipeline crops and resizes each to the folder's shape.
//! A file whose header cannot be read is an error naming it, or — with [`OnCorrupt::Skip`] —
//! left out and counted ([`ImageFolder::skipped`]).

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{ImageError, Result};
use crate::images::Images;
use crate::transform::FloatImage;

/// What to do with a file that cannot be read as an image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnCorrupt {
    /// Refuse the folder, naming the file.
    #[default]
    Error,
    /// Leave the file out and count it.
    Skip,
}

/// A streamed image folder.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    files: Vec<PathBuf>,
    labels: Vec<i64>,
    classes: Vec<String>,
    shape: (usize, usize, usize),
    skipped: Vec<(PathBuf, String)>,
}

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "jpg" | "jpeg" | "png"))
}

/// The dimensions in `path`'s header, or why they cannot be read.
fn header(path: &Path) -> std::result::Result<(u32, u32), String> {
    image::ImageReader::open(path)
        .map_err(|e| e.to_string())?
        .with_guessed_format()
        .map_err(|e| e.to_string())?
        .into_dimensions()
        .map_err(|e| e.to_string())
}

impl ImageFolder {
    /// The images under `dir/<class>/` (classes sorted by name give the labels; files sorted
    /// by name within a class), brought to `side × side` (`grey`: one channel, else RGB).
    pub fn open(dir: &Path, side: usize, grey: bool, on_corrupt: OnCorrupt) -> Result<Self> {
        if side == 0 {
            return Err(ImageError::invalid("image folder", "a side of 0 pixels"));
        }
        let mut classes = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| ImageError::io(dir, e))? {
            let entry = entry.map_err(|e| ImageError::io(dir, e))?;
            if entry.path().is_dir() {
                classes.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        classes.sort();
        let mut listed = Vec::new();
        for (label, class) in classes.iter().enumerate() {
            let sub = dir.join(class);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&sub)
                .map_err(|e| ImageError::io(&sub, e))?
                .map(|f| f.map(|f| f.path()).map_err(|e| ImageError::io(&sub, e)))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .filter(|p| p.is_file() && is_image(p))
                .collect();
            files.sort();
            listed.extend(files.into_iter().map(|f| (f, label as i64)));
        }
        if listed.is_empty() {
            return Err(ImageError::format(
                dir,
                "no .jpg/.jpeg/.png files under class sub-folders",
            ));
        }
        let checked: Vec<std::result::Result<(), String>> = listed
            .par_iter()
            .map(|(f, _)| header(f).map(|_| ()))
            .collect();
        let (mut files, mut labels, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
        for ((path, label), check) in listed.into_iter().zip(checked) {
            match (check, on_corrupt) {
                (Ok(()), _) => {
                    files.push(path);
                    labels.push(label);
                }
                (Err(why), OnCorrupt::Skip) => skipped.push((path, why)),
                (Err(why), OnCorrupt::Error) => {
                    return Err(ImageError::format(
                        &path,
                        format!(
                            "cannot read the image ({why}); `on_corrupt = \"skip\"` leaves such files out"
                        ),
                    ));
                }
            }
        }
        if files.is_empty() {
            return Err(ImageError::format(dir, "no readable image"));
        }
        Ok(Self {
            files,
            labels,
            classes,
            shape: (side, side, if grey { 1 } else { 3 }),
            skipped,
        })
    }

    /// The class names, indexed by label.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// The files left out, each with why.
    pub fn skipped(&self) -> &[(PathBuf, String)] {
        &self.skipped
    }
}

impl Images for ImageFolder {
    fn len(&self) -> usize {
        self.files.len()
    }
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }
    fn label(&self, i: usize) -> i64 {
        self.labels.get(i).copied().unwrap_or(-1)
    }
    fn streamed(&self) -> bool {
        true
    }
    fn read(&self, i: usize) -> Result<FloatImage> {
        let path = self.files.get(i).ok_or_else(|| {
            ImageError::invalid("image folder", format!("image {i} of {}", self.files.len()))
        })?;
        let bytes = std::fs::read(path).map_err(|e| ImageError::io(path, e))?;
        let img = image::load_from_memory(&bytes)
            .map_err(|e| ImageError::format(path, format!("cannot decode the image: {e}")))?;
        let (w, h) = (img.width() as usize, img.height() as usize);
        let data: Vec<f32> = if self.shape.2 == 1 {
            img.to_luma8()
                .into_raw()
                .iter()
                .map(|&v| f32::from(v) / 255.0)
                .collect()
        } else {
            img.to_rgb8()
                .into_raw()
                .iter()
                .map(|&v| f32::from(v) / 255.0)
                .collect()
        };
        Ok(FloatImage {
            w,
            h,
            c: self.shape.2,
            data,
        })
    }
}
