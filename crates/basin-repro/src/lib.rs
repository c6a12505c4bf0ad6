//! # basin-repro
//!
//! Every paper table basin reproduces, each a [`Reproduction`] in its own file that registers
//! itself ([`register_table!`]; [`registry`] collects them, `basin reproduce --list` prints
//! them and `cargo xtask` asks the binary for them), plus what experiments share: [`report`]
//! (paper numbers from `data/papers/*.toml`, missing datasets, energy plots, `report.md` +
//! `report.json`), [`tu`] (TU classification under leak-free CV with baselines, for every
//! family), [`examples`] (the example run files of `basin train --example`) and the [`demo`].
//!
//! Tables are named by id and subject, not by one paper's numbering alone: CDAT's Table 1 is
//! ET's Table 2 task, so a table that compares families lives here, where every family is in
//! reach. The modules [`et`], [`cdat`], [`sfi`] and [`hopfield`] hold each paper's tables, one
//! file per table (or per group of tables that share their runs).
//!
//! Adding a table is its file (a unit struct, its [`TableInfo`], its `run`, and
//! `register_table!`) and its paper numbers in `data/papers/<id>.toml`.

use std::path::PathBuf;
use std::time::Instant;

use basin_train::context::{RunContext, Shard};
use serde::{Deserialize, Serialize};
use tch::Device;

pub mod anomaly;
pub mod demo;
pub mod examples;
pub mod report;
pub mod tu;

/// The Energy Transformer's tables.
pub mod et {
    pub mod ablation_table13;
    pub mod ablation_table14;
    pub mod anomaly_table1;
    pub mod gnn_table7;
    pub mod heterogeneous_table12;
    pub mod params_table15;
    pub mod tu_table2;
    pub mod vit_table16;
}

/// CDAT's tables.
pub mod cdat {
    pub mod ablation_table12;
    pub mod anomaly_table2;
    pub mod cost_table4;
    pub mod params_tables13_14;
    pub mod tu_tables;
}

/// SFi-Former's tables (and the GraphGPS rows beside them).
pub mod sfi;

/// The Hopfield slides' tables.
pub mod hopfield {
    pub mod claims;
    pub mod memory;
    pub mod mil;
}

pub use report::Report;

/// basin-repro's errors and results are basin-tasks': a table is tasks run many times.
pub use basin_tasks::{Result, TaskError};

/// How much of a table to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Minutes: checks the whole path on tiny subsets, says nothing about the model (CI).
    Quick,
    /// The documented CPU scale (smaller models, fewer runs or epochs; hours at most).
    Cpu,
    /// The paper's protocol and models (a GPU).
    Paper,
}

impl Preset {
    /// The preset `table` runs without a preset flag: the paper's where a CUDA device is
    /// present, the CPU scale otherwise (or, where the table lacks that one, its first), with
    /// the reason in words.
    pub fn for_machine(table: &dyn Reproduction, cuda: bool) -> (Self, String) {
        let wanted = if cuda { Self::Paper } else { Self::Cpu };
        let why = if cuda {
            "a CUDA device is present"
        } else {
            "no CUDA device"
        };
        if table.presets().contains(&wanted) {
            return (
                wanted,
                format!("{} chosen for this machine ({why})", wanted.flag()),
            );
        }
        let first = table.presets()[0];
        (
            first,
            format!(
                "{} chosen for this machine ({why}; {} has no {})",
                first.flag(),
                table.id(),
                wanted.flag()
            ),
        )
    }

    /// The flag that selects it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Quick => "--quick",
            Self::Cpu => "--cpu",
            Self::Paper => "--paper",
        }
    }
}

/// Overrides a table may accept (each table says which; the others are refused).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    /// Number of epochs.
    pub epochs: Option<usize>,
    /// Only these datasets.
    pub datasets: Vec<String>,
    /// Number of training images.
    pub train_images: Option<usize>,
    /// Repeats of the cross-validation (each with its own fold seed), baselines included.
    pub repeats: Option<usize>,
    /// How the cross-validation picks each fold's epoch, baselines included.
    pub selection: Option<basin_train::protocol::Selection>,
    /// Choose each fold's number of epochs on this many inner folds of its training part
    /// ([`basin_train::protocol::CrossValidation::inner_folds`]), baselines included.
    pub inner_folds: Option<usize>,
    /// Evaluate an exponential moving average of the weights with this decay
    /// ([`basin_train::runner::TrainConfig::ema`]), baselines included.
    pub ema: Option<f64>,
}

/// One override, for [`Reproduction::accepts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Override {
    /// `--epochs`.
    Epochs,
    /// `--dataset`.
    Dataset,
    /// `--train-images`.
    TrainImages,
    /// `--repeats`.
    Repeats,
    /// `--selection`.
    Selection,
    /// `--inner-folds`.
    InnerFolds,
    /// `--ema`.
    Ema,
}

impl Override {
    fn flag(self) -> &'static str {
        match self {
            Self::Epochs => "--epochs",
            Self::Dataset => "--dataset",
            Self::TrainImages => "--train-images",
            Self::Repeats => "--repeats",
            Self::Selection => "--selection",
            Self::InnerFolds => "--inner-folds",
            Self::Ema => "--ema",
        }
    }
}

/// Everything a reproduction runs with.
#[derive(Clone, Debug)]
pub struct Context {
    /// Where datasets are read from.
    pub data_dir: PathBuf,
    /// Where the report, run records and pictures go.
    pub out: PathBuf,
    /// The device.
    pub device: Device,
    /// How much to run.
    pub preset: Preset,
    /// Flags that change the preset.
    pub overrides: Overrides,
    /// This process's share of the runs (`--shard`); a sharded process writes no report.
    pub shard: Option<Shard>,
    /// Show progress bars.
    pub progress: bool,
    /// Retrain runs whose checkpoint cannot be read instead of stopping (`--restart-damaged`).
    pub restart_damaged: bool,
    /// Why this preset runs (`chosen for this machine: no CUDA device`, `--cpu given`), printed
    /// first and written into the report.
    pub preset_reason: String,
    /// When the table's command started (before any `--jobs` shard), for the report's footer.
    pub command_started: Instant,
    /// When this pass of the table started.
    pub pass_started: Instant,
}

impl Context {
    /// A context writing to `out` with the preset's defaults: every run, progress shown.
    pub fn new(data_dir: PathBuf, out: PathBuf, device: Device, preset: Preset) -> Self {
        Self {
            data_dir,
            out,
            device,
            preset,
            overrides: Overrides::default(),
            shard: None,
            progress: true,
            restart_damaged: false,
            preset_reason: format!("{} given", preset.flag()),
            command_started: Instant::now(),
            pass_started: Instant::now(),
        }
    }

    /// The device as the reports name it.
    pub fn device_name(&self) -> String {
        basin_core::device::describe(self.device)
    }

    /// The context of a protocol's runs named `name`, writing under `dir` (the device, the
    /// shard and progress are this one's).
    pub fn runs(&self, name: impl Into<String>, dir: impl Into<PathBuf>) -> RunContext {
        RunContext::new(name)
            .with_out(dir)
            .with_device_label(self.device_name())
            .with_shard(self.shard)
            .with_progress(self.progress)
            .with_restart_damaged(self.restart_damaged)
    }

    /// Whether this process holds every run, and so writes reports and plots.
    pub fn reports(&self) -> bool {
        self.shard.is_none()
    }
}

/// What a table is, as one value: its id, what it shows, where in its paper, the datasets it
/// looks for, its presets (the first is the default), the overrides it accepts, and whether
/// shards can split it.
#[derive(Clone, Copy, Debug)]
pub struct TableInfo {
    /// Its id, e.g. `et-table1`.
    pub id: &'static str,
    /// One line on what it is.
    pub title: &'static str,
    /// The paper (the paper's name and the section or table).
    pub paper: &'static str,
    /// The datasets it looks for.
    pub datasets: &'static [&'static str],
    /// The presets it has; the first is the default.
    pub presets: &'static [Preset],
    /// The overrides it accepts.
    pub accepts: &'static [Override],
    /// Whether all its training goes through runs that keep records (cross-validation folds,
    /// anomaly seeds), so that shards split it with nothing run twice and `basin reproduce
    /// --jobs N` can train it in N processes at once; a table that also trains outside them (a
    /// grid, timings) says no.
    pub shards: bool,
}

/// A paper table, end to end: its [`TableInfo`] and one function that runs it. A table
/// registers itself in its own file with [`register_table!`]; nothing else lists it.
pub trait Reproduction: Sync {
    /// What the table is.
    fn info(&self) -> &'static TableInfo;
    /// Runs it; the report is not written yet (see [`reproduce`]).
    fn run(&self, ctx: &Context) -> Result<Report>;
    /// Its id, e.g. `et-table1`.
    fn id(&self) -> &'static str {
        self.info().id
    }
    /// One line on what it is.
    fn title(&self) -> &'static str {
        self.info().title
    }
    /// The paper (the paper's name and the section or table).
    fn paper(&self) -> &'static str {
        self.info().paper
    }
    /// The datasets it looks for.
    fn datasets(&self) -> &'static [&'static str] {
        self.info().datasets
    }
    /// The presets it has; the first is the default.
    fn presets(&self) -> &'static [Preset] {
        self.info().presets
    }
    /// The overrides it accepts.
    fn accepts(&self) -> &'static [Override] {
        self.info().accepts
    }
    /// Whether shards can split it ([`TableInfo::shards`]).
    fn shards(&self) -> bool {
        self.info().shards
    }
}

/// A registered table (what [`register_table!`] submits).
pub struct TableEntry(pub &'static dyn Reproduction);

inventory::collect!(TableEntry);

/// Registers a table (a unit struct implementing [`Reproduction`]) so that `basin reproduce`
/// and `--list` know it. Write it next to the table.
#[macro_export]
macro_rules! register_table {
    ($table:expr) => {
        $crate::inventory::submit! { $crate::TableEntry(&$table) }
    };
}

/// Re-exported for [`register_table!`].
#[doc(hidden)]
pub use inventory;

/// Where a table stands in listings: by paper (ET, CDAT, SFi-Former, the Hopfield slides),
/// then by table number (tables without one last), then by id.
fn listing_order(id: &str) -> (usize, u32, &str) {
    let (paper, rest) = id.split_once('-').unwrap_or((id, ""));
    let rank = ["et", "cdat", "sfi", "hopfield"]
        .iter()
        .position(|p| *p == paper)
        .unwrap_or(usize::MAX);
    let number = rest
        .strip_prefix("table")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX);
    (rank, number, id)
}

/// Every registered table, in the order `--list` shows them ([`register_table!`]).
pub fn registry() -> Vec<&'static dyn Reproduction> {
    let mut tables: Vec<&'static dyn Reproduction> = inventory::iter::<TableEntry>
        .into_iter()
        .map(|e| e.0)
        .collect();
    tables.sort_by_key(|t| listing_order(t.id()));
    tables
}

/// The table `id`; a name without its paper's prefix (`table14`) when one paper has such a
/// table. Otherwise an error that lists the tables it could mean (`table1`: ET's, CDAT's and
/// SFi-Former's), or every known id.
pub fn find(id: &str) -> Result<&'static dyn Reproduction> {
    if let Some(table) = registry().into_iter().find(|r| r.id() == id) {
        return Ok(table);
    }
    let mut papers: Vec<&'static dyn Reproduction> = registry()
        .into_iter()
        .filter(|r| r.id().split_once('-').is_some_and(|(_, rest)| rest == id))
        .collect();
    match papers.len() {
        1 => Ok(papers.remove(0)),
        0 => {
            let known: Vec<&str> = registry().iter().map(|r| r.id()).collect();
            Err(TaskError::invalid(
                "table",
                format!("unknown table `{id}`; known: {}", known.join(", ")),
            ))
        }
        _ => {
            let which: Vec<String> = papers
                .iter()
                .map(|r| format!("`{}` ({})", r.id(), r.title()))
                .collect();
            Err(TaskError::invalid(
                "table",
                format!(
                    "`{id}` is a table of {} papers; name one: {}",
                    papers.len(),
                    which.join("; ")
                ),
            ))
        }
    }
}

/// The tables `name` stands for, in the registry's order (ET, CDAT, SFi-Former, the Hopfield
/// slides): `all`, one table's id, or a number several papers share (`table1`: each paper's
/// Table 1); `only` (paper prefixes such as `et`, or full ids) narrows them.
pub fn tables(name: &str, only: &[String]) -> Result<Vec<&'static dyn Reproduction>> {
    let mut found: Vec<&'static dyn Reproduction> = if name == "all" {
        registry()
    } else if let Some(t) = registry().into_iter().find(|r| r.id() == name) {
        vec![t]
    } else {
        let shared: Vec<&'static dyn Reproduction> = registry()
            .into_iter()
            .filter(|r| r.id().split_once('-').is_some_and(|(_, rest)| rest == name))
            .collect();
        if shared.is_empty() {
            find(name)?;
        }
        shared
    };
    if !only.is_empty() {
        let keep = |t: &&dyn Reproduction| {
            let paper = t.id().split_once('-').map_or(t.id(), |(p, _)| p);
            only.iter().any(|o| o == paper || o == t.id())
        };
        let all = found.clone();
        found.retain(keep);
        if found.is_empty() {
            let ids: Vec<&str> = all.iter().map(|t| t.id()).collect();
            return Err(TaskError::invalid(
                "--only",
                format!(
                    "{} leaves none of {}; name a paper (et, cdat, sfi, hopfield) or an id",
                    only.join(", "),
                    ids.join(", ")
                ),
            ));
        }
    }
    Ok(found)
}

/// Checks the context against what `table` takes: a preset it has, overrides it accepts
/// (refused with a message, never silently ignored).
pub fn check(table: &dyn Reproduction, ctx: &Context) -> Result<()> {
    if !table.presets().contains(&ctx.preset) {
        let has: Vec<&str> = table.presets().iter().map(|p| p.flag()).collect();
        return Err(TaskError::invalid(
            ctx.preset.flag(),
            format!(
                "{} has no such preset; it has {}",
                table.id(),
                has.join(", ")
            ),
        ));
    }
    let o = &ctx.overrides;
    for (given, which) in [
        (o.epochs.is_some(), Override::Epochs),
        (!o.datasets.is_empty(), Override::Dataset),
        (o.train_images.is_some(), Override::TrainImages),
        (o.repeats.is_some(), Override::Repeats),
        (o.selection.is_some(), Override::Selection),
        (o.inner_folds.is_some(), Override::InnerFolds),
        (o.ema.is_some(), Override::Ema),
    ] {
        if given && !table.accepts().contains(&which) {
            return Err(TaskError::invalid(
                which.flag(),
                format!("{} does not take this flag", table.id()),
            ));
        }
    }
    for d in &o.datasets {
        if !table.datasets().iter().any(|k| k.eq_ignore_ascii_case(d)) {
            return Err(TaskError::invalid(
                "--dataset",
                format!(
                    "{} has no dataset `{d}`; it runs {}",
                    table.id(),
                    table.datasets().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Checks, runs and writes `ctx.out/report.md` and `report.json` for table `id`. A sharded
/// process ([`Context::shard`]) trains its runs and writes no report: the same command run
/// again without a shard reads every finished run and writes it.
pub fn reproduce(id: &str, ctx: &Context) -> Result<Report> {
    let table = find(id)?;
    check(table, ctx)?;
    let mut report = table.run(ctx)?;
    // The preset and why it ran, under the title; the whole command's time at the end.
    let note = format!("Preset: {} ({}).\n\n", ctx.preset.flag(), ctx.preset_reason);
    report.markdown = match report.markdown.split_once("\n\n") {
        Some((title, rest)) => format!("{title}\n\n{note}{rest}"),
        None => format!("{note}{}", report.markdown),
    };
    let command = ctx.command_started.elapsed().as_secs_f64();
    report.markdown.push_str(&format!(
        "\nThe command took {command:.0} s of wall time for this table, every pass and shard included.\n"
    ));
    if let Some(o) = report.json.as_object_mut() {
        o.insert("preset".into(), serde_json::json!(ctx.preset));
        o.insert("preset_reason".into(), ctx.preset_reason.clone().into());
        o.insert("command_seconds".into(), command.into());
        o.insert(
            "headline".into(),
            serde_json::to_value(&report.headline).unwrap_or_default(),
        );
    }
    if ctx.reports() {
        report.write(&ctx.out)?;
    }
    Ok(report)
}

/// One line of `index.md`: a table that ran (or failed) and its headline cells.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexEntry {
    /// The table's id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// The preset it ran.
    pub preset: Preset,
    /// Datasets (or parts) that ran.
    pub ran: usize,
    /// Its headline cells beside the paper's.
    pub headline: Vec<report::Headline>,
    /// Its report, relative to the index.
    pub report: String,
    /// Why it did not finish, if it did not.
    pub error: Option<String>,
    /// Its wall time in seconds (this pass).
    pub seconds: f64,
}

/// Runs every table of `tables`, each into `ctx.out/<id>/` at the preset `preset_of` gives it
/// (and the reason), then writes `ctx.out/index.md` and `index.json`: one line per table with
/// its headline cells and a link to its report. A table that fails is listed with why; the
/// others still run. Finished runs are read back, so the same command resumes.
pub fn reproduce_all(
    tables: &[&'static dyn Reproduction],
    ctx: &Context,
    preset_of: impl Fn(&dyn Reproduction) -> (Preset, String),
) -> Result<Vec<IndexEntry>> {
    let mut index = Vec::new();
    for &table in tables {
        let (preset, reason) = preset_of(table);
        let one = Context {
            out: ctx.out.join(table.id()),
            preset,
            preset_reason: reason,
            // Each table's report times its own part of the command.
            command_started: Instant::now(),
            pass_started: Instant::now(),
            ..ctx.clone()
        };
        tracing::info!("{}: {} ({})", table.id(), preset.flag(), one.preset_reason);
        let result = reproduce(table.id(), &one);
        let seconds = one.pass_started.elapsed().as_secs_f64();
        let (ran, headline, error) = match result {
            Ok(r) => (r.ran, r.headline, None),
            Err(e) => {
                tracing::warn!("{}: {e}", table.id());
                (0, Vec::new(), Some(e.to_string()))
            }
        };
        index.push(IndexEntry {
            id: table.id().into(),
            title: table.title().into(),
            preset,
            ran,
            headline,
            report: format!("{}/report.md", table.id()),
            error,
            seconds,
        });
    }
    if ctx.reports() {
        write_index(&ctx.out, &index)?;
    }
    Ok(index)
}

/// `index.md` and `index.json` under `out`.
fn write_index(out: &std::path::Path, index: &[IndexEntry]) -> Result<()> {
    let mut t = report::Table::new([
        "table",
        "preset",
        "ran",
        "headline (ours / paper)",
        "wall (s)",
        "report",
    ]);
    for e in index {
        let cells: Vec<String> = e
            .headline
            .iter()
            .map(|h| match &h.paper {
                Some(p) => format!("{} {} / {p}", h.what, h.ours),
                None => format!("{} {}", h.what, h.ours),
            })
            .collect();
        let ran = match &e.error {
            Some(why) => format!("failed: {why}"),
            None if e.ran == 0 => "nothing (data absent: see its report)".into(),
            None => e.ran.to_string(),
        };
        t.row([
            format!("`{}` {}", e.id, e.title),
            e.preset.flag().into(),
            ran,
            cells.join("; "),
            format!("{:.0}", e.seconds),
            format!("[report]({})", e.report),
        ]);
    }
    let md = format!("# basin reproductions\n\n{}", t.to_markdown());
    std::fs::create_dir_all(out).map_err(|e| basin_core::CoreError::io(out, e))?;
    basin_core::fsio::write_atomic(&out.join("index.md"), md.as_bytes())?;
    let json = serde_json::to_string_pretty(index)
        .map_err(|e| TaskError::invalid("index.json", format!("cannot serialise: {e}")))?;
    basin_core::fsio::write_atomic(&out.join("index.json"), json.as_bytes())?;
    Ok(())
}

/// The datasets a table runs: those `--dataset` names (in the table's spelling), else the
/// preset's `default`.
pub fn selected(table: &dyn Reproduction, ctx: &Context, default: &[&str]) -> Vec<String> {
    if ctx.overrides.datasets.is_empty() {
        return default.iter().map(|d| d.to_string()).collect();
    }
    table
        .datasets()
        .iter()
        .filter(|d| {
            ctx.overrides
                .datasets
                .iter()
                .any(|o| o.eq_ignore_ascii_case(d))
        })
        .map(|d| d.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table's name without its paper's prefix finds it when one paper has it, and is
    /// refused, naming the candidates, when several do.
    #[test]
    fn a_table_is_found_by_its_full_or_its_unique_short_name() {
        assert_eq!(find("et-table14").map(|t| t.id()).ok(), Some("et-table14"));
        assert_eq!(find("table14").map(|t| t.id()).ok(), Some("et-table14"));
        assert_eq!(find("table15").map(|t| t.id()).ok(), Some("et-table15"));
        let err = find("params")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`cdat-params`") && err.contains("`sfi-params`"),
            "{err}"
        );
        let err = find("table3")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`cdat-table3`") && err.contains("`sfi-table3`"),
            "{err}"
        );
        let err = find("table99")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown table `table99`"), "{err}");
    }
}
