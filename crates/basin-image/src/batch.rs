//! From [`Images`] to model-ready patch batches: bring to the set's shape, augment, normalise,
//! patchify, mask — in parallel over images, each image with its own RNG derived from the batch
//! seed, so a batch is the same whatever the number of threads.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::images::Images;
use crate::mask::MaskStrategy;
use crate::patch::Grid;
use crate::transform::{Augment, Normalize};

/// A batch of patchified images.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchBatch {
    /// Images in the batch B.
    pub batch: usize,
    /// Patches per image N.
    pub tokens: usize,
    /// Values per patch P.
    pub patch_len: usize,
    /// `B·N·P` normalised patch values.
    pub patches: Vec<f32>,
    /// `B·N` masked flags.
    pub masked: Vec<bool>,
    /// `B·N` scored flags.
    pub scored: Vec<bool>,
    /// Class labels.
    pub labels: Vec<i64>,
}

/// The preparation of one batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    /// Patch side.
    pub patch: usize,
    /// Augmentations (training only).
    pub augment: Augment,
    /// Normalisation.
    pub normalize: Normalize,
    /// Masking.
    pub mask: MaskStrategy,
}

fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed ^ i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Pipeline {
    /// The patch grid of `set`'s images.
    pub fn grid(&self, set: &dyn Images) -> Result<Grid> {
        let (h, w, c) = set.shape();
        Grid::new(h, w, c, self.patch)
    }

    /// The batch of images `indices`, deterministic in `seed`; each image is decoded (where the
    /// source streams), brought to the set's shape and augmented in parallel.
    pub fn batch(&self, set: &dyn Images, indices: &[usize], seed: u64) -> Result<PatchBatch> {
        let grid = self.grid(set)?;
        let (h, w, c) = set.shape();
        self.augment.validate()?;
        self.mask.validate(grid.rows(), grid.cols())?;
        let per: Vec<(Vec<f32>, Vec<bool>, Vec<bool>)> = indices
            .par_iter()
            .enumerate()
            .map(|(pos, &i)| {
                let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, pos as u64));
                let mut img = self.augment.apply_to(set.read(i)?, h, w, &mut rng);
                self.normalize.apply(&mut img.data);
                let plan = self.mask.sample(grid.rows(), grid.cols(), &mut rng);
                Ok((grid.patchify(&img.data), plan.masked, plan.scored))
            })
            .collect::<Result<_>>()?;
        let mut batch = PatchBatch {
            batch: indices.len(),
            tokens: grid.tokens(),
            patch_len: grid.patch_len(),
            patches: Vec::with_capacity(indices.len() * h * w * c),
            masked: Vec::with_capacity(indices.len() * grid.tokens()),
            scored: Vec::with_capacity(indices.len() * grid.tokens()),
            labels: indices.iter().map(|&i| set.label(i)).collect(),
        };
        for (p, m, s) in per {
            batch.patches.extend(p);
            batch.masked.extend(m);
            batch.scored.extend(s);
        }
        Ok(batch)
    }
}
