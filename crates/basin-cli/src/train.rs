//! `basin train` and `basin eval`: one run from a TOML run file, and its re-evaluation from
//! the saved weights (see `basin_tasks::run_file` for the file's fields).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use basin_core::device::DeviceChoice;
use basin_repro::examples::{EXAMPLES, example};
use basin_tasks::TaskError;
use basin_tasks::run_file::{self, RunSpec};
use basin_train::context::RunContext;

/// Train a model from a run file (records, checkpoints, report); `--example` prints one.
///
/// Start from an example: `basin train --example list` names them, `basin train --example
/// et-graph > mutag.toml` prints one (a CPU-scale ET on MUTAG under 10-fold cross-validation),
/// `basin train mutag.toml --out runs/mutag` trains it and `basin eval runs/mutag` scores its
/// saved weights again; `basin compare` and `basin select` set runs side by side.
///
/// A run file names the `task`: `graph-classification` (stratified k-fold cross-validation),
/// `node-anomaly` (the anomaly protocol) or `image-completion` (seeded draws of training,
/// validation and test images, scored over several masking seeds by PSNR and SSIM beside two
/// baselines on the same masks: the training mean and each image's visible mean). Then the
/// `data` (a name or a path, as for `basin data`), `[architecture]` (the task's config with its
/// `[architecture.block]`: any registered terms and dynamics; omitted fields take ET's preset)
/// and `[protocol]` (split, runs or folds, epochs, optimiser, schedule). Unknown fields and
/// kinds are errors naming the file and the field. Each field (the model switches: readouts,
/// kernels, encodings, initialisations) is documented where it is defined, in `basin_tasks`.
///
/// Bad values are refused when the file is read, before any data is loaded or anything is
/// written, naming the file and the field; what depends on the data (folds against the smallest
/// class, the encodings' k against the node cap) once the data is read, still before `run.toml`
/// is written.
///
/// A run killed at any moment (SIGKILL included) and started again with the same file and
/// `--out` resumes each run from its checkpoint, trains no finished run again and ends with the
/// same records as an uninterrupted one, wall-clock fields aside (every file is written to a
/// temporary and renamed; temporaries of killed writes are removed). Each record holds its
/// model's configuration (`model` in `record.json`): a checkpoint of another model under the
/// same protocol, seed and splits is refused instead of trained on, naming the first fields that
/// differ (records from before `model` was recorded are resumed on trust). A switch added since
/// a run was recorded takes its default there, which keeps the behaviour from before it.
#[derive(clap::Args)]
pub struct TrainArgs {
    /// The run file (TOML): `task` (graph-classification, node-anomaly or image-completion), `data`,
    /// `[architecture]` (with its `[architecture.block]`), `[protocol]`. Start from
    /// `basin train --example et-graph > run.toml`.
    config: Option<PathBuf>,
    /// Print a complete run file and exit: et-graph, et-anomaly, cdat-graph, cdat-anomaly,
    /// et-image; `--example list` says what each is.
    #[arg(long, value_name = "NAME")]
    example: Option<String>,
    /// Output directory (run.toml, per-run records and checkpoints, report, energy.png). An
    /// interrupted run resumes from its last checkpoint when started again with the same file.
    ///
    /// `run.toml` (the run file as run, `--set` applied); a directory per run or fold with its
    /// `record.json`, `record.csv` (the per-epoch metrics, for pandas or a spreadsheet) and
    /// `checkpoint.safetensors`; `report.md`, `report.json` and `energy.png` (each block's
    /// energy per step under the first run's selected weights). Image completion also writes
    /// `reconstructions.png`, `worst.png`, `best.png`, `dynamics.png`, the descent step by
    /// step (`descent.png`, `descent.gif`, `updates.png`), `memories.png`, `kernels.png` and
    /// `positions.png`.
    #[arg(long, default_value = "runs/latest")]
    out: PathBuf,
    /// Data directory for dataset names (default: BASIN_DATA_DIR, else ~/.cache/basin/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
    /// Train data-parallel in N local processes, like `torchrun --standalone --nproc-per-node
    /// N` (Gloo; each rank on its share of every batch: the run file's batch is the global
    /// batch). Under torchrun or srun leave it out: their RANK, WORLD_SIZE, MASTER_ADDR and
    /// MASTER_PORT are used (README: "Training on several GPUs or machines").
    #[arg(long, value_name = "N")]
    nproc: Option<usize>,
    /// Train only shard I of N of the protocol's runs (fold or seed r where r mod N = I), so N
    /// processes or machines can share one --out; then run the same command without --shard:
    /// it reads the finished runs and writes the report.
    #[arg(long, value_name = "I/N", value_parser = crate::parse_shard)]
    shard: Option<basin_train::context::Shard>,
    /// Retrain exactly the runs whose checkpoint or record cannot be read (truncated, corrupt)
    /// and keep every finished one, instead of stopping at the first.
    #[arg(long)]
    restart_damaged: bool,
    /// Train the protocol's runs (folds, seeds) in N local processes at once, each its own
    /// `--shard i/N` with the cores divided among them, then write the report: what N `--shard`
    /// commands and one without would do, in one command. Runs are independent, so on a
    /// machine of C cores `--jobs C` (one thread each) is usually the fastest way through a
    /// cross-validation of small graphs.
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["shard", "nproc"],
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    jobs: Option<u64>,
    /// Override one field of the run file (repeatable, applied in order): a dotted KEY, a TOML
    /// VALUE or a bare word for a string. `--set architecture.batching.pe.k=8 --set data=PROTEINS`;
    /// an array element by index (`architecture.block.terms.1.memories=256`). The run's
    /// `run.toml` holds the result, so a sweep is one file and several --out directories, among
    /// which `basin select` chooses fold by fold.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
}

/// Score a trained run's saved weights on its held-out splits again (and plot its energy).
///
/// Rebuilds every split from the directory's `run.toml` (the protocol's own plan), refuses a
/// split whose hash differs from the run's record, loads each run's selected weights and writes
/// `eval.md`, `eval.json` and `energy.png`.
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

pub fn train(args: &TrainArgs, quiet: bool) -> Result<()> {
    if let Some(name) = &args.example {
        if name == "list" {
            for (n, what) in EXAMPLES {
                crate::outln!("{n:<12} {what}");
            }
        } else {
            crate::out!("{}", example(name)?);
        }
        return Ok(());
    }
    let Some(config) = &args.config else {
        bail!("give a run file (start from `basin train --example et-graph`)");
    };
    let spec = RunSpec::read_with(config, &args.sets)?;
    // Held until the command ends: its launched shards and ranks write under it.
    let _hold = crate::hold(&args.out, args.shard)?;
    if let Some(n) = args.nproc
        && std::env::var_os("WORLD_SIZE").is_none()
    {
        // The launcher: the ranks are this same command, told who they are by the variables.
        let exe = std::env::current_exe().context("finding the basin executable")?;
        let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        basin_dist::launch(n, &exe, &argv)?;
        return Ok(());
    }
    if let Some(n) = args.jobs.filter(|&n| n > 1) {
        // Each process is this command less `--jobs`, given its shard; this one then reads the
        // finished runs (nothing is trained again) and writes the report.
        let exe = std::env::current_exe().context("finding the basin executable")?;
        basin_dist::launch_shards(
            n as usize,
            &exe,
            &crate::without_jobs(std::env::args_os().skip(1)),
        )?;
    }
    let group = basin_dist::init_from_env()?;
    let mut device = crate::device(args.device)?;
    if let (Some(g), tch::Device::Cuda(_)) = (&group, device) {
        // One GPU per local rank, as torchrun's LOCAL_RANK means.
        device = tch::Device::Cuda(g.env().local_rank);
    }
    let data = basin_data::datadir::data_dir(args.data_dir.as_deref());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let ctx = RunContext::new(spec.title())
        .with_out(&args.out)
        .with_device(device)
        .with_data_dir(data)
        .with_shard(args.shard)
        .with_progress(!quiet)
        .with_restart_damaged(args.restart_damaged);
    let outcome = spec.train(&ctx).map_err(|e| {
        // The protocol or the dataset does not fit the task: name the run file it came from.
        let (field, message) = match &e {
            TaskError::Invalid { field, message } | TaskError::Config { field, message } => {
                (field.clone(), message.clone())
            }
            _ => return e,
        };
        if ["protocol", "data", "architecture"].contains(&field.as_str()) {
            TaskError::invalid(format!("{}: {field}", config.display()), message)
        } else {
            e
        }
    })?;
    if let Some(g) = group {
        // No rank leaves (closing rank 0's rendezvous store) before all are done.
        g.barrier()?;
        basin_dist::set_current(None);
        if g.rank() != 0 {
            return Ok(());
        }
    }
    // Under `--jobs` the launcher lists every run and writes the report once all are done.
    let launched = std::env::var_os(basin_dist::launch::LAUNCHED_SHARD).is_some();
    if args.shard.is_some() && launched {
        return Ok(());
    }
    for (dir, m) in &outcome.runs {
        crate::outln!("{dir}: {}", show(m));
    }
    if let Some(s) = args.shard {
        crate::outln!(
            "shard {s}: its runs are in {}; once every shard is done, run this command again without --shard to write the report",
            args.out.display()
        );
        return Ok(());
    }
    crate::outln!("report: {}", args.out.join("report.md").display());
    Ok(())
}

pub fn eval(args: &EvalArgs) -> Result<()> {
    let device = crate::device(args.device)?;
    let _hold = crate::hold(&args.run, None)?;
    let data = basin_data::datadir::data_dir(args.data_dir.as_deref());
    let outcome = run_file::eval(&args.run, Some(&data), device)?;
    for (dir, m) in &outcome.runs {
        crate::outln!("{dir}: {}", show(m));
    }
    crate::outln!("written: {}", args.run.join("eval.md").display());
    Ok(())
}

fn show(m: &std::collections::BTreeMap<String, f64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v:.4}"))
        .collect::<Vec<_>>()
        .join(", ")
}
