//! `reproduce all` and `reproduce table1`: several tables in one command, each into its own
//! folder, and the `index.md` / `index.json` that lists them with their headline cells.

use std::time::Instant;

use basin_tasks::{Result, TaskError};
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::preset::Preset;
use crate::registry::Table;
use crate::report;

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

/// Runs every table of `tables`, each into `ctx.out()/<id>/` at the preset `preset_of` gives it
/// (and the reason), then writes `ctx.out()/index.md` and `index.json`: one line per table with
/// its headline cells and a link to its report. A table that fails is listed with why; the
/// others still run, unless the failure was an interrupt (SIGINT, SIGTERM): then no other table
/// starts. Finished runs are read back, so the same command resumes.
pub fn reproduce_all(
    tables: &[&'static Table],
    ctx: &Context,
    preset_of: impl Fn(&Table) -> (Preset, String),
) -> Result<Vec<IndexEntry>> {
    let mut index = Vec::new();
    for &table in tables {
        // One interrupt stops the whole command: no table starts after it.
        if basin_train::interrupt::requested() {
            break;
        }
        let (preset, reason) = preset_of(table);
        let one = Context {
            preset,
            preset_reason: reason,
            // Each table's report times its own part of the command.
            command_started: Instant::now(),
            pass_started: Instant::now(),
            ..ctx.writing_to(ctx.out().join(table.id()))
        };
        tracing::info!("{}: {} ({})", table.id(), preset.flag(), one.preset_reason);
        let result = crate::reproduce(table.id(), &one);
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
        write_index(ctx.out(), &index)?;
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
