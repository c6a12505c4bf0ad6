//! `et-table14`: the module ablation of ET Table 14 — at the paper's scale on ImageNet-1k (a
//! folder the user provides, streamed: images of any size decoded as batches need them), at CPU
//! scale on CIFAR-10 and Fashion-MNIST — written as a report beside the paper's numbers.
//!
//! Protocol: a seeded random draw of the training split trains (with ET Table 4's
//! augmentations), another draw from it validates (masked-patch MSE under fixed masks; the best epoch is kept), and the test
//! split is scored once with the selected weights over several masking seeds (the paper: 10).
//! Masking follows the paper's mix scaled to the patch count (90 % of the scored patches masked,
//! 10 % visible but scored; half the image scored). MSE is in normalised pixel space, as the
//! paper's; PSNR and SSIM are on the completed images in `[0, 1]`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use basin_image::Images;
use basin_image::stream::OnCorrupt;
use basin_tasks::image_completion::{ImageCompletionConfig, ImageLearner, ImageRun, draw};
use basin_tasks::task::Task;
use basin_train::protocol::{ImageProtocol, Protocol};
use basin_train::record::RunRecord;
use serde::{Deserialize, Serialize};

use crate::papers::{self, PaperRow};
use crate::report::{self, Missing, Report};
use crate::{Context, Preset, Reproduction, Result, Table, selected};

/// ET Table 14.
#[derive(Debug)]
pub struct EtTable14;

impl Reproduction for EtTable14 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        run(&Table14Options::for_context(table, ctx), ctx)
    }
}
crate::register_table!(
    EtTable14,
    "et-table14",
    &["imagenet-1k", "cifar10", "fashion-mnist"]
);

/// Which dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageDataset {
    /// `images/imagenet/{train,val}/<class>/*` (a folder the user provides), streamed.
    #[serde(rename = "imagenet-1k")]
    ImageNet,
    /// `images/cifar10-jpg/CIFAR-10-images_jpg.tar`.
    Cifar10,
    /// `images/fashion-mnist/*-idx*-ubyte.gz`.
    FashionMnist,
}

impl ImageDataset {
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ImageNet => "imagenet-1k",
            Self::Cifar10 => "cifar10",
            Self::FashionMnist => "fashion-mnist",
        }
    }

    /// The dataset with `name` (`imagenet-1k`, `cifar10`, `fashion-mnist`).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::ImageNet, Self::Cifar10, Self::FashionMnist]
            .into_iter()
            .find(|d| d.name() == name)
    }

    /// Train and test (ImageNet: validation) splits from the data directory, each image brought
    /// to `cfg`'s size where the files differ in size.
    pub fn load(
        self,
        data_dir: &Path,
        cfg: &ImageCompletionConfig,
        on_corrupt: OnCorrupt,
    ) -> Result<(Arc<dyn Images>, Arc<dyn Images>)> {
        Ok(basin_image::source::open_images(
            self.name(),
            Some(data_dir),
            (cfg.height as usize, cfg.channels == 1),
            on_corrupt,
        )?)
    }

    /// The model of this dataset at `preset`: Table 4's on ImageNet at the paper's scale,
    /// else the CPU-scale one (ImageNet at 64² for smoke runs).
    pub fn config(self, preset: Preset) -> ImageCompletionConfig {
        match (self, preset) {
            (Self::ImageNet, Preset::Paper) => basin_et::image::imagenet(),
            (Self::ImageNet, _) => basin_et::image::imagenet_cpu(),
            (Self::Cifar10, _) => basin_et::image::cifar10_cpu(),
            (Self::FashionMnist, _) => basin_et::image::fashion_mnist_cpu(),
        }
    }
}

/// How much to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table14Options {
    /// Datasets.
    pub datasets: Vec<ImageDataset>,
    /// Ablations (`full`, `full+self`, `nohn+self`, `nohn`, `noatt`).
    pub ablations: Vec<String>,
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
    /// Descent steps T (overrides the preset; the paper: 12).
    pub steps: usize,
    /// Masking seeds at test time (the paper: 10).
    pub mask_seeds: usize,
    /// Peak learning rate (warm-up + cosine, Table 4's shape).
    pub lr: f64,
    /// Seed.
    pub seed: u64,
    /// A streamed folder's unreadable files: refused by name (default) or left out and counted.
    #[serde(default)]
    pub on_corrupt: OnCorrupt,
}

impl Table14Options {
    /// The draws, training and scoring of each ablation.
    pub fn protocol(&self) -> ImageProtocol {
        ImageProtocol {
            train_images: self.train_images,
            val_images: self.val_images,
            test_images: self.test_images,
            epochs: self.epochs,
            batch: self.batch,
            mask_seeds: self.mask_seeds,
            lr: self.lr,
            seed: self.seed,
            implicit_warmup: 0,
        }
    }

    /// The CPU run: 5000 training images, 500 for validation, 1000 test images × 10 masking
    /// seeds, 5 epochs, T = 12 (about 40 minutes on two cores for both datasets).
    pub fn cpu() -> Self {
        Self {
            datasets: vec![ImageDataset::Cifar10, ImageDataset::FashionMnist],
            ablations: basin_et::image::ABLATIONS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            train_images: 5_000,
            val_images: 500,
            test_images: 1_000,
            epochs: 5,
            batch: 64,
            steps: 12,
            mask_seeds: 10,
            lr: 2e-3,
            seed: 0,
            on_corrupt: OnCorrupt::Error,
        }
    }

    /// The paper's run (Table 4): ImageNet-1k, every training image but 10,000 held out for
    /// validation, the 50,000 validation images as the test split × 10 masking seeds, 100
    /// epochs of batches of 768, peak lr 5·10⁻⁴, T = 12.
    pub fn paper() -> Self {
        Self {
            datasets: vec![ImageDataset::ImageNet],
            train_images: usize::MAX,
            val_images: 10_000,
            test_images: 50_000,
            epochs: 100,
            batch: 768,
            lr: 5e-4,
            ..Self::cpu()
        }
    }

    /// The options of `ctx`'s preset for `table` with its `--epochs`, `--train-images` and
    /// `--dataset` applied.
    pub fn for_context(table: &Table, ctx: &Context) -> Self {
        let mut opts = match ctx.preset {
            Preset::Quick => Self::quick(),
            Preset::Paper => Self::paper(),
            Preset::Cpu => Self::cpu(),
        };
        if let Some(e) = ctx.overrides.epochs {
            opts.epochs = e;
        }
        if let Some(n) = ctx.overrides.train_images {
            opts.train_images = n;
        }
        if !ctx.overrides.datasets.is_empty() {
            // Named datasets run at this preset's scale, ImageNet included.
            opts.datasets = selected(table, ctx, table.datasets())
                .iter()
                .filter_map(|n| ImageDataset::from_name(n))
                .collect();
        }
        opts
    }

    /// Minutes-long version for CI: 256 training images, 1 epoch, T = 4, 2 seeds.
    pub fn quick() -> Self {
        Self {
            train_images: 256,
            val_images: 64,
            test_images: 64,
            epochs: 1,
            steps: 4,
            mask_seeds: 2,
            ..Self::cpu()
        }
    }
}

/// One trained model of an image table.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AblationResult {
    /// Dataset.
    pub dataset: String,
    /// The model's name (a Table 14 ablation, or Table 16's `ET` and `ViT`).
    pub ablation: String,
    /// Parameters in the ET block (or the ViT in its place).
    pub block_params: i64,
    /// Every trainable parameter.
    pub params: i64,
    /// The run record (test metrics in its summary).
    pub record: RunRecord,
}

/// Trainable parameters of the block (or the ViT in its place).
fn backbone_params(learner: &ImageLearner) -> i64 {
    learner
        .vs
        .variables()
        .iter()
        .filter(|(n, t)| (n.starts_with("block.") || n.starts_with("vit.")) && t.requires_grad())
        .map(|(_, t)| t.numel() as i64)
        .sum()
}

/// Every trainable parameter.
fn trainable(learner: &ImageLearner) -> i64 {
    learner
        .vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum()
}

fn fmt_params(n: i64) -> String {
    if n >= 1_000_000 {
        format!("{:.2}M", n as f64 / 1e6)
    } else {
        format!("{:.1}k", n as f64 / 1e3)
    }
}

/// Trains and scores on every dataset of `opts` found the models `models` makes from the
/// dataset's CPU-scale configuration (with `opts.steps`), each on the same draw; run records
/// and pictures go under `ctx.out()/<dataset>/<model>/`. Datasets not found are noted in
/// `missing`.
pub fn train_models(
    opts: &Table14Options,
    ctx: &Context,
    models: impl Fn(&ImageCompletionConfig) -> Result<Vec<(String, ImageCompletionConfig)>>,
    missing: &mut Missing,
) -> Result<Vec<AblationResult>> {
    let (out, device) = (ctx.out(), ctx.device());
    let mut results = Vec::new();
    for &ds in &opts.datasets {
        let mut base = ds.config(ctx.preset);
        base.block.steps = opts.steps;
        let (train_all, test_all) = match ds.load(ctx.data_dir(), &base, opts.on_corrupt) {
            Ok(sets) => sets,
            Err(e) => {
                missing.push(ds.name(), e);
                continue;
            }
        };
        let protocol = opts.protocol();
        let d = draw(&train_all, &test_all, &protocol)?;
        for (name, architecture) in models(&base)? {
            let run = ImageRun {
                data: ds.name().into(),
                architecture,
                protocol: protocol.clone(),
                on_corrupt: opts.on_corrupt,
            };
            let dir = out.join(ds.name()).join(&name);
            let title = format!("{name} on {}", ds.name());
            let (mut params, mut total) = (0, 0);
            let report = protocol.run(
                run.targets(&d),
                |r| Ok(run.learner(&d, r, device)?),
                |r, learner| {
                    (params, total) = (backbone_params(learner), trainable(learner));
                    let run_dir = dir.join(&r.dir);
                    let terms = run.figures(&d, learner, r, &run_dir)?;
                    if terms.is_empty() {
                        return Ok(());
                    }
                    report::plot_terms(
                        &run_dir.join("energy.png"),
                        &format!("{title}: energy per step (one test image)"),
                        &terms,
                    )
                    .map_err(basin_train::TrainError::learner)
                },
                &ctx.runs(format!("{}/{name}", ds.name()), &dir),
            )?;
            let Some(record) = report.runs.into_iter().next() else {
                continue;
            };
            tracing::info!(
                "{}/{name}: test MSE {:.4}, PSNR {:.2}, SSIM {:.3}",
                ds.name(),
                record.summary.get("test_mse").copied().unwrap_or(f64::NAN),
                record.summary.get("test_psnr").copied().unwrap_or(f64::NAN),
                record.summary.get("test_ssim").copied().unwrap_or(f64::NAN)
            );
            results.push(AblationResult {
                dataset: ds.name().into(),
                ablation: name,
                block_params: params,
                params: total,
                record,
            });
        }
    }
    Ok(results)
}

/// Runs the ablation table with `opts`; run records and pictures go under
/// `ctx.out()/<dataset>/<ablation>/`.
pub fn run(opts: &Table14Options, ctx: &Context) -> Result<Report> {
    let started = Instant::now();
    let paper = papers::rows("et-table14")?;
    let mut missing = Missing::default();
    let results = train_models(
        opts,
        ctx,
        |base| {
            opts.ablations
                .iter()
                .map(|a| Ok((a.clone(), basin_et::image::ablation(base, a)?)))
                .collect()
        },
        &mut missing,
    )?;
    let md = markdown(
        &paper,
        &results,
        &missing,
        opts,
        ctx,
        started.elapsed().as_secs_f64(),
    )?;
    let ran = results.len();
    // The full model's test MSE per dataset, beside the paper's (on ImageNet-1k).
    let full = papers::find(&paper, "ablation", "full")
        .map(|p| p.number("mse"))
        .transpose()?;
    let headline = results
        .iter()
        .filter(|r| r.ablation == "full")
        .map(|r| {
            report::Headline::new(
                format!("{} ET-Full test MSE", r.dataset),
                mse_cell(r),
                full.map(|mse| format!("{mse:.3} (IN1K)")),
            )
        })
        .collect();
    Ok(Report::new(
        md,
        &serde_json::json!({ "options": opts, "results": results, "missing": missing }),
        ran,
    )?
    .with_headline(headline))
}

/// A run's test MSE as the table prints it: mean ± the standard deviation over images.
fn mse_cell(r: &AblationResult) -> String {
    let s = &r.record.summary;
    let g = |k: &str| s.get(k).copied().unwrap_or(f64::NAN);
    format!("{:.3} ± {:.2}", g("test_mse"), g("test_mse_std_images"))
}

fn markdown(
    paper: &[PaperRow],
    results: &[AblationResult],
    missing: &Missing,
    opts: &Table14Options,
    ctx: &Context,
    seconds: f64,
) -> Result<String> {
    let mut md = String::from("# ET Table 14 — module ablation for masked image completion\n\n");
    md.push_str(&report::banner(
        ctx.preset,
        &format!(
            "{} training images, {} epoch(s), T = {}",
            opts.train_images, opts.epochs, opts.steps
        ),
    ));
    md.push_str(&format!(
        "Paper: {} (the paper trains 100 epochs on ImageNet-1k, D = 768, on GPUs). Ours: {} training images (at most), {} epochs, \
         batch {}, T = {}, {} masking seeds; at `--paper` Table 4's model on ImageNet-1k streamed from its folder (each image resized and \
         cropped to 224², random resized crops in training), otherwise the small presets below. **At CPU scale the scale differs by orders \
         of magnitude: compare the ordering of the ablations, not the values.** MSE is on the scored patches in normalised pixel space (mean over test images and seeds; \
         ± is the standard deviation over images, as the paper's ± appears to be); PSNR/SSIM on the completed images in [0, 1].\n\n",
        papers::value("et-table14", "dataset")?,
        opts.train_images,
        opts.epochs,
        opts.batch,
        opts.steps,
        opts.mask_seeds
    ));
    let datasets: Vec<&str> = {
        let mut d: Vec<&str> = results.iter().map(|r| r.dataset.as_str()).collect();
        d.dedup();
        d
    };
    let mut header: Vec<String> = ["model", "ATTN", "self", "HN", "paper params"]
        .into_iter()
        .chain(["paper MSE (IN1K)"])
        .map(String::from)
        .collect();
    for d in &datasets {
        header.extend([
            format!("{d} params"),
            format!("{d} MSE"),
            format!("{d} PSNR"),
            format!("{d} SSIM"),
        ]);
    }
    let mut t = report::Table::new(header);
    let tick = |b: bool| if b { "✓" } else { "✗" }.to_owned();
    for row in paper {
        let ablation = row.text("ablation")?;
        let mut cells = vec![
            row.text("name")?.to_owned(),
            tick(row.flag("attention")?),
            tick(row.flag("self_attention")?),
            tick(row.flag("hopfield")?),
            row.text("params")?.to_owned(),
            format!("{:.3} ± {:.2}", row.number("mse")?, row.number("std")?),
        ];
        for d in &datasets {
            match results
                .iter()
                .find(|r| r.dataset == *d && r.ablation == ablation)
            {
                Some(r) => {
                    let s = &r.record.summary;
                    let g = |k: &str| s.get(k).copied().unwrap_or(f64::NAN);
                    cells.extend([
                        fmt_params(r.block_params),
                        mse_cell(r),
                        format!("{:.2}", g("test_psnr")),
                        format!("{:.3}", g("test_ssim")),
                    ]);
                }
                None => cells.extend(["–"; 4].map(String::from)),
            }
        }
        t.row(cells);
    }
    md.push_str(&t.to_markdown());
    md.push_str(&format!(
        "\nDevice: {}. Wall time: {:.0} s in all. Switches: defaults of the paper (no self-attention unless the row says so, masked MSE \
         loss, CLS token as the reference code). Optimiser: AdamW β = (0.9, 0.99), wd 0.05, clip 1.0, warm-up + cosine to peak lr {} \
         (Table 4's shape).\n\n",
        ctx.device_name(),
        seconds,
        opts.lr
    ));
    let mut t = report::Table::new(["run", "selected epoch", "test MSE", "± seeds", "wall (s)"]);
    for r in results {
        let s = &r.record.summary;
        t.row([
            r.record.name.clone(),
            r.record
                .selected_epoch
                .map_or("–".into(), |e| e.to_string()),
            format!("{:.4}", s.get("test_mse").copied().unwrap_or(f64::NAN)),
            format!(
                "{:.4}",
                s.get("test_mse_std_seeds").copied().unwrap_or(f64::NAN)
            ),
            format!("{:.0}", r.record.wall_seconds),
        ]);
    }
    md.push_str(&t.to_markdown());
    md.push_str("\nPictures per run: `<dataset>/<ablation>/run-<r>/reconstructions.png` (masked input / completed / original), `energy.png`, \
                 `dynamics.png` (tokens and each module's gradient decoded over the steps, Figure 4), `memories.png` (Hopfield memories \
                 decoded, Figure 5), `kernels.png` (W_K and W_Q decoded, Figure 6), `positions.png` (cosine similarity of the position \
                 biases, Figure 7; the paper's sweep over β and weight decay is not run), `worst.png` and `best.png` (the 8 test images of largest and smallest masked-patch MSE averaged \
                 over the masking seeds, Figures 8 and 9).\n");
    md.push_str(&missing.to_markdown());
    Ok(md)
}
