//! `et-table13`: the module ablation of ET on node anomaly detection (ET Appendix F.1,
//! Table 13): the attention alone (HN removed), the Hopfield memory alone (ATT removed: each
//! node then sees only its own features, a recurrent MLP) and the full model, each with
//! Table 6's hyperparameters, on every anomaly graph found at 1 % and 40 % training, on the
//! same split and runs as Table 1 ([`crate::anomaly`]), with the floor beside them.

use basin_et::anomaly::{ABLATIONS, ablations};

use crate::anomaly::{self, DATASETS, TableModel};
use crate::et::anomaly_table1::{options, table6_models, ykth_column};
use crate::report::Report;
use crate::{Context, Reproduction, Result, Table};

/// ET Table 13.
#[derive(Debug)]
pub struct EtTable13;

impl Reproduction for EtTable13 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let opts = options(ctx.preset).with_overrides(table, ctx);
        let paper = anomaly::paper_rows(
            "et-table13",
            &[
                (ABLATIONS[0], "att"),
                (ABLATIONS[1], "hn"),
                (ABLATIONS[2], "et"),
            ],
        )?;
        let model_for = table6_models()?;
        let (results, missing) = anomaly::run(
            &opts,
            |dataset, ratio, _| {
                ablations(&model_for(dataset, ratio))
                    .into_iter()
                    .map(|(name, cfg)| TableModel::new(name, cfg))
                    .collect()
            },
            ctx,
        )?;
        // The drop of each ablation against the full model, macro-F1 and AUC (the paper's ▼).
        let drops = |r: &anomaly::AnomalyResult| anomaly::against(r, "ET", &ABLATIONS[..2]);
        let table = anomaly::results_table(
            &results,
            &paper,
            &ABLATIONS,
            &opts.ratios,
            &[
                ("against full ET (F1 / AUC)", &drops),
                ("Y, K, T, H", &ykth_column),
            ],
        );
        anomaly::report("et-table13", &opts, &results, &missing, table, ctx)
    }
}
crate::register_table!(EtTable13, "et-table13", DATASETS);
