//! Masked image completion as one protocol, shared by `basin train` (`task =
//! "image-completion"`) and ET Table 14's ablations: seeded draws of training, validation and
//! test images (loaders order images by class, so subsets are random draws with every class
//! represented, not prefixes), ET Table 4's augmentations and warm-up + cosine schedule, the best
//! validation epoch kept (masked-patch MSE under fixed masks), the test draw scored once over
//! several masking seeds, and the pictures (reconstructions, dynamics, energy, memories).

use std::collections::BTreeMap;
use std::path::Path;

use basin_graph::registry::{self, DataKind};
use basin_image::{Augment, ImageSet, MaskStrategy, Normalize};
use basin_tasks::image_completion::{ImageCompletionConfig, ImageLearner, summary};
use basin_train::optim::OptimConfig;
use basin_train::record::{RunRecord, split_hash};
use basin_train::runner::{Runner, TrainConfig, Validation};
use basin_train::schedule::{Schedule, Unit};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::report;
use crate::{ReproError, Result};

/// How much of an image dataset trains, validates and tests, and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageProtocol {
    /// Training images (a seeded random draw from the training split).
    pub train_images: usize,
    /// Validation images (another draw from the training split).
    pub val_images: usize,
    /// Test images (a seeded random draw from the test split).
    pub test_images: usize,
    /// Epochs.
    pub epochs: usize,
    /// Images per batch.
    pub batch: usize,
    /// Masking seeds at test time (ET: 10).
    pub mask_seeds: usize,
    /// Peak learning rate (warm-up over the first tenth, then cosine; ET Table 4's shape).
    pub lr: f64,
    /// Seed of the draws and the model.
    pub seed: u64,
}

impl Default for ImageProtocol {
    /// Minutes on two cores: 2,000 training images, 3 epochs.
    fn default() -> Self {
        Self {
            train_images: 2_000,
            val_images: 250,
            test_images: 500,
            epochs: 3,
            batch: 64,
            mask_seeds: 4,
            lr: 2e-3,
            seed: 0,
        }
    }
}

impl ImageProtocol {
    /// Refuses values that cannot run, naming the field under `field`.
    pub fn validate(&self, field: &str) -> Result<()> {
        let positive = [
            ("train_images", self.train_images),
            ("val_images", self.val_images),
            ("test_images", self.test_images),
            ("epochs", self.epochs),
            ("batch", self.batch),
            ("mask_seeds", self.mask_seeds),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(ReproError::config(
                    format!("{field}.{name}"),
                    "must be at least 1",
                ));
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(ReproError::config(
                format!("{field}.lr"),
                format!("must be a positive number, got {}", self.lr),
            ));
        }
        Ok(())
    }
}

/// Train and test splits of an image dataset: a registered name (`fashion-mnist`, `cifar10`)
/// under `data_dir`, or a path (a folder of IDX files, or a tar of `train/`/`test/` class
/// folders).
pub fn load_images(spec: &str, data_dir: &Path) -> Result<(ImageSet, ImageSet)> {
    let as_path = Path::new(spec);
    let (kind, path) = if as_path.exists() {
        let kind = if as_path.is_dir() {
            DataKind::IdxImages
        } else {
            DataKind::ImageTar
        };
        (kind, as_path.to_path_buf())
    } else {
        let info = registry::get(spec)?;
        (info.kind, info.require(data_dir)?)
    };
    Ok(match kind {
        DataKind::IdxImages => (
            basin_image::idx::load_fashion_mnist(&path, true)?,
            basin_image::idx::load_fashion_mnist(&path, false)?,
        ),
        DataKind::ImageTar => (
            basin_image::folder::load_tar(&path, "train", false)?,
            basin_image::folder::load_tar(&path, "test", false)?,
        ),
        other => {
            return Err(ReproError::config(
                "data",
                format!(
                    "`{spec}` is a {} dataset; image-completion reads fashion-mnist, cifar10, an IDX folder or an image tar",
                    other.as_str()
                ),
            ));
        }
    })
}

/// The drawn images: one set holding the training, validation and test parts, in that order.
#[derive(Clone, Debug)]
pub struct Drawn {
    /// Training images, then validation, then test.
    pub data: ImageSet,
    /// Items of each part.
    pub train: Vec<usize>,
    /// Validation items.
    pub val: Vec<usize>,
    /// Test items.
    pub test: Vec<usize>,
    /// Pixel statistics of the training part only.
    pub normalize: Normalize,
    /// Hashes of which source images were drawn, so a checkpoint of another draw never resumes.
    pub drawn: serde_json::Value,
}

/// Draws the parts of `p` from the two splits.
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
    Drawn {
        data,
        train,
        val: (n_train..n_train + n_val).collect(),
        test: (n_train + n_val..n_train + n_val + n_test).collect(),
        normalize,
        drawn: serde_json::json!({
            "train_and_val": split_hash(&train_part),
            "test": split_hash(&test_part),
        }),
    }
}

/// The masking of a model: ET's mix scaled to its patch count.
pub fn mask_of(cfg: &ImageCompletionConfig) -> MaskStrategy {
    MaskStrategy::et_mix(cfg.tokens() as usize)
}

/// The test masking seeds.
pub fn test_seeds(p: &ImageProtocol) -> Vec<u64> {
    (0..p.mask_seeds as u64).map(|s| 1000 + s).collect()
}

/// A fresh learner of `cfg` on the drawn images.
pub fn learner(
    cfg: &ImageCompletionConfig,
    d: &Drawn,
    p: &ImageProtocol,
    device: Device,
) -> Result<ImageLearner> {
    tch::manual_seed(p.seed as i64);
    Ok(ImageLearner::new(
        cfg,
        d.data.clone(),
        d.normalize.clone(),
        mask_of(cfg),
        Augment::et_table4(),
        p.batch,
        device,
    )?)
}

/// Trains `cfg` on `d` as `p` says, checkpointing under `dir` (resumes there); the selected
/// epoch's weights are restored and the test part scored once. `config` identifies the run in
/// its record and checkpoint.
#[allow(clippy::too_many_arguments)]
pub fn fit(
    name: &str,
    cfg: &ImageCompletionConfig,
    d: &Drawn,
    p: &ImageProtocol,
    dir: &Path,
    device: Device,
    device_name: String,
    config: serde_json::Value,
) -> Result<(ImageLearner, RunRecord)> {
    let mut learner = learner(cfg, d, p, device)?;
    let steps_per_epoch = d.train.len().div_ceil(p.batch) as u64;
    let total = steps_per_epoch * p.epochs as u64;
    let warmup = (total / 10).max(1).min(total);
    let runner = Runner {
        name: name.to_owned(),
        train: TrainConfig {
            epochs: p.epochs,
            optim: OptimConfig {
                lr: p.lr,
                ..OptimConfig::et_image()
            },
            schedule: Some(Schedule::WarmupCosine {
                start: p.lr * 1e-3,
                peak: p.lr,
                end: p.lr * 1e-3,
                warmup,
                total,
            }),
            schedule_unit: Unit::Step,
            ema: None,
        },
        seed: p.seed,
        dir: Some(dir.to_path_buf()),
        device: device_name,
        config,
        progress: true,
    };
    let seeds = test_seeds(p);
    let (train, val, test) = (&d.train, &d.val, &d.test);
    let record = runner.fit(
        &mut learner,
        train,
        &[("train", train), ("val", val), ("test", test)],
        |l, _, _| {
            let r = l.evaluate(val, &[0])?;
            Ok(Validation {
                metrics: BTreeMap::from([("val_mse".into(), r.mse)]),
                score: -r.mse,
                ..Validation::default()
            })
        },
        |l, _| Ok(summary("test_", &l.evaluate(test, &seeds)?)),
    )?;
    Ok((learner, record))
}

/// The selected model's pictures under `dir`: `reconstructions.png` (8 test images),
/// `dynamics.png` (ET Figure 4 for one of them), `energy.png` (each term per step) and
/// `memories.png`; returns the energy per term.
pub fn pictures(
    learner: &ImageLearner,
    d: &Drawn,
    p: &ImageProtocol,
    dir: &Path,
    title: &str,
) -> Result<Vec<(String, Vec<f64>)>> {
    let seed = test_seeds(p)[0];
    let shown: Vec<usize> = d.test.iter().take(8).copied().collect();
    let Some(&first) = shown.first() else {
        return Ok(Vec::new());
    };
    learner.write_reconstructions(&shown, seed, &dir.join("reconstructions.png"))?;
    let terms = learner.write_dynamics(first, seed, &dir.join("dynamics.png"))?;
    report::plot_terms(
        &dir.join("energy.png"),
        &format!("{title}: energy per step (one test image)"),
        &terms,
    )?;
    learner.write_memories(100, &dir.join("memories.png"))?;
    Ok(terms)
}
