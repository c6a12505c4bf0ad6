//! `cdat-table4`: parameters, inference milliseconds per batch and training seconds per epoch
//! of a graph transformer (GT), ET and CDAT on the same data, machine and run (CDAT Table 4).
//! The paper uses NCI109; when it is absent NCI1 stands in (4,110 graphs of 29.9 nodes against
//! 4,127 of 29.7, one input feature fewer), and the report says which.

use std::sync::Arc;
use std::time::Instant;

use basin_graph::Split;
use basin_graph::tu::load_tu;
use basin_tasks::baselines::{GraphTransformerConfig, GraphTransformerLearner};
use basin_tasks::graph_classification::{GraphClassifierLearner, dataset_pe};
use basin_train::context::RunContext;
use basin_train::metrics::mean_std;
use basin_train::protocol::PlannedRun;
use basin_train::runner::{Learner, TrainConfig, Validation};
use serde::{Deserialize, Serialize};

use crate::papers;
use crate::report::{self, Report};
use crate::{Context, Preset, Reproduction, Result, Table, TaskError, selected};

/// CDAT Table 4.
#[derive(Debug)]
pub struct CdatTable4;

/// One model's measurements.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cost {
    /// Model.
    pub model: String,
    /// Trainable parameters.
    pub params: i64,
    /// Milliseconds to score one batch, per run.
    pub inference_ms: Vec<f64>,
    /// Seconds of one training epoch, per run.
    pub train_s_per_epoch: Vec<f64>,
}

/// How every model is timed: one batch of the first `batch` items scored (after a warm-up
/// batch) and one epoch over `items`, `runs` times on `device`.
#[derive(Clone, Copy)]
struct Timing<'a> {
    items: &'a [usize],
    batch: usize,
    runs: usize,
    device: tch::Device,
}

impl Timing<'_> {
    /// The cost of the learners `make(seed)` builds, one per run.
    fn costs<L: Learner>(
        &self,
        name: &str,
        mut make: impl FnMut(u64) -> Result<L>,
    ) -> Result<Cost> {
        let Timing {
            items,
            batch,
            runs,
            device,
        } = *self;
        let (mut inference, mut training, mut params) = (Vec::new(), Vec::new(), 0);
        for r in 0..runs {
            let mut learner = make(r as u64)?;
            params = learner
                .vars()
                .trainable_variables()
                .iter()
                .map(|t| t.numel() as i64)
                .sum();
            let first: Vec<usize> = items.iter().copied().take(batch).collect();
            learner.predict(&first)?; // warm-up
            let t0 = Instant::now();
            learner.predict(&first)?;
            basin_core::device::synchronize(learner.vars().device());
            inference.push(t0.elapsed().as_secs_f64() * 1e3);
            let run = PlannedRun::new(
                format!("run-{r}"),
                Split::new(Vec::new(), Vec::new(), Vec::new()),
                r as u64,
            );
            let one_epoch = TrainConfig {
                epochs: 1,
                ..TrainConfig::default()
            };
            let runner = RunContext::new(name)
                .with_device(device)
                .with_progress(false)
                .runner(&run, one_epoch, serde_json::Value::Null);
            let record = runner.fit(
                &mut learner,
                items,
                &[],
                |_, _, _| Ok(Validation::default()),
                |_, _| Ok(Default::default()),
            )?;
            training.extend(record.epochs.first().map(|e| e.seconds));
        }
        Ok(Cost {
            model: name.into(),
            params,
            inference_ms: inference,
            train_s_per_epoch: training,
        })
    }
}

impl Reproduction for CdatTable4 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let paper = papers::rows("cdat-table4")?;
        let candidates = match ctx.preset {
            Preset::Quick => selected(table, ctx, &["MUTAG"]),
            _ => selected(table, ctx, &["NCI109", "NCI1"]),
        };
        let Some((name, dir)) = candidates
            .iter()
            .map(|n| (n.clone(), ctx.data_dir().join("tu").join(n)))
            .find(|(_, d)| d.is_dir())
        else {
            return Err(TaskError::invalid(
                "data",
                format!(
                    "none of {} under {}",
                    candidates.join(", "),
                    ctx.data_dir().join("tu").display()
                ),
            ));
        };
        let (et, cdat) = match ctx.preset {
            Preset::Paper => (basin_et::graph::tu_paper(), basin_cdat::graph::tu_paper()),
            _ => (basin_et::graph::tu_cpu(), basin_cdat::graph::tu_cpu()),
        };
        let gt = match ctx.preset {
            Preset::Paper => GraphTransformerConfig::default(),
            _ => GraphTransformerConfig {
                dim: 32,
                heads: 4,
                layers: 2,
                batch: 32,
                ..GraphTransformerConfig::default()
            },
        };
        let runs = match ctx.preset {
            Preset::Paper => 5,
            Preset::Cpu => 3,
            Preset::Quick => 1,
        };
        let data = Arc::new(load_tu(&dir)?);
        let items: Vec<usize> = (0..data.graphs.len()).collect();
        let pe = dataset_pe(&data, &et.batching)?.map(Arc::new);
        let device = ctx.device_name();
        // The same batch for all three: the paper's 64 (Table 10).
        let batch = 64;
        let gt = GraphTransformerConfig { batch, ..gt };
        let dev = ctx.device();
        let timing = Timing {
            items: &items,
            batch,
            runs,
            device: dev,
        };
        let mut costs = vec![timing.costs("GT", |seed| {
            GraphTransformerLearner::new(data.clone(), pe.clone(), &gt, &items, seed, dev)
        })?];
        for (model, mut cfg) in [("ET", et), ("CDAT", cdat)] {
            cfg.batch = batch;
            costs.push(timing.costs(model, |seed| {
                GraphClassifierLearner::new(data.clone(), pe.clone(), &cfg, &items, seed, dev)
            })?);
        }
        let mut md = String::from("# CDAT Table 4 — cost of GT, ET and CDAT\n\n");
        md.push_str(&report::banner(
            ctx.preset,
            &format!("{runs} run(s), the CPU-scale models"),
        ));
        md.push_str(&format!(
            "Data: **{name}** ({} graphs){}. Batch {batch} for every model; inference is one batch of the first {batch} graphs after a warm-up batch, training one epoch over every graph, {runs} run(s), mean ± std; {device}. GT: {} pre-norm layers of masked softmax attention (D = {}, {} heads, FFN {}·D) on the same front end.\n\n",
            data.graphs.len(),
            if name == "NCI109" { "" } else { ", standing in for the paper's NCI109" },
            gt.layers,
            gt.dim,
            gt.heads,
            gt.ffn
        ));
        let mut t = report::Table::new([
            "model",
            "paper params",
            "paper inference (ms/batch)",
            "paper training (s/epoch)",
            "ours params",
            "ours inference (ms/batch)",
            "ours training (s/epoch)",
        ]);
        let mut headline = Vec::new();
        for c in &costs {
            let p = papers::find(&paper, "model", &c.model);
            let (im, is) = mean_std(&c.inference_ms);
            let (tm, ts) = mean_std(&c.train_s_per_epoch);
            t.row([
                c.model.clone(),
                papers::cell(p, |p| Ok(p.text("params")?.to_owned()))?,
                papers::cell(p, |p| {
                    let [m, s] = p.pair("inference_ms")?;
                    Ok(format!("{m:.2} ± {s:.2}"))
                })?,
                papers::cell(p, |p| {
                    let [m, s] = p.pair("train_s_per_epoch")?;
                    Ok(format!("{m:.3} ± {s:.3}"))
                })?,
                c.params.to_string(),
                format!("{im:.2} ± {is:.2}"),
                format!("{tm:.3} ± {ts:.3}"),
            ]);
            if c.model == "CDAT" {
                headline.push(report::Headline::new(
                    "CDAT params",
                    c.params.to_string(),
                    p.map(|p| p.text("params").map(str::to_owned)).transpose()?,
                ));
            }
        }
        md.push_str(&t.to_markdown());
        md.push_str("\nThe paper's times are on an unstated GPU; compare ratios, not values.\n");
        md.push_str(&report::footer(ctx, None, ""));
        Ok(Report::new(
            md,
            &serde_json::json!({ "dataset": name, "batch": batch, "runs": runs, "costs": costs }),
            1,
        )?
        .with_headline(headline))
    }
}
crate::register_table!(CdatTable4, "cdat-table4", &["NCI109", "NCI1", "MUTAG"]);
