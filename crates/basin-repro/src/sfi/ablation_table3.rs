//! `sfi-table3`: SFi-Former Table 3, the ablations on PascalVOC-SP, Peptides-func and
//! Peptides-struct — λ* ∈ {0.5, 1, 2, 5}, α ∈ {0.01, 0.1, 0.5, 1} and the attention (SP + Ã,
//! SP alone, Ã alone) — beside GPS and the model that ignores the graph, on the same split and
//! seeds. The share of zero flows should grow with λ* (the ℓ1 weight); the paper's ordering of
//! the scores is weak evidence.

use basin_sfi::presets::{Dataset, Variant};

use super::datasets;
use super::{ROW_COLUMNS, ZERO_NOTE, benchmark, no_graph, row_cells, run_rows};
use crate::papers::{self, PaperRow};
use crate::report::{self, Missing, Report};
use crate::{Context, Preset, Reproduction, Result, Table};

/// SFi-Former Table 3.
#[derive(Debug)]
pub struct SfiTable3;

/// A row's attention (`SP`, `Ã` or both), where it names one (the GPS row does not).
fn attention(p: &PaperRow) -> Result<Option<&str>> {
    p.has("attention").then(|| p.text("attention")).transpose()
}

/// Every row of the paper's table as a model on `d` at `preset`, after the no-graph row.
fn models(
    paper: &[PaperRow],
    d: Dataset,
    preset: Preset,
    epochs: Option<usize>,
) -> Result<Vec<super::ModelSpec>> {
    let mut rows: Vec<super::ModelSpec> = paper
        .iter()
        .map(|p| {
            let variant = match attention(p)? {
                None => Variant::Gps,
                Some("SP") => Variant::SfiSp,
                Some("Ã") => Variant::SfiAdj,
                Some(_) => Variant::Sfi,
            };
            let mut m = datasets::spec(d, preset, p.text("model")?, variant);
            if p.has("lambda_star") {
                m.config.layer.attention.lambda_star = p.number("lambda_star")?;
            }
            if p.has("alpha") {
                m.config.layer.attention.flow.alpha = p.number("alpha")?;
            }
            Ok(m)
        })
        .collect::<Result<_>>()?;
    if preset == Preset::Cpu && epochs.is_none() {
        // The CPU scale of the ablation: 8 epochs per row, so that its eleven rows fit in about
        // an hour on two cores.
        datasets::with_epochs(&mut rows, Some(8));
    }
    datasets::with_epochs(&mut rows, epochs);
    let baseline = no_graph(&rows[0]);
    rows.insert(0, baseline);
    Ok(rows)
}

impl Reproduction for SfiTable3 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let paper = papers::rows("sfi-table3")?;
        let mut md = String::from("# SFi-Former Table 3 — ablations\n\n");
        let epochs = models(
            &paper,
            Dataset::PeptidesFunc,
            ctx.preset,
            ctx.overrides.epochs,
        )?[1]
            .train
            .epochs;
        md.push_str(&report::banner(
            ctx.preset,
            &format!(
                "parts of each split as `sfi-table1` takes them, {} run(s), {epochs} epochs per row",
                benchmark::plan(Dataset::PeptidesFunc, ctx.preset).runs
            ),
        ));
        md.push_str("Protocol and models as `sfi-table1` (the same splits, seeds and graphs of each split; at `--cpu` fewer epochs, as above), each SFi row with its (λ*, α, attention) from the paper: SP + Ã is eq. 11, SP the flow alone (no Ã, no γ), Ã the adjacency alone (no queries, keys or frictions).\n\n");
        let mut t = report::Table::new(
            ["dataset (metric)", "model", "λ*", "α", "attention", "paper"]
                .into_iter()
                .chain(ROW_COLUMNS),
        );
        let (mut missing, mut json, mut headline) = (Missing::default(), Vec::new(), Vec::new());
        let mut seconds = 0.0;
        for d in benchmark::datasets(table, ctx)? {
            let (key, scale, label) = datasets::metric_cell(d);
            let rows = models(&paper, d, ctx.preset, ctx.overrides.epochs)?;
            // Figure 3's train − test curves are Table 1's; here they would double the evaluation.
            let plan = super::RunPlan {
                curves: false,
                ..benchmark::plan(d, ctx.preset)
            };
            let results = match datasets::load(ctx, d, &rows, &mut missing)? {
                Some((data, split)) => run_rows(ctx, d.name(), &data, &split, &rows, &plan)?,
                None => Vec::new(),
            };
            for m in &rows {
                let p = papers::find(&paper, "model", &m.name);
                let a = &m.config.layer.attention;
                let (l, al, att) = match p.map(attention).transpose()?.flatten() {
                    Some(att) => (
                        format!("{}", a.lambda_star),
                        format!("{}", a.flow.alpha),
                        att.to_owned(),
                    ),
                    None => ("–".into(), "–".into(), "–".into()),
                };
                let paper_cell = benchmark::paper_cell(&paper, &m.name, d, scale)?;
                let ours = results.iter().find(|r| r.model == m.name).map_or(
                    vec![if results.is_empty() {
                        "data absent (below)".into()
                    } else {
                        "not run".into()
                    }],
                    |r| row_cells(r, key, scale),
                );
                t.row(
                    [
                        format!("{} ({label})", d.name()),
                        m.name.clone(),
                        l,
                        al,
                        att,
                        paper_cell,
                    ]
                    .into_iter()
                    .chain(ours),
                );
            }
            // The full model (the paper's λ* = 1, α = 0.1, SP + Ã row).
            for r in results.iter().filter(|r| r.model == "SFi-Former") {
                headline.push(report::Headline::new(
                    format!("{} SFi-Former {label}", d.name()),
                    r.show(&format!("test_{key}"), scale),
                    benchmark::paper_mean(&paper, &r.model, d, scale)?,
                ));
            }
            seconds += results.iter().map(|r| r.seconds).sum::<f64>();
            if !results.is_empty() {
                json.push(serde_json::json!({
                    "dataset": d.name(), "plan": plan, "models": rows, "results": results,
                }));
            }
        }
        md.push_str(&t.to_markdown());
        md.push_str(ZERO_NOTE);
        md.push_str(&missing.to_markdown());
        super::datasets_report(md, ctx, seconds, json, &missing, headline)
    }
}
crate::register_table!(
    SfiTable3,
    "sfi-table3",
    &["pascalvoc-sp", "peptides-func", "peptides-struct"]
);
