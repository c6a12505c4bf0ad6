//! What every table's report repeats, written once: the key of an anomaly table's rows
//! ([`ratio_key`]; the paper's numbers themselves: [`crate::papers`]), Markdown tables
//! ([`Table`]), the preset banner, the datasets that could not be run and where to get them
//! ([`Missing`]), the footer with the device and the times ([`footer`]), the headline cells an
//! index shows ([`Headline`]), energy plots, and the two files written at the end (`report.md`
//! for people, `report.json` for programs).

use std::path::Path;

use basin_train::plot::{Series, line_panels};
use serde::Serialize;

use crate::{Preset, Result, TaskError};

/// The recorded wall times of the tables' commands (`data/timings.toml`).
const TIMINGS: &str = include_str!("../../../data/timings.toml");

/// The wall time of a table's command at one preset on a 2-core CPU machine
/// (`data/timings.toml`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordedTime {
    /// Seconds.
    pub seconds: f64,
    /// Estimated from the per-dataset records in RESULTS.md, not timed as one command.
    pub estimated: bool,
}

impl std::fmt::Display for RecordedTime {
    /// `about 6 min`, `about 8.3 h (estimated)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.seconds;
        match s {
            s if s >= 5400.0 => write!(f, "about {:.1} h", s / 3600.0)?,
            s if s >= 90.0 => write!(f, "about {:.0} min", s / 60.0)?,
            s => write!(f, "about {s:.0} s")?,
        }
        if self.estimated {
            write!(f, " (estimated)")?;
        }
        Ok(())
    }
}

/// The wall time of table `id` at `preset` on a 2-core CPU machine, timed or estimated, if
/// `data/timings.toml` has it.
pub fn recorded_time(id: &str, preset: Preset) -> Option<RecordedTime> {
    let table: toml::Table = toml::from_str(TIMINGS).ok()?;
    let key = preset.flag().trim_start_matches('-');
    let seconds = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|s| s as f64));
    let entry = table.get(id)?;
    if let Some(s) = entry.get(key).and_then(seconds) {
        return Some(RecordedTime {
            seconds: s,
            estimated: false,
        });
    }
    let s = entry.get("estimated")?.get(key).and_then(seconds)?;
    Some(RecordedTime {
        seconds: s,
        estimated: true,
    })
}

/// Why table `id` has no time at all, if `data/timings.toml` says (`untimed = "…"`: a table
/// whose datasets the benchmark data lacks).
pub fn untimed(id: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(TIMINGS).ok()?;
    Some(table.get(id)?.get("untimed")?.as_str()?.to_owned())
}

/// One cell of a table worth seeing in an index: what it is, ours, and the paper's.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Headline {
    /// What the cell is (`reddit 40 % ET AUC`).
    pub what: String,
    /// Ours, as the report prints it.
    pub ours: String,
    /// The paper's, where it has the cell.
    pub paper: Option<String>,
}

impl Headline {
    /// A cell `what`: ours beside the paper's.
    pub fn new(what: impl Into<String>, ours: impl Into<String>, paper: Option<String>) -> Self {
        Self {
            what: what.into(),
            ours: ours.into(),
            paper,
        }
    }
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
    /// The cells an index shows of this table (the first few of its main table).
    pub headline: Vec<Headline>,
}

impl Report {
    /// A report from its Markdown and anything serialisable.
    pub fn new(markdown: String, json: &impl Serialize, ran: usize) -> Result<Self> {
        let json = serde_json::to_value(json)
            .map_err(|e| TaskError::invalid("report.json", format!("cannot serialise: {e}")))?;
        Ok(Self {
            markdown,
            json,
            ran,
            headline: Vec::new(),
        })
    }

    /// The same report with the cells an index shows.
    pub fn with_headline(mut self, headline: Vec<Headline>) -> Self {
        self.headline = headline;
        self
    }

    /// Writes `report.md` and `report.json` into `out`, each atomically.
    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::create_dir_all(out).map_err(|e| basin_core::CoreError::io(out, e))?;
        basin_core::fsio::write_atomic(&out.join("report.md"), self.markdown.as_bytes())?;
        let text = serde_json::to_string_pretty(&self.json)
            .map_err(|e| TaskError::invalid("report.json", format!("cannot serialise: {e}")))?;
        basin_core::fsio::write_atomic(&out.join("report.json"), text.as_bytes())?;
        Ok(())
    }
}

/// A Markdown table: a header and rows of cells, each row as wide as the header (missing cells
/// are blank, extra ones an error of the caller's, dropped).
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new<S: ToString>(header: impl IntoIterator<Item = S>) -> Self {
        Self {
            header: header.into_iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        let mut row: Vec<String> = cells.into_iter().map(|c| c.to_string()).collect();
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
        self
    }

    /// The rows so far.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as Markdown, ending with a newline (`|` inside a cell escaped).
    pub fn to_markdown(&self) -> String {
        let line = |cells: &[String]| {
            let cells: Vec<String> = cells.iter().map(|c| c.replace('|', "\\|")).collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut md = line(&self.header);
        md.push_str(&format!("|{}\n", "---|".repeat(self.header.len())));
        for r in &self.rows {
            md.push_str(&line(r));
        }
        md
    }
}

/// `dataset@<percent>`: a dataset at a training ratio, the key the anomaly tables' rows are
/// found by (ratios compared as whole tenths of a percent, never as floats).
pub fn ratio_key(dataset: &str, ratio: f64) -> String {
    format!("{dataset}@{}", (ratio * 1000.0).round() as i64)
}

/// `mean ± std` of a published pair.
pub fn pair(v: [f64; 2]) -> String {
    format!("{:.1} ± {:.1}", v[0], v[1])
}

/// The footer every report ends with: the device, this pass's wall time, and, where the table
/// trained through runs that keep records, their recorded training time (a run read back
/// counts the time it took when trained, so a resumed or sharded table reports what its runs
/// cost, not the seconds it took to read them). The whole command's time is added by
/// [`crate::reproduce`].
pub fn footer(ctx: &crate::Context, run_seconds: Option<f64>, extra: &str) -> String {
    let runs = run_seconds.map_or(String::new(), |s| {
        // `+ 0.0`: an empty sum of f64 is −0.0, which would print as "-0 s".
        format!("; the runs' recorded training time {:.0} s", s + 0.0)
    });
    format!(
        "\nDevice: {}. This pass {:.0} s{runs}.{}{extra}\n",
        ctx.device_name(),
        ctx.pass_started.elapsed().as_secs_f64(),
        if extra.is_empty() { "" } else { " " }
    )
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

/// Plots each curve in its own panel against `x` (e.g. `epoch`); nothing without curves. A
/// sharded process, which sees only its share of the runs, does not call it.
pub fn plot_curves(path: &Path, title: &str, x: &str, curves: &[(String, Vec<f64>)]) -> Result<()> {
    let series: Vec<Series> = curves
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| Series::new(n.clone(), v.clone()))
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    line_panels(path, title, x, &series)
        .map_err(|e| TaskError::invalid(path.display().to_string(), e.to_string()))
}

/// Curves meant to be compared (models, training beside validation) on one axis with a legend
/// against `x`; nothing without curves. A model's `<model> training` and `<model> validation`
/// share a colour, validation dashed.
pub fn plot_compared(
    path: &Path,
    title: &str,
    x: &str,
    curves: &[(String, Vec<f64>)],
) -> Result<()> {
    let mut models: Vec<&str> = Vec::new();
    let series: Vec<Series> = curves
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| {
            let (model, dashed) = match (n.strip_suffix(" training"), n.strip_suffix(" validation"))
            {
                (Some(m), _) => (m, false),
                (_, Some(m)) => (m, true),
                _ => (n.as_str(), false),
            };
            let group = models.iter().position(|m| *m == model).unwrap_or_else(|| {
                models.push(model);
                models.len() - 1
            });
            Series::new(n.clone(), v.clone()).styled(group, dashed)
        })
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    basin_train::plot::line_chart(path, title, x, &series)
        .map_err(|e| TaskError::invalid(path.display().to_string(), e.to_string()))
}

/// `energy`, or `energy and V` where the curves include a storage functional (CDAT's
/// controlled dynamics): what an energy plot's title names.
pub fn energy_words(curves: &[(String, Vec<f64>)]) -> &'static str {
    if curves.iter().any(|(n, _)| n.ends_with(" V")) {
        "energy and V"
    } else {
        "energy"
    }
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

/// What a trained model's descent looked like (run 0's or fold 0's selected model): the energy
/// (and V) per step, its test items' energies along the descent by group (anomalous and normal
/// nodes, a class's graphs), and, for dynamics that leave the gradient flow, the descent over
/// its energy landscape. Drawn by [`DescentViews::draw`].
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct DescentViews {
    /// Named curves per step (`block 0 E`, `homogeneous`, `… V`).
    pub energy: Vec<(String, Vec<f64>)>,
    /// Per group, the quartiles of its items' energies at each step (empty where a term does
    /// not split over items).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub energy_by_group: Vec<basin_train::quartiles::StepQuartiles>,
    /// The descent over the energy landscape beside plain gradient flow (CDAT Figures 1 and
    /// 3); drawn as `landscape.png`, not kept in the JSON.
    #[serde(skip)]
    pub landscape: Option<basin_core::landscape::Landscape>,
}

impl DescentViews {
    /// Each path over the landscape from its first energy to its last (`on` says where, e.g.
    /// `on graph 0, `), and the plane's share of the states' variance, with its picture
    /// `dir/landscape.png`: `; E …` to end a line, or empty without a landscape.
    pub fn landscape_markdown(&self, on: &str, dir: &str) -> String {
        self.landscape.as_ref().map_or(String::new(), |l| {
            let ends: Vec<String> = l
                .paths
                .iter()
                .map(|p| {
                    let e = |i: usize| p.energy.get(i).copied().unwrap_or(f64::NAN);
                    let last = p.energy.len().saturating_sub(1);
                    format!("{} {:.4} → {:.4}", p.name, e(0), e(last))
                })
                .collect();
            format!(
                "; {on}E by {} (the plane holds {:.0} % of the states' variance) — `{dir}/landscape.png`",
                ends.join(", "),
                l.explained * 100.0,
            )
        })
    }

    /// Into `out`: `energy.png`, `<groups>.png` (the groups' energies, `items` naming what one
    /// value is, e.g. `test node`) and `landscape.png`, each titled `<who>: … (<when>)`, e.g.
    /// `reddit-40pct, ET` and `run 0, selected model`; `landscape` says what the landscape
    /// shows.
    pub fn draw(
        &self,
        out: &Path,
        (who, when): (&str, &str),
        (groups, items): (&str, &str),
        landscape: &str,
    ) -> Result<()> {
        let fail =
            |file: &str, e: basin_train::plot::PlotError| TaskError::invalid(file, e.to_string());
        plot_energy(
            &out.join("energy.png"),
            &format!("{who}: {} per step ({when})", energy_words(&self.energy)),
            &self.energy,
        )?;
        if !self.energy_by_group.is_empty() {
            let file = format!("{groups}.png");
            basin_train::plot::quartile_bands(
                &out.join(&file),
                &format!("{who}: each {items}'s energy along the descent ({when})"),
                &format!("energy of the {items}"),
                &self.energy_by_group,
            )
            .map_err(|e| fail(&file, e))?;
        }
        if let Some(land) = &self.landscape {
            basin_train::plot::landscape_chart(
                &out.join("landscape.png"),
                &format!("{who}: {landscape} ({when})"),
                land,
            )
            .map_err(|e| fail("landscape.png", e))?;
        }
        Ok(())
    }
}

/// Where each group (anomalous and normal nodes, a class's graphs) settles, in words beside
/// its picture: `; settled median energy: a … (n = …, quartiles … to …), b … — `picture``, or
/// nothing without groups.
pub fn group_ends(groups: &[basin_train::quartiles::StepQuartiles], picture: &str) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let ends: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{} {:.4} (n = {}, quartiles {:.4} to {:.4})",
                g.group,
                g.median.last().copied().unwrap_or(f64::NAN),
                g.count,
                g.q1.last().copied().unwrap_or(f64::NAN),
                g.q3.last().copied().unwrap_or(f64::NAN)
            )
        })
        .collect();
    format!("; settled median energy: {} — `{picture}`", ends.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_footer_of_a_table_with_no_runs_says_zero_seconds_not_minus_zero() {
        let ctx = crate::Context::new("data".into(), "out".into(), tch::Device::Cpu, Preset::Quick);
        let none: f64 = std::iter::empty::<f64>().sum();
        let text = footer(&ctx, Some(none), "");
        assert!(text.contains("training time 0 s"), "{text}");
    }

    /// Every table's command has a time at every preset a CPU machine runs, timed or
    /// estimated, or a reason why not, so `--list` never answers "not recorded"; and every
    /// entry names a table.
    #[test]
    fn every_cpu_preset_of_every_table_has_a_time() {
        for t in crate::registry() {
            for &p in t.presets() {
                let time = recorded_time(t.id(), p);
                assert!(
                    p == Preset::Paper || time.is_some() || untimed(t.id()).is_some(),
                    "{} {}: no time in data/timings.toml",
                    t.id(),
                    p.flag()
                );
            }
        }
        let file: toml::Table = toml::from_str(TIMINGS).unwrap();
        for (id, entry) in &file {
            assert!(
                crate::registry().iter().any(|t| t.id() == id),
                "data/timings.toml: `{id}` is no table"
            );
            for key in entry.as_table().unwrap().keys() {
                assert!(
                    ["quick", "cpu", "paper", "estimated", "untimed"].contains(&key.as_str()),
                    "{id}.{key}"
                );
            }
        }
        let est = recorded_time("cdat-table1", Preset::Cpu).unwrap();
        assert!(
            est.estimated && est.to_string().ends_with("h (estimated)"),
            "{est}"
        );
        let timed = recorded_time("et-table1", Preset::Quick).unwrap();
        assert!(
            !timed.estimated && timed.to_string() == "about 18 s",
            "{timed}"
        );
    }
}
