//! `basin demo`: an ET block learns a family of striped patterns in seconds, then completes
//! masked ones by descending its energy — written with the library a user would use:
//! [`basin_tasks::image_completion`] with an ET block from [`basin_et`], trained by
//! basin-train's runner and AdamW.
//!
//! Images are 16×16 grey stripes and checkerboards ([`basin_image::synthetic::stripes`]), cut
//! into 16 patches of 4×4 pixels. Patches are encoded to tokens, some are replaced by a learned
//! MASK token, position embeddings are added, and one ET block (energy attention + Hopfield
//! memory, shared weights) runs T steps of gradient descent on its energy; a decoder reads the
//! patches back from the final tokens. Training minimises the MSE on the masked patches through
//! the unrolled descent. Evaluation prints the energy per step, the completion error beside two
//! baselines, and writes `energy.png`, `completions.png`, the descent step by step
//! (`descent.png`, `descent.gif`, `updates.png`) and `demo.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use basin_core::{AttentionConfig, BlockConfig, DynamicsConfig, TraceOptions};
use basin_image::{Augment, MaskStrategy, Normalize};
use basin_tasks::image_completion::{
    ImageCompletion, ImageCompletionConfig, ImageLearner, ImageLoss, PatchBatchOnDevice,
};
use basin_train::context::RunContext;
use basin_train::optim::OptimConfig;
use basin_train::protocol::PlannedRun;
use basin_train::runner::{TrainConfig, Validation};
use serde::Serialize;
use tch::{Device, Kind, Tensor};

use crate::report::plot_terms;
use crate::{Result, TaskError};

/// What the demo runs.
#[derive(Clone, Debug, Serialize)]
pub struct DemoOptions {
    /// Seed of the data, the initialisation and the masks.
    pub seed: u64,
    /// Training epochs over `train_images` images.
    pub epochs: usize,
    /// Training images.
    pub train_images: usize,
    /// Patches masked per image (of 16).
    pub masked: usize,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            seed: 0,
            epochs: 12,
            train_images: 2048,
            masked: 5,
        }
    }
}

/// The demo's results (`demo.json`).
#[derive(Clone, Debug, Serialize)]
pub struct DemoSummary {
    /// The options.
    pub options: DemoOptions,
    /// The device.
    pub device: String,
    /// The model.
    pub config: ImageCompletionConfig,
    /// Training loss of the last epoch.
    pub final_train_loss: f64,
    /// Masked-patch MSE on the test images (normalised pixels).
    pub test_mse_masked: f64,
    /// The same for predicting the mean pixel (0 after normalisation).
    pub baseline_mse_mean: f64,
    /// The same for predicting each image's mean visible pixel.
    pub baseline_mse_visible_mean: f64,
    /// Mean energy over the test images at each step.
    pub energy_per_step: Vec<f64>,
    /// The same per term.
    pub energy_per_term: Vec<(String, Vec<f64>)>,
    /// Whether the energy never rose along the descent, for every test image.
    pub energy_monotone: bool,
    /// Seconds spent training.
    pub train_seconds: f64,
    /// Seconds in all.
    pub total_seconds: f64,
}

/// The demo's model: 16×16 grey in 4×4 patches, one ET block of width 32 (2 heads of 16,
/// 128 memories, T = 8, α = 0.1); patches attend to themselves, as the image reference code.
pub fn model() -> ImageCompletionConfig {
    let block: BlockConfig = basin_et::block(
        32,
        AttentionConfig {
            heads: 2,
            head_dim: 16,
            init_std: 0.02,
            ..AttentionConfig::default()
        },
        128,
        8,
        DynamicsConfig::gradient_flow(0.1),
    );
    ImageCompletionConfig {
        channels: 1,
        height: 16,
        width: 16,
        patch: 4,
        block,
        self_attention: true,
        cls_token: false,
        token_init_std: 0.02,
        loss: ImageLoss::MaskedMse,
        recompute: false,
        dense_init: Default::default(),
        vit: None,
    }
}

/// Trains, evaluates and writes the pictures and `demo.json` into `out`.
pub fn run(
    opts: &DemoOptions,
    out: &Path,
    device: Device,
    say: &mut dyn FnMut(&str),
) -> Result<DemoSummary> {
    let start = Instant::now();
    if !(1..16).contains(&opts.masked) {
        return Err(TaskError::invalid(
            "--masked",
            format!("between 1 and 15 patches, got {}", opts.masked),
        ));
    }
    let (n_val, n_test) = (128, 256);
    let n = opts.train_images + n_val + n_test;
    let data = basin_image::synthetic::stripes(n, opts.seed)?;
    let train: Vec<usize> = (0..opts.train_images).collect();
    let val: Vec<usize> = (opts.train_images..opts.train_images + n_val).collect();
    let test: Vec<usize> = (opts.train_images + n_val..n).collect();
    let normalize = Normalize::of(&data.subset(&train));
    let cfg = model();
    tch::manual_seed(opts.seed as i64);
    let mut learner = ImageLearner::new(
        &cfg,
        std::sync::Arc::new(data),
        normalize,
        MaskStrategy::Random { k: opts.masked },
        Augment::none(),
        64,
        device,
    )?;
    say(
        "basin demo: fitting an ET block (D = 32, 2 heads, 128 memories, T = 8) on striped 16×16 patterns…",
    );
    let run = PlannedRun::new(
        "demo",
        basin_graph::Split::new(ids(&train), ids(&val), ids(&test)),
        opts.seed,
    );
    let train_config = TrainConfig {
        epochs: opts.epochs,
        optim: OptimConfig {
            lr: 3e-3,
            ..OptimConfig::default()
        },
        ..TrainConfig::default()
    };
    let runner = RunContext::new("basin").with_device(device).runner(
        &run,
        train_config,
        serde_json::json!({}),
    );
    let eval_seed = opts.seed.wrapping_add(1_000_003);
    let record = runner.fit(
        &mut learner,
        &train,
        &[("train", &train), ("val", &val), ("test", &test)],
        |l, _, _| {
            let mse = l.evaluate(&val, &[0])?.mse;
            Ok(Validation {
                metrics: BTreeMap::from([("val_mse".into(), mse)]),
                score: -mse,
                ..Validation::default()
            })
        },
        |l, _| {
            Ok(BTreeMap::from([(
                "test_mse".into(),
                l.evaluate(&test, &[eval_seed])?.mse,
            )]))
        },
    )?;
    let train_seconds = start.elapsed().as_secs_f64();
    let final_train_loss = record
        .epochs
        .last()
        .and_then(|e| e.metrics.get("train_loss").copied())
        .unwrap_or(f64::NAN);
    say(&format!(
        "trained {} epochs in {train_seconds:.1} s, final masked-patch MSE {final_train_loss:.4}",
        opts.epochs
    ));

    // The test images under one set of masks: energy trace and baselines.
    let b = PatchBatchOnDevice::new(
        &learner
            .eval_pipe
            .batch(learner.data.as_ref(), &test, eval_seed)?,
        device,
    );
    let (pred, trace) = tch::no_grad(|| {
        learner
            .model
            .forward(&b, false, Some(TraceOptions::default()))
    });
    let trace = trace.ok_or_else(|| TaskError::invalid("trace", "no trace recorded"))?;
    let mean = |t: &Tensor| {
        ImageCompletion::per_image_mse(t, &b)
            .mean(Kind::Double)
            .double_value(&[])
    };
    let mse = mean(&pred);
    let baseline_mean = mean(&b.patches.zeros_like());
    let visible = b.masked.logical_not().unsqueeze(-1).to_kind(Kind::Float);
    let visible_mean = (&b.patches * &visible).sum_dim_intlist(&[1i64, 2][..], true, Kind::Float)
        / (visible.sum_dim_intlist(&[1i64, 2][..], true, Kind::Float) * b.patches.size()[2] as f64);
    let baseline_visible = mean(&visible_mean.expand_as(&b.patches));
    let totals = trace.mean_total();
    let terms = trace.mean_terms();
    let per_sample: Vec<Vec<f64>> =
        Vec::try_from(&trace.total.tr().contiguous().to_kind(Kind::Double))?;
    let monotone = per_sample.iter().all(|row| {
        row.windows(2)
            .all(|w| w[1] <= w[0] + 1e-6 * w[0].abs().max(1.0))
    });
    say(&format!(
        "\nenergy per step on {} masked test patterns (mean over images):",
        test.len()
    ));
    say(&format!(
        "{:>5} {:>12} {}",
        "step",
        "total",
        terms
            .iter()
            .map(|(n, _)| format!("{n:>12}"))
            .collect::<String>()
    ));
    for (t, e) in totals.iter().enumerate() {
        let parts: String = terms
            .iter()
            .map(|(_, v)| format!("{:>12.4}", v[t]))
            .collect();
        say(&format!("{t:>5} {e:>12.4} {parts}"));
    }
    say(&format!(
        "energy non-increasing along the descent for every image: {monotone}"
    ));
    say("\ncompletion of the masked patches (MSE in normalised pixels, lower is better):");
    say(&format!("  ET block            {mse:.4}"));
    say(&format!("  predict the mean    {baseline_mean:.4}"));
    say(&format!("  mean of visible     {baseline_visible:.4}"));

    std::fs::create_dir_all(out).map_err(|e| basin_core::CoreError::io(out, e))?;
    let energy_png = out.join("energy.png");
    plot_terms(
        &energy_png,
        &format!(
            "ET block: energy per descent step (mean over {} test images)",
            test.len()
        ),
        &terms,
    )?;
    let completions_png = out.join("completions.png");
    let shown: Vec<usize> = test.iter().take(8).copied().collect();
    learner.write_reconstructions(&shown, eval_seed, &completions_png)?;
    // The descent step by step: descent.png, descent.gif, updates.png.
    learner.write_descent(&shown[..shown.len().min(4)], eval_seed, out)?;

    let summary = DemoSummary {
        options: opts.clone(),
        device: basin_core::device::describe(device),
        config: cfg,
        final_train_loss,
        test_mse_masked: mse,
        baseline_mse_mean: baseline_mean,
        baseline_mse_visible_mean: baseline_visible,
        energy_per_step: totals,
        energy_per_term: terms,
        energy_monotone: monotone,
        train_seconds,
        total_seconds: start.elapsed().as_secs_f64(),
    };
    let json: PathBuf = out.join("demo.json");
    let text = serde_json::to_string_pretty(&summary)
        .map_err(|e| TaskError::invalid("demo.json", e.to_string()))?;
    basin_core::fsio::write_atomic(&json, text.as_bytes())?;
    say(&format!(
        "\nwrote {}, {}, {} and, step by step, descent.png, descent.gif and updates.png beside them ({:.1} s in all)",
        energy_png.display(),
        completions_png.display(),
        json.display(),
        summary.total_seconds
    ));
    Ok(summary)
}

/// Items as the split's `u32` ids.
fn ids(items: &[usize]) -> Vec<u32> {
    items.iter().map(|&i| i as u32).collect()
}
