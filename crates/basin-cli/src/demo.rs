//! `basin demo`: an ET block learns a family of striped patterns in seconds, then completes
//! masked ones by descending its energy.
//!
//! Images are 16×16 grey stripes and checkerboards (random orientation, width and phase), cut
//! into 16 patches of 4×4 pixels. Patches are encoded to tokens, some are replaced by a learned
//! MASK token, position embeddings are added, and one ET block (energy attention + Hopfield
//! memory, shared weights) runs T steps of gradient descent on its energy; a linear decoder
//! reads the masked patches back from the final normalised tokens. Training minimises the MSE
//! on the masked patches through the unrolled descent. Evaluation prints the energy per step,
//! the completion error beside two baselines, and writes `energy.png`, `completions.png` and
//! `demo.json`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use basin_core::device::DeviceChoice;
use basin_core::{AttentionConfig, BlockConfig, EnergyBlock, Structure, TermConfig, TraceOptions};
use basin_train::plot::{Picture, Series, image_grid, line_panels};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

const SIDE: i64 = 16;
const PATCH: i64 = 4;
const GRID: i64 = SIDE / PATCH;
const TOKENS: i64 = GRID * GRID;
const PIXELS: i64 = PATCH * PATCH;

/// Arguments of `basin demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory for energy.png, completions.png and demo.json.
    #[arg(long, default_value = "reports/demo")]
    out: PathBuf,
    /// Random seed (data, initialisation, masks).
    #[arg(long, default_value_t = 0)]
    seed: i64,
    /// Training steps (one fresh batch of 64 images each).
    #[arg(long, default_value_t = 400)]
    train_steps: usize,
    /// Patches masked per image (of 16).
    #[arg(long, default_value_t = 5)]
    masked: i64,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
}

/// A batch of `[B, 16, 16]` images in {0, 1}: stripes (horizontal, vertical, diagonal) and
/// checkerboards with random widths 1–3 and phases.
fn patterns(b: i64, device: Device) -> Tensor {
    let opts = (Kind::Int64, device);
    let ys = Tensor::arange(SIDE, opts).view([1, SIDE, 1]);
    let xs = Tensor::arange(SIDE, opts).view([1, 1, SIDE]);
    let family = Tensor::randint(4, [b, 1, 1], opts);
    let width = Tensor::randint_low(1, 4, [b, 1, 1], opts);
    let (py, px) = (
        Tensor::randint(6, [b, 1, 1], opts),
        Tensor::randint(6, [b, 1, 1], opts),
    );
    let (y, x) = (&ys + &py, &xs + &px);
    let horizontal = y.floor_divide(&width);
    let vertical = x.floor_divide(&width);
    let diagonal = (&x + &y).floor_divide(&width);
    let checker = &horizontal + &vertical;
    let pick = |k: i64, t: &Tensor, other: Tensor| t.where_self(&family.eq(k), &other);
    let v = pick(
        0,
        &horizontal,
        pick(1, &vertical, pick(2, &diagonal, checker)),
    );
    v.remainder(2).to_kind(Kind::Float)
}

/// `[B, 16, 16]` → `[B, 16 tokens, 16 pixels]`, row-major over the 4×4 grid of patches.
fn patchify(img: &Tensor) -> Tensor {
    let b = img.size()[0];
    img.view([b, GRID, PATCH, GRID, PATCH])
        .permute([0, 1, 3, 2, 4])
        .reshape([b, TOKENS, PIXELS])
}

fn unpatchify(p: &Tensor) -> Tensor {
    let b = p.size()[0];
    p.view([b, GRID, GRID, PATCH, PATCH])
        .permute([0, 1, 3, 2, 4])
        .reshape([b, SIDE, SIDE])
}

/// `[B, 16]` bool with exactly `k` masked patches per image.
fn random_mask(b: i64, k: i64, device: Device) -> Tensor {
    let ranks = Tensor::rand([b, TOKENS], (Kind::Float, device))
        .argsort(-1, false)
        .argsort(-1, false);
    ranks.lt(k)
}

struct Model {
    encoder: nn::Linear,
    pos: Tensor,
    mask_token: Tensor,
    block: EnergyBlock,
    decoder: nn::Linear,
}

impl Model {
    fn new(path: &nn::Path, cfg: &BlockConfig) -> Result<Self> {
        let d = cfg.dim;
        let small = nn::Init::Randn {
            mean: 0.0,
            stdev: 0.02,
        };
        Ok(Self {
            encoder: nn::linear(path / "encoder", PIXELS, d, Default::default()),
            pos: path.var("pos", &[TOKENS, d], small),
            mask_token: path.var("mask_token", &[d], small),
            block: EnergyBlock::new(&(path / "block"), cfg)?,
            decoder: nn::linear(path / "decoder", d, PIXELS, Default::default()),
        })
    }

    /// Tokens `x_0` for patches `[B, N, P]` with `mask` `[B, N]` replaced by the MASK token.
    fn encode(&self, patches: &Tensor, mask: &Tensor) -> Tensor {
        let tokens = self.encoder.forward(patches);
        let masked = self.mask_token.view([1, 1, -1]).expand_as(&tokens);
        masked.where_self(&mask.unsqueeze(-1), &tokens) + &self.pos
    }

    fn decode(&self, x: &Tensor) -> Tensor {
        self.decoder.forward(&self.block.norm.forward(x))
    }
}

fn masked_mse(pred: &Tensor, target: &Tensor, mask: &Tensor) -> Tensor {
    let m = mask.unsqueeze(-1).to_kind(pred.kind());
    ((pred - target).square() * &m).sum(Kind::Float) / (m.sum(Kind::Float) * PIXELS as f64)
}

#[derive(Serialize)]
struct Summary {
    seed: i64,
    device: String,
    config: BlockConfig,
    train_steps: usize,
    masked_patches: i64,
    final_train_loss: f64,
    test_mse_masked: f64,
    baseline_mse_half: f64,
    baseline_mse_visible_mean: f64,
    energy_per_step: Vec<f64>,
    energy_per_term: Vec<(String, Vec<f64>)>,
    energy_monotone: bool,
    train_seconds: f64,
    total_seconds: f64,
}

pub fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    let device = crate::device(args.device)?;
    if !(1..TOKENS).contains(&args.masked) {
        anyhow::bail!(
            "--masked must be between 1 and {}, got {}",
            TOKENS - 1,
            args.masked
        );
    }
    tch::manual_seed(args.seed);
    let mut cfg = BlockConfig::et(32, 2, 16, 128, 8);
    for t in cfg.terms.iter_mut() {
        if let TermConfig::Attention(a) = t {
            *a = AttentionConfig {
                init_std: 0.02,
                ..a.clone()
            };
        }
    }
    let vs = nn::VarStore::new(device);
    let model = Model::new(&vs.root(), &cfg)?;
    // The image reference code lets patches attend to themselves.
    let structure = Structure::full().with_self_attention(true);
    let mut opt = nn::Adam::default().build(&vs, 3e-3)?;

    println!(
        "basin demo: fitting an ET block (D=32, 2 heads, 128 memories, T=8) on striped 16×16 patterns…"
    );
    let bar = ProgressBar::new(args.train_steps as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps  loss {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut last_loss = f64::NAN;
    for step in 0..args.train_steps {
        let patches = patchify(&patterns(64, device));
        let mask = random_mask(64, args.masked, device);
        let x = model
            .block
            .forward(&model.encode(&patches, &mask), &structure, true);
        let loss = masked_mse(&model.decode(&x), &patches, &mask);
        opt.backward_step(&loss);
        last_loss = loss.double_value(&[]);
        if !last_loss.is_finite() {
            anyhow::bail!("training diverged at step {step}: loss {last_loss}");
        }
        if step % 10 == 0 {
            bar.set_message(format!("{last_loss:.4}"));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let train_seconds = start.elapsed().as_secs_f64();
    println!(
        "trained {} steps in {train_seconds:.1} s, final masked-patch MSE {last_loss:.4}",
        args.train_steps
    );

    // Evaluation on fresh patterns and masks.
    tch::manual_seed(args.seed + 1_000_003);
    let images = patterns(256, device);
    let patches = patchify(&images);
    let mask = random_mask(256, args.masked, device);
    let (x_final, trace, pred) = tch::no_grad(|| {
        let (x, trace) = model.block.run(
            &model.encode(&patches, &mask),
            &structure,
            false,
            Some(TraceOptions::default()),
        );
        let pred = model.decode(&x);
        (x, trace, pred)
    });
    drop(x_final);
    let trace = trace.context("no trace recorded")?;
    let mse = masked_mse(&pred, &patches, &mask).double_value(&[]);
    let half = masked_mse(&patches.full_like(0.5), &patches, &mask).double_value(&[]);
    let visible = mask.logical_not().unsqueeze(-1).to_kind(Kind::Float);
    let mean_visible = (&patches * &visible).sum_dim_intlist(&[1i64, 2][..], true, Kind::Float)
        / (visible.sum_dim_intlist(&[1i64, 2][..], true, Kind::Float) * PIXELS as f64);
    let mean_mse = masked_mse(&mean_visible.expand_as(&patches), &patches, &mask).double_value(&[]);

    let totals = trace.mean_total();
    let terms = trace.mean_terms();
    let per_sample: Vec<Vec<f64>> =
        Vec::try_from(&trace.total.tr().contiguous().to_kind(Kind::Double))?;
    let monotone = per_sample.iter().all(|row| {
        row.windows(2)
            .all(|w| w[1] <= w[0] + 1e-6 * w[0].abs().max(1.0))
    });
    println!("\nenergy per step on 256 masked test patterns (mean over images):");
    println!(
        "{:>5} {:>12} {}",
        "step",
        "total",
        terms
            .iter()
            .map(|(n, _)| format!("{n:>12}"))
            .collect::<String>()
    );
    for (t, e) in totals.iter().enumerate() {
        let parts: String = terms
            .iter()
            .map(|(_, v)| format!("{:>12.4}", v[t]))
            .collect();
        println!("{t:>5} {e:>12.4} {parts}");
    }
    println!("energy non-increasing along the descent for every image: {monotone}");
    println!("\ncompletion of the masked patches (MSE, lower is better):");
    println!("  ET block            {mse:.4}");
    println!("  predict 0.5         {half:.4}");
    println!("  mean of visible     {mean_mse:.4}");

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut panels = vec![Series::new("total energy", totals.clone())];
    panels.extend(
        terms
            .iter()
            .map(|(n, v)| Series::new(format!("{n} energy"), v.clone())),
    );
    let energy_png = args.out.join("energy.png");
    line_panels(
        &energy_png,
        "ET block: energy per descent step (mean over 256 test images)",
        "step",
        &panels,
    )?;

    let shown = 8;
    let filled = unpatchify(
        &pred
            .clamp(0.0, 1.0)
            .where_self(&mask.unsqueeze(-1), &patches),
    );
    let shown_input =
        unpatchify(&patches.where_self(&mask.logical_not().unsqueeze(-1), &patches.full_like(0.5)));
    let to_pics = |t: &Tensor| -> Result<Vec<Picture>> {
        (0..shown)
            .map(|i| {
                let data: Vec<f32> = Vec::try_from(&t.get(i).reshape([-1]).to_device(Device::Cpu))?;
                Ok(Picture {
                    width: SIDE as u32,
                    height: SIDE as u32,
                    channels: 1,
                    data,
                })
            })
            .collect()
    };
    let completions_png = args.out.join("completions.png");
    image_grid(
        &completions_png,
        &[to_pics(&shown_input)?, to_pics(&filled)?, to_pics(&images)?],
        &["masked input", "completed", "original"],
        6,
    )?;

    let summary = Summary {
        seed: args.seed,
        device: basin_core::device::describe(device),
        config: cfg,
        train_steps: args.train_steps,
        masked_patches: args.masked,
        final_train_loss: last_loss,
        test_mse_masked: mse,
        baseline_mse_half: half,
        baseline_mse_visible_mean: mean_mse,
        energy_per_step: totals,
        energy_per_term: terms,
        energy_monotone: monotone,
        train_seconds,
        total_seconds: start.elapsed().as_secs_f64(),
    };
    let json = args.out.join("demo.json");
    basin_core::checkpoint::write_atomic(
        &json,
        serde_json::to_string_pretty(&summary)?.as_bytes(),
    )?;
    println!(
        "\nwrote {}, {} and {} ({:.1} s in all)",
        energy_png.display(),
        completions_png.display(),
        json.display(),
        summary.total_seconds
    );
    Ok(())
}
