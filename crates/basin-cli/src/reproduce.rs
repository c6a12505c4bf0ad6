//! `basin reproduce <table>`: one paper table, end to end (the registry is basin-repro's; xtask
//! asks `basin reproduce --list` for it).

use std::path::PathBuf;

use anyhow::{Result, bail};
use basin_core::device::DeviceChoice;
use basin_repro::{Context, Overrides, Preset};

/// Arguments of `basin reproduce`.
#[derive(clap::Args)]
pub struct Args {
    /// The table, e.g. `et-table1` (`--list` shows them all); `table14` names a table that only
    /// one paper has, and a name several papers share (`table1`) is refused with their ids.
    #[arg(required_unless_present = "list")]
    table: Option<String>,
    /// List the tables: id, presets, datasets, what each is.
    #[arg(long)]
    list: bool,
    /// Minutes-long smoke version (tiny subsets, one or two epochs): checks the whole path, not
    /// the model.
    #[arg(long, conflicts_with_all = ["cpu", "paper"])]
    quick: bool,
    /// The documented CPU-scale configuration (smaller models or fewer runs and epochs).
    #[arg(long, conflicts_with = "paper")]
    cpu: bool,
    /// The paper's protocol and models (meant for a GPU). Without --quick, --cpu or --paper a
    /// table runs its first preset (`--list` shows which).
    #[arg(long)]
    paper: bool,
    /// Data directory (default: BASIN_DATA_DIR, else ~/.cache/basin/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output directory (default: reports/<table>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
    /// Override the number of epochs (tables that train).
    #[arg(long)]
    epochs: Option<usize>,
    /// Override the number of training images (et-table14).
    #[arg(long)]
    train_images: Option<usize>,
    /// Repeat the cross-validation N times, fold seeds 0..N, models and baselines alike (TU
    /// tables); small sets such as MUTAG move by points between fold seeds. Into a directory
    /// that holds fewer, only the new repeats train (the finished folds are read back).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    repeats: Option<u64>,
    /// How each fold's epoch is chosen on its inner validation split, baselines included (TU
    /// tables): `metric` (highest accuracy, ties to the earlier epoch), `metric-then-loss`
    /// (ties to the lower validation cross-entropy; the default) or `loss` (lowest validation
    /// cross-entropy).
    #[arg(long)]
    selection: Option<basin_train::protocol::Selection>,
    /// Choose each fold's number of epochs on K inner folds of its training part instead of its
    /// validation split, baselines included (TU tables): a model per inner fold scores the
    /// held-out inner fold after every epoch, the best epoch of their mean curve (under
    /// `--selection`) is the count, and the fold's model trains on the whole training part for
    /// it. K + 1 trainings per fold; small sets (MUTAG's validation split holds 19 graphs)
    /// choose their epoch with less noise.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(2..))]
    inner_folds: Option<u64>,
    /// Validate, select and test an exponential moving average of the weights with this decay
    /// (e.g. 0.99; updated after every optimiser step, TensorFlow's warm-up rule), baselines
    /// included (TU tables): a smoother validation curve to choose the epoch on.
    #[arg(long, value_name = "DECAY", value_parser = crate::parse_decay)]
    ema: Option<f64>,
    /// Only this dataset (repeatable; `--list` shows each table's).
    #[arg(long)]
    dataset: Vec<String>,
    /// Train only shard I of N of the runs (fold f of each model where f mod N = I), so N
    /// processes or machines can share one --out; then run the same command without --shard:
    /// it reads the finished runs and writes the report. Splits the runs that keep records
    /// (cross-validation folds, anomaly and fixed-split seeds); a table without them (the MIL
    /// grid, the timing tables) runs whole in every shard.
    #[arg(long, value_name = "I/N", value_parser = crate::parse_shard)]
    shard: Option<basin_train::runner::Shard>,
    /// Train the table's runs in N local processes at once, each its own `--shard i/N` with the
    /// cores divided among them, then write the report: what N `--shard` commands and one
    /// without would do, in one command. For the tables whose training all keeps records (the
    /// TU and anomaly tables; `--list` marks them).
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "shard",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    jobs: Option<u64>,
}

fn list() {
    println!("tables (`basin reproduce <id>`; the first preset is the default):");
    for t in basin_repro::registry() {
        let presets: Vec<&str> = t.presets().iter().map(|p| p.flag()).collect();
        println!("  {:<16} {}", t.id(), t.title());
        println!(
            "  {:<16}   presets {}; paper: {}",
            "",
            presets.join(" "),
            t.paper()
        );
        if !t.datasets().is_empty() {
            println!("  {:<16}   datasets {}", "", t.datasets().join(", "));
        }
        if t.shards() {
            println!("  {:<16}   --jobs N: its runs in N processes at once", "");
        }
    }
}

pub fn run(args: &Args) -> Result<()> {
    let Some(id) = args.table.as_deref().filter(|_| !args.list) else {
        list();
        return Ok(());
    };
    let table = basin_repro::find(id)?;
    let id = table.id();
    let preset = if args.quick {
        Preset::Quick
    } else if args.cpu {
        Preset::Cpu
    } else if args.paper {
        Preset::Paper
    } else {
        table.presets()[0]
    };
    if let Some(n) = args.jobs.filter(|&n| n > 1) {
        if !table.shards() {
            let which: Vec<&str> = basin_repro::registry()
                .into_iter()
                .filter(|t| t.shards())
                .map(|t| t.id())
                .collect();
            bail!(
                "{id} also trains outside its record-keeping runs, which every shard would run again: --jobs is for {}",
                which.join(", ")
            );
        }
        // Each process is this command less `--jobs`, given its shard; this one then reads the
        // finished runs (nothing is trained again) and writes the report.
        let exe = std::env::current_exe()?;
        basin_dist::launch_shards(
            n as usize,
            &exe,
            &crate::without_jobs(std::env::args_os().skip(1)),
        )?;
    }
    let device = crate::device(args.device)?;
    let ctx = Context {
        data_dir: basin_graph::datadir::data_dir(args.data_dir.as_deref()),
        out: args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("reports").join(id)),
        device,
        preset,
        overrides: Overrides {
            epochs: args.epochs,
            datasets: args.dataset.clone(),
            train_images: args.train_images,
            repeats: args.repeats.map(|r| r as usize),
            selection: args.selection,
            inner_folds: args.inner_folds.map(|k| k as usize),
            ema: args.ema,
        },
    };
    println!(
        "{id} ({}) on {} (data: {}) → {}",
        preset.flag(),
        ctx.device_name(),
        ctx.data_dir.display(),
        ctx.out.display()
    );
    basin_train::runner::set_shard(args.shard);
    let report = basin_repro::reproduce(id, &ctx)?;
    if report.ran == 0 && !table.datasets().is_empty() {
        // The report's list of what was not found and why (a shard writes no report).
        let why: Vec<&str> = report
            .markdown
            .lines()
            .skip_while(|l| !l.starts_with("Datasets not run"))
            .skip(1)
            .take_while(|l| l.starts_with("- "))
            .collect();
        bail!(
            "no dataset could be loaded from {}:\n{}",
            ctx.data_dir.display(),
            why.join("\n")
        );
    }
    if let Some(s) = args.shard {
        // Under `--jobs` the launcher writes the report once every shard is done.
        if std::env::var_os(basin_dist::launch::LAUNCHED_SHARD).is_none() {
            println!(
                "shard {s}: its runs are in {}; once every shard is done, run this command again without --shard to write the report",
                ctx.out.display()
            );
        }
        return Ok(());
    }
    println!("wrote {}", ctx.out.join("report.md").display());
    Ok(())
}
