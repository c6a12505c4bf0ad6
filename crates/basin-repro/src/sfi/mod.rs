//! What the SFi-Former tables share: every model of a table on one dataset, on the same
//! published split and seeds (`run_rows`), beside the model that ignores the graph (the same
//! encoders and head with no GPS layer and no positional encoding: pooled node features for
//! graph targets, each node's own features for node targets), and the train − test gap curves
//! (SFi-Former Fig. 3).

pub mod ablation_table3;
mod benchmark;
pub(crate) mod datasets;
pub mod gnn_table2;
pub mod lrgb_table1;
pub mod params;
pub mod stats_table4;

use std::path::Path;
use std::sync::Arc;

use basin_graph::Split;
use basin_sfi::flow::FlowSolver;
use basin_sfi::learner::{GpsData, GpsLearner};
use basin_sfi::model::{GpsModelConfig, PosEnc};
use basin_train::protocol::{FixedSplitProtocol, Metric, Protocol, ProtocolReport, PublishedSplit};
use basin_train::runner::{TrainConfig, warm_start};
use serde::Serialize;

use crate::report::{self, Headline, Missing, Report};
use crate::{Context, Result};

/// What the zero-flow column means, for every SFi report.
pub const ZERO_NOTE: &str = "\nZero flows: the share of attention entries between real nodes below 10⁻⁸ (the paper's threshold; it says about 5 % on Peptides) over every layer and head, on up to 256 test graphs, run 0's selected model. For softmax rows (GPS, DFi) it measures saturation, not sparsity: GPS's LapPE comes from the combinatorial Laplacian with raw eigenvalues (up to about twice the largest degree; the GPS configs do not normalise them), which can saturate its softmax.\n";

/// One model of a table.
#[derive(Clone, Debug, Serialize)]
pub struct ModelSpec {
    /// Its row name (`GPS`, `SFi-Former`, …; the paper's spelling).
    pub name: String,
    /// Its configuration.
    pub config: GpsModelConfig,
    /// Its training.
    pub train: TrainConfig,
    /// Start from the selected weights of this earlier row's run with the same seed (SFi-Former+
    /// from DFi-Former); only the friction branch, which DFi lacks, starts from scratch.
    pub warm_start: Option<String>,
}

impl ModelSpec {
    /// A row.
    pub fn new(name: &str, config: GpsModelConfig, train: TrainConfig) -> Self {
        Self {
            name: name.into(),
            config,
            train,
            warm_start: None,
        }
    }

    /// SFi-Former+: `sfi` started from the row `from` (DFi-Former).
    pub fn warm_started(name: &str, sfi: &ModelSpec, from: &str) -> Self {
        Self {
            name: name.into(),
            warm_start: Some(from.into()),
            ..sfi.clone()
        }
    }
}

/// The model that ignores the graph, built from `like`: no layer, no positional encoding.
pub fn no_graph(like: &ModelSpec) -> ModelSpec {
    ModelSpec::new(
        "no graph (features → head)",
        GpsModelConfig {
            layers: 0,
            pe: PosEnc::None,
            ..like.config.clone()
        },
        like.train.clone(),
    )
}

/// The graphs `ds` with as many Laplacian frequencies as the largest positional encoding of
/// `models` reads (no random-walk encodings).
pub fn gps_data(ds: basin_graph::GraphDataset, models: &[ModelSpec]) -> Result<Arc<GpsData>> {
    let k = models
        .iter()
        .map(|r| r.config.pe.frequencies())
        .max()
        .unwrap_or(0);
    Ok(Arc::new(GpsData::new(Arc::new(ds), k, 0)?))
}

/// How every model of a table runs: seeds, metric, gap curves.
#[derive(Clone, Debug, Serialize)]
pub struct RunPlan {
    /// Runs (seeds `seed, seed + 1, …`).
    pub runs: usize,
    /// First seed.
    pub seed: u64,
    /// The metric.
    pub metric: Metric,
    /// Record the train − test gap every epoch.
    pub curves: bool,
}

/// What one model gave.
#[derive(Debug, Serialize)]
pub struct RowResult {
    /// Row name.
    pub model: String,
    /// Trainable parameters.
    pub parameters: i64,
    /// The runs and their aggregate.
    pub report: ProtocolReport,
    /// Share of flow entries below 10⁻⁸ on (up to 256) test graphs, run 0's selected model.
    pub zero_share: Option<f64>,
    /// Run 0's train − test metric per epoch (evaluation mode; empty without curves).
    pub gap: Vec<f64>,
    /// Run 0's solver trace per layer on up to 16 test graphs: the energy of eq. 9 at each
    /// iterate and at the exact minimiser (empty without a flow solver that iterates).
    pub solver: Vec<(Vec<f64>, f64)>,
    /// Run 0's flows on the first test graph, per layer and head (not in the JSON).
    #[serde(skip)]
    pub maps: Vec<Vec<Vec<f64>>>,
    /// Training time of all its runs, as their records keep it (a run read back counts the
    /// time it took when trained, not the seconds it took to read).
    pub seconds: f64,
}

impl RowResult {
    /// `mean ± sd` of test metric `key` (e.g. `test_ap`), scaled.
    pub fn show(&self, key: &str, scale: f64) -> String {
        self.report.show(key, scale)
    }
}

/// Runs every model of `models` on `data` with `protocol` on `split`; run records go under
/// `out/<dataset>/<model index>-<slug>`.
pub fn run_rows(
    ctx: &Context,
    dataset: &str,
    data: &Arc<GpsData>,
    split: &Split,
    models: &[ModelSpec],
    plan: &RunPlan,
) -> Result<Vec<RowResult>> {
    let mut rows = Vec::new();
    let mut dirs: Vec<(String, std::path::PathBuf)> = Vec::new();
    for (i, spec) in models.iter().enumerate() {
        let slug: String = spec
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let dir = ctx.out().join(dataset).join(format!("{i}-{slug}"));
        dirs.push((spec.name.clone(), dir.clone()));
        let source = match &spec.warm_start {
            Some(from) => Some(
                dirs.iter()
                    .find(|(n, _)| n == from)
                    .map(|(_, d)| d.clone())
                    .ok_or_else(|| {
                        crate::TaskError::invalid(
                            &spec.name,
                            format!("warm start from `{from}`, which is not an earlier row"),
                        )
                    })?,
            ),
            None => None,
        };
        let mut parameters = 0;
        let mut zero_share = None;
        let mut maps = Vec::new();
        let mut solver = Vec::new();
        let test: Vec<usize> = split.test.iter().take(256).map(|&t| t as usize).collect();
        let protocol = FixedSplitProtocol {
            runs: plan.runs,
            seed: plan.seed,
            metric: plan.metric,
            train: spec.train.clone(),
            curves: plan.curves,
        };
        let report = protocol.run(PublishedSplit { split, target: (data.targets()) }, |run| {
                let learner = GpsLearner::new(data.clone(), &spec.config, run.seed, ctx.device())?;
                if let Some(src) = &source {
                    let ckpt = src.join(&run.dir).join("checkpoint.safetensors");
                    let left = warm_start(&ckpt, basin_train::runner::Learner::vars(&learner))?;
                    if let Some(bad) = left.iter().find(|n| !n.contains("friction")) {
                        return Err(basin_train::TrainError::State(format!(
                            "{}: warm start left `{bad}` untrained (only the friction branch may be new)",
                            ckpt.display()
                        )));
                    }
                }
                Ok(learner)
            }, |run, learner| {
                parameters = learner.parameters();
                if run.dir == "run-0" {
                    zero_share = learner.zero_share(&test)?;
                    if let Some(&first) = test.first() {
                        maps = learner.attention_maps(first)?;
                    }
                    if spec.config.layer.attention.flow.solver == FlowSolver::ProxBb {
                        let few = &test[..test.len().min(16)];
                        solver = learner.flow_traces(few)?;
                    }
                }
                Ok(())
            }, &ctx.runs(format!("{dataset}/{}", spec.name), &dir))?;
        let gap = gap_curve(&report);
        let seconds = report.seconds();
        rows.push(RowResult {
            model: spec.name.clone(),
            parameters,
            report,
            zero_share,
            gap,
            solver,
            maps,
            seconds,
        });
    }
    Ok(rows)
}

/// Run 0's `curve_train_* − curve_test_*` per epoch.
fn gap_curve(report: &ProtocolReport) -> Vec<f64> {
    let Some(run) = report.runs.first() else {
        return Vec::new();
    };
    run.epochs
        .iter()
        .filter_map(|e| {
            let train = e
                .metrics
                .iter()
                .find(|(k, _)| k.starts_with("curve_train_"))?
                .1;
            let test = e
                .metrics
                .iter()
                .find(|(k, _)| k.starts_with("curve_test_"))?
                .1;
            Some(train - test)
        })
        .collect()
}

/// Plots the gap curves of `rows` into `path` and returns a Markdown line for the report.
pub fn gap_figure(path: &Path, title: &str, rows: &[RowResult]) -> Result<String> {
    let curves: Vec<(String, Vec<f64>)> = rows
        .iter()
        .filter(|r| !r.gap.is_empty())
        .map(|r| (r.model.clone(), r.gap.clone()))
        .collect();
    if curves.is_empty() {
        return Ok(String::new());
    }
    let series: Vec<basin_train::plot::Series> = curves
        .iter()
        .map(|(n, v)| basin_train::plot::Series::new(n.clone(), v.clone()))
        .collect();
    basin_train::plot::line_chart(path, title, "epoch", &series)
        .map_err(|e| crate::TaskError::invalid(path.display().to_string(), e.to_string()))?;
    let ends: Vec<String> = curves
        .iter()
        .map(|(n, c)| {
            let last = c.last().copied().unwrap_or(f64::NAN);
            let max = c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{n}: last {last:.3}, largest {max:.3}")
        })
        .collect();
    Ok(format!(
        "\nTrain − test gap per epoch, run 0 (both scored in evaluation mode every epoch; selection reads validation only): {}. Plot: `{}`.\n",
        ends.join("; "),
        path.file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned())
    ))
}

/// The end of a report over datasets: `md` with the footer (the runs' training `seconds`),
/// and `report.json` with each dataset's entry in `json` (an absent set's entry says
/// `"absent": true` and does not count as run) beside the missing datasets.
pub(crate) fn datasets_report(
    mut md: String,
    ctx: &Context,
    seconds: f64,
    json: Vec<serde_json::Value>,
    missing: &Missing,
    headline: Vec<Headline>,
) -> Result<Report> {
    md.push_str(&report::footer(ctx, Some(seconds), ""));
    let ran = json.iter().filter(|j| j.get("absent").is_none()).count();
    let json = serde_json::json!({ "datasets": json, "missing": missing });
    Ok(Report::new(md, &json, ran)?.with_headline(headline))
}

/// The columns of [`row_cells`].
pub const ROW_COLUMNS: [&str; 5] = [
    "parameters",
    "test",
    "val (selected epoch)",
    "zero flows",
    "training (s)",
];

/// The common cells of a results row: parameters, our test metric, validation, zero share,
/// recorded training time ([`ROW_COLUMNS`]).
pub fn row_cells(r: &RowResult, key: &str, scale: f64) -> Vec<String> {
    vec![
        r.parameters.to_string(),
        r.show(&format!("test_{key}"), scale),
        selected_val(&r.report, &format!("val_{key}"), scale),
        r.zero_share
            .map_or("–".into(), |z| format!("{:.1} %", z * 100.0)),
        format!("{:.0}", r.seconds),
    ]
}

/// Mean ± population s.d. over runs of `key` at each run's selected epoch (one run: its value).
pub(crate) fn selected_val(report: &ProtocolReport, key: &str, scale: f64) -> String {
    let values: Vec<f64> = report
        .runs
        .iter()
        .filter_map(|r| r.epochs.get(r.selected_epoch?)?.metrics.get(key).copied())
        .collect();
    if values.is_empty() {
        return "–".into();
    }
    let (m, s) = basin_train::metrics::mean_std(&values);
    if values.len() == 1 {
        return format!("{:.2}", m * scale);
    }
    format!("{:.2} ± {:.2}", m * scale, s * scale)
}

/// Draws run 0's flows on the first test graph, one row per model and one picture per layer
/// and head, on a log scale: black at 10⁻⁸ and below (the paper's threshold), white at 1.
/// Returns a Markdown line for the report (nothing when no model has flows).
pub fn attention_figure(path: &Path, rows: &[RowResult]) -> Result<String> {
    use basin_train::plot::{Picture, image_grid};
    let drawn: Vec<&RowResult> = rows.iter().filter(|r| !r.maps.is_empty()).collect();
    let Some(first) = drawn.first() else {
        return Ok(String::new());
    };
    let n = first.maps[0].len() as u32;
    let pictures: Vec<Vec<Picture>> = drawn
        .iter()
        .map(|r| {
            r.maps
                .iter()
                .map(|m| Picture {
                    width: n,
                    height: n,
                    channels: 1,
                    data: m
                        .iter()
                        .flatten()
                        .map(|&z| ((z.max(1e-8).log10() + 8.0) / 8.0) as f32)
                        .collect(),
                })
                .collect()
        })
        .collect();
    let labels: Vec<&str> = drawn.iter().map(|r| r.model.as_str()).collect();
    let scale = (256 / n.max(1)).clamp(1, 8);
    let columns: Vec<String> = (0..first.maps.len())
        .map(|k| format!("map {}", k + 1))
        .collect();
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    image_grid(path, &pictures, &labels, &columns, scale)
        .map_err(|e| crate::TaskError::invalid(path.display().to_string(), e.to_string()))?;
    Ok(format!(
        "\nAttention (flows Z) on the first test graph ({n} nodes), one picture per layer and head (map 1, 2, … in layer-major order), log scale from 10⁻⁸ (black) to 1 (white), rows = queries (Figure 4): `{}`.\n",
        path.file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned())
    ))
}

/// Plots each SFi row's solver trace (run 0, per layer) as the gap of the energy of eq. 9 to
/// the exact minimiser over the unrolled iterations, and returns a Markdown line.
pub fn solver_figure(path: &Path, rows: &[RowResult]) -> Result<String> {
    let mut series = Vec::new();
    let mut text = Vec::new();
    for r in rows {
        for (l, (trace, optimum)) in r.solver.iter().enumerate() {
            if trace.len() < 2 {
                continue;
            }
            let gap: Vec<f64> = trace.iter().map(|e| e - optimum).collect();
            text.push(format!(
                "{} layer {l}: {:.4} → {:.4} (optimum {:.4})",
                r.model,
                trace[0],
                trace[trace.len() - 1],
                optimum
            ));
            series.push(basin_train::plot::Series::new(
                format!("{} layer {l}", r.model),
                gap,
            ));
        }
    }
    if series.is_empty() {
        return Ok(String::new());
    }
    basin_train::plot::line_chart(
        path,
        "energy of eq. 9 above the exact minimiser",
        "iteration",
        &series,
    )
    .map_err(|e| crate::TaskError::invalid(path.display().to_string(), e.to_string()))?;
    Ok(format!(
        "\nSolver trace (run 0, up to 16 test graphs, mean over graphs and heads), energy of eq. 9 from the softmax start to the last unrolled prox-BB iterate, beside the exact minimiser's: {}. Plot: `{}`.\n",
        text.join("; "),
        path.file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned())
    ))
}
