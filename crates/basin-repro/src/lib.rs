//! # basin-repro
//!
//! Every paper table basin reproduces, as a [`Reproduction`] in one registry ([`registry`],
//! the only list of tables: `basin reproduce --list` prints it and `cargo xtask` asks the
//! binary for it), plus what experiments share: [`report`] (paper numbers from
//! `data/papers/*.toml`, missing datasets, energy plots, `report.md` + `report.json`), [`tu`]
//! (TU classification under leak-free CV with baselines, for every family), [`runs`]
//! (`basin train` / `basin eval` run files) and the [`demo`].
//!
//! Tables are named by id and subject, not by one paper's numbering alone: CDAT's Table 1 is
//! ET's Table 2 task, so a table that compares families lives here, where every family is in
//! reach.
//!
//! | id | module |
//! |---|---|
//! | `et-table1` | [`et::anomaly_table1`]: node anomaly detection |
//! | `et-table2` | [`et::tu_table2`]: TU graph classification |
//! | `et-table7` | [`et::gnn_table7`]: PATTERN and CLUSTER node classification |
//! | `et-table12` | [`et::heterogeneous_table12`]: anomaly detection over relation subgraphs |
//! | `et-table13` | [`et::ablation_table13`]: ATT and HN ablation of node anomaly detection |
//! | `et-table14` | [`et::ablation_table14`]: module ablation of masked image completion |
//! | `et-table15` | [`et::params_table15`]: parameters of ViT-Base, ALBERT ViT-Base and ET |
//! | `et-table16` | [`et::vit_table16`]: ET against a ViT of about its size, image completion |
//! | `cdat-table1`, `cdat-table3`, `cdat-table11` | [`cdat::tu_tables`]: TU classification, CDAT beside ET; the rank of W; ablations |
//! | `cdat-table2` | [`cdat::anomaly_table2`]: node anomaly detection, CDAT beside ET |
//! | `cdat-table12` | [`cdat::ablation_table12`]: ET, SUPP, Wx and full CDAT on node anomaly detection |
//! | `cdat-table4` | [`cdat::cost_table4`]: parameters and time of GT, ET and CDAT |
//! | `cdat-params` | [`cdat::params_tables13_14`]: parameter counts of CDAT and ET (Tables 13, 14) |
//! | `sfi-table1` | [`sfi::lrgb_table1`]: Peptides-func, GatedGCN/GPS/DFi/SFi beside a no-graph model |
//! | `sfi-table2` | [`sfi::gnn_table2`]: PATTERN and CLUSTER (regenerated) |
//! | `sfi-table3` | [`sfi::ablation_table3`]: λ*, α and attention ablations on Peptides-func |
//! | `sfi-table4` | [`sfi::stats_table4`]: dataset statistics |
//! | `sfi-params` | [`sfi::params`]: parameter counts of every Table 5/6 model |
//! | `hopfield-memory` | [`hopfield::memory`]: the Hopfield slides' claims, measured |
//! | `hopfield-mil` | [`hopfield::mil`]: MIL benchmarks with HopfieldPooling |

use std::path::PathBuf;
use std::time::Instant;

use basin_train::context::{RunContext, Shard};
use serde::{Deserialize, Serialize};
use tch::Device;

pub mod anomaly;
pub mod demo;
pub mod report;
pub mod runs;
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

/// Errors of basin-repro.
#[derive(Debug, thiserror::Error)]
pub enum ReproError {
    /// A configuration value, flag or run file is invalid.
    #[error("{field}: {message}")]
    Config {
        /// The field, flag or file.
        field: String,
        /// What was expected.
        message: String,
    },
    /// From the energy core.
    #[error(transparent)]
    Core(#[from] basin_core::CoreError),
    /// From training and evaluation.
    #[error(transparent)]
    Train(#[from] basin_train::TrainError),
    /// From a task.
    #[error(transparent)]
    Task(#[from] basin_tasks::TaskError),
    /// From finding a dataset.
    #[error(transparent)]
    Data(#[from] basin_data::DataError),
    /// From graph data.
    #[error(transparent)]
    Graph(#[from] basin_graph::GraphError),
    /// From image data.
    #[error(transparent)]
    Image(#[from] basin_image::ImageError),
    /// From a metric.
    #[error(transparent)]
    Metric(#[from] basin_train::metrics::MetricError),
    /// From libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

impl ReproError {
    /// Shorthand for a [`ReproError::Config`].
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The result type of basin-repro.
pub type Result<T, E = ReproError> = std::result::Result<T, E>;

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

/// A paper table, end to end.
pub trait Reproduction: Sync {
    /// Its id, e.g. `et-table1`.
    fn id(&self) -> &'static str;
    /// One line on what it is.
    fn title(&self) -> &'static str;
    /// The paper (the paper's name and the section or table).
    fn paper(&self) -> &'static str;
    /// The datasets it looks for.
    fn datasets(&self) -> &'static [&'static str];
    /// The presets it has; the first is the default.
    fn presets(&self) -> &'static [Preset];
    /// The overrides it accepts.
    fn accepts(&self) -> &'static [Override];
    /// Whether all its training goes through runs that keep records (cross-validation folds,
    /// anomaly seeds), so that shards split it with nothing run twice and `basin reproduce
    /// --jobs N` can train it in N processes at once; a table that also trains outside them (a
    /// grid, timings) says no.
    fn shards(&self) -> bool {
        false
    }
    /// Runs it; the report is not written yet (see [`reproduce`]).
    fn run(&self, ctx: &Context) -> Result<Report>;
}

/// Every table, in the order `--list` shows them: the only list there is.
pub fn registry() -> Vec<&'static dyn Reproduction> {
    vec![
        &et::anomaly_table1::EtTable1,
        &et::tu_table2::EtTable2,
        &et::heterogeneous_table12::EtTable12,
        &et::ablation_table13::EtTable13,
        &et::ablation_table14::EtTable14,
        &et::params_table15::EtTable15,
        &et::vit_table16::EtTable16,
        &et::gnn_table7::EtTable7,
        &cdat::tu_tables::CdatTable1,
        &cdat::anomaly_table2::CdatTable2,
        &cdat::cost_table4::CdatTable4,
        &cdat::tu_tables::CdatTable3,
        &cdat::tu_tables::CdatTable11,
        &cdat::ablation_table12::CdatTable12,
        &cdat::params_tables13_14::CdatParams,
        &sfi::lrgb_table1::SfiTable1,
        &sfi::gnn_table2::SfiTable2,
        &sfi::ablation_table3::SfiTable3,
        &sfi::stats_table4::SfiTable4,
        &sfi::params::SfiParams,
        &hopfield::memory::HopfieldMemory,
        &hopfield::mil::HopfieldMil,
    ]
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
            Err(ReproError::config(
                "table",
                format!("unknown table `{id}`; known: {}", known.join(", ")),
            ))
        }
        _ => {
            let which: Vec<String> = papers
                .iter()
                .map(|r| format!("`{}` ({})", r.id(), r.title()))
                .collect();
            Err(ReproError::config(
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
            return Err(ReproError::config(
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
        return Err(ReproError::config(
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
            return Err(ReproError::config(
                which.flag(),
                format!("{} does not take this flag", table.id()),
            ));
        }
    }
    for d in &o.datasets {
        if !table.datasets().iter().any(|k| k.eq_ignore_ascii_case(d)) {
            return Err(ReproError::config(
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
        .map_err(|e| ReproError::config("index.json", format!("cannot serialise: {e}")))?;
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
