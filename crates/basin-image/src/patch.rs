//! Patchify and unpatchify: an `h × w × c` image (channel-last) ⇄ `N = (h/p)(w/p)` patches of
//! `c·p·p` values, patches in row-major order over the grid, each flattened channel-first
//! (`c, py, px`), as ET's encoder takes them. The round trip is exact.

use crate::error::{ImageError, Result};

/// Geometry of a patch grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// Image height.
    pub h: usize,
    /// Image width.
    pub w: usize,
    /// Channels.
    pub c: usize,
    /// Patch side.
    pub p: usize,
}

impl Grid {
    /// A grid, if `p` divides both sides.
    pub fn new(h: usize, w: usize, c: usize, p: usize) -> Result<Self> {
        if p == 0 || !h.is_multiple_of(p) || !w.is_multiple_of(p) || c == 0 {
            return Err(ImageError::invalid(
                "patch",
                format!("a patch side that divides {h}×{w}, got {p}"),
            ));
        }
        Ok(Self { h, w, c, p })
    }
    /// Patches per column.
    pub fn rows(&self) -> usize {
        self.h / self.p
    }
    /// Patches per row.
    pub fn cols(&self) -> usize {
        self.w / self.p
    }
    /// Number of patches N.
    pub fn tokens(&self) -> usize {
        self.rows() * self.cols()
    }
    /// Values per patch (c·p·p).
    pub fn patch_len(&self) -> usize {
        self.c * self.p * self.p
    }

    /// `h·w·c` pixels → `N·c·p·p` patch values.
    pub fn patchify(&self, img: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; img.len()];
        self.walk(|src, dst| out[dst] = img[src]);
        out
    }

    /// The inverse of [`Grid::patchify`].
    pub fn unpatchify(&self, patches: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; patches.len()];
        self.walk(|src, dst| out[src] = patches[dst]);
        out
    }

    /// Calls `f(pixel index, patch index)` for every value.
    fn walk(&self, mut f: impl FnMut(usize, usize)) {
        let (p, c) = (self.p, self.c);
        let mut dst = 0;
        for gy in 0..self.rows() {
            for gx in 0..self.cols() {
                for k in 0..c {
                    for py in 0..p {
                        for px in 0..p {
                            let (y, x) = (gy * p + py, gx * p + px);
                            f((y * self.w + x) * c + k, dst);
                            dst += 1;
                        }
                    }
                }
            }
        }
    }
}
