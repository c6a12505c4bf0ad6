//! `sfi-table3`: SFi-Former Table 3, the ablations on Peptides-func — λ* ∈ {0.5, 1, 2, 5},
//! α ∈ {0.01, 0.1, 0.5, 1} and the attention (SP + Ã, SP alone, Ã alone) — beside GPS and the
//! model that ignores the graph, on the same split and seeds. The share of zero flows should
//! grow with λ* (the ℓ1 weight); the paper's AP ordering is weak evidence.

use basin_sfi::presets::Variant;
use basin_train::protocol::Metric;
use serde::Deserialize;

use super::lrgb_table1::{banner, load, spec, with_epochs};
use super::{ModelSpec, RunPlan, ZERO_NOTE, no_graph, row_cells, run_rows};
use crate::report::{self, Missing, Report};
use crate::{Context, Override, Preset, Reproduction, Result};

/// SFi-Former Table 3 (Peptides-Func column).
#[derive(Debug)]
pub struct SfiTable3;

#[derive(Debug, Deserialize)]
struct PaperRow {
    model: String,
    lambda_star: Option<f64>,
    alpha: Option<f64>,
    attention: Option<String>,
    value: [f64; 2],
}

#[derive(Debug, Deserialize)]
struct PaperTable {
    rows: Vec<PaperRow>,
}

/// Every row of the paper's table as a model at `preset`, after the no-graph row.
fn models(paper: &PaperTable, preset: Preset, epochs: Option<usize>) -> Vec<ModelSpec> {
    let mut rows: Vec<ModelSpec> = paper
        .rows
        .iter()
        .map(|p| {
            let variant = match p.attention.as_deref() {
                None => Variant::Gps,
                Some("SP") => Variant::SfiSp,
                Some("Ã") => Variant::SfiAdj,
                Some(_) => Variant::Sfi,
            };
            let mut m = spec(preset, &p.model, variant);
            if let Some(l) = p.lambda_star {
                m.config.layer.attention.lambda_star = l;
            }
            if let Some(a) = p.alpha {
                m.config.layer.attention.flow.alpha = a;
            }
            m
        })
        .collect();
    if preset == Preset::Cpu && epochs.is_none() {
        // The CPU scale of the ablation: 15 epochs per row.
        with_epochs(&mut rows, Some(15));
    }
    with_epochs(&mut rows, epochs);
    let baseline = no_graph(&rows[0]);
    rows.insert(0, baseline);
    rows
}

impl Reproduction for SfiTable3 {
    fn id(&self) -> &'static str {
        "sfi-table3"
    }
    fn title(&self) -> &'static str {
        "SFi-Former Table 3: λ*, α and attention ablations on Peptides-func"
    }
    fn paper(&self) -> &'static str {
        "sfi-former.txt, Table 3 (Peptides-Func column)"
    }
    fn datasets(&self) -> &'static [&'static str] {
        &["peptides-func"]
    }
    fn presets(&self) -> &'static [Preset] {
        &[Preset::Paper, Preset::Cpu, Preset::Quick]
    }
    fn accepts(&self) -> &'static [Override] {
        &[Override::Epochs]
    }
    fn run(&self, ctx: &Context) -> Result<Report> {
        let paper: PaperTable = report::paper("sfi-table3")?;
        let rows = models(&paper, ctx.preset, ctx.overrides.epochs);
        let plan = RunPlan {
            runs: if ctx.preset == Preset::Paper { 4 } else { 1 },
            seed: 0,
            metric: Metric::MeanAp,
            curves: false,
        };
        let mut md = String::from("# SFi-Former Table 3 — ablations on Peptides-func (AP)\n\n");
        md.push_str(&banner(ctx.preset, plan.runs, rows[1].train.epochs));
        md.push_str("Protocol and models as `sfi-table1` (same split, seeds and scale), each SFi row with its (λ*, α, attention) from the paper: SP + Ã is eq. 11, SP the flow alone (no Ã, no γ), Ã the adjacency alone (no queries, keys or frictions).\n\n");
        let mut missing = Missing::default();
        let results = match load(ctx, &rows, &mut missing)? {
            Some((data, split)) => run_rows(ctx, "peptides-func", &data, &split, &rows, &plan)?,
            None => Vec::new(),
        };
        let mut t = report::Table::new([
            "model",
            "λ*",
            "α",
            "attention",
            "paper AP ×100",
            "parameters",
            "AP ×100 (test)",
            "AP ×100 (val, selected epoch)",
            "zero flows",
            "training (s)",
        ]);
        for m in &rows {
            let p = paper.rows.iter().find(|p| p.model == m.name);
            let a = &m.config.layer.attention;
            let sfi = p.and_then(|p| p.attention.as_ref()).is_some();
            let (l, al, att) = if sfi {
                (
                    format!("{}", a.lambda_star),
                    format!("{}", a.flow.alpha),
                    p.and_then(|p| p.attention.clone()).unwrap_or_default(),
                )
            } else {
                ("–".into(), "–".into(), "–".into())
            };
            let paper_cell = p.map_or("–".into(), |p| {
                format!("{:.2} ± {:.2}", p.value[0] * 100.0, p.value[1] * 100.0)
            });
            let ours = results
                .iter()
                .find(|r| r.model == m.name)
                .map_or(vec!["not run".into()], |r| row_cells(r, "ap", 100.0));
            t.row(
                [m.name.clone(), l, al, att, paper_cell]
                    .into_iter()
                    .chain(ours),
            );
        }
        md.push_str(&t.to_markdown());
        md.push_str(ZERO_NOTE);
        md.push_str(&missing.to_markdown());
        md.push_str(&report::footer(
            ctx,
            Some(results.iter().map(|r| r.seconds).sum()),
            "",
        ));
        let ran = usize::from(!results.is_empty());
        // The full model (the paper's λ* = 1, α = 0.1, SP + Ã row).
        let headline = results
            .iter()
            .filter(|r| r.model == "SFi-Former")
            .map(|r| {
                let p = report::find_row(&paper.rows, &r.model, |p| p.model.clone());
                report::Headline::new(
                    "Peptides-func SFi-Former AP",
                    r.show("test_ap", 100.0),
                    p.map(|p| format!("{:.2}", p.value[0] * 100.0)),
                )
            })
            .collect();
        Ok(Report::new(
            md,
            &serde_json::json!({ "plan": plan, "models": rows, "results": results, "missing": missing }),
            ran,
        )?
        .with_headline(headline))
    }
}
