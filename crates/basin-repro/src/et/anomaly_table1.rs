//! `et-table1`: node anomaly detection (ET Table 1) on every anomaly graph found in the data
//! directory, at 1 % and 40 % training ratios, macro-F1 and AUC (mean ± std over runs), beside
//! the paper's numbers.
//!
//! Protocol: [`basin_train::protocol::AnomalyProtocol`] — one stratified split with a fixed
//! seed (BWGNN's), the rest split val:test = 1:2, the threshold swept on validation, the epoch
//! with the best validation macro-F1 selected, test scored once. Model: ET's `basin_tasks::node_anomaly` with the
//! Table 6 hyperparameters where the paper gives them, the paper's defaults otherwise (the
//! reference's switches off). Yelp and Amazon are read from CARE-GNN's `.mat` files; T-Finance
//! and T-Social ship as DGL binary graphs, which are not read; Reddit and Tolokers (not in the
//! paper) from their npz files.

use basin_core::{AttentionConfig, HopfieldMemoryConfig};
use basin_et::anomaly::{Table6Row, default_model, table6};
use basin_tasks::node_anomaly::NodeAnomalyConfig;

use crate::anomaly::{self, AnomalyOptions, AnomalyResult, DATASETS};
use crate::papers;
use crate::report::{self, Report};
use crate::{Context, Preset, Reproduction, Result, Table};

/// ET Table 1.
#[derive(Debug)]
pub struct EtTable1;

impl Reproduction for EtTable1 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        run(&options(ctx.preset).with_overrides(table, ctx), ctx)
    }
}
crate::register_table!(EtTable1, "et-table1", DATASETS);

/// The options of a preset: the paper's protocol (ratios 1 % and 40 %, 5 runs of 100 epochs
/// at lr 1e-3; for a GPU), CPU scale (2 runs of 100 epochs; its epoch is timed by
/// `benches/models.rs`), or the CI smoke run (1 run of 3 epochs). The floor runs 200
/// full-batch steps in every preset but `quick`.
pub fn options(preset: Preset) -> AnomalyOptions {
    let datasets = DATASETS.iter().map(|s| s.to_string()).collect();
    let paper = AnomalyOptions::paper(datasets, vec![0.01, 0.4]);
    match preset {
        Preset::Paper => paper,
        Preset::Cpu => paper.scaled(2, 100),
        Preset::Quick => paper.scaled(1, 3),
    }
}

/// ET's model at a dataset and training ratio: Table 6's row where the paper has it, the
/// defaults (`basin_et::anomaly::default_model`) otherwise.
pub fn table6_models() -> Result<impl Fn(&str, f64) -> NodeAnomalyConfig> {
    // Each row's key (dataset and ratio) and its Table 6 model.
    let rows: Vec<(String, Table6Row)> = papers::rows("et-table1")?
        .iter()
        .map(|r| {
            let key = report::ratio_key(r.text("dataset")?, r.number("ratio")?);
            Ok((key, r.parse("table6")?))
        })
        .collect::<Result<_>>()?;
    Ok(move |dataset: &str, ratio: f64| {
        let key = report::ratio_key(dataset, ratio);
        rows.iter()
            .find(|(k, _)| *k == key)
            .map_or_else(default_model, |(_, row)| table6(*row))
    })
}

/// Y, K, T, H of a model config, as Table 6 lists them (0 for a module it lacks).
pub fn table6_of(cfg: &NodeAnomalyConfig) -> String {
    let att = cfg.block.term::<AttentionConfig>();
    let hop = cfg.block.term::<HopfieldMemoryConfig>();
    format!(
        "{}, {}, {}, {}",
        att.as_ref().map_or(0, |a| a.head_dim),
        hop.map_or(0, |h| h.memories),
        cfg.block.steps,
        att.map_or(0, |a| a.heads)
    )
}

/// The "Y, K, T, H" column of ET's row of a result (empty without one).
pub fn ykth_column(r: &AnomalyResult) -> String {
    r.model("ET")
        .map_or(String::new(), |m| table6_of(&m.config))
}

/// Runs Table 1 with `opts`: ET with Table 6's row where the paper has the dataset, the
/// defaults otherwise.
pub fn run(opts: &AnomalyOptions, ctx: &Context) -> Result<Report> {
    let model_for = table6_models()?;
    let (results, missing) = anomaly::run(
        opts,
        |dataset, ratio, _| vec![anomaly::TableModel::new("ET", model_for(dataset, ratio))],
        ctx,
    )?;
    let table = anomaly::results_table(
        &results,
        &anomaly::paper_rows("et-table1", &[("ET", "et"), ("BWGNN", "bwgnn")])?,
        &["ET"],
        &opts.ratios,
        &[("Y, K, T, H", &ykth_column)],
    );
    anomaly::report("et-table1", opts, &results, &missing, table, ctx)
}
