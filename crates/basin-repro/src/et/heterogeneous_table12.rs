//! `et-table12`: ET on the heterogeneous anomaly graphs (ET Appendix E, Table 12): one ET block
//! per relation subgraph, the final representations aggregated by max pooling or by
//! concatenation, beside the homogeneous ET of Table 1 on the union of the relations, on the
//! same split and runs ([`crate::anomaly`]) with the floor. Yelp and Amazon (CARE-GNN's `.mat`
//! files, three relations each) are the paper's sets; a graph without relation subgraphs has
//! nothing to pool and is not run.

use basin_tasks::node_anomaly::{NodeAnomalyConfig, RelationPool};

use crate::anomaly::{self, TableModel};
use crate::et::anomaly_table1::{options, table6_models, ykth_column};
use crate::report::Report;
use crate::{Context, Reproduction, Result, Table};

/// ET Table 12.
#[derive(Debug)]
pub struct EtTable12;

/// The graphs with relation subgraphs.
pub const DATASETS: &[&str] = &["yelp", "amazon"];

/// The rows of our side, in the table's order: the two aggregations, then the homogeneous ET.
const MODELS: [&str; 3] = ["MaxPool", "Concatenation", "ET"];

/// The heterogeneous form of `cfg`: one block per relation, pooled by `pool`.
fn per_relation(cfg: &NodeAnomalyConfig, pool: RelationPool) -> NodeAnomalyConfig {
    NodeAnomalyConfig {
        heterogeneous: true,
        relation_pool: pool,
        ..cfg.clone()
    }
}

impl Reproduction for EtTable12 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let opts = options(ctx.preset).with_overrides(table, ctx);
        let paper = anomaly::paper_rows(
            "et-table12",
            &[
                (MODELS[0], "maxpool"),
                (MODELS[1], "concat"),
                ("BWGNN (heterogeneous)", "bwgnn"),
            ],
        )?;
        let model_for = table6_models()?;
        let (results, missing) = anomaly::run(
            &opts,
            |dataset, ratio, _| {
                let homogeneous = model_for(dataset, ratio);
                vec![
                    TableModel::new(MODELS[0], per_relation(&homogeneous, RelationPool::Max)),
                    TableModel::new(MODELS[1], per_relation(&homogeneous, RelationPool::Concat)),
                    TableModel::new(MODELS[2], homogeneous),
                ]
            },
            ctx,
        )?;
        let relations = |r: &anomaly::AnomalyResult| {
            r.model(MODELS[0]).map_or(String::new(), |m| {
                m.views
                    .energy
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .filter(|n| !n.ends_with(" V"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        };
        let table = anomaly::results_table(
            &results,
            &paper,
            &MODELS,
            &opts.ratios,
            &[("relations", &relations), ("Y, K, T, H", &ykth_column)],
        );
        anomaly::report("et-table12", &opts, &results, &missing, table, ctx)
    }
}
crate::register_table!(EtTable12, "et-table12", DATASETS);
