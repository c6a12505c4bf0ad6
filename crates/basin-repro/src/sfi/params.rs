//! `sfi-params`: the parameter counts of every model of SFi Tables 5 and 6, built
//! (`basin_sfi::presets::paper`, the SFi rows) and counted, beside the printed `#params`. What one
//! per-layer formula fitted to them finds: the printed counts are the built model plus 2d + 1
//! parameters per layer that nothing in the text identifies; this report shows it column by
//! column.

use basin_sfi::model::GpsModel;
use basin_sfi::presets::{Dataset, Variant, paper};
use serde::Serialize;
use tch::{Device, nn};

use crate::papers;
use crate::report::{self, Report};
use crate::{Context, Reproduction, Result, Table, TaskError};

/// SFi-Former Tables 5/6, `#params`.
#[derive(Debug)]
pub struct SfiParams;

#[derive(Debug, Serialize)]
struct Row {
    model: Dataset,
    paper: i64,
    built: i64,
    unidentified: i64,
}

fn count(model: Dataset) -> Result<i64> {
    let cfg = paper(model, Variant::Sfi);
    let vs = nn::VarStore::new(Device::Cpu);
    GpsModel::new(&vs.root(), &cfg, model.task().outputs(cfg.dim()))
        .map_err(|e| TaskError::invalid(model.name(), e.to_string()))?;
    Ok(vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum())
}

impl Reproduction for SfiParams {
    fn run(&self, _table: &Table, ctx: &Context) -> Result<Report> {
        let paper = papers::rows("sfi-params")?;
        let mut md = String::from("# SFi-Former Tables 5/6 — parameter counts\n\n");
        md.push_str("Each model is built from `basin_sfi::presets::paper` (its SFi row; no data needed) and its trainable parameters counted. `L(2d + 1)` is what nothing in the paper's text identifies in the printed counts: a built model that matches `paper − L(2d + 1)` has every identified part right.\n\n");
        let mut t = report::Table::new([
            "model",
            "L × d",
            "paper #params",
            "built",
            "paper − built",
            "L(2d + 1)",
            "matches",
        ]);
        let mut rows = Vec::new();
        for p in &paper {
            let model: Dataset = p.parse("model")?;
            let (params, layers, dim) = (
                p.integer("params")?,
                p.integer("layers")?,
                p.integer("dim")?,
            );
            let built = count(model)?;
            let unidentified = layers * (2 * dim + 1);
            let verdict = if params - built == unidentified {
                "yes"
            } else {
                "no (fits no configuration)"
            };
            t.row([
                model.name().to_owned(),
                format!("{layers} × {dim}"),
                params.to_string(),
                built.to_string(),
                (params - built).to_string(),
                unidentified.to_string(),
                verdict.to_owned(),
            ]);
            rows.push(Row {
                model,
                paper: params,
                built,
                unidentified,
            });
        }
        md.push_str(&t.to_markdown());
        md.push_str(&report::footer(ctx, None, ""));
        // How many printed counts the built models explain (the table's "yes" rows).
        let matching = rows
            .iter()
            .filter(|r| r.paper - r.built == r.unidentified)
            .count();
        let headline = vec![report::Headline::new(
            "models matching the paper's #params (built + L(2d + 1))",
            format!("{matching}/{}", rows.len()),
            None,
        )];
        Ok(Report::new(md, &serde_json::json!({ "rows": rows }), 1)?.with_headline(headline))
    }
}
crate::register_table!(SfiParams, "sfi-params", &[]);
