//! `cdat-table12`: the term-wise ablation of node anomaly detection (CDAT Appendix C, Table 12)
//! at 1/40/70 % training on every anomaly graph found: ET, SUPP (the suppression alone, W
//! removed), Wx (the excitation alone, the decay removed) and the full CDAT, on the same split,
//! runs and protocol as `cdat-table2` ([`crate::anomaly`]), with the floor beside them.

use std::collections::BTreeMap;

use crate::anomaly::{self, DATASETS, TableModel};
use crate::cdat::anomaly_table2::{cdat_model, options};
use crate::report::{self, Report};
use crate::{Context, Reproduction, Result, Table};

/// CDAT Table 12.
#[derive(Debug)]
pub struct CdatTable12;

/// The paper's column names, each with the ablation of [`basin_cdat::ABLATIONS`] it runs.
const VARIANTS: [(&str, &str); 3] = [
    ("CDAT", "full"),
    ("SUPP", "no-excitation"),
    ("Wx", "no-inhibition"),
];

impl Reproduction for CdatTable12 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let opts = options(ctx.preset).with_overrides(table, ctx);
        let paper = anomaly::paper_rows(
            "cdat-table12",
            &[
                ("CDAT", "cdat"),
                ("SUPP", "supp"),
                ("Wx", "wx"),
                ("ET", "et"),
            ],
        )?;
        // Every variant of every dataset and ratio, built before anything trains: an ablation
        // the block cannot take is an error here, not halfway through the table.
        let mut variants = BTreeMap::new();
        for dataset in &opts.datasets {
            for &ratio in &opts.ratios {
                let cdat = cdat_model(ctx.preset, dataset, ratio);
                let mut models = Vec::new();
                for (name, ablation) in VARIANTS {
                    let mut cfg = cdat.clone();
                    cfg.block = basin_cdat::ablate(&cdat.block, ablation)?;
                    models.push(TableModel::new(name, cfg));
                }
                models.push(TableModel::new("ET", basin_et::anomaly::default_model()));
                variants.insert(report::ratio_key(dataset, ratio), models);
            }
        }
        let (results, missing) = anomaly::run(
            &opts,
            |dataset, ratio, _| {
                variants
                    .get(&report::ratio_key(dataset, ratio))
                    .cloned()
                    .unwrap_or_default()
            },
            ctx,
        )?;
        // Each variant against the full CDAT of the same runs, macro-F1 and AUC.
        let against_full =
            |r: &anomaly::AnomalyResult| anomaly::against(r, "CDAT", &["SUPP", "Wx", "ET"]);
        let table = anomaly::results_table(
            &results,
            &paper,
            &["CDAT", "SUPP", "Wx", "ET"],
            &opts.ratios,
            &[("against full CDAT (F1 / AUC)", &against_full)],
        );
        anomaly::report("cdat-table12", &opts, &results, &missing, table, ctx)
    }
}
crate::register_table!(CdatTable12, "cdat-table12", DATASETS);
