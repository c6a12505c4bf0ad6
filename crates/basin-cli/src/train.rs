//! `basin train` and `basin eval`: one graph-model run from a TOML run file, and its
//! re-evaluation from the saved weights (see `basin_et::run` for the file's fields).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use basin_core::device::DeviceChoice;
use basin_et::run::{self, RunSpec};

/// Arguments of `basin train`.
#[derive(clap::Args)]
pub struct TrainArgs {
    /// The run file (TOML): `model` (et-anomaly or et-graph), `data`, `[architecture]`,
    /// `[protocol]`. Start from `basin train --example et-graph > run.toml`.
    config: Option<PathBuf>,
    /// Print a complete run file for this model (et-anomaly or et-graph) and exit.
    #[arg(long, value_name = "MODEL")]
    example: Option<String>,
    /// Output directory (run.toml, per-run records and checkpoints, report, energy.png). An
    /// interrupted run resumes from its last checkpoint when started again with the same file.
    #[arg(long, default_value = "runs/latest")]
    out: PathBuf,
    /// Data directory for dataset names (default: BASIN_DATA_DIR, else ~/.cache/basin/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
}

/// Arguments of `basin eval`.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// A directory written by `basin train`.
    run: PathBuf,
    /// Data directory for dataset names (default: BASIN_DATA_DIR, else ~/.cache/basin/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
}

pub fn train(args: &TrainArgs) -> Result<()> {
    if let Some(model) = &args.example {
        print!("{}", RunSpec::example(model)?);
        return Ok(());
    }
    let Some(config) = &args.config else {
        bail!("give a run file (start from `basin train --example et-graph`)");
    };
    let spec = RunSpec::read(config)?;
    let device = crate::device(args.device)?;
    let data = basin_core::data::data_dir(args.data_dir.as_deref());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let outcome = run::train(&spec, Some(&data), &args.out, device)?;
    for (dir, m) in &outcome.runs {
        println!("{dir}: {}", show(m));
    }
    println!("report: {}", args.out.join("report.md").display());
    Ok(())
}

pub fn eval(args: &EvalArgs) -> Result<()> {
    let device = crate::device(args.device)?;
    let data = basin_core::data::data_dir(args.data_dir.as_deref());
    let outcome = run::eval(&args.run, Some(&data), device)?;
    for (dir, m) in &outcome.runs {
        println!("{dir}: {}", show(m));
    }
    println!("written: {}", args.run.join("eval.md").display());
    Ok(())
}

fn show(m: &std::collections::BTreeMap<String, f64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v:.4}"))
        .collect::<Vec<_>>()
        .join(", ")
}
