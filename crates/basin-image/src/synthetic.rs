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
