//! `basin reproduce <table>`: one paper table, end to end (the registry is basin-repro's; xtask
//! asks `basin reproduce --list` for it).

use std::path::PathBuf;

use anyhow::{Result, bail};
use basin_core::device::DeviceChoice;
use basin_repro::{Context, Overrides, Preset, Table};

/// Reproduce a paper table end to end (report.md and report.json beside the paper's numbers).
///
/// `basin reproduce --list` shows the tables, their presets with their recorded wall time, and
/// their datasets present and missing. Killed and started again with the same command, a
/// reproduction resumes each run from its checkpoint (finished runs are not trained again) and
/// ends with the same records.
///
/// Example: `basin reproduce et-table14 --quick --data-dir DATA`.
#[derive(clap::Args)]
pub struct Args {
    /// The table, e.g. `et-table1` (`--list` shows them all); `table14` names the table of the
    /// one paper that has it; a number several papers share (`table1`) runs each paper's, and
    /// `all` every table, each into `OUT/<id>/` with `OUT/index.md` over them.
    #[arg(required_unless_present = "list")]
    table: Option<String>,
    /// List the tables: id, what each is, its presets with their recorded wall time, and its
    /// datasets present and missing in the data directory.
    #[arg(long)]
    list: bool,
    /// With a name several tables share (`table1`, `all`): only these papers (`et`, `cdat`,
    /// `sfi`, `hopfield`) or ids (repeatable).
    #[arg(long, value_name = "PAPER")]
    only: Vec<String>,
    /// Minutes-long smoke version (tiny subsets, one or two epochs): checks the whole path, not
    /// the model.
    #[arg(long, conflicts_with_all = ["cpu", "paper"])]
    quick: bool,
    /// The documented CPU-scale configuration (smaller models or fewer runs and epochs).
    #[arg(long, conflicts_with = "paper")]
    cpu: bool,
    /// The paper's protocol and models (meant for a GPU). Without --quick, --cpu or --paper a
    /// table runs --paper where a CUDA device is present and --cpu otherwise (the choice is
    /// printed first and written into the report).
    #[arg(long)]
    paper: bool,
    /// Data directory (default: BASIN_DATA_DIR, else ~/.cache/basin/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output directory (default: `reports/<table>`, or `reports/` for several tables).
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
    /// Retrain exactly the runs whose checkpoint or record cannot be read (truncated, corrupt)
    /// and keep every finished one, instead of stopping at the first.
    #[arg(long)]
    restart_damaged: bool,
    /// Only this dataset (repeatable; `--list` shows each table's).
    #[arg(long)]
    dataset: Vec<String>,
    /// Train only shard I of N of the runs (fold f of each model where f mod N = I), so N
    /// processes or machines can share one --out; then run the same command without --shard:
    /// it reads the finished runs and writes the report. Splits the runs that keep records
    /// (cross-validation folds, anomaly and fixed-split seeds); a table without them (the MIL
    /// grid, the timing tables) runs whole in every shard.
    #[arg(long, value_name = "I/N", value_parser = crate::parse_shard)]
    shard: Option<basin_train::context::Shard>,
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

/// The explicit preset flag, if one was given.
fn explicit(args: &Args) -> Option<Preset> {
    if args.quick {
        Some(Preset::Quick)
    } else if args.cpu {
        Some(Preset::Cpu)
    } else if args.paper {
        Some(Preset::Paper)
    } else {
        None
    }
}

/// The preset `table` runs and why: the flag given, else the machine's.
fn preset_of(table: &Table, args: &Args, cuda: bool) -> (Preset, String) {
    match explicit(args) {
        Some(p) => (p, format!("{} given", p.flag())),
        None => table.preset_for_machine(cuda),
    }
}

/// What the datasets of `table` are in `data_dir`: `present`, `missing` and the names.
fn presence(table: &Table, data_dir: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let (mut present, mut missing) = (Vec::new(), Vec::new());
    for d in table.datasets() {
        use basin_data::registry::{DataKind, Presence};
        match basin_data::registry::find(d) {
            Some(info) => match info.presence(data_dir) {
                Presence::Present => present.push(d.to_string()),
                Presence::Generated => present.push(format!("{d} (generated)")),
                _ if info.kind == DataKind::ImageFolder => {
                    missing.push(format!("{d} ({})", info.how_to_get()))
                }
                _ => missing.push(d.to_string()),
            },
            None => present.push(format!("{d} (generated or read by the table)")),
        }
    }
    (present, missing)
}

/// The recorded wall time of `table` at `preset` on a two-core machine, in words.
fn recorded_time(table: &Table, preset: Preset) -> String {
    match basin_repro::report::recorded_time(table.id(), preset) {
        Some(t) => t.to_string(),
        None if preset == Preset::Paper => "paper scale, for a GPU: not timed on a CPU".into(),
        None => basin_repro::report::untimed(table.id())
            .map_or_else(|| "not recorded".into(), |why| format!("not timed: {why}")),
    }
}

fn list(data_dir: &std::path::Path) {
    crate::outln!(
        "tables (`basin reproduce <id>`, `table1` for every paper's Table 1, `all`); data from {}; times as recorded on a 2-core CPU machine (crates/basin-repro/RESULTS.md, data/timings.toml):",
        data_dir.display()
    );
    for t in basin_repro::registry() {
        crate::outln!("  {:<16} {}", t.id(), t.title());
        let times: Vec<String> = t
            .presets()
            .iter()
            .map(|&p| format!("{} {}", p.flag(), recorded_time(t, p)))
            .collect();
        crate::outln!("  {:<16}   presets: {}", "", times.join("; "));
        crate::outln!("  {:<16}   paper: {}", "", t.paper());
        let (present, missing) = presence(t, data_dir);
        if !present.is_empty() {
            crate::outln!("  {:<16}   datasets present: {}", "", present.join(", "));
        }
        if !missing.is_empty() {
            crate::outln!(
                "  {:<16}   datasets missing: {} (`basin data fetch NAME`)",
                "",
                missing.join(", ")
            );
        }
        if t.shards() {
            crate::outln!("  {:<16}   --jobs N: its runs in N processes at once", "");
        }
    }
}

pub fn run(args: &Args, quiet: bool) -> Result<()> {
    let command_started = std::time::Instant::now();
    let data_dir = basin_data::datadir::data_dir(args.data_dir.as_deref());
    let Some(name) = args.table.as_deref().filter(|_| !args.list) else {
        list(&data_dir);
        return Ok(());
    };
    let tables = basin_repro::tables(name, &args.only)?;
    let device = crate::device(args.device)?;
    let cuda = matches!(device, tch::Device::Cuda(_));
    if tables.len() > 1 {
        if args.jobs.is_some() || args.shard.is_some() {
            bail!("--jobs and --shard run one table; name one of them");
        }
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from("reports"));
        let _hold = crate::hold(&out, None)?;
        crate::outln!("{} tables into {}:", tables.len(), out.display());
        for t in &tables {
            let (preset, why) = preset_of(t, args, cuda);
            let (_, missing) = presence(t, &data_dir);
            crate::outln!(
                "  {:<14} {} ({why}); {}; {}",
                t.id(),
                preset.flag(),
                if missing.is_empty() {
                    "every dataset present".to_owned()
                } else {
                    format!("missing {}", missing.join(", "))
                },
                recorded_time(t, preset),
            );
        }
        let ctx = context(
            args,
            quiet,
            data_dir,
            out.clone(),
            device,
            Preset::Quick,
            command_started,
        );
        let index = basin_repro::reproduce_all(&tables, &ctx, |t| preset_of(t, args, cuda))?;
        if basin_train::interrupt::requested() {
            // One line: what stopped and how to go on (the index lists what finished).
            return Err(basin_train::TrainError::Interrupted.into());
        }
        for e in &index {
            match &e.error {
                Some(why) => crate::outln!("{}: failed: {why}", e.id),
                None => crate::outln!("{}: {} ({:.0} s)", e.id, e.report, e.seconds),
            }
        }
        crate::outln!("index: {}", out.join("index.md").display());
        return Ok(());
    }
    let table = tables[0];
    let id = table.id();
    let (preset, reason) = preset_of(table, args, cuda);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("reports").join(id));
    // Held until the command ends: its `--jobs` shards write under it.
    let _hold = crate::hold(&out, args.shard)?;
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
    let mut ctx = context(args, quiet, data_dir, out, device, preset, command_started);
    ctx.preset_reason = reason;
    crate::outln!(
        "{id} ({}, {}) on {} (data: {}; {}) → {}",
        preset.flag(),
        ctx.preset_reason,
        ctx.device_name(),
        ctx.data_dir().display(),
        recorded_time(table, preset),
        ctx.out().display()
    );
    let report = basin_repro::reproduce(id, &ctx)?;
    if report.ran == 0 && !table.datasets().is_empty() {
        // The report's list of what was not found and why (a shard writes no report).
        let why: Vec<String> = report.json["missing"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(|m| format!("- {m}")))
            .collect();
        bail!(
            "no dataset could be loaded from {}:\n{}",
            ctx.data_dir().display(),
            why.join("\n")
        );
    }
    if let Some(s) = args.shard {
        // Under `--jobs` the launcher writes the report once every shard is done.
        if std::env::var_os(basin_dist::launch::LAUNCHED_SHARD).is_none() {
            crate::outln!(
                "shard {s}: its runs are in {}; once every shard is done, run this command again without --shard to write the report",
                ctx.out().display()
            );
        }
        return Ok(());
    }
    crate::outln!("wrote {}", ctx.out().join("report.md").display());
    Ok(())
}

/// The context of a run of `basin reproduce` from its flags.
fn context(
    args: &Args,
    quiet: bool,
    data_dir: PathBuf,
    out: PathBuf,
    device: tch::Device,
    preset: Preset,
    command_started: std::time::Instant,
) -> Context {
    let mut ctx = Context {
        overrides: Overrides {
            epochs: args.epochs,
            datasets: args.dataset.clone(),
            train_images: args.train_images,
            repeats: args.repeats.map(|r| r as usize),
            selection: args.selection,
            inner_folds: args.inner_folds.map(|k| k as usize),
            ema: args.ema,
        },
        command_started,
        ..Context::new(data_dir, out, device, preset)
    };
    ctx.run = ctx
        .run
        .with_shard(args.shard)
        .with_progress(!quiet)
        .with_restart_damaged(args.restart_damaged);
    ctx
}
