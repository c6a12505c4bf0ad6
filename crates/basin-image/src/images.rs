//! What a batch is made from: [`Images`], the one contract of an in-memory [`ImageSet`] and a
//! streamed [`crate::stream::ImageFolder`], and [`Parts`], a view that joins drawn items of
//! several of them (a run's training, validation and test images) without copying pixels.

use std::sync::Arc;

use crate::error::{ImageError, Result};
use crate::set::ImageSet;
use crate::transform::FloatImage;

/// Images with class labels, read one at a time. Every batch image is brought to
/// [`Images::shape`] (a stored image of another size is cropped and resized by the pipeline).
pub trait Images: Send + Sync + std::fmt::Debug {
    /// Number of images.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `(height, width, channels)` of the batches made from these images.
    fn shape(&self) -> (usize, usize, usize);
    /// The class of image `i`.
    fn label(&self, i: usize) -> i64;
    /// Image `i` in `[0, 1]`, channel-last, at its stored size.
    fn read(&self, i: usize) -> Result<FloatImage>;
    /// Whether images are decoded from files as they are read (a batch then costs I/O and
    /// decoding); `false` for images held in memory.
    fn streamed(&self) -> bool {
        false
    }
    /// Per-channel mean and standard deviation in `[0, 1]` over the images `items`, each
    /// brought to [`Images::shape`] by a centre crop.
    fn channel_stats(&self, items: &[usize]) -> Result<(Vec<f64>, Vec<f64>)> {
        centre_stats(self, items)
    }
}

/// [`Images::channel_stats`] image by image, each centre-cropped to the shape.
fn centre_stats<I: Images + ?Sized>(images: &I, items: &[usize]) -> Result<(Vec<f64>, Vec<f64>)> {
    let (h, w, c) = images.shape();
    let (mut sum, mut sq, mut n) = (vec![0f64; c], vec![0f64; c], 0f64);
    for &i in items {
        let img = crate::transform::centre_crop(&images.read(i)?, h, w);
        for px in img.data.chunks(c) {
            for (k, &v) in px.iter().enumerate() {
                sum[k] += f64::from(v);
                sq[k] += f64::from(v) * f64::from(v);
            }
        }
        n += (h * w) as f64;
    }
    Ok(crate::set::mean_std(&sum, &sq, n))
}

impl Images for ImageSet {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn shape(&self) -> (usize, usize, usize) {
        (self.height, self.width, self.channels)
    }
    fn label(&self, i: usize) -> i64 {
        self.labels[i]
    }
    fn read(&self, i: usize) -> Result<FloatImage> {
        if i >= self.len() {
            return Err(ImageError::invalid(
                "image set",
                format!("image {i} of {}", self.len()),
            ));
        }
        Ok(FloatImage {
            w: self.width,
            h: self.height,
            c: self.channels,
            data: self.image_f32(i),
        })
    }
    fn channel_stats(&self, items: &[usize]) -> Result<(Vec<f64>, Vec<f64>)> {
        Ok(self.subset(items).channel_stats())
    }
}

/// Items drawn from several image sources of one shape, joined in order: item `k` is the
/// `k`-th of all the parts' items.
#[derive(Debug, Clone)]
pub struct Parts {
    parts: Vec<(Arc<dyn Images>, Vec<usize>)>,
    shape: (usize, usize, usize),
    len: usize,
}

impl Parts {
    /// `parts[j].1` drawn from `parts[j].0`, in order; all sources must share one shape.
    pub fn new(parts: Vec<(Arc<dyn Images>, Vec<usize>)>) -> Result<Self> {
        let shape = parts.first().map_or((0, 0, 0), |(s, _)| s.shape());
        for (s, items) in &parts {
            if s.shape() != shape {
                return Err(ImageError::invalid(
                    "image parts",
                    format!("shapes {:?} and {shape:?} differ", s.shape()),
                ));
            }
            if let Some(&bad) = items.iter().find(|&&i| i >= s.len()) {
                return Err(ImageError::invalid(
                    "image parts",
                    format!("item {bad} of a source of {} images", s.len()),
                ));
            }
        }
        let len = parts.iter().map(|p| p.1.len()).sum();
        Ok(Self { parts, shape, len })
    }

    /// The part and the index within its source of item `k`.
    fn locate(&self, mut k: usize) -> Result<(usize, usize)> {
        for (p, (_, items)) in self.parts.iter().enumerate() {
            if k < items.len() {
                return Ok((p, items[k]));
            }
            k -= items.len();
        }
        Err(ImageError::invalid(
            "image parts",
            format!("item {} of {}", k + self.len, self.len),
        ))
    }
}

impl Images for Parts {
    fn len(&self) -> usize {
        self.len
    }
    fn shape(&self) -> (usize, usize, usize) {
        self.shape
    }
    fn label(&self, i: usize) -> i64 {
        self.locate(i).map_or(-1, |(p, j)| self.parts[p].0.label(j))
    }
    fn streamed(&self) -> bool {
        self.parts.iter().any(|(s, _)| s.streamed())
    }
    fn read(&self, i: usize) -> Result<FloatImage> {
        let (p, j) = self.locate(i)?;
        self.parts[p].0.read(j)
    }
    /// The source's own statistics where every item comes from one source (for an in-memory
    /// set, exactly its pixel statistics).
    fn channel_stats(&self, items: &[usize]) -> Result<(Vec<f64>, Vec<f64>)> {
        let located: Vec<(usize, usize)> = items
            .iter()
            .map(|&i| self.locate(i))
            .collect::<Result<_>>()?;
        match located.first() {
            Some(&(p, _)) if located.iter().all(|&(q, _)| q == p) => {
                let inner: Vec<usize> = located.iter().map(|&(_, j)| j).collect();
                self.parts[p].0.channel_stats(&inner)
            }
            _ => centre_stats(self, items),
        }
    }
}
