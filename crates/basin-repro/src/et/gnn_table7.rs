//! `et-table7`: ET on the GNN Benchmark's node-classification sets (ET Table 7, PATTERN and
//! CLUSTER columns), regenerated as `sfi-table2` makes them (same seed and sizes), with every
//! node token read out (`Readout::Nodes`), weighted accuracy (`accuracy_SBM`), beside the
//! model that ignores the graph and GatedGCN from the SFi tables' front end, on the same split.

use std::sync::Arc;
use std::time::Instant;

use basin_graph::sbm::one_hot_features;
use basin_sfi::learner::GpsData;
use basin_sfi::presets::{self, Dataset, Variant};
use basin_tasks::graph_classification::{GraphClassifierLearner, dataset_pe};
use basin_train::optim::OptimConfig;
use basin_train::protocol::{FixedSplitProtocol, Metric, PlannedRun, Protocol, PublishedSplit};
use basin_train::runner::TrainConfig;
use basin_train::schedule::{Schedule, Unit};
use serde::Deserialize;

use crate::report::{self, Report};
use crate::sfi::gnn_table2::generate;
use crate::sfi::{ModelSpec, RunPlan, no_graph, run_rows, selected_val};
use crate::{Context, Override, Preset, ReproError, Reproduction, Result, selected};

/// ET Table 7 (PATTERN and CLUSTER columns).
#[derive(Debug)]
pub struct EtTable7;

#[derive(Debug, Deserialize)]
struct PaperRow {
    model: String,
    pattern: [f64; 2],
    cluster: [f64; 2],
}

#[derive(Debug, Deserialize)]
struct PaperTable {
    rows: Vec<PaperRow>,
}

const DATASETS: &[&str] = &["pattern", "cluster"];

/// ET's training at `preset` (Table 10 for the paper: a flat warm-up of 50 epochs at 10⁻³, then
/// cosine to 5·10⁻⁷; AdamW β₂ = 0.99, weight decay 0.05).
fn et_training(d: Dataset, preset: Preset, epochs: Option<usize>) -> TrainConfig {
    let (e, warmup) = match preset {
        Preset::Paper => (if d == Dataset::Pattern { 100 } else { 300 }, 50),
        Preset::Cpu => (20, 2),
        Preset::Quick => (2, 1),
    };
    let e = epochs.unwrap_or(e);
    TrainConfig {
        epochs: e,
        optim: OptimConfig::et_graph(),
        schedule: Some(Schedule::WarmupCosine {
            start: 1e-3,
            peak: 1e-3,
            end: 5e-7,
            warmup: warmup.min(e / 2) as u64,
            total: e as u64,
        }),
        schedule_unit: Unit::Epoch,
        ema: None,
    }
}

impl Reproduction for EtTable7 {
    fn id(&self) -> &'static str {
        "et-table7"
    }
    fn title(&self) -> &'static str {
        "ET Table 7: PATTERN and CLUSTER node classification (regenerated) beside a no-graph model and GatedGCN"
    }
    fn paper(&self) -> &'static str {
        "energy-transformer.txt, Appendix D, Table 7 (hyperparameters: Tables 10 and 11)"
    }
    fn datasets(&self) -> &'static [&'static str] {
        DATASETS
    }
    fn presets(&self) -> &'static [Preset] {
        &[Preset::Paper, Preset::Cpu, Preset::Quick]
    }
    fn accepts(&self) -> &'static [Override] {
        &[Override::Epochs, Override::Dataset]
    }
    fn run(&self, ctx: &Context) -> Result<Report> {
        let paper: PaperTable = report::paper("et-table7")?;
        let runs = if ctx.preset == Preset::Paper { 4 } else { 1 };
        let mut et_cfg = match ctx.preset {
            Preset::Paper => basin_et::graph::gnn_benchmark_paper(),
            _ => basin_et::graph::gnn_benchmark_cpu(),
        };
        et_cfg.features = basin_graph::features::FeatureScaling::Raw;
        if ctx.preset == Preset::Quick {
            et_cfg.batch = 8;
        }
        let mut md = String::from("# ET Table 7 — PATTERN and CLUSTER (weighted accuracy)\n\n");
        md.push_str(&report::banner(
            ctx.preset,
            &format!(
                "the generated sets of `sfi-table2` at this scale, {runs} run(s), {} epochs",
                et_training(Dataset::Pattern, ctx.preset, ctx.overrides.epochs).epochs
            ),
        ));
        md.push_str("Protocol: the graphs of `sfi-table2` (published SBM parameters, seed 0, node features one-hot), the generator's train/val/test parts, the epoch of best validation `accuracy_SBM`, tested there (the paper reports 100 evaluations of the test set instead). **ET**: `basin_et::graph::gnn_benchmark_paper` (Table 11; \"depth 4, block_size 2\" read as 4 blocks × 2 steps) or `gnn_benchmark_cpu` (D = 32, 4 heads of 8, K = 128, 2 blocks × 2 steps, α = 0.1, σ = 0.005), Laplacian encodings k = 15, masked Â, every node token read out by one Linear, the per-batch class-weighted cross-entropy; AdamW β₂ = 0.99, weight decay 0.05, gradient centralisation, lr 10⁻³ held then cosine to 5·10⁻⁷. **no graph** and **GatedGCN**: the SFi tables' GPS front end at the same scale (`sfi-table2`'s rows).\n\n");
        let mut t = report::Table::new([
            "dataset",
            "graphs (train/val/test)",
            "model",
            "paper",
            "parameters",
            "accuracy (test)",
            "accuracy (val, selected epoch)",
            "wall (s)",
        ]);
        let mut headline = Vec::new();
        let mut json = Vec::new();
        let mut ran = 0;
        for name in selected(self, ctx, DATASETS) {
            let (d, classes) = if name == "pattern" {
                (Dataset::Pattern, 3)
            } else {
                (Dataset::Cluster, 7)
            };
            let raw = generate(d, ctx.preset)?;
            let split = raw
                .official_split
                .clone()
                .ok_or_else(|| ReproError::config(&name, "the generator gave no split"))?;
            let sizes = split.sizes();
            // ET.
            let t0 = Instant::now();
            let onehot = Arc::new(one_hot_features(&raw, classes)?);
            let pe = dataset_pe(&onehot, &et_cfg.batching)?.map(Arc::new);
            let gps_data = Arc::new(GpsData::new(onehot.clone(), 0, 0)?);
            let protocol = FixedSplitProtocol {
                runs,
                seed: 0,
                metric: Metric::AccuracySbm,
                train: et_training(d, ctx.preset, ctx.overrides.epochs),
                curves: false,
            };
            let mut parameters = 0i64;
            let make = |run: &PlannedRun| {
                Ok(GraphClassifierLearner::new(
                    onehot.clone(),
                    pe.clone(),
                    &et_cfg,
                    &run.train(),
                    run.seed,
                    ctx.device,
                )?)
            };
            let et = protocol.run(
                PublishedSplit {
                    split: &split,
                    target: (gps_data.targets()),
                },
                make,
                |_, l| {
                    parameters = basin_train::runner::Learner::vars(l)
                        .trainable_variables()
                        .iter()
                        .map(|t| t.numel() as i64)
                        .sum();
                    Ok(())
                },
                &ctx.runs(format!("{name}/ET"), ctx.out.join(&name).join("et")),
            )?;
            let et_seconds = t0.elapsed().as_secs_f64();
            // Baselines from the SFi front end, on the same graphs and split.
            let gps_cfg = |v: Variant| match ctx.preset {
                Preset::Paper => presets::paper(d, v),
                _ => presets::cpu(d, v),
            };
            let train = presets::warmup_cosine(
                protocol.train.epochs,
                2.min(protocol.train.epochs / 2).max(1),
                1e-3,
                1e-5,
            );
            let gated = ModelSpec::new("GatedGCN", gps_cfg(Variant::GatedGcn), train);
            let rows = vec![
                no_graph(&ModelSpec::new(
                    "GPS",
                    gps_cfg(Variant::Gps),
                    gated.train.clone(),
                )),
                gated,
            ];
            let k = rows
                .iter()
                .map(|r| r.config.pe.frequencies())
                .max()
                .unwrap_or(0);
            let raw_data = Arc::new(GpsData::new(Arc::new(raw), k, 0)?);
            let plan = RunPlan {
                runs,
                seed: 0,
                metric: Metric::AccuracySbm,
                curves: false,
            };
            let base = run_rows(ctx, &name, &raw_data, &split, &rows, &plan)?;
            let p = paper.rows.iter().find(|p| p.model == "ET");
            let published = p.map(|p| {
                if d == Dataset::Pattern {
                    p.pattern
                } else {
                    p.cluster
                }
            });
            let pcell = published.map_or("–".into(), |v| format!("{:.2} ± {:.2}", v[0], v[1]));
            let key = "accuracy_sbm";
            let graphs = format!("{}/{}/{}", sizes[0], sizes[1], sizes[2]);
            let et_test = et.show(&format!("test_{key}"), 100.0);
            t.row([
                name.clone(),
                graphs.clone(),
                "ET".into(),
                pcell,
                parameters.to_string(),
                et_test.clone(),
                selected_val(&et, &format!("val_{key}"), 100.0),
                format!("{et_seconds:.0}"),
            ]);
            headline.push(report::Headline::new(
                format!("{name} ET accuracy"),
                et_test,
                published.map(|v| format!("{:.2}", v[0])),
            ));
            for r in &base {
                t.row([
                    name.clone(),
                    graphs.clone(),
                    r.model.clone(),
                    "–".into(),
                    r.parameters.to_string(),
                    r.show(&format!("test_{key}"), 100.0),
                    selected_val(&r.report, &format!("val_{key}"), 100.0),
                    format!("{:.0}", r.seconds),
                ]);
            }
            ran += 1;
            json.push(serde_json::json!({ "dataset": name, "et": et, "baselines": base }));
        }
        md.push_str(&t.to_markdown());
        md.push_str("\nPaper rows not run here (other models): ");
        let others: Vec<String> = paper
            .rows
            .iter()
            .filter(|p| p.model != "ET")
            .map(|p| format!("{} {:.2} / {:.2}", p.model, p.pattern[0], p.cluster[0]))
            .collect();
        md.push_str(&others.join("; "));
        md.push_str(" (PATTERN / CLUSTER, %).\n\nChance: PATTERN 50 %, CLUSTER 16.7 %; the no-graph row is the bar a graph model must clear.\n");
        md.push_str(&report::footer(ctx, None, ""));
        Ok(Report::new(
            md,
            &serde_json::json!({ "et_config": et_cfg, "datasets": json }),
            ran,
        )?
        .with_headline(headline))
    }
}
