//! Masked image completion as a run file names it (`task = "image-completion"`): an image
//! dataset, the model's configuration and the image protocol.

use std::collections::BTreeMap;
use std::path::Path;

use basin_image::Augment;
use basin_train::protocol::{ImageProtocol, ImageTargets, PlannedRun, Protocol};
use basin_train::runner::{Learner, Validation};
use serde::{Deserialize, Serialize};
use tch::Device;

use super::{Drawn, ImageCompletionConfig, ImageLearner, draw, mask_of};
use crate::task::Task;
use crate::{Result, TaskError};

/// Masked image completion: masked patches completed by the energy descent, on seeded draws
/// of training, validation and test images.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRun {
    /// Dataset name (`fashion-mnist`, `cifar10`) or path (IDX folder, image tar).
    pub data: String,
    /// The model (absent: [`ImageCompletionConfig::default`]; ET's presets are in basin-et,
    /// and `basin train --example et-image` prints one whole).
    #[serde(default)]
    pub architecture: ImageCompletionConfig,
    /// Draws, epochs, masking seeds (default: 2,000 training images, 3 epochs).
    #[serde(default)]
    pub protocol: ImageProtocol,
    /// A streamed image folder's unreadable files: `error` (default, naming the file) or
    /// `skip` (left out and counted in the log).
    #[serde(default)]
    pub on_corrupt: basin_image::stream::OnCorrupt,
}

impl ImageRun {
    /// A fresh learner on the drawn images, its parameters seeded by the protocol's seed.
    pub fn learner_on(&self, drawn: &Drawn, device: Device) -> Result<ImageLearner> {
        tch::manual_seed(self.protocol.seed as i64);
        ImageLearner::new(
            &self.architecture,
            drawn.data.clone(),
            drawn.normalize.clone(),
            mask_of(&self.architecture),
            Augment::et_table4(),
            self.protocol.batch,
            device,
        )
    }
}

impl Task for ImageRun {
    const NAME: &'static str = "image-completion";
    type Protocol = ImageProtocol;
    type Data = Drawn;
    type Learner = ImageLearner;

    fn data_name(&self) -> &str {
        &self.data
    }

    fn protocol(&self) -> &ImageProtocol {
        &self.protocol
    }

    fn validate(&self) -> Result<()> {
        self.architecture.validate()?;
        Ok(self.protocol.validate("protocol")?)
    }

    fn load(&self, data_dir: Option<&Path>, _: Device) -> Result<Drawn> {
        let view = (
            self.architecture.height as usize,
            self.architecture.channels == 1,
        );
        let (train, test) =
            basin_image::source::open_images(&self.data, data_dir, view, self.on_corrupt).map_err(
                |e| match e {
                    // A dataset of another kind, or none: the run file's `data` is at fault.
                    basin_image::ImageError::Invalid { what, message } if what == "data" => {
                        TaskError::config("data", message)
                    }
                    other => other.into(),
                },
            )?;
        draw(&train, &test, &self.protocol)
    }

    fn targets<'a>(&self, data: &'a Drawn) -> ImageTargets<'a> {
        ImageTargets {
            split: &data.split,
            drawn: &data.identity,
        }
    }

    fn learner(&self, data: &Drawn, _: &PlannedRun, device: Device) -> Result<ImageLearner> {
        self.learner_on(data, device)
    }

    /// The test draw over every masking seed, as `test_mse`, `test_psnr`, …
    fn rescore(
        &self,
        _: &Drawn,
        learner: &mut ImageLearner,
        run: &PlannedRun,
        _: &Validation,
    ) -> Result<BTreeMap<String, f64>> {
        let metrics = learner.reconstruction(&run.test(), &self.protocol.test_seeds())?;
        Ok(metrics
            .into_iter()
            .map(|(k, v)| (format!("test_{k}"), v))
            .collect())
    }

    /// In `dir`: `reconstructions.png` (8 test images), `worst.png` and `best.png` (ET Figures
    /// 8 and 9), `dynamics.png` (Figure 4 for the first image), `descent.png`, `descent.gif`
    /// and `updates.png` (the first four, step by step), `memories.png` (Figure 5),
    /// `kernels.png` (Figure 6) and `positions.png` (Figure 7); the energy per step of each
    /// term for that first image.
    fn figures(
        &self,
        _: &Drawn,
        learner: &ImageLearner,
        run: &PlannedRun,
        dir: &Path,
    ) -> Result<Vec<(String, Vec<f64>)>> {
        let seed = self.protocol.test_seeds()[0];
        let shown: Vec<usize> = run.test().into_iter().take(8).collect();
        let Some(&first) = shown.first() else {
            return Ok(Vec::new());
        };
        learner.write_reconstructions(&shown, seed, &dir.join("reconstructions.png"))?;
        // Figures 8 and 9 over the held-out images (the paper's IN1K validation set).
        learner.write_extremes(&run.test(), &self.protocol.test_seeds(), 8, dir)?;
        let terms = learner.write_dynamics(first, seed, &dir.join("dynamics.png"))?;
        learner.write_descent(&shown[..shown.len().min(4)], seed, dir)?;
        learner.write_memories(100, &dir.join("memories.png"))?;
        learner.write_kernels(&dir.join("kernels.png"))?;
        learner.write_positions(&dir.join("positions.png"))?;
        Ok(terms)
    }
}

crate::register_task!(ImageRun);
