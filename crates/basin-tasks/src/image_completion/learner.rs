//! Training, evaluation and pictures for an [`ImageCompletion`] model on image sets.

use std::collections::BTreeMap;

use basin_core::Recompute;
use std::sync::Arc;

use basin_image::{Augment, Images, MaskStrategy, Normalize, Pipeline};
use basin_train::TrainError;
use basin_train::runner::{Learner, Scores, StepOutput};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use tch::{Device, Kind, Tensor, nn};

use super::{ImageCompletion, ImageCompletionConfig, PatchBatchOnDevice};
use crate::{Result, TaskError};

/// An [`ImageCompletion`] model with its data: items index into `data` (training and evaluation images
/// together; the protocol decides which are which).
pub struct ImageLearner {
    /// The parameters.
    pub vs: nn::VarStore,
    /// The model.
    pub model: ImageCompletion,
    /// All images (in memory, or streamed from files).
    pub data: Arc<dyn Images>,
    /// Training preparation (augmentations on).
    pub train_pipe: Pipeline,
    /// Evaluation preparation (no augmentation).
    pub eval_pipe: Pipeline,
    /// Images per batch.
    pub batch: usize,
    /// Seed of the masks drawn by [`Learner::predict`] (fixed, so validation is comparable
    /// across epochs).
    pub eval_seed: u64,
    /// The backward pass still owed by a training step with recomputed activations.
    pending: Option<Recompute>,
}

impl std::fmt::Debug for ImageLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageLearner")
            .field("cfg", &self.model.cfg)
            .field("images", &self.data.len())
            .finish()
    }
}

/// Reconstruction quality over several masking seeds.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reconstruction {
    /// Mean over images and seeds of the masked-patch MSE (normalised pixel space).
    pub mse: f64,
    /// Standard deviation over images of each image's MSE (averaged over seeds).
    pub mse_std_images: f64,
    /// Standard deviation over seeds of the mean MSE.
    pub mse_std_seeds: f64,
    /// Mean PSNR (dB) of the completed images (visible patches kept, masked ones predicted),
    /// in `[0, 1]` pixel space.
    pub psnr: f64,
    /// Mean SSIM of the completed images.
    pub ssim: f64,
    /// Images × seeds evaluated.
    pub evaluated: usize,
    /// Baseline on the same masks: the masked-patch MSE of predicting the training mean (0 in
    /// normalised space) for every masked pixel.
    pub mse_mean_predictor: f64,
    /// Baseline on the same masks: predicting each image's mean over its visible patches.
    pub mse_visible_mean: f64,
    /// Each image's masked-patch MSE averaged over the seeds, in the order of the items.
    #[serde(skip)]
    pub per_image: Vec<f64>,
}

impl ImageLearner {
    /// A learner for `cfg` on `data`, normalising with `normalize` and masking with `mask`.
    pub fn new(
        cfg: &ImageCompletionConfig,
        data: Arc<dyn Images>,
        normalize: Normalize,
        mask: MaskStrategy,
        augment: Augment,
        batch: usize,
        device: Device,
    ) -> Result<Self> {
        let vs = nn::VarStore::new(device);
        let model = ImageCompletion::new(&vs.root(), cfg)?;
        let eval_pipe = Pipeline {
            patch: cfg.patch as usize,
            augment: Augment::none(),
            normalize: normalize.clone(),
            mask: mask.clone(),
        };
        let train_pipe = Pipeline {
            augment,
            ..eval_pipe.clone()
        };
        train_pipe.grid(data.as_ref())?;
        let (h, w, c) = data.shape();
        if (c as i64, h as i64, w as i64) != (cfg.channels, cfg.height, cfg.width) {
            return Err(TaskError::config(
                "image",
                format!(
                    "the model expects {}×{}×{}, the data is {h}×{w}×{c}",
                    cfg.height, cfg.width, cfg.channels
                ),
            ));
        }
        Ok(Self {
            vs,
            model,
            data,
            train_pipe,
            eval_pipe,
            batch: batch.max(1),
            eval_seed: 0,
            pending: None,
        })
    }

    fn device(&self) -> Device {
        self.vs.device()
    }

    /// The batch of `items` prepared with `pipe` and mask seed `seed`, on the model's device.
    fn prepare(&self, items: &[usize], pipe: &Pipeline, seed: u64) -> Result<PatchBatchOnDevice> {
        Ok(PatchBatchOnDevice::new(
            &pipe.batch(self.data.as_ref(), items, seed)?,
            self.device(),
        ))
    }

    /// Predictions and the batch for `items` prepared with `pipe` and mask seed `seed`.
    pub fn run_batch(
        &self,
        items: &[usize],
        pipe: &Pipeline,
        seed: u64,
        train: bool,
    ) -> Result<(Tensor, PatchBatchOnDevice)> {
        let b = self.prepare(items, pipe, seed)?;
        let (pred, _) = self.model.forward(&b, train, None);
        Ok((pred, b))
    }

    /// The evaluation of chunk number `k` of a pass under mask seed `seed` (masks drawn from
    /// `seed ^ (k << 32)`, no gradient): the predictions, the batch and each image's
    /// masked-patch MSE.
    fn score_chunk(
        &self,
        chunk: &[usize],
        k: usize,
        seed: u64,
    ) -> Result<(Tensor, PatchBatchOnDevice, Vec<f64>)> {
        let (pred, b) = tch::no_grad(|| {
            self.run_batch(chunk, &self.eval_pipe, seed ^ ((k as u64) << 32), false)
        })?;
        let mse = Vec::try_from(
            &ImageCompletion::per_image_mse(&pred, &b)
                .to_kind(Kind::Double)
                .to_device(Device::Cpu),
        )?;
        Ok((pred, b, mse))
    }

    /// Masked-patch MSE, PSNR and SSIM over `items` for each masking seed in `seeds`.
    pub fn evaluate(&self, items: &[usize], seeds: &[u64]) -> Result<Reconstruction> {
        let grid = self.eval_pipe.grid(self.data.as_ref())?;
        let (h, w, c) = self.data.shape();
        let mut per_image = vec![0f64; items.len()];
        let mut per_seed = Vec::with_capacity(seeds.len());
        let (mut psnr, mut ssim, mut count) = (0f64, 0f64, 0usize);
        let (mut base_mean, mut base_visible) = (0f64, 0f64);
        for &seed in seeds {
            let mut seed_sum = 0.0;
            for (chunk_no, chunk) in items.chunks(self.batch).enumerate() {
                let (pred, b, mse) = self.score_chunk(chunk, chunk_no, seed)?;
                let sum_mse = |p: &Tensor| {
                    ImageCompletion::per_image_mse(p, &b)
                        .sum(Kind::Double)
                        .double_value(&[])
                };
                base_mean += sum_mse(&b.patches.zeros_like());
                let visible = b
                    .masked
                    .logical_not()
                    .unsqueeze(-1)
                    .to_kind(b.patches.kind());
                let visible_mean =
                    (&b.patches * &visible).sum_dim_intlist(&[1i64, 2][..], true, b.patches.kind())
                        / (visible.sum_dim_intlist(&[1i64, 2][..], true, b.patches.kind())
                            * b.patches.size()[2] as f64)
                            .clamp_min(1.0);
                base_visible += sum_mse(&visible_mean.expand_as(&b.patches));
                let completed = pred.where_self(&b.masked.unsqueeze(-1), &b.patches);
                let completed: Vec<f32> = Vec::try_from(
                    &completed
                        .to_kind(Kind::Float)
                        .to_device(Device::Cpu)
                        .reshape([-1]),
                )?;
                let original: Vec<f32> = Vec::try_from(
                    &b.patches
                        .to_kind(Kind::Float)
                        .to_device(Device::Cpu)
                        .reshape([-1]),
                )?;
                let per = grid.tokens() * grid.patch_len();
                for (k, m) in mse.iter().enumerate() {
                    per_image[chunk_no * self.batch + k] += m;
                    seed_sum += m;
                    let mut a = grid.unpatchify(&original[k * per..(k + 1) * per]);
                    let mut z = grid.unpatchify(&completed[k * per..(k + 1) * per]);
                    self.eval_pipe.normalize.invert(&mut a);
                    self.eval_pipe.normalize.invert(&mut z);
                    z.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
                    a.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
                    psnr += basin_train::image_metrics::psnr(&a, &z, 1.0)?.min(100.0);
                    ssim += basin_train::image_metrics::ssim(&a, &z, h, w, c, 1.0)?;
                    count += 1;
                }
            }
            per_seed.push(seed_sum / items.len().max(1) as f64);
        }
        let per_image: Vec<f64> = per_image
            .iter()
            .map(|v| v / seeds.len().max(1) as f64)
            .collect();
        let (mse, mse_std_images) = basin_train::metrics::mean_std(&per_image);
        let (_, mse_std_seeds) = basin_train::metrics::mean_std(&per_seed);
        Ok(Reconstruction {
            mse,
            mse_std_images,
            mse_std_seeds,
            psnr: psnr / count.max(1) as f64,
            ssim: ssim / count.max(1) as f64,
            evaluated: count,
            mse_mean_predictor: base_mean / count.max(1) as f64,
            mse_visible_mean: base_visible / count.max(1) as f64,
            per_image,
        })
    }
}

impl Learner for ImageLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        Some(basin_train::runner::ModelConfig::of(&self.model.cfg))
    }

    fn batch_size(&self) -> Option<usize> {
        Some(self.batch)
    }

    fn train_step(
        &mut self,
        items: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> std::result::Result<StepOutput, TrainError> {
        let seed: u64 = rng.random();
        let t0 = std::time::Instant::now();
        let b = self.prepare(items, &self.train_pipe, seed)?;
        basin_core::device::synchronize(self.device());
        let data = t0.elapsed().as_secs_f64();
        let recomputed = self.model.block().filter(|_| self.model.cfg.recompute);
        let pred = if let Some(block) = recomputed {
            let x0 = self.model.encode(&b.patches, &b.masked);
            let (x, pending) = block.run_recomputed(&x0, &self.model.structure(), true);
            self.pending = Some(pending);
            self.model.decode(&x)
        } else {
            self.model.forward(&b, true, None).0
        };
        let mut loss = self.model.loss(&pred, &b);
        // Fixed-point correction: the block's sampled states, decoded and scored as its output.
        for (weight, state) in self
            .model
            .block()
            .map(|b| b.take_corrections())
            .unwrap_or_default()
        {
            loss = loss + self.model.loss(&self.model.decode(&state), &b) * weight;
        }
        Ok(StepOutput::loss(loss).with_data_seconds(data))
    }

    fn blocks(&self) -> Vec<&basin_core::EnergyBlock> {
        self.model.block().into_iter().collect()
    }

    fn after_backward(&mut self) {
        if let (Some(pending), Some(block)) = (self.pending.take(), self.model.block()) {
            pending.backward(block, &self.model.structure());
        }
    }

    /// The masked-patch MSE, its spreads, PSNR and SSIM of `items` over `mask_seeds`
    /// ([`ImageLearner::evaluate`], keys as [`summary`] names them).
    fn reconstruction(
        &mut self,
        items: &[usize],
        mask_seeds: &[u64],
    ) -> std::result::Result<BTreeMap<String, f64>, TrainError> {
        Ok(summary("", &self.evaluate(items, mask_seeds)?))
    }

    /// One row per image: its masked-patch MSE under the fixed evaluation masks.
    fn predict(&mut self, items: &[usize]) -> std::result::Result<Scores, TrainError> {
        let mut rows = Vec::with_capacity(items.len());
        for (k, chunk) in items.chunks(self.batch).enumerate() {
            let (_, _, mse) = self.score_chunk(chunk, k, self.eval_seed)?;
            rows.extend(mse.into_iter().map(|m| vec![m]));
        }
        Ok(Scores(rows))
    }
}

/// Summary numbers of a reconstruction, for run records.
pub fn summary(prefix: &str, r: &Reconstruction) -> BTreeMap<String, f64> {
    BTreeMap::from([
        (format!("{prefix}mse"), r.mse),
        (format!("{prefix}mse_std_images"), r.mse_std_images),
        (format!("{prefix}mse_std_seeds"), r.mse_std_seeds),
        (format!("{prefix}psnr"), r.psnr),
        (format!("{prefix}ssim"), r.ssim),
        (format!("{prefix}mse_mean_predictor"), r.mse_mean_predictor),
        (format!("{prefix}mse_visible_mean"), r.mse_visible_mean),
    ])
}

// ------------------------------------------------------------------------------- pictures

use std::path::Path;

use basin_core::TraceOptions;
use basin_train::plot::{Picture, animated_grid, heat, image_grid};

/// A descent watched step by step ([`ImageLearner::descent`]): patches `[B, N, P]` in the
/// pipeline's normalised pixels.
#[derive(Debug)]
pub struct Descent {
    /// The masked input (masked patches zero).
    pub shown: Tensor,
    /// Per step `0 … T`, the visible patches with the masked ones decoded from `x_t`.
    pub completions: Vec<Tensor>,
    /// The original patches.
    pub original: Tensor,
    /// `‖x_t − x_{t−1}‖` per patch token, `[T, B, N]`.
    pub moves: Tensor,
}

fn picture(data: Vec<f32>, w: usize, h: usize, c: usize) -> Picture {
    Picture {
        width: w as u32,
        height: h as u32,
        channels: c as u32,
        data,
    }
}

/// Rescales values to `[0, 1]` (for gradients, which have no pixel range).
fn stretch(mut v: Vec<f32>) -> Vec<f32> {
    let (lo, hi) = v
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let span = (hi - lo).max(1e-12);
    v.iter_mut().for_each(|x| *x = (*x - lo) / span);
    v
}

impl ImageLearner {
    /// Patches `[N·P]` (normalised) → an image in `[0, 1]`.
    fn to_image(&self, patches: &[f32]) -> Result<Vec<f32>> {
        let grid = self.eval_pipe.grid(self.data.as_ref())?;
        let mut img = grid.unpatchify(patches);
        self.eval_pipe.normalize.invert(&mut img);
        img.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
        Ok(img)
    }

    fn flat(t: &Tensor) -> Result<Vec<f32>> {
        Ok(Vec::try_from(
            &t.to_kind(Kind::Float).to_device(Device::Cpu).reshape([-1]),
        )?)
    }

    /// Masked input / completion / original for `items` (ET Figure 3).
    pub fn write_reconstructions(&self, items: &[usize], seed: u64, path: &Path) -> Result<()> {
        let (pred, b) = tch::no_grad(|| self.run_batch(items, &self.eval_pipe, seed, false))?;
        let grey = b.patches.full_like(0.0);
        let shown = b
            .patches
            .where_self(&b.masked.logical_not().unsqueeze(-1), &grey);
        let completed = pred.where_self(&b.masked.unsqueeze(-1), &b.patches);
        let (h, w, c) = self.data.shape();
        let per = items.len();
        let mut rows = vec![Vec::new(), Vec::new(), Vec::new()];
        for (r, t) in [&shown, &completed, &b.patches].into_iter().enumerate() {
            for k in 0..per as i64 {
                rows[r].push(picture(self.to_image(&Self::flat(&t.get(k))?)?, w, h, c));
            }
        }
        image_grid(
            path,
            &rows,
            &["masked input", "completed", "original"],
            &[],
            4,
        )
        .map_err(|e| TaskError::config("picture", e.to_string()))
    }

    /// ET Figures 8 and 9: the `count` images of `items` with the largest and the smallest
    /// masked-patch MSE averaged over the masking `seeds`, drawn as
    /// [`write_reconstructions`](Self::write_reconstructions) draws them (under the first seed's
    /// masking) into `worst.png` and `best.png` under `dir`. Returns the two lists of items,
    /// worst first and best first.
    pub fn write_extremes(
        &self,
        items: &[usize],
        seeds: &[u64],
        count: usize,
        dir: &Path,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let r = self.evaluate(items, seeds)?;
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| r.per_image[b].total_cmp(&r.per_image[a]));
        let worst: Vec<usize> = order.iter().take(count).map(|&k| items[k]).collect();
        let best: Vec<usize> = order.iter().rev().take(count).map(|&k| items[k]).collect();
        let seed = seeds.first().copied().unwrap_or(0);
        if !worst.is_empty() {
            self.write_reconstructions(&worst, seed, &dir.join("worst.png"))?;
            self.write_reconstructions(&best, seed, &dir.join("best.png"))?;
        }
        Ok((worst, best))
    }

    /// A decoded patch, channel-major `(c, py, px)` as the decoder writes it, as a picture in
    /// pixel space.
    fn patch_picture(&self, vals: &[f32]) -> Result<Picture> {
        let grid = self.eval_pipe.grid(self.data.as_ref())?;
        let (p, c) = (grid.p, grid.c);
        let mut img = vec![0f32; p * p * c];
        for ch in 0..c {
            for y in 0..p {
                for x in 0..p {
                    img[(y * p + x) * c + ch] = vals[ch * p * p + y * p + x];
                }
            }
        }
        self.eval_pipe.normalize.invert(&mut img);
        img.iter_mut().for_each(|v| *v = v.clamp(0.0, 1.0));
        Ok(picture(img, p, p, c))
    }

    /// The first `count` Hopfield memories decoded to patches (ET Figure 5).
    pub fn write_memories(&self, count: usize, path: &Path) -> Result<bool> {
        let Some(mem) = tch::no_grad(|| self.model.decoded_memories()) else {
            return Ok(false);
        };
        let k = (mem.size()[0] as usize).min(count);
        let per_row = (k as f64).sqrt().ceil() as usize;
        let mut rows: Vec<Vec<Picture>> = Vec::new();
        for m in 0..k {
            if m % per_row == 0 {
                rows.push(Vec::new());
            }
            let pic = self.patch_picture(&Self::flat(&mem.get(m as i64))?)?;
            if let Some(row) = rows.last_mut() {
                row.push(pic);
            }
        }
        image_grid(path, &rows, &[], &[], 6)
            .map_err(|e| TaskError::config("picture", e.to_string()))?;
        Ok(true)
    }

    /// ET Figure 6: the token dimension of W_K and W_Q decoded to patches, a row of Y patches
    /// per head and matrix; false (and no picture) without attention.
    pub fn write_kernels(&self, path: &Path) -> Result<bool> {
        let Some((k, q)) = tch::no_grad(|| self.model.decoded_kernels()) else {
            return Ok(false);
        };
        let (heads, y) = (k.size()[0], k.size()[1]);
        let (mut rows, mut labels) = (Vec::new(), Vec::new());
        for h in 0..heads {
            for (name, w) in [("K", &k), ("Q", &q)] {
                let row = (0..y)
                    .map(|j| self.patch_picture(&Self::flat(&w.get(h).get(j))?))
                    .collect::<Result<Vec<_>>>()?;
                rows.push(row);
                labels.push(format!("{name} head {h}"));
            }
        }
        let label_refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        let columns: Vec<String> = (0..y).map(|j| format!("y = {j}")).collect();
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        image_grid(path, &rows, &label_refs, &columns, 6)
            .map_err(|e| TaskError::config("picture", e.to_string()))?;
        Ok(true)
    }

    /// ET Figure 7: for each patch, in the image's layout, the map of its position bias's
    /// cosine similarity to every patch's (−1 black, 1 white).
    pub fn write_positions(&self, path: &Path) -> Result<()> {
        let sim: Vec<f32> = Self::flat(&tch::no_grad(|| self.model.position_similarity()))?;
        let p = self.model.cfg.patch.max(1) as usize;
        let (gh, gw) = (self.data.shape().0 / p, self.data.shape().1 / p);
        let n = gh * gw;
        let rows: Vec<Vec<Picture>> = (0..gh)
            .map(|r| {
                (0..gw)
                    .map(|col| {
                        let i = r * gw + col;
                        let map = sim[i * n..(i + 1) * n]
                            .iter()
                            .map(|v| (v + 1.0) / 2.0)
                            .collect();
                        picture(map, gw, gh, 1)
                    })
                    .collect()
            })
            .collect();
        let row_names: Vec<String> = (0..gh).map(|r| format!("patch row {r}")).collect();
        let row_names: Vec<&str> = row_names.iter().map(String::as_str).collect();
        let col_names: Vec<String> = (0..gw).map(|c| format!("col {c}")).collect();
        let col_names: Vec<&str> = col_names.iter().map(String::as_str).collect();
        image_grid(path, &rows, &row_names, &col_names, 4)
            .map_err(|e| TaskError::config("picture", e.to_string()))
    }

    /// The descent step by step for `items` under the masking of `seed` (evaluation mode):
    /// every step's tokens decoded to a completion, and how far each patch's token moves at each
    /// step; `None` for a model without an energy (a ViT).
    pub fn descent(&self, items: &[usize], seed: u64) -> Result<Option<Descent>> {
        let b = PatchBatchOnDevice::new(
            &self.eval_pipe.batch(self.data.as_ref(), items, seed)?,
            self.device(),
        );
        let Some(block) = self.model.block() else {
            return Ok(None);
        };
        let keep = TraceOptions {
            states: true,
            term_grads: false,
        };
        let (_, trace) = tch::no_grad(|| {
            let x0 = self.model.encode(&b.patches, &b.masked);
            block.run(&x0, &self.model.structure(), false, Some(keep))
        });
        let states = trace
            .ok_or_else(|| TaskError::config("trace", "no trace recorded"))?
            .states;
        let completions = tch::no_grad(|| {
            states
                .iter()
                .map(|x| {
                    self.model
                        .decode(x)
                        .where_self(&b.masked.unsqueeze(-1), &b.patches)
                })
                .collect()
        });
        let moves = Tensor::stack(
            &(1..states.len())
                .map(|t| {
                    self.model
                        .patch_tokens(&(&states[t] - &states[t - 1]))
                        .norm_scalaropt_dim(2.0, [-1], false)
                })
                .collect::<Vec<_>>(),
            0,
        );
        let shown = b.patches.where_self(
            &b.masked.logical_not().unsqueeze(-1),
            &b.patches.full_like(0.0),
        );
        Ok(Some(Descent {
            shown,
            completions,
            original: b.patches,
            moves,
        }))
    }

    /// The descent step by step ([`Self::descent`]), for `items` under the masking of `seed`,
    /// into `dir`: `descent.png` (a row per image: the masked input, the completion decoded
    /// from the tokens after each step, the original; columns labelled by step),
    /// `descent.gif` (the same completions animated, one frame a step) and `updates.png` (per
    /// step, each patch token's update ‖x_t − x_{t−1}‖ as a heat map over the image, one scale
    /// for every step and image, so a reader sees where the energy works). Returns the steps
    /// drawn: every step up to twelve, else twelve spread evenly; none, and no pictures, for a
    /// model without an energy.
    pub fn write_descent(&self, items: &[usize], seed: u64, dir: &Path) -> Result<Vec<usize>> {
        let Some(d) = self.descent(items, seed)? else {
            return Ok(Vec::new());
        };
        let last = d.completions.len() - 1;
        let picks: Vec<usize> = if last <= 12 {
            (0..=last).collect()
        } else {
            (0..=12).map(|i| i * last / 12).collect()
        };
        let (h, w, c) = self.data.shape();
        let image = |t: &Tensor, k: usize| -> Result<Picture> {
            Ok(picture(
                self.to_image(&Self::flat(&t.get(k as i64))?)?,
                w,
                h,
                c,
            ))
        };
        let fail = |e: basin_train::plot::PlotError| TaskError::config("picture", e.to_string());
        let mut rows = Vec::new();
        let mut frames = vec![Vec::new(); picks.len()];
        for k in 0..items.len() {
            let (masked, original) = (image(&d.shown, k)?, image(&d.original, k)?);
            let mut row = vec![masked.clone()];
            for (f, &t) in picks.iter().enumerate() {
                let pic = image(&d.completions[t], k)?;
                frames[f].push(vec![masked.clone(), pic.clone(), original.clone()]);
                row.push(pic);
            }
            row.push(original);
            rows.push(row);
        }
        let mut columns = vec!["masked".to_owned()];
        columns.extend(picks.iter().map(|t| format!("step {t}")));
        columns.push("original".into());
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        image_grid(&dir.join("descent.png"), &rows, &[], &columns, 3).map_err(fail)?;
        let titles: Vec<String> = picks
            .iter()
            .map(|t| format!("step {t} of {last}"))
            .collect();
        animated_grid(
            &dir.join("descent.gif"),
            &frames,
            &[],
            &["masked", "completed", "original"],
            &titles,
            3,
            500,
        )
        .map_err(fail)?;
        let moved: Vec<usize> = picks.iter().copied().filter(|&t| t > 0).collect();
        if moved.is_empty() {
            return Ok(picks);
        }
        let top = d.moves.max().double_value(&[]).max(f64::MIN_POSITIVE);
        let pixels = d.original.size()[2];
        let grid = self.eval_pipe.grid(self.data.as_ref())?;
        let mut heat_rows = Vec::new();
        for k in 0..items.len() {
            let mut row = Vec::new();
            for &t in &moved {
                let per_patch = (d.moves.get(t as i64 - 1).get(k as i64) / top)
                    .unsqueeze(-1)
                    .expand([-1, pixels], false);
                let img = grid.unpatchify(&Self::flat(&per_patch)?);
                let values: Vec<f32> = img.iter().step_by(c).copied().collect();
                row.push(heat(&values, w as u32, h as u32));
            }
            heat_rows.push(row);
        }
        let columns: Vec<String> = moved.iter().map(|t| format!("step {t}")).collect();
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        image_grid(&dir.join("updates.png"), &heat_rows, &[], &columns, 3).map_err(fail)?;
        Ok(picks)
    }

    /// ET Figure 4: for one image, the completion decoded from the tokens at a few steps, and
    /// each module's gradient `∂E_i/∂g` decoded through the decoder's linear map (stretched to
    /// [0, 1]); also returns the trace's mean energies per term (with a ViT: nothing, and no
    /// picture).
    pub fn write_dynamics(
        &self,
        item: usize,
        seed: u64,
        path: &Path,
    ) -> Result<Vec<(String, Vec<f64>)>> {
        let b = PatchBatchOnDevice::new(
            &self.eval_pipe.batch(self.data.as_ref(), &[item], seed)?,
            self.device(),
        );
        // A ViT has no energy to trace.
        let Some(block) = self.model.block() else {
            return Ok(Vec::new());
        };
        let (_, trace) = tch::no_grad(|| {
            let x0 = self.model.encode(&b.patches, &b.masked);
            block.run(
                &x0,
                &self.model.structure(),
                false,
                Some(TraceOptions {
                    states: true,
                    term_grads: true,
                }),
            )
        });
        let trace = trace.ok_or_else(|| TaskError::config("trace", "no trace recorded"))?;
        let (h, w, c) = self.data.shape();
        let steps = trace.states.len();
        let picks: Vec<usize> = (0..6).map(|i| i * (steps - 1) / 5).collect();
        let mut rows = vec![Vec::new()];
        let mut labels = vec!["tokens".to_owned()];
        for &t in &picks {
            let pred = tch::no_grad(|| self.model.decode(&trace.states[t]));
            let completed = pred.where_self(&b.masked.unsqueeze(-1), &b.patches);
            rows[0].push(picture(
                self.to_image(&Self::flat(&completed.get(0))?)?,
                w,
                h,
                c,
            ));
        }
        for (name, grads) in &trace.term_grads {
            let mut row = Vec::new();
            for &t in &picks {
                let g = &grads[t.min(grads.len() - 1)];
                let img = self
                    .eval_pipe
                    .grid(self.data.as_ref())?
                    .unpatchify(&Self::flat(
                        &tch::no_grad(|| -self.model.decode_direction(g)).get(0),
                    )?);
                row.push(picture(stretch(img), w, h, c));
            }
            rows.push(row);
            labels.push(format!("−∂E/∂g {name}"));
        }
        let label_refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        let columns: Vec<String> = picks.iter().map(|t| format!("step {t}")).collect();
        let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
        image_grid(path, &rows, &label_refs, &columns, 4)
            .map_err(|e| TaskError::config("picture", e.to_string()))?;
        Ok(trace.mean_terms())
    }
}
