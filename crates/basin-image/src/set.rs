//! An in-memory image dataset: 8-bit pixels, channel-last, one label per image.

use crate::error::{ImageError, Result};

/// `len` images of `height × width × channels` bytes (HWC, row-major), with class labels.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageSet {
    /// Image width in pixels.
    pub width: usize,
    /// Image height in pixels.
    pub height: usize,
    /// 1 (grey) or 3 (RGB).
    pub channels: usize,
    /// All pixels, image after image.
    pub pixels: Vec<u8>,
    /// Class index of each image.
    pub labels: Vec<i64>,
    /// Class names, indexed by label.
    pub classes: Vec<String>,
}

impl ImageSet {
    /// Checks that the pixel buffer and the labels agree with the dimensions.
    pub fn new(
        width: usize,
        height: usize,
        channels: usize,
        pixels: Vec<u8>,
        labels: Vec<i64>,
        classes: Vec<String>,
    ) -> Result<Self> {
        let per = width * height * channels;
        if per == 0 || pixels.len() != per * labels.len() {
            return Err(ImageError::invalid(
                "image set",
                format!(
                    "{} bytes for {} images of {width}×{height}×{channels}",
                    pixels.len(),
                    labels.len()
                ),
            ));
        }
        Ok(Self {
            width,
            height,
            channels,
            pixels,
            labels,
            classes,
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Bytes per image.
    pub fn image_len(&self) -> usize {
        self.width * self.height * self.channels
    }

    /// The bytes of image `i` (HWC).
    pub fn image(&self, i: usize) -> &[u8] {
        let n = self.image_len();
        &self.pixels[i * n..(i + 1) * n]
    }

    /// Image `i` as floats in `[0, 1]` (HWC).
    pub fn image_f32(&self, i: usize) -> Vec<f32> {
        self.image(i)
            .iter()
            .map(|&b| f32::from(b) / 255.0)
            .collect()
    }

    /// The images at `indices`, in that order.
    pub fn subset(&self, indices: &[usize]) -> Self {
        let mut pixels = Vec::with_capacity(indices.len() * self.image_len());
        for &i in indices {
            pixels.extend_from_slice(self.image(i));
        }
        Self {
            width: self.width,
            height: self.height,
            channels: self.channels,
            pixels,
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            classes: self.classes.clone(),
        }
    }

    /// Per-channel mean and standard deviation of the pixels in `[0, 1]` (for normalisation).
    pub fn channel_stats(&self) -> (Vec<f64>, Vec<f64>) {
        let c = self.channels;
        let mut sum = vec![0f64; c];
        let mut sq = vec![0f64; c];
        for (k, &b) in self.pixels.iter().enumerate() {
            let v = f64::from(b) / 255.0;
            sum[k % c] += v;
            sq[k % c] += v * v;
        }
        mean_std(&sum, &sq, (self.pixels.len() / c) as f64)
    }
}

/// Per-channel mean and standard deviation from the sums of values and of their squares over
/// `n` pixels.
pub(crate) fn mean_std(sum: &[f64], sq: &[f64], n: f64) -> (Vec<f64>, Vec<f64>) {
    let n = n.max(1.0);
    let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
    let std = sq
        .iter()
        .zip(&mean)
        .map(|(q, m)| (q / n - m * m).max(0.0).sqrt())
        .collect();
    (mean, std)
}
