//! What SFi-Former Tables 1 and 2 share: every selected dataset with the rows of
//! [`datasets::table_models`] on its published split and seeds, each beside the paper's cell, with
//! the train − test gap (Figure 3), the flows and the solver trace of each set; a set whose data
//! is absent gets a row that says so.

use basin_sfi::presets::Dataset;
use basin_train::protocol::Metric;

use super::datasets;
use super::{
    ROW_COLUMNS, RunPlan, attention_figure, gap_figure, row_cells, run_rows, solver_figure,
};
use crate::papers::{self, PaperRow};
use crate::report::{self, Missing, Report};
use crate::{Context, Preset, Result, Table, TaskError, selected};

/// The paper's cell of `model` on `d` at `scale` (its `values`, a `[mean, s.d.]` or `[mean]`
/// per dataset), with GraphGPS's own number where the SFi table prints another for GPS (its
/// `published`).
pub(crate) fn paper_cell(
    paper: &[PaperRow],
    model: &str,
    d: Dataset,
    scale: f64,
) -> Result<String> {
    let Some(p) = papers::find(paper, "model", model) else {
        return Ok("–".into());
    };
    let mut s = p
        .by_name("values")?
        .get(d.name())
        .map_or("–".into(), |v| datasets::published(v, scale));
    if let Some(q) = p.by_name("published")?.get(d.name()) {
        s.push_str(&format!(
            " (GraphGPS paper {})",
            datasets::published(q, scale)
        ));
    }
    Ok(s)
}

/// The paper's mean of `model` on `d` at `scale`, for a headline.
pub(crate) fn paper_mean(
    paper: &[PaperRow],
    model: &str,
    d: Dataset,
    scale: f64,
) -> Result<Option<String>> {
    let Some(p) = papers::find(paper, "model", model) else {
        return Ok(None);
    };
    Ok(p.by_name("values")?
        .get(d.name())
        .and_then(|v| v.first())
        .map(|m| format!("{:.2}", m * scale)))
}

/// The datasets `table` runs in `ctx` (its own, narrowed by `--dataset`).
pub(crate) fn datasets(table: &Table, ctx: &Context) -> Result<Vec<Dataset>> {
    selected(table, ctx, table.datasets())
        .iter()
        .map(|n| {
            Dataset::from_name(n)
                .ok_or_else(|| TaskError::invalid(n, "not a dataset of the SFi-Former tables"))
        })
        .collect()
}

/// How the runs of `d` are planned at `preset`: 4 seeds at the paper's scale, 1 otherwise,
/// the paper's metric, the gap curves recorded.
pub(crate) fn plan(d: Dataset, preset: Preset) -> RunPlan {
    RunPlan {
        runs: if preset == Preset::Paper { 4 } else { 1 },
        seed: 0,
        metric: d.metric(),
        curves: true,
    }
}

/// Runs Tables 1 or 2 (`table`, whose paper numbers are `data/papers/<id>.toml`) and writes
/// the report: `heading` and `protocol` are its first paragraphs.
pub(crate) fn run(table: &Table, ctx: &Context, heading: &str, protocol: &str) -> Result<Report> {
    let paper = papers::rows(table.id())?;
    let mut md = format!("# {heading}\n\n");
    let epochs = datasets::table_models(Dataset::Pattern, ctx.preset, ctx.overrides.epochs)[1]
        .train
        .epochs;
    md.push_str(&report::banner(
        ctx.preset,
        &format!(
            "parts of each split and generated sets as the table says, {} run(s), {epochs} epochs ({} on the Peptides sets)",
            plan(Dataset::Pattern, ctx.preset).runs,
            datasets::table_models(Dataset::PeptidesFunc, ctx.preset, ctx.overrides.epochs)[1]
                .train
                .epochs
        ),
    ));
    md.push_str(protocol);
    md.push_str("\n\n");
    let mut t = report::Table::new(
        [
            "dataset (metric)",
            "graphs (train/val/test)",
            "model",
            "paper",
        ]
        .into_iter()
        .chain(ROW_COLUMNS),
    );
    let (mut headline, mut json, mut figures) = (Vec::new(), Vec::new(), String::new());
    let mut missing = Missing::default();
    let mut seconds = 0.0;
    for d in datasets(table, ctx)? {
        let (key, scale, label) = datasets::metric_cell(d);
        let column = format!("{} ({label})", d.name());
        let rows = datasets::table_models(d, ctx.preset, ctx.overrides.epochs);
        let plan = plan(d, ctx.preset);
        let Some((data, split)) = datasets::load(ctx, d, &rows, &mut missing)? else {
            t.row([
                column,
                "–".into(),
                "every row".into(),
                format!(
                    "SFi-Former: {}",
                    paper_cell(&paper, "SFi-Former", d, scale)?
                ),
                "data absent (below)".into(),
            ]);
            json.push(serde_json::json!({ "dataset": d.name(), "absent": true }));
            continue;
        };
        let mut results = run_rows(ctx, d.name(), &data, &split, &rows, &plan)?;
        let sizes = split.sizes();
        for r in &results {
            let mut cells = vec![
                column.clone(),
                format!("{}/{}/{}", sizes[0], sizes[1], sizes[2]),
                r.model.clone(),
                paper_cell(&paper, &r.model, d, scale)?,
            ];
            cells.extend(row_cells(r, key, scale));
            t.row(cells);
            if r.model.starts_with("SFi-Former") {
                headline.push(report::Headline::new(
                    format!("{} {} {label}", d.name(), r.model),
                    r.show(&format!("test_{key}"), scale),
                    paper_mean(&paper, &r.model, d, scale)?,
                ));
            }
            seconds += r.seconds;
        }
        // Figure 3 plots the gap so that smaller is better generalisation: test − train for MAE.
        let gap_title = if d.metric() == Metric::Mae {
            for r in &mut results {
                r.gap.iter_mut().for_each(|g| *g = -*g);
            }
            format!("{}: test − train MAE (Figure 3)", d.name())
        } else {
            format!("{}: train − test {label} (Figure 3)", d.name())
        };
        figures.push_str(&gap_figure(
            &ctx.out().join(format!("{}-gap.png", d.name())),
            &gap_title,
            &results,
        )?);
        figures.push_str(&attention_figure(
            &ctx.out().join(format!("{}-attention.png", d.name())),
            &results,
        )?);
        figures.push_str(&solver_figure(
            &ctx.out().join(format!("{}-solver.png", d.name())),
            &results,
        )?);
        json.push(serde_json::json!({
            "dataset": d.name(),
            "metric": d.metric(),
            "plan": plan,
            "models": rows,
            "results": results,
        }));
    }
    md.push_str(&t.to_markdown());
    md.push_str(super::ZERO_NOTE);
    md.push_str(&missing.to_markdown());
    md.push_str("\nThe no-graph row (the GPS row's encoders and head, no layer, no positional encoding) is the bar a graph model must clear. Chance: PATTERN 50 %, CLUSTER 16.7 % (weighted accuracy); 10 % on the superpixel sets.\n");
    md.push_str(&figures);
    super::datasets_report(md, ctx, seconds, json, &missing, headline)
}
