//! `cdat-params`: the parameter counts of CDAT Tables 13 and 14 (Appendix D), built and
//! counted beside the printed ones. Table 13 is the public anomaly code's model on Amazon
//! (`basin_cdat::anomaly::reference` with Table 9's Amazon 40 % row: D = 256, 2 heads,
//! |V| = 11,944, 25 attributes) with what that code allocates and counts but never uses
//! (`reference_unused_parameters`); its ET is the same model without the controlled dynamics'
//! parameters (the coupling W = PᵀCP over the nodes and ω's c). The per-block count is one ET
//! layer: attention, memories, norm and the code's unused per-layer weights; the coupling sits
//! outside it, as the paper says. Table 14 is the graph reference models on NCI109's 38
//! attributes: `basin_cdat::graph::tu_reference` and `basin_et::graph::tu_reference`.

use basin_tasks::graph_classification::{GraphClassifier, GraphClassifierConfig};
use basin_tasks::node_anomaly::NodeAnomaly;
use serde::Serialize;
use tch::{Device, nn};

use crate::papers;
use crate::report::{self, Report};
use crate::{Context, Reproduction, Result, Table, TaskError};

/// CDAT Tables 13 and 14.
#[derive(Debug)]
pub struct CdatParams;

/// One model's built counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Built {
    /// The row's name.
    pub model: String,
    /// Every parameter the paper counts.
    pub total: i64,
    /// One block's (Table 13 only).
    pub per_block: Option<i64>,
}

/// Amazon in Table 13: nodes and attributes.
const AMAZON: (i64, i64) = (11_944, 25);
/// NCI109's node attributes in Table 14.
const NCI109_FEATURES: i64 = 38;

fn is_control(name: &str) -> bool {
    name.contains(".coupling.") || name.contains(".omega.")
}

/// Table 13's CDAT and ET, built.
pub fn anomaly() -> Result<[Built; 2]> {
    use basin_cdat::anomaly::{reference, reference_unused_parameters, table9};
    let (nodes, features) = AMAZON;
    let row = table9("amazon", 0.4)
        .ok_or_else(|| TaskError::invalid("cdat-params", "Table 9 has no Amazon 40 % row"))?;
    let cfg = reference(row, nodes);
    let vs = nn::VarStore::new(Device::Cpu);
    NodeAnomaly::new(&vs.root(), &cfg, features, nodes, 1)?;
    let vars: Vec<(String, i64)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (n, t.numel() as i64))
        .collect();
    let dim = row.hid;
    // The shared layer and the output layer each carry the code's unused weights.
    let total =
        vars.iter().map(|(_, c)| c).sum::<i64>() + reference_unused_parameters(nodes, dim, 2);
    let control: i64 = vars
        .iter()
        .filter(|(n, _)| is_control(n))
        .map(|(_, c)| c)
        .sum();
    let block = vars
        .iter()
        .filter(|(n, _)| n.starts_with("block.") && !is_control(n))
        .map(|(_, c)| c)
        .sum::<i64>()
        + reference_unused_parameters(0, dim, 1);
    Ok([
        Built {
            model: "CDAT".into(),
            total,
            per_block: Some(block),
        },
        Built {
            model: "ET".into(),
            total: total - control,
            per_block: Some(block),
        },
    ])
}

fn trainable(cfg: &GraphClassifierConfig) -> Result<i64> {
    let vs = nn::VarStore::new(Device::Cpu);
    GraphClassifier::new(&vs.root(), cfg, NCI109_FEATURES, 2)?;
    Ok(vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum())
}

/// Table 14's CDAT and ET, built.
pub fn graph() -> Result<[Built; 2]> {
    Ok([
        Built {
            model: "CDAT".into(),
            total: trainable(&basin_cdat::graph::tu_reference())?,
            per_block: None,
        },
        Built {
            model: "ET".into(),
            total: trainable(&basin_et::graph::tu_reference())?,
            per_block: None,
        },
    ])
}

fn drop(n: i64, base: i64) -> f64 {
    100.0 * (1.0 - n as f64 / base as f64)
}

/// `n` in millions with `decimals` decimals, as the paper prints it.
fn millions(n: i64, decimals: usize) -> String {
    format!("{:.*}M", decimals, n as f64 / 1e6)
}

/// How many printed cells match the paper's, of how many compared.
#[derive(Default)]
struct Matches {
    matched: usize,
    cells: usize,
}

impl Matches {
    /// Counts one cell; `yes` or `no` for the table.
    fn check(&mut self, ok: bool) -> &'static str {
        self.cells += 1;
        self.matched += usize::from(ok);
        if ok { "yes" } else { "no" }
    }

    /// A model's total, built and the paper's (in millions to `decimals`), and its drop against
    /// CDAT's `base` (built / paper), with whether each matches as printed.
    fn totals(
        &mut self,
        b: &Built,
        base: i64,
        p: &papers::PaperRow,
        decimals: usize,
    ) -> Result<([String; 3], [&'static str; 2])> {
        let (total, total_drop) = (p.number("total")?, p.number("total_drop")?);
        let d = drop(b.total, base);
        let paper = format!("{total:.decimals$}M");
        let ok = [
            self.check(millions(b.total, decimals) == paper),
            self.check(format!("{d:.2}") == format!("{total_drop:.2}")),
        ];
        let built = format!("{} ({})", millions(b.total, decimals), b.total);
        Ok(([built, paper, format!("{d:.2} % / {total_drop:.2} %")], ok))
    }
}

impl Reproduction for CdatParams {
    fn run(&self, _table: &Table, ctx: &Context) -> Result<Report> {
        let paper_anomaly = papers::rows_of("cdat-params", "anomaly")?;
        let paper_graph = papers::rows_of("cdat-params", "graph")?;
        let (anomaly, graph) = (anomaly()?, graph()?);
        let mut md = String::from("# CDAT Tables 13 and 14 — parameters of CDAT and ET\n\n");
        md.push_str("Each model is built (no data needed) and counted. **Table 13** (anomaly detection): the public anomaly code's model on Amazon (`basin_cdat::anomaly::reference`, Table 9's Amazon 40 % row: D = 256, 2 heads, 11,944 nodes, 25 attributes) with the weights that code allocates and counts but never uses (a per-node embedding, and per layer an output projection, a second LayerNorm and a scalar: `reference_unused_parameters`); ET is the same model without the controlled dynamics' parameters (the coupling W = PᵀCP over the nodes and ω's c). A block is one ET layer; the coupling is counted outside it, as the paper says. **Table 14** (graph classification): the graph reference models (`basin_cdat::graph::tu_reference`, `basin_et::graph::tu_reference`) on NCI109's 38 node attributes. A cell matches when ours, rounded as the paper prints it, is the paper's.\n\n");
        let mut m = Matches::default();
        let mut t = report::Table::new([
            "Table 13 model",
            "built",
            "paper",
            "▼ vs CDAT (built / paper)",
            "per block, built",
            "paper",
            "matches (total, ▼, per block)",
        ]);
        for b in &anomaly {
            let Some(p) = papers::find(&paper_anomaly, "model", &b.model) else {
                continue;
            };
            let ([built, paper, down], [a, b_ok]) = m.totals(b, anomaly[0].total, p, 2)?;
            let per_block = p.number("per_block")?;
            let block = b.per_block.unwrap_or(0);
            let c = m.check(millions(block, 2) == format!("{per_block:.2}M"));
            t.row([
                b.model.clone(),
                built,
                paper,
                down,
                format!("{} ({block})", millions(block, 2)),
                format!("{per_block:.2}M"),
                [a, b_ok, c].join(", "),
            ]);
        }
        md.push_str(&t.to_markdown());
        md.push('\n');
        let mut t = report::Table::new([
            "Table 14 model",
            "built",
            "paper",
            "▼ vs CDAT (built / paper)",
            "matches (total, ▼)",
        ]);
        for b in &graph {
            let Some(p) = papers::find(&paper_graph, "model", &b.model) else {
                continue;
            };
            let ([built, paper, down], ok) = m.totals(b, graph[0].total, p, 3)?;
            t.row([b.model.clone(), built, paper, down, ok.join(", ")]);
        }
        md.push_str(&t.to_markdown());
        md.push_str(&format!(
            "\n{} of {} printed cells match. CDAT's overhead over ET is {} parameters on the anomaly model (the coupling over the nodes) and {} on the graph model (the coupling over the 501 token slots and c).\n",
            m.matched,
            m.cells,
            anomaly[0].total - anomaly[1].total,
            graph[0].total - graph[1].total
        ));
        md.push_str(&report::footer(ctx, None, ""));
        // CDAT's total, ours against the paper's first row, in millions to `decimals`.
        let cdat_total = |name: &str, built: &[Built], paper: &[papers::PaperRow], decimals| {
            let printed = paper
                .first()
                .map(|p| Ok::<_, TaskError>(format!("{:.*}M", decimals, p.number("total")?)))
                .transpose()?;
            Ok::<_, TaskError>(report::Headline::new(
                name,
                millions(built[0].total, decimals),
                printed,
            ))
        };
        let headline = vec![
            cdat_total("CDAT anomaly parameters", &anomaly, &paper_anomaly, 2)?,
            cdat_total("CDAT graph parameters", &graph, &paper_graph, 3)?,
            report::Headline::new(
                "printed cells matching",
                format!("{}/{}", m.matched, m.cells),
                None,
            ),
        ];
        Ok(Report::new(
            md,
            &serde_json::json!({ "anomaly": anomaly, "graph": graph, "matched": m.matched, "cells": m.cells }),
            1,
        )?
        .with_headline(headline))
    }
}
crate::register_table!(CdatParams, "cdat-params", &[]);

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts the architecture gives: CDAT's anomaly model is Table 13's 4,294,839 and ET
    /// that without the coupling over 11,944 nodes (4 × 11,944 + 4 × 4) and c; the graph models
    /// differ by the coupling over the token slots (4 × 501 + 4 × 4) and c.
    #[test]
    fn the_counts_are_the_reference_codes() {
        let [cdat, et] = anomaly().unwrap();
        assert_eq!(cdat.total, 4_294_839);
        assert_eq!(cdat.total - et.total, 4 * 11_944 + 16 + 1);
        assert_eq!(cdat.per_block, et.per_block);
        let [cdat, et] = graph().unwrap();
        assert_eq!(cdat.total, 1_060_327);
        assert_eq!(cdat.total - et.total, 4 * 501 + 16 + 1);
    }
}
