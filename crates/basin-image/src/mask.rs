//! Which patches are hidden and which are scored (ET Section 3, Appendix B).
//!
//! A masked patch is replaced by the MASK token and scored by the loss; the paper's mix also
//! scores some patches that stay visible (90 masked + 10 visible of 100 scored on ImageNet),
//! which it finds important for the Hopfield memory to learn real patch representations.

use rand::RngExt;
use rand::seq::index;
use serde::{Deserialize, Serialize};

use crate::error::{ImageError, Result};

/// Masked and scored flags of each patch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaskPlan {
    /// Replaced by the MASK token.
    pub masked: Vec<bool>,
    /// Counted by the loss (every masked patch, plus visible-but-scored ones).
    pub scored: Vec<bool>,
}

/// How patches are chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum MaskStrategy {
    /// `k` random patches masked (and scored).
    Random {
        /// Number masked.
        k: usize,
    },
    /// `masked` random patches masked and `visible` other random patches left visible but
    /// scored (the paper's 90/10).
    Mixed {
        /// Number masked.
        masked: usize,
        /// Number visible but scored.
        visible: usize,
    },
    /// One random block of `h × w` patches masked.
    Block {
        /// Block height in patches.
        h: usize,
        /// Block width in patches.
        w: usize,
    },
}

impl MaskStrategy {
    /// The paper's ImageNet mix scaled to `n` patches: ⌈100·n/196⌉ scored patches (100 of 196
    /// on ImageNet), a tenth of them visible and the rest masked (90/10).
    pub fn et_mix(n: usize) -> Self {
        let scored = (n * 100).div_ceil(196);
        let visible = scored / 10;
        Self::Mixed {
            masked: scored - visible,
            visible,
        }
    }

    /// Checks that the strategy fits a `rows × cols` grid.
    pub fn validate(&self, rows: usize, cols: usize) -> Result<()> {
        let n = rows * cols;
        let ok = match *self {
            Self::Random { k } => k <= n,
            Self::Mixed { masked, visible } => masked + visible <= n,
            Self::Block { h, w } => h >= 1 && w >= 1 && h <= rows && w <= cols,
        };
        if ok {
            Ok(())
        } else {
            Err(ImageError::invalid(
                "mask",
                format!("{self:?} does not fit a {rows}×{cols} grid of patches"),
            ))
        }
    }

    /// Draws a plan for a `rows × cols` grid (call [`MaskStrategy::validate`] first).
    pub fn sample<R: rand::Rng + ?Sized>(&self, rows: usize, cols: usize, rng: &mut R) -> MaskPlan {
        let n = rows * cols;
        let mut masked = vec![false; n];
        let mut scored = vec![false; n];
        match *self {
            Self::Random { k } => {
                for i in index::sample(rng, n, k.min(n)) {
                    masked[i] = true;
                    scored[i] = true;
                }
            }
            Self::Mixed { masked: m, visible } => {
                let chosen = index::sample(rng, n, (m + visible).min(n)).into_vec();
                for (j, i) in chosen.into_iter().enumerate() {
                    scored[i] = true;
                    masked[i] = j < m;
                }
            }
            Self::Block { h, w } => {
                let (h, w) = (h.min(rows), w.min(cols));
                let top = rng.random_range(0..=rows - h);
                let left = rng.random_range(0..=cols - w);
                for y in top..top + h {
                    for x in left..left + w {
                        masked[y * cols + x] = true;
                        scored[y * cols + x] = true;
                    }
                }
            }
        }
        MaskPlan { masked, scored }
    }
}
