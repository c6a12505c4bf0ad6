//! Node anomaly detection, as several tables run it (ET Table 1, CDAT Table 2): every model of
//! a table under the BWGNN/ET protocol ([`AnomalyProtocol`]: one stratified split with a fixed
//! seed per training ratio, val:test = 1:2 of the rest, threshold swept on validation, best
//! validation epoch, test scored once) on the same split and runs, and the floor — each node's
//! attributes with its 1-hop and 2-hop neighbour means into an MLP — beside them.

use std::path::Path;
use std::time::Instant;

use basin_data::registry::{self, DataKind};
use basin_graph::mat::{FraudConfig, load_fraud_mat};
use basin_graph::npz::{NodeLoadOptions, load_anomaly_npz};
use basin_graph::{NodeDataset, SplitConfig};
use basin_tasks::baselines::{MlpConfig, NeighbourMeanLearner};
use basin_tasks::node_anomaly::{NodeAnomalyConfig, NodeAnomalyLearner};
use basin_train::optim::OptimConfig;
use basin_train::protocol::{AnomalyProtocol, AnomalyTargets, Protocol, ProtocolReport, ScoreMode};
use basin_train::runner::TrainConfig;
use serde::{Deserialize, Serialize};

use crate::report::{self, Missing, Report};
use crate::{Context, Result, Table, TaskError, selected};

/// The anomaly graphs the tables look for.
pub const DATASETS: &[&str] = &[
    "yelp", "amazon", "tfinance", "tsocial", "reddit", "tolokers",
];

/// Where a dataset's file is expected (the registry's place for it), and how to read it; `Err`
/// says why it cannot run.
pub fn load(name: &str, data_dir: &Path) -> std::result::Result<Result<NodeDataset>, String> {
    let info = registry::get(name).map_err(|e| e.to_string())?;
    let path = info.location(data_dir);
    if !path.exists() && matches!(name, "tfinance" | "tsocial") {
        return Err(format!(
            "{name}: not found at {}; it is published as a DGL binary graph (BWGNN's release): convert it with `python crates/basin-graph/scripts/to_basin_npz.py nodes --dgl {name} --out {}` where DGL is installed",
            path.display(),
            path.display()
        ));
    }
    if !path.exists() {
        return Err(info.missing(data_dir).to_string());
    }
    Ok(match info.kind {
        DataKind::FraudMat => load_fraud_mat(&path, &FraudConfig::for_path(&path)),
        DataKind::AnomalyNpz => load_anomaly_npz(&path, &NodeLoadOptions::default()),
        other => Err(basin_graph::GraphError::invalid(
            "dataset",
            format!("`{name}` is a {other:?} dataset, not a node-anomaly graph"),
        )),
    }
    .map_err(TaskError::from))
}

/// How much an anomaly table runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnomalyOptions {
    /// Datasets to look for.
    pub datasets: Vec<String>,
    /// Training ratios.
    pub ratios: Vec<f64>,
    /// Runs per ratio (model seeds 0…).
    pub runs: usize,
    /// Epochs (full-batch steps) of the models.
    pub epochs: usize,
    /// Adam learning rate of the models.
    pub lr: f64,
    /// The floor: features and neighbour means into an MLP, full batch.
    pub floor: MlpConfig,
    /// Epochs of the floor, Adam at lr 1e-2.
    pub floor_epochs: usize,
}

/// A model of a table: its name, configuration and how the protocol scores it.
#[derive(Clone, Debug)]
pub struct TableModel {
    /// The row's name.
    pub name: String,
    /// The model.
    pub config: NodeAnomalyConfig,
    /// How its epochs are scored (the code's own way for a reference row).
    pub score: ScoreMode,
}

impl TableModel {
    /// A model scored the default way (evaluation mode after each step).
    pub fn new(name: &str, config: NodeAnomalyConfig) -> Self {
        Self {
            name: name.into(),
            config,
            score: ScoreMode::EvalAfterStep,
        }
    }
}

/// One model at one dataset and ratio.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AnomalyModelRuns {
    /// The model's name.
    pub model: String,
    /// Its configuration.
    pub config: NodeAnomalyConfig,
    /// How it was scored.
    pub score: ScoreMode,
    /// The protocol's report.
    pub report: ProtocolReport,
    /// Run 0's selected model's descent: the graph's energy (and V) per step per relation, its
    /// test nodes' energies on the first relation (anomalous and normal apart), and for
    /// dynamics with a storage functional (CDAT's) the landscape.
    #[serde(flatten)]
    pub views: report::DescentViews,
}

/// One dataset at one ratio.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AnomalyResult {
    /// Dataset.
    pub dataset: String,
    /// Training ratio.
    pub ratio: f64,
    /// Each model.
    pub models: Vec<AnomalyModelRuns>,
    /// The floor on the same split.
    pub floor: ProtocolReport,
    /// The runs' training time in seconds (models and floor), read from their records.
    pub seconds: f64,
}

impl AnomalyResult {
    /// The model `name`'s results.
    pub fn model(&self, name: &str) -> Option<&AnomalyModelRuns> {
        self.models.iter().find(|m| m.model == name)
    }

    /// The output folder of this dataset and ratio, e.g. `reddit-40pct`.
    pub fn tag(&self) -> String {
        tag(&self.dataset, self.ratio)
    }
}

fn tag(dataset: &str, ratio: f64) -> String {
    format!("{dataset}-{}pct", (ratio * 100.0).round())
}

/// Runs, on every dataset found and every ratio, the models `models(dataset, ratio, nodes)`
/// names (each on the same split and runs, scored as it says) and the floor; run records under
/// `<dataset>-<ratio>pct/<model>/run-<r>`, with `energy.png` beside them. Also returns the
/// datasets that were not found.
pub fn run(
    opts: &AnomalyOptions,
    models: impl Fn(&str, f64, i64) -> Vec<TableModel>,
    ctx: &Context,
) -> Result<(Vec<AnomalyResult>, Missing)> {
    let (mut results, mut missing) = (Vec::new(), Missing::default());
    for name in &opts.datasets {
        let data = match load(name, ctx.data_dir()) {
            Ok(d) => d?,
            Err(why) => {
                missing.0.push(why);
                continue;
            }
        };
        let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
        for &ratio in &opts.ratios {
            let t0 = Instant::now();
            let tag = tag(name, ratio);
            let protocol = AnomalyProtocol {
                split: SplitConfig::bwgnn(ratio),
                runs: opts.runs,
                seed: 0,
                score: ScoreMode::EvalAfterStep,
                train: TrainConfig {
                    epochs: opts.epochs,
                    optim: OptimConfig {
                        lr: opts.lr,
                        ..OptimConfig::et_anomaly()
                    },
                    ..TrainConfig::default()
                },
            };
            let mut done = Vec::new();
            let nodes = data.graph.num_nodes() as i64;
            for TableModel {
                name: model,
                config: cfg,
                score,
            } in models(name, ratio, nodes)
            {
                let out = ctx.out().join(&tag).join(&model);
                let mut views = report::DescentViews::default();
                let protocol = AnomalyProtocol {
                    score,
                    ..protocol.clone()
                };
                let report = protocol.run(
                    AnomalyTargets {
                        labelled: &data.labelled,
                        is_anomaly: &is_anomaly,
                    },
                    |run| {
                        Ok(NodeAnomalyLearner::for_run(
                            &data,
                            &cfg,
                            run,
                            protocol.score,
                            ctx.device(),
                        )?)
                    },
                    |run, learner| {
                        if views.energy.is_empty() {
                            views.energy = learner.energy_per_step();
                            views.energy_by_group = learner
                                .node_energy_by_class(&run.test(), &is_anomaly)
                                .unwrap_or_default();
                            // Controlled dynamics (a V beside E) leave the gradient flow: draw both.
                            if views.energy.iter().any(|(n, _)| n.ends_with(" V")) {
                                views.landscape = learner.landscape(ANOMALY_LANDSCAPE_GRID);
                            }
                        }
                        Ok(())
                    },
                    &ctx.runs(format!("{tag} {model}"), &out),
                )?;
                if ctx.reports() {
                    views.draw(
                        &out,
                        (&format!("{tag}, {model}"), "run 0, selected model"),
                        ("node_energy", "test node"),
                        "the whole graph's descent over its energy",
                    )?;
                }
                tracing::info!(
                    "{tag} {model}: macro-F1 {}, AUC {}",
                    report.show("test_macro_f1", 100.0),
                    report.show("test_auc", 100.0)
                );
                done.push(AnomalyModelRuns {
                    model,
                    config: cfg,
                    score,
                    report,
                    views,
                });
            }
            let floor = AnomalyProtocol {
                train: TrainConfig {
                    epochs: opts.floor_epochs,
                    optim: OptimConfig {
                        lr: 1e-2,
                        ..OptimConfig::default()
                    },
                    ..TrainConfig::default()
                },
                ..protocol.clone()
            }
            .run(
                AnomalyTargets {
                    labelled: &data.labelled,
                    is_anomaly: &is_anomaly,
                },
                |run| {
                    Ok(NeighbourMeanLearner::new(
                        &data,
                        &opts.floor,
                        &run.train(),
                        run.seed,
                        ctx.device(),
                    )?)
                },
                |_, _| Ok(()),
                &ctx.runs(format!("{tag} floor"), ctx.out()).writing_to(None),
            )?;
            tracing::info!(
                "{tag} floor: macro-F1 {}, AUC {}",
                floor.show("test_macro_f1", 100.0),
                floor.show("test_auc", 100.0)
            );
            // Runs read back (the report pass of `--jobs` or `--shard`) count the time they
            // took when trained.
            let seconds = done
                .iter()
                .map(|m| &m.report)
                .chain([&floor])
                .map(ProtocolReport::seconds)
                .sum();
            tracing::info!("{tag}: {:.0} s here", t0.elapsed().as_secs_f64());
            results.push(AnomalyResult {
                dataset: name.clone(),
                ratio,
                models: done,
                floor,
                seconds,
            });
        }
    }
    Ok((results, missing))
}

/// The protocol paragraph of a report.
pub fn protocol_note(opts: &AnomalyOptions) -> String {
    format!(
        "Protocol: BWGNN/ET — stratified split with a fixed seed (2) at each training ratio, the rest split val:test = 1:2, threshold swept on validation macro-F1, best-validation epoch, test scored once; {} runs (model seeds 0…), {} epochs, Adam lr {}, node attributes standardised with the training nodes' statistics. The **floor**, on the same split and runs: each node's standardised attributes with the mean of its 1-hop and 2-hop neighbours' into an MLP (hidden {}, dropout {}), weighted BCE, {} full-batch Adam steps at lr 1e-2, the same threshold selection; a model below the floor has not learned more from the graph than neighbour averaging. Numbers ×100, mean ± std over runs. The papers say their runs use different splits; the reference code fixes the split seed, as we do.\n\n",
        opts.runs, opts.epochs, opts.lr, opts.floor.hidden, opts.floor.dropout, opts.floor_epochs
    )
}

/// Side of the grid the anomaly graphs' energy landscapes are evaluated on (each point is an
/// energy of the whole graph).
const ANOMALY_LANDSCAPE_GRID: usize = 15;

/// One line per dataset, ratio and model: the energy's (and V's) first and last value, and for
/// Each of `models` against `reference` on the same runs, in points of macro-F1 and AUC (the
/// papers' ▼ of an ablation): `SUPP +0.3 / -1.2; Wx …`, `–` where either lacks the metric.
pub fn against(r: &AnomalyResult, reference: &str, models: &[&str]) -> String {
    let mean = |m: &str, metric: &str| {
        r.model(m)
            .and_then(|m| m.report.mean_std(metric))
            .map(|(mean, _)| mean * 100.0)
    };
    models
        .iter()
        .map(|m| {
            let d = |metric: &str| match (mean(m, metric), mean(reference, metric)) {
                (Some(a), Some(f)) => format!("{:+.1}", a - f),
                _ => "–".into(),
            };
            format!("{m} {} / {}", d("test_macro_f1"), d("test_auc"))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// CDAT's dynamics where its descent and plain gradient flow end on the landscape (Figures 1
/// and 3); and where each group of test nodes (anomalous, normal) settles.
pub fn curves_markdown(results: &[AnomalyResult]) -> String {
    let mut md = String::new();
    for r in results {
        for m in &r.models {
            let landscape = m
                .views
                .landscape_markdown("", &format!("{}/{}", r.tag(), m.model));
            md.push_str(&format!(
                "- {} {:.0} % {}: {} — `{}/{}/energy.png`{landscape}{}\n",
                r.dataset,
                r.ratio * 100.0,
                m.model,
                report::curve_ends(&m.views.energy),
                r.tag(),
                m.model,
                report::group_ends(
                    &m.views.energy_by_group,
                    &format!("{}/{}/node_energy.png", r.tag(), m.model)
                ),
            ));
        }
    }
    md
}

/// A row of a paper's anomaly table: a dataset at a training ratio, and each published model's
/// macro-F1 and AUC (`[mean, std]`).
#[derive(Clone, Debug)]
pub struct AnomalyPaperRow {
    /// Dataset.
    pub dataset: String,
    /// Training ratio.
    pub ratio: f64,
    /// Model name → (macro-F1, AUC).
    pub models: Vec<(String, [f64; 2], [f64; 2])>,
}

/// The paper's rows of anomaly table `id` (`data/papers/<id>.toml`) in the shared form: each
/// row's `dataset` and `ratio`, and for each `(name, key)` of `models` the row's `<key>_f1` and
/// `<key>_auc` (mean, std): one schema for every anomaly table.
pub fn paper_rows(id: &str, models: &[(&str, &str)]) -> Result<Vec<AnomalyPaperRow>> {
    crate::papers::rows(id)?
        .iter()
        .map(|row| {
            Ok(AnomalyPaperRow {
                dataset: row.text("dataset")?.to_owned(),
                ratio: row.number("ratio")?,
                models: models
                    .iter()
                    .map(|&(name, key)| {
                        Ok((
                            name.to_owned(),
                            row.pair(&format!("{key}_f1"))?,
                            row.pair(&format!("{key}_auc"))?,
                        ))
                    })
                    .collect::<Result<_>>()?,
            })
        })
        .collect()
}

impl AnomalyPaperRow {
    /// The key rows are found by ([`report::ratio_key`]).
    pub fn key(&self) -> String {
        report::ratio_key(&self.dataset, self.ratio)
    }
}

/// An extra column of an anomaly table: its name and its cell for a result.
pub type Column<'a> = (&'a str, &'a dyn Fn(&AnomalyResult) -> String);

/// The results table ET's and CDAT's anomaly reports share: for each dataset and ratio the
/// paper's models (F1 / AUC), each of `ours` (macro-F1, AUC), the floor, `extra` columns and the
/// runs' time; a paper row at one of `ratios` that did not run says "not run". Also the headline
/// cells: the first of `ours`'s AUC beside the paper's, per row.
pub fn results_table(
    results: &[AnomalyResult],
    paper: &[AnomalyPaperRow],
    ours: &[&str],
    ratios: &[f64],
    extra: &[Column],
) -> (String, Vec<report::Headline>) {
    let published: Vec<String> = paper
        .first()
        .map(|r| r.models.iter().map(|(m, _, _)| m.clone()).collect())
        .unwrap_or_default();
    let mut header = vec!["dataset".to_owned(), "train".to_owned()];
    header.extend(published.iter().map(|m| format!("paper {m} F1 / AUC")));
    for m in ours {
        header.push(format!("{m} macro-F1"));
        header.push(format!("{m} AUC"));
    }
    header.extend(["floor macro-F1".to_owned(), "floor AUC".to_owned()]);
    header.extend(extra.iter().map(|(name, _)| name.to_string()));
    header.push("wall (s)".into());
    let mut t = report::Table::new(header);
    let mut headline = Vec::new();
    let published_cells = |row: Option<&AnomalyPaperRow>| -> Vec<String> {
        published
            .iter()
            .map(|m| {
                row.and_then(|r| r.models.iter().find(|(n, _, _)| n == m))
                    .map_or("–".into(), |(_, f, a)| {
                        format!("{:.1} / {:.1}", f[0], a[0])
                    })
            })
            .collect()
    };
    for r in results {
        let key = report::ratio_key(&r.dataset, r.ratio);
        let p = paper.iter().find(|p| p.key() == key);
        let mut cells = vec![r.dataset.clone(), format!("{:.0} %", r.ratio * 100.0)];
        cells.extend(published_cells(p));
        for m in ours {
            for metric in ["test_macro_f1", "test_auc"] {
                cells.push(
                    r.model(m)
                        .map_or("–".into(), |m| m.report.show(metric, 100.0)),
                );
            }
        }
        cells.push(r.floor.show("test_macro_f1", 100.0));
        cells.push(r.floor.show("test_auc", 100.0));
        cells.extend(extra.iter().map(|(_, cell)| cell(r)));
        cells.push(format!("{:.0}", r.seconds));
        t.row(cells);
        if let Some(first) = ours.first().and_then(|m| r.model(m)) {
            let paper_auc = p.and_then(|p| {
                p.models
                    .iter()
                    .find(|(n, _, _)| n == &first.model)
                    .map(|(_, _, a)| format!("{:.1}", a[0]))
            });
            headline.push(report::Headline::new(
                format!("{} {:.0} % {} AUC", r.dataset, r.ratio * 100.0, first.model),
                first.report.show("test_auc", 100.0),
                paper_auc,
            ));
        }
    }
    for row in paper {
        let ran = results.iter().any(|r| r.dataset == row.dataset);
        let asked = ratios
            .iter()
            .any(|&x| report::ratio_key(&row.dataset, x) == row.key());
        if !ran && asked {
            let mut cells = vec![row.dataset.clone(), format!("{:.0} %", row.ratio * 100.0)];
            cells.extend(published_cells(Some(row)));
            cells.push("not run".into());
            t.row(cells);
        }
    }
    (t.to_markdown(), headline)
}

impl AnomalyOptions {
    /// These options with `runs` runs of `epochs` epochs (a smaller scale of the protocol).
    pub fn scaled(self, runs: usize, epochs: usize) -> Self {
        Self {
            runs,
            epochs,
            ..self
        }
    }

    /// The protocol ET's and CDAT's anomaly tables share, at the training `ratios`: 5 runs of
    /// 100 epochs at lr 1e-3, and the floor (a 64-wide MLP, dropout 0.2, 200 full-batch steps).
    pub fn paper(datasets: Vec<String>, ratios: Vec<f64>) -> Self {
        Self {
            datasets,
            ratios,
            runs: 5,
            epochs: 100,
            lr: 1e-3,
            floor: MlpConfig {
                hidden: 64,
                dropout: 0.2,
                batch: 0,
            },
            floor_epochs: 200,
        }
    }

    /// These options with the context's `--epochs` and `--dataset` applied for `table`.
    pub fn with_overrides(mut self, table: &Table, ctx: &Context) -> Self {
        if let Some(e) = ctx.overrides.epochs {
            self.epochs = e;
        }
        self.datasets = selected(table, ctx, table.datasets());
        self
    }
}

/// The words of an anomaly table's report around its results: the `[report]` section of its
/// `data/papers/<id>.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Prose {
    /// The Markdown title.
    title: String,
    /// What each model row runs.
    models: String,
    /// The line before the energy curves.
    curves: String,
    /// Where the run records are, for the footer.
    records: String,
}

/// Table `id`'s report words (its `[report]` section).
pub(crate) fn prose(id: &str) -> Result<Prose> {
    crate::papers::report(id)
}

/// The report every anomaly table writes: title, preset banner, protocol, what each model row
/// runs, the results table ([`results_table`]), the datasets not found, the energy curves and
/// the footer (the words from table `id`'s `[report]` section); `report.json` holds the
/// options, results and missing datasets.
pub fn report(
    id: &str,
    opts: &AnomalyOptions,
    results: &[AnomalyResult],
    missing: &Missing,
    (table, headline): (String, Vec<report::Headline>),
    ctx: &Context,
) -> Result<Report> {
    let prose = prose(id)?;
    let mut md = format!("# {}\n\n", prose.title);
    md.push_str(&report::banner(
        ctx.preset,
        &format!("{} run(s) of {} epochs", opts.runs, opts.epochs),
    ));
    md.push_str(&protocol_note(opts));
    md.push_str(&prose.models);
    md.push_str("\n\n");
    md.push_str(&table);
    md.push_str(&missing.to_markdown());
    if !results.is_empty() {
        md.push_str(&format!("\n{}\n", prose.curves));
        md.push_str(&curves_markdown(results));
    }
    let seconds: f64 = results.iter().map(|r| r.seconds).sum();
    md.push_str(&report::footer(ctx, Some(seconds), &prose.records));
    Ok(Report::new(
        md,
        &serde_json::json!({ "options": opts, "results": results, "missing": missing }),
        results.len(),
    )?
    .with_headline(headline))
}
