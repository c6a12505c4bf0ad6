//! A toy image set that needs no download: 16×16 grey stripes and checkerboards, for the demo
//! and for tests of image models.

use crate::error::Result;
use crate::set::ImageSet;

/// `n` grey 16×16 images, deterministic in `seed`: horizontal stripes, vertical stripes or a
/// checkerboard (label 0, 1, 2), with widths 1–3 and random phases, in two grey levels.
pub fn stripes(n: usize, seed: u64) -> Result<ImageSet> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |m: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % m
    };
    let mut pixels = Vec::with_capacity(n * 256);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let (family, width, py, px) = (next(3), next(3) + 1, next(6), next(6));
        for y in 0..16u64 {
            for x in 0..16u64 {
                let v = match family {
                    0 => (y + py) / width,
                    1 => (x + px) / width,
                    _ => (x + px) / width + (y + py) / width,
                };
                pixels.push(if v % 2 == 0 { 30u8 } else { 220 });
            }
        }
        labels.push(family as i64);
    }
    ImageSet::new(
        16,
        16,
        1,
        pixels,
        labels,
        vec!["horizontal".into(), "vertical".into(), "checker".into()],
    )
}

/// Writes `per_class` RGB images of each of the three [`stripes`] families into
/// `dir/<family>/`, of mixed sizes (16–47 pixels a side, wide and tall) and formats (PNG and
/// JPEG, alternately): an image folder in ImageNet-1k's layout for tests of the streamed path.
/// Returns the files written.
pub fn write_folder(
    dir: &std::path::Path,
    per_class: usize,
    seed: u64,
) -> Result<Vec<std::path::PathBuf>> {
    let names = ["horizontal", "vertical", "checker"];
    let mut written = Vec::new();
    for (family, name) in names.iter().enumerate() {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).map_err(|e| crate::ImageError::io(&sub, e))?;
        for k in 0..per_class {
            let salt = seed.wrapping_add((family * 1000 + k) as u64);
            let (w, h) = (16 + (salt * 7 % 32) as u32, 16 + (salt * 13 % 32) as u32);
            let width = 1 + (salt % 3) as u32 + w / 16;
            let img = image::RgbImage::from_fn(w, h, |x, y| {
                let v = match family {
                    0 => y / width,
                    1 => x / width,
                    _ => x / width + y / width,
                };
                let g = if v % 2 == 0 { 30 } else { 220 };
                image::Rgb([g, g / 2 + 40, 255 - g])
            });
            let path = sub.join(format!("{k:03}.{}", if k % 2 == 0 { "png" } else { "jpg" }));
            img.save(&path)
                .map_err(|e| crate::ImageError::format(&path, e.to_string()))?;
            written.push(path);
        }
    }
    Ok(written)
}
