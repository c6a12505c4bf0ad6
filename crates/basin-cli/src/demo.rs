//! `basin demo`: an ET block learns striped patterns in seconds and completes masked ones
//! (see `basin_repro::demo`).

use std::path::PathBuf;

use anyhow::Result;
use basin_core::device::DeviceChoice;
use basin_repro::demo::DemoOptions;

/// Fit a small ET block on synthetic patterns, then complete masked ones (energy plot, pictures).
///
/// An ET block learns 16×16 grey stripes and checkerboards (16 patches of 4×4 pixels) in
/// seconds, then completes images with `--masked` patches hidden by descending its energy; it
/// prints the energy per step and the completion error beside two baselines.
///
/// Example: `basin demo --out reports/demo`.
#[derive(clap::Args)]
pub struct Args {
    /// Output directory for energy.png, completions.png, descent.png, descent.gif, updates.png
    /// and demo.json.
    #[arg(long, default_value = "reports/demo")]
    out: PathBuf,
    /// Random seed (data, initialisation, masks).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Training epochs (over 2048 images, batches of 64).
    #[arg(long, default_value_t = 12)]
    epochs: usize,
    /// Patches masked per image (of 16).
    #[arg(long, default_value_t = 5)]
    masked: usize,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
}

pub fn run(args: &Args) -> Result<()> {
    let device = crate::device(args.device)?;
    let opts = DemoOptions {
        seed: args.seed,
        epochs: args.epochs,
        masked: args.masked,
        ..DemoOptions::default()
    };
    basin_repro::demo::run(&opts, &args.out, device, &mut |line| {
        crate::outln!("{line}")
    })?;
    Ok(())
}
