//! Which images an image-completion run sees: seeded random draws of training, validation and
//! test images (loaders order images by class, so subsets are random draws with every class
//! represented, not prefixes), gathered into one set, with the training part's pixel
//! statistics.

use basin_graph::Split;
use basin_image::{ImageSet, MaskStrategy, Normalize};
use basin_train::protocol::ImageProtocol;
use basin_train::record::split_hash;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::ImageCompletionConfig;

/// The drawn images: one set holding the training, validation and test parts, in that order.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// Training images, then validation, then test.
    pub data: ImageSet,
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

/// Draws the parts of `p` from the two splits of a dataset.
pub fn draw(train_all: &ImageSet, test_all: &ImageSet, p: &ImageProtocol) -> Drawn {
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
    let mut data = train_all.subset(&train_part);
    let tests = test_all.subset(&test_part);
    data.pixels.extend_from_slice(&tests.pixels);
    data.labels.extend_from_slice(&tests.labels);
    let train: Vec<usize> = (0..n_train).collect();
    let normalize = Normalize::of(&data.subset(&train));
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
    Drawn {
        data,
        split,
        normalize,
        identity,
    }
}

/// The masking of a model: ET's mix scaled to its patch count.
pub fn mask_of(cfg: &ImageCompletionConfig) -> MaskStrategy {
    MaskStrategy::et_mix(cfg.tokens() as usize)
}
