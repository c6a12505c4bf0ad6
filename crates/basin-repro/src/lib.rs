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
//! | `et-table14` | [`et::ablation_table14`]: module ablation of masked image completion |
//! | `cdat-table1`, `cdat-table3`, `cdat-table11` | [`cdat::tu_tables`]: TU classification, CDAT beside ET; the rank of W; ablations |
//! | `cdat-table2` | [`cdat::anomaly_table2`]: node anomaly detection, CDAT beside ET |
//! | `cdat-table4` | [`cdat::cost_table4`]: parameters and time of GT, ET and CDAT |
//! | `sfi-table1` | [`sfi::lrgb_table1`]: Peptides-func, GatedGCN/GPS/DFi/SFi beside a no-graph model |
//! | `sfi-table2` | [`sfi::gnn_table2`]: PATTERN and CLUSTER (regenerated) |
//! | `sfi-table3` | [`sfi::ablation_table3`]: λ*, α and attention ablations on Peptides-func |
//! | `sfi-table4` | [`sfi::stats_table4`]: dataset statistics |
//! | `sfi-params` | [`sfi::params`]: parameter counts of every Table 5/6 model |
//! | `hopfield-memory` | [`hopfield::memory`]: the Hopfield slides' claims, measured |
//! | `hopfield-mil` | [`hopfield::mil`]: MIL benchmarks with HopfieldPooling |

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tch::Device;

pub mod anomaly;
pub mod demo;
pub mod image;
pub mod report;
pub mod runs;
pub mod tu;

/// The Energy Transformer's tables.
pub mod et {
    pub mod ablation_table14;
    pub mod anomaly_table1;
    pub mod gnn_table7;
    pub mod tu_table2;
}

/// CDAT's tables.
pub mod cdat {
    pub mod anomaly_table2;
    pub mod cost_table4;
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
}

impl Context {
    /// The device as the reports name it.
    pub fn device_name(&self) -> String {
        basin_core::device::describe(self.device)
    }
}

/// A paper table, end to end.
pub trait Reproduction: Sync {
    /// Its id, e.g. `et-table1`.
    fn id(&self) -> &'static str;
    /// One line on what it is.
    fn title(&self) -> &'static str;
    /// The paper (file under `../shared/papers` or its citation).
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
        &et::ablation_table14::EtTable14,
        &et::gnn_table7::EtTable7,
        &cdat::tu_tables::CdatTable1,
        &cdat::anomaly_table2::CdatTable2,
        &cdat::cost_table4::CdatTable4,
        &cdat::tu_tables::CdatTable3,
        &cdat::tu_tables::CdatTable11,
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
/// process ([`basin_train::runner::Shard`]) trains its runs and writes no report: the same
/// command run again without a shard reads every finished run and writes it.
pub fn reproduce(id: &str, ctx: &Context) -> Result<Report> {
    let table = find(id)?;
    check(table, ctx)?;
    let report = table.run(ctx)?;
    if basin_train::runner::shard().is_none() {
        report.write(&ctx.out)?;
    }
    Ok(report)
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
        assert_eq!(find("params").map(|t| t.id()).ok(), Some("sfi-params"));
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
