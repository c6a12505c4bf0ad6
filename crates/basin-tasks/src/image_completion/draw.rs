//! Which images an image-completion run sees: seeded random draws of training, validation and
//! test images (loaders order images by class, so subsets are random draws with every class
//! represented, not prefixes), joined into one view without copying pixels, with the training
//! part's pixel statistics.

use std::sync::Arc;

use basin_graph::Split;
use basin_image::{Images, MaskStrategy, Normalize, Parts};
use basin_train::protocol::ImageProtocol;
use basin_train::record::split_hash;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::ImageCompletionConfig;
use crate::Result;

/// Training images whose statistics normalise a streamed set (every training image of an
/// in-memory one): decoding a whole ImageNet split for two numbers per channel would cost an
/// epoch.
pub const STREAMED_STATS_IMAGES: usize = 2_000;

/// The drawn images: one view of the training, validation and test parts, in that order.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// Training images, then validation, then test.
    pub data: Arc<dyn Images>,
    /// The items of each part.
    pub split: Split,
    /// Pixel statistics of the training part only.
    pub normalize: Normalize,
    /// What identifies the draw: hashes of which source images were drawn and the pixel
    /// statistics, so that a checkpoint of another draw never resumes.
    pub identity: serde_json::Value,
}

impl Drawn {
    /// Training items.
    pub fn train(&self) -> Vec<usize> {
        self.split.train.iter().map(|&i| i as usize).collect()
    }

    /// Test items.
    pub fn test(&self) -> Vec<usize> {
        self.split.test.iter().map(|&i| i as usize).collect()
    }
}

/// Draws the parts of `p` from the two splits of a dataset (in memory or streamed).
pub fn draw(
    train_all: &Arc<dyn Images>,
    test_all: &Arc<dyn Images>,
    p: &ImageProtocol,
) -> Result<Drawn> {
    let n_train = p
        .train_images
        .min(train_all.len().saturating_sub(p.val_images));
    let n_val = p.val_images.min(train_all.len() - n_train);
    let n_test = p.test_images.min(test_all.len());
    let pick = |n_all: usize, k: usize, salt: u64| {
        let mut idx: Vec<usize> = (0..n_all).collect();
        idx.shuffle(&mut ChaCha8Rng::seed_from_u64(p.seed ^ salt));
        idx.truncate(k);
        idx
    };
    let train_part = pick(train_all.len(), n_train + n_val, 0x7121);
    let test_part = pick(test_all.len(), n_test, 0x7e57);
    let data: Arc<dyn Images> = Arc::new(Parts::new(vec![
        (train_all.clone(), train_part.clone()),
        (test_all.clone(), test_part.clone()),
    ])?);
    let stats = if data.streamed() {
        n_train.min(STREAMED_STATS_IMAGES)
    } else {
        n_train
    };
    let normalize = Normalize::of_items(data.as_ref(), &(0..stats).collect::<Vec<_>>())?;
    let (a, b, c) = (n_train as u32, n_val as u32, n_test as u32);
    let split = Split::new(
        (0..a).collect(),
        (a..a + b).collect(),
        (a + b..a + b + c).collect(),
    );
    let identity = serde_json::json!({
        "normalize": normalize,
        "drawn": {
            "train_and_val": split_hash(&train_part),
            "test": split_hash(&test_part),
        },
    });
    Ok(Drawn {
        data,
        split,
        normalize,
        identity,
    })
}

/// The masking of a model: ET's mix scaled to its patch count.
pub fn mask_of(cfg: &ImageCompletionConfig) -> MaskStrategy {
    MaskStrategy::et_mix(cfg.tokens() as usize)
}
