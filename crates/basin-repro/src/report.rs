//! What every table's report repeats: the paper's numbers from `data/papers/*.toml`, the
//! preset banner, the datasets that could not be run and where to get them, energy plots, and
//! the two files written at the end (`report.md` for people, `report.json` for programs).

use std::path::Path;

use basin_train::plot::{Series, line_panels};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Preset, ReproError, Result};

/// The papers' published numbers, one TOML file per table (compiled in, so a report never
/// depends on where the binary runs).
const PAPERS: &[(&str, &str)] = &[
    (
        "sfi-params",
        include_str!("../../../data/papers/sfi-params.toml"),
    ),
    (
        "et-table1",
        include_str!("../../../data/papers/et-table1.toml"),
    ),
    (
        "et-table2",
        include_str!("../../../data/papers/et-table2.toml"),
    ),
    (
        "et-table14",
        include_str!("../../../data/papers/et-table14.toml"),
    ),
    (
        "cdat-table1",
        include_str!("../../../data/papers/cdat-table1.toml"),
    ),
    (
        "cdat-table2",
        include_str!("../../../data/papers/cdat-table2.toml"),
    ),
    (
        "cdat-table3",
        include_str!("../../../data/papers/cdat-table3.toml"),
    ),
    (
        "cdat-table4",
        include_str!("../../../data/papers/cdat-table4.toml"),
    ),
    (
        "cdat-table11",
        include_str!("../../../data/papers/cdat-table11.toml"),
    ),
    (
        "et-table7",
        include_str!("../../../data/papers/et-table7.toml"),
    ),
    (
        "sfi-table1",
        include_str!("../../../data/papers/sfi-table1.toml"),
    ),
    (
        "sfi-table2",
        include_str!("../../../data/papers/sfi-table2.toml"),
    ),
    (
        "sfi-table3",
        include_str!("../../../data/papers/sfi-table3.toml"),
    ),
    (
        "hopfield-mil",
        include_str!("../../../data/papers/hopfield-mil.toml"),
    ),
];

/// The paper's numbers of table `id` (`data/papers/<id>.toml`), parsed as `T`.
pub fn paper<T: DeserializeOwned>(id: &str) -> Result<T> {
    let file = format!("data/papers/{id}.toml");
    let text = PAPERS
        .iter()
        .find(|(name, _)| *name == id)
        .map(|(_, text)| *text)
        .ok_or_else(|| ReproError::config(&file, "no such paper table"))?;
    toml::from_str(text).map_err(|e| ReproError::config(file, e.to_string()))
}

/// A finished table: Markdown for people, JSON for programs, and how many datasets ran.
#[derive(Clone, Debug)]
pub struct Report {
    /// `report.md`.
    pub markdown: String,
    /// `report.json`.
    pub json: serde_json::Value,
    /// Datasets (or parts) that ran; 0 means nothing could be loaded.
    pub ran: usize,
}

impl Report {
    /// A report from its Markdown and anything serialisable.
    pub fn new(markdown: String, json: &impl Serialize, ran: usize) -> Result<Self> {
        let json = serde_json::to_value(json)
            .map_err(|e| ReproError::config("report.json", format!("cannot serialise: {e}")))?;
        Ok(Self {
            markdown,
            json,
            ran,
        })
    }

    /// Writes `report.md` and `report.json` into `out`, each atomically.
    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::create_dir_all(out).map_err(|e| basin_core::CoreError::io(out, e))?;
        basin_core::checkpoint::write_atomic(&out.join("report.md"), self.markdown.as_bytes())?;
        let text = serde_json::to_string_pretty(&self.json)
            .map_err(|e| ReproError::config("report.json", format!("cannot serialise: {e}")))?;
        basin_core::checkpoint::write_atomic(&out.join("report.json"), text.as_bytes())?;
        Ok(())
    }
}

/// The line every quick or CPU-scale report starts with, so nobody mistakes it for the paper's
/// protocol (empty for the paper preset).
pub fn banner(preset: Preset, what: &str) -> String {
    match preset {
        Preset::Quick => format!(
            "**`--quick` run (CI smoke test): {what}; the numbers say nothing about the model.**\n\n"
        ),
        Preset::Cpu => format!("**CPU scale (`--cpu`): {what}.**\n\n"),
        Preset::Paper => String::new(),
    }
}

/// The datasets a table could not run, each with where it looked and where to get it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Missing(pub Vec<String>);

impl Missing {
    /// Records that `name` was not found, and why.
    pub fn push(&mut self, name: &str, why: impl std::fmt::Display) {
        self.0.push(format!("{name}: {why}"));
    }

    /// A Markdown list, or nothing.
    pub fn to_markdown(&self) -> String {
        if self.0.is_empty() {
            return String::new();
        }
        let mut md = String::from("\nDatasets not run:\n");
        for m in &self.0 {
            md.push_str(&format!("- {m}\n"));
        }
        md
    }
}

/// Plots each curve of `energy` in its own panel (energies of different blocks or terms differ
/// in scale) against the descent step; nothing is written when there is no curve.
pub fn plot_energy(path: &Path, title: &str, energy: &[(String, Vec<f64>)]) -> Result<()> {
    plot_curves(path, title, "step", energy)
}

/// Plots each curve in its own panel against `x` (e.g. `epoch`); nothing without curves, and
/// nothing in a sharded process (it sees only its share of the runs; the unsharded run plots).
pub fn plot_curves(path: &Path, title: &str, x: &str, curves: &[(String, Vec<f64>)]) -> Result<()> {
    if basin_train::runner::shard().is_some() {
        return Ok(());
    }
    let series: Vec<Series> = curves
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| Series::new(n.clone(), v.clone()))
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    line_panels(path, title, x, &series)
        .map_err(|e| ReproError::config(path.display().to_string(), e.to_string()))
}

/// Energy per step in total and per term, one panel each.
pub fn plot_terms(path: &Path, title: &str, terms: &[(String, Vec<f64>)]) -> Result<()> {
    let total: Vec<f64> = (0..terms.first().map_or(0, |t| t.1.len()))
        .map(|i| terms.iter().map(|t| t.1[i]).sum())
        .collect();
    let mut panels = vec![("total energy".to_owned(), total)];
    panels.extend(
        terms
            .iter()
            .map(|(n, v)| (format!("{n} energy"), v.clone())),
    );
    plot_energy(path, title, &panels)
}

/// `name first → last` for each curve, joined by `; ` (for the report's text).
pub fn curve_ends(energy: &[(String, Vec<f64>)]) -> String {
    energy
        .iter()
        .map(|(b, e)| {
            format!(
                "{b} {:.3} → {:.3}",
                e.first().copied().unwrap_or(f64::NAN),
                e.last().copied().unwrap_or(f64::NAN)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}
