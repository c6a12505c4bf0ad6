//! Per-channel normalisation and the seeded augmentations of ET Table 4 (timm's
//! `hflip = 0.5`, `color_jitter = 0.4`, `scale = (0.08, 1)`, `ratio = (3/4, 4/3)`), on float
//! images in `[0, 1]`, channel-last.

use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::error::{ImageError, Result};

/// An image being transformed: `h × w × c` floats, channel-last.
#[derive(Clone, Debug, PartialEq)]
pub struct FloatImage {
    /// Width.
    pub w: usize,
    /// Height.
    pub h: usize,
    /// Channels.
    pub c: usize,
    /// Pixels, HWC.
    pub data: Vec<f32>,
}

impl FloatImage {
    fn at(&self, y: usize, x: usize, k: usize) -> f32 {
        self.data[(y * self.w + x) * self.c + k]
    }

    /// Bilinear resampling of the window `(top, left, height, width)` to `out_h × out_w`
    /// (pixel centres aligned, as torchvision's `resize` with `antialias=False`).
    pub fn resize_window(
        &self,
        top: f64,
        left: f64,
        height: f64,
        width: f64,
        out_h: usize,
        out_w: usize,
    ) -> Self {
        let mut data = Vec::with_capacity(out_h * out_w * self.c);
        let (sy, sx) = (height / out_h as f64, width / out_w as f64);
        for oy in 0..out_h {
            let fy = (top + (oy as f64 + 0.5) * sy - 0.5).clamp(0.0, (self.h - 1) as f64);
            let (y0, ty) = (fy.floor() as usize, fy - fy.floor());
            let y1 = (y0 + 1).min(self.h - 1);
            for ox in 0..out_w {
                let fx = (left + (ox as f64 + 0.5) * sx - 0.5).clamp(0.0, (self.w - 1) as f64);
                let (x0, tx) = (fx.floor() as usize, fx - fx.floor());
                let x1 = (x0 + 1).min(self.w - 1);
                for k in 0..self.c {
                    let top_row = f64::from(self.at(y0, x0, k)) * (1.0 - tx)
                        + f64::from(self.at(y0, x1, k)) * tx;
                    let bottom = f64::from(self.at(y1, x0, k)) * (1.0 - tx)
                        + f64::from(self.at(y1, x1, k)) * tx;
                    data.push((top_row * (1.0 - ty) + bottom * ty) as f32);
                }
            }
        }
        Self {
            w: out_w,
            h: out_h,
            c: self.c,
            data,
        }
    }

    /// Mirror left–right.
    pub fn hflip(&mut self) {
        let (w, c) = (self.w, self.c);
        for row in self.data.chunks_mut(w * c) {
            for x in 0..w / 2 {
                for k in 0..c {
                    row.swap(x * c + k, (w - 1 - x) * c + k);
                }
            }
        }
    }

    fn grey(&self) -> Vec<f32> {
        self.data
            .chunks(self.c)
            .map(|p| {
                if self.c == 3 {
                    0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]
                } else {
                    p[0]
                }
            })
            .collect()
    }
}

/// `RandomResizedCrop` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizedCrop {
    /// Range of the crop's area as a fraction of the image.
    pub scale: (f64, f64),
    /// Range of the crop's aspect ratio (w/h).
    pub ratio: (f64, f64),
}

/// `ColorJitter` strengths (a factor is drawn from `[1 − s, 1 + s]`; hue is left alone).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColorJitter {
    /// Brightness strength.
    pub brightness: f64,
    /// Contrast strength.
    pub contrast: f64,
    /// Saturation strength.
    pub saturation: f64,
}

/// Training augmentations, applied in the order crop → flip → colour jitter.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Augment {
    /// Probability of a horizontal flip.
    pub hflip: f64,
    /// Random resized crop back to the original size.
    pub crop: Option<ResizedCrop>,
    /// Colour jitter.
    pub jitter: Option<ColorJitter>,
}

impl Augment {
    /// ET Table 4: flip 0.5, crop scale (0.08, 1) and ratio (3/4, 4/3), jitter 0.4.
    pub fn et_table4() -> Self {
        Self {
            hflip: 0.5,
            crop: Some(ResizedCrop {
                scale: (0.08, 1.0),
                ratio: (3.0 / 4.0, 4.0 / 3.0),
            }),
            jitter: Some(ColorJitter {
                brightness: 0.4,
                contrast: 0.4,
                saturation: 0.4,
            }),
        }
    }

    /// No augmentation.
    pub fn none() -> Self {
        Self::default()
    }

    /// Checks the ranges.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.hflip) {
            return Err(ImageError::invalid(
                "augment.hflip",
                format!("a probability, got {}", self.hflip),
            ));
        }
        if let Some(c) = self.crop
            && !(0.0 < c.scale.0
                && c.scale.0 <= c.scale.1
                && c.scale.1 <= 1.0
                && 0.0 < c.ratio.0
                && c.ratio.0 <= c.ratio.1)
        {
            return Err(ImageError::invalid(
                "augment.crop",
                format!("need 0 < scale.0 ≤ scale.1 ≤ 1 and 0 < ratio.0 ≤ ratio.1, got {c:?}"),
            ));
        }
        if let Some(j) = self.jitter
            && [j.brightness, j.contrast, j.saturation]
                .iter()
                .any(|s| !(0.0..=1.0).contains(s))
        {
            return Err(ImageError::invalid(
                "augment.jitter",
                format!("strengths in [0, 1], got {j:?}"),
            ));
        }
        Ok(())
    }

    /// Brings `img` to `h × w` and augments it: an image of that size as [`Augment::apply`]
    /// does; one of another size cropped at random and resized (when there is a crop) or
    /// [`centre_crop`]ped, then flipped and jittered.
    pub fn apply_to<R: rand::Rng + ?Sized>(
        &self,
        img: FloatImage,
        h: usize,
        w: usize,
        rng: &mut R,
    ) -> FloatImage {
        if (img.h, img.w) == (h, w) {
            let mut img = img;
            self.apply(&mut img, rng);
            return img;
        }
        let mut img = match self.crop {
            Some(crop) => random_resized_crop_to(&img, crop, rng, h, w),
            None => centre_crop(&img, h, w),
        };
        Self {
            crop: None,
            ..self.clone()
        }
        .apply(&mut img, rng);
        img
    }

    /// Applies the augmentations with randomness from `rng`.
    pub fn apply<R: rand::Rng + ?Sized>(&self, img: &mut FloatImage, rng: &mut R) {
        if let Some(crop) = self.crop {
            *img = random_resized_crop(img, crop, rng);
        }
        if self.hflip > 0.0 && rng.random_bool(self.hflip) {
            img.hflip();
        }
        if let Some(j) = self.jitter {
            color_jitter(img, j, rng);
        }
    }
}

/// torchvision's `RandomResizedCrop`: ten tries at a window of random area and aspect ratio,
/// else the central window of the clamped ratio; resized back to the image size.
fn random_resized_crop<R: rand::Rng + ?Sized>(
    img: &FloatImage,
    p: ResizedCrop,
    rng: &mut R,
) -> FloatImage {
    random_resized_crop_to(img, p, rng, img.h, img.w)
}

/// [`random_resized_crop`] resized to `out_h × out_w` (the training view of an image of another
/// size, as torchvision's transform takes it).
fn random_resized_crop_to<R: rand::Rng + ?Sized>(
    img: &FloatImage,
    p: ResizedCrop,
    rng: &mut R,
    out_h: usize,
    out_w: usize,
) -> FloatImage {
    let (h, w) = (img.h as f64, img.w as f64);
    let area = h * w;
    let (lr0, lr1) = (p.ratio.0.ln(), p.ratio.1.ln());
    for _ in 0..10 {
        let target = area * rng.random_range(p.scale.0..=p.scale.1);
        let aspect = if lr1 > lr0 {
            rng.random_range(lr0..lr1).exp()
        } else {
            p.ratio.0
        };
        let cw = (target * aspect).sqrt().round();
        let ch = (target / aspect).sqrt().round();
        if cw > 0.0 && cw <= w && ch > 0.0 && ch <= h {
            let top = rng.random_range(0..=(h - ch) as usize) as f64;
            let left = rng.random_range(0..=(w - cw) as usize) as f64;
            return img.resize_window(top, left, ch, cw, out_h, out_w);
        }
    }
    let ratio = w / h;
    let (cw, ch) = if ratio < p.ratio.0 {
        (w, (w / p.ratio.0).round())
    } else if ratio > p.ratio.1 {
        ((h * p.ratio.1).round(), h)
    } else {
        (w, h)
    };
    img.resize_window(
        ((h - ch) / 2.0).floor(),
        ((w - cw) / 2.0).floor(),
        ch,
        cw,
        out_h,
        out_w,
    )
}

/// The evaluation view of an image of any size at `h × w`: the image itself at that size, else
/// the standard ImageNet one — resized so that the crop covers 87.5 % (224/256) of its shorter
/// side, cropped at the centre (the window of the target's aspect, resampled bilinearly).
pub fn centre_crop(img: &FloatImage, h: usize, w: usize) -> FloatImage {
    if (img.h, img.w) == (h, w) {
        return img.clone();
    }
    let (ih, iw) = (img.h as f64, img.w as f64);
    let aspect = w as f64 / h as f64;
    // The largest window of the target's aspect, scaled by 0.875.
    let (mut ch, mut cw) = if iw / ih > aspect {
        (ih, ih * aspect)
    } else {
        (iw / aspect, iw)
    };
    ch *= 0.875;
    cw *= 0.875;
    img.resize_window((ih - ch) / 2.0, (iw - cw) / 2.0, ch, cw, h, w)
}

/// torchvision's `ColorJitter` without hue: brightness, contrast and saturation in a random
/// order, each blending with black, the mean grey level or the grey image, clamped to [0, 1].
fn color_jitter<R: rand::Rng + ?Sized>(img: &mut FloatImage, j: ColorJitter, rng: &mut R) {
    let mut order = [0usize, 1, 2];
    for i in (1..3).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    for op in order {
        let (s, blend): (f64, Option<Vec<f32>>) = match op {
            0 => (j.brightness, None),
            1 => {
                let g = img.grey();
                let mean = g.iter().sum::<f32>() / g.len().max(1) as f32;
                (j.contrast, Some(vec![mean; img.data.len() / img.c]))
            }
            _ => (j.saturation, Some(img.grey())),
        };
        if s <= 0.0 || (op == 2 && img.c != 3) {
            continue;
        }
        let f = rng.random_range((1.0 - s).max(0.0)..=1.0 + s) as f32;
        let c = img.c;
        for (i, v) in img.data.iter_mut().enumerate() {
            let other = blend.as_ref().map_or(0.0, |b| b[i / c]);
            *v = (f * *v + (1.0 - f) * other).clamp(0.0, 1.0);
        }
    }
}

/// Per-channel normalisation `(x − mean) / std`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalize {
    /// Mean per channel.
    pub mean: Vec<f32>,
    /// Standard deviation per channel.
    pub std: Vec<f32>,
}

impl Normalize {
    /// Statistics of an image set.
    pub fn of(set: &crate::set::ImageSet) -> Self {
        let (m, s) = set.channel_stats();
        Self::from_stats(&m, &s)
    }

    /// Statistics of the images `items` of any source ([`crate::Images::channel_stats`]).
    pub fn of_items(set: &dyn crate::Images, items: &[usize]) -> Result<Self> {
        let (m, s) = set.channel_stats(items)?;
        Ok(Self::from_stats(&m, &s))
    }

    fn from_stats(m: &[f64], s: &[f64]) -> Self {
        Self {
            mean: m.iter().map(|&v| v as f32).collect(),
            std: s.iter().map(|&v| v.max(1e-6) as f32).collect(),
        }
    }

    /// In place.
    pub fn apply(&self, data: &mut [f32]) {
        let c = self.mean.len();
        for (i, v) in data.iter_mut().enumerate() {
            *v = (*v - self.mean[i % c]) / self.std[i % c];
        }
    }

    /// The inverse, in place.
    pub fn invert(&self, data: &mut [f32]) {
        let c = self.mean.len();
        for (i, v) in data.iter_mut().enumerate() {
            *v = *v * self.std[i % c] + self.mean[i % c];
        }
    }
}
