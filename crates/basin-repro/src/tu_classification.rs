//! TU graph classification, as several tables run it (ET Table 2, CDAT Tables 1, 3 and 11):
//! every model of a table under the same leak-free stratified k-fold cross-validation (model
//! selection on an inner validation split), optionally the ET reference's training-set
//! procedure (`et-paper`), and the two baselines on the same folds — a no-graph MLP on pooled
//! node features and GIN — so that a table shows whether a model learned the graph.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use basin_graph::laplacian::LaplacianPe;
use basin_graph::tu::load_tu;
use basin_graph::{GraphDataset, KFoldConfig};
use basin_tasks::baselines::{GinConfig, GinLearner, MlpConfig, PooledFeaturesLearner};
use basin_tasks::graph_classification::{
    AdjacencyMode, GraphClassifierConfig, GraphClassifierLearner, SPARSE_MEAN_NODES, dataset_pe,
    graph_classes, large_graphs,
};
use basin_train::TrainError;
use basin_train::compare::Paired;
use basin_train::optim::OptimConfig;
use basin_train::protocol::{
    CodeCrossValidation, CrossValidation, EtPaperProtocol, Metric, PlannedRun, Protocol,
    ProtocolReport, Selection, nothing_after,
};
use basin_train::runner::TrainConfig;
use basin_train::schedule::{Schedule, Unit};
use serde::{Deserialize, Serialize};

use crate::report::{self, Missing, Report};
use crate::{Context, Result};

/// A model column of a TU table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuModel {
    /// Its name in the table and the output folder (`ET`, `CDAT`, `CDAT r=2`, …).
    pub name: String,
    /// The model.
    pub config: GraphClassifierConfig,
    /// Runs only the leak-free CV, not the table's et-paper and code-cv procedures (a variant
    /// set beside the table's main models).
    #[serde(default)]
    pub cv_only: bool,
}

/// `opts` with the `--epochs`, `--repeats`, `--selection`, `--inner-folds` and `--ema`
/// overrides applied.
pub(crate) fn with_overrides(mut opts: TuOptions, ctx: &Context) -> TuOptions {
    let o = &ctx.overrides;
    opts.epochs = o.epochs.unwrap_or(opts.epochs);
    opts.repeats = o.repeats.unwrap_or(opts.repeats);
    opts.selection = o.selection.unwrap_or(opts.selection);
    opts.inner_folds = o.inner_folds.unwrap_or(opts.inner_folds);
    opts.ema = o.ema.or(opts.ema);
    opts
}

/// How much a TU table runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuOptions {
    /// TU datasets to look for under `tu/`.
    pub datasets: Vec<String>,
    /// Cross-validation folds.
    pub folds: usize,
    /// Cross-validation repeats.
    pub repeats: usize,
    /// How each fold's epoch is chosen on its inner validation split (models and baselines).
    #[serde(default)]
    pub selection: Selection,
    /// 0: each fold's epoch is chosen on its inner validation split; k ≥ 2: its number of
    /// epochs on k inner folds, then trained on the whole training part (models and baselines;
    /// [`CrossValidation::inner_folds`]).
    #[serde(default)]
    pub inner_folds: usize,
    /// Decay of the weights' average that validation, selection and the test use (models and
    /// baselines; [`TrainConfig::ema`]); `None`: the live weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ema: Option<f64>,
    /// Epochs of the models.
    pub epochs: usize,
    /// Peak learning rate of [`tu_train`].
    pub lr: f64,
    /// Repeats of the et-paper scoring (the ET paper: 100); 0 skips the procedure.
    pub et_paper_repeats: usize,
    /// Folds of the CDAT code's evaluation (`cdat-code-cv`: plain shuffled k-fold, final
    /// epoch, no validation); 0 skips it.
    pub code_cv_folds: usize,
    /// The models, each under the same protocol and budget.
    pub models: Vec<TuModel>,
    /// Epochs of the baselines (Adam, lr 1e-3); 0 skips them.
    pub baseline_epochs: usize,
    /// The no-graph baseline.
    pub pooled: MlpConfig,
    /// The message-passing baseline.
    pub gin: GinConfig,
}

impl TuOptions {
    /// The papers' protocol for `models` on `datasets`: one repeat of 10-fold cross-validation,
    /// `epochs` at peak lr 1e-3, the baselines for 100 epochs, no et-paper or code-cv scoring.
    pub fn ten_fold(datasets: &[&str], models: Vec<TuModel>, epochs: usize) -> Self {
        Self {
            datasets: datasets.iter().map(|s| s.to_string()).collect(),
            folds: 10,
            repeats: 1,
            selection: Selection::default(),
            inner_folds: 0,
            ema: None,
            epochs,
            lr: 1e-3,
            et_paper_repeats: 0,
            code_cv_folds: 0,
            models,
            baseline_epochs: 100,
            pooled: MlpConfig::default(),
            gin: GinConfig::default(),
        }
    }
}

/// One model on one dataset.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TuModelRuns {
    /// The model's name.
    pub model: String,
    /// Leak-free cross-validation.
    pub cv: ProtocolReport,
    /// The ET reference's training-set procedure, if run.
    pub et_paper: Option<ProtocolReport>,
    /// The CDAT code's evaluation, if run.
    pub code_cv: Option<ProtocolReport>,
    /// CV fold 0's selected model's descent: per block the energy per step and (for
    /// controlled dynamics) V, mean over the first 64 graphs; its test graphs' energies along
    /// the last block's descent by class; its first block on graph 0 over the landscape.
    #[serde(flatten)]
    pub views: report::DescentViews,
}

/// One dataset's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TuResult {
    /// Dataset.
    pub dataset: String,
    /// Graphs.
    pub graphs: usize,
    /// Each model.
    pub models: Vec<TuModelRuns>,
    /// The no-graph baseline under the same cross-validation.
    pub pooled: Option<ProtocolReport>,
    /// GIN under the same cross-validation.
    pub gin: Option<ProtocolReport>,
    /// Seconds the runs took, summed over their records (whichever process trained them: a
    /// resumed or sharded reproduction counts each run once); data loading not included.
    pub seconds: f64,
    /// How the node features were made, where the set publishes none
    /// ([`GraphDataset::node_features`]).
    pub node_features: Option<String>,
}

impl TuResult {
    /// The model `name`'s results.
    pub fn model(&self, name: &str) -> Option<&TuModelRuns> {
        self.models.iter().find(|m| m.model == name)
    }
}

/// The folds of the TU tables' leak-free CV: stratified, fold seed 0, an inner validation
/// split of one ninth. The graph example run files use the same, so that `basin compare` pairs a
/// `basin train` run with a reproduction's baselines.
pub fn cv_folds(folds: usize) -> KFoldConfig {
    KFoldConfig {
        folds,
        val_ratio: 1.0 / 9.0,
        seed: 0,
    }
}

/// The mean over a report's runs of the per-epoch metric `key` (`train_loss`, `val_loss`), as
/// long as its shortest run; under inner folds the inner runs' mean training loss, the curve the
/// epoch counts were chosen on.
pub fn mean_curve(report: &ProtocolReport, key: &str) -> Vec<f64> {
    if let Some(inner) = report.inner_curves.get(key) {
        return inner.clone();
    }
    let epochs = report
        .runs
        .iter()
        .map(|r| r.epochs.len())
        .min()
        .unwrap_or(0);
    let curve: Vec<f64> = (0..epochs)
        .map(|e| {
            let v: Vec<f64> = report
                .runs
                .iter()
                .filter_map(|r| r.epochs[e].metrics.get(key).copied())
                .collect();
            v.iter().sum::<f64>() / v.len().max(1) as f64
        })
        .collect();
    if curve.iter().all(|v| v.is_finite()) {
        curve
    } else {
        Vec::new()
    }
}

/// `name training` and `name validation`: a model's mean loss curves, for one axis.
fn loss_curves(name: &str, report: &ProtocolReport) -> Vec<(String, Vec<f64>)> {
    vec![
        (format!("{name} training"), mean_curve(report, "train_loss")),
        (format!("{name} validation"), mean_curve(report, "val_loss")),
    ]
}

/// The Markdown paragraph that says what was run.
pub fn protocol_note(opts: &TuOptions) -> String {
    let rule = match opts.selection {
        Selection::Metric => "highest accuracy, ties to the earlier epoch (`--selection metric`)",
        Selection::MetricThenLoss => "highest accuracy, ties to the lower cross-entropy",
        Selection::Loss => "lowest cross-entropy (`--selection loss`)",
    };
    let choice = if opts.inner_folds >= 2 {
        format!(
            "each fold's number of epochs chosen on {} inner stratified folds of its training part (the best epoch of their mean held-out curve; {rule}; `--inner-folds {}`), then one model trained on the whole training part for that many epochs",
            opts.inner_folds, opts.inner_folds
        )
    } else {
        format!("epoch selected on an inner validation split (1/9 of each training part; {rule})")
    };
    let mut md = format!(
        "**CV** — stratified {}-fold cross-validation × {} repeat(s), {choice}, each test fold used once: leak-free. Every model trains for {} epochs with AdamW (0.9, 0.99), wd 0.05, gradient centralisation, warm-up + cosine to a peak lr of {}.",
        opts.folds, opts.repeats, opts.epochs, opts.lr
    );
    if let Some(d) = opts.ema {
        md.push_str(&format!(
            " Validation, selection and the test use an exponential moving average of the weights (decay {d}, updated after every optimiser step; `--ema {d}`), baselines included."
        ));
    }
    if opts.et_paper_repeats > 0 {
        md.push_str(&format!(
            " **et-paper** — the ET reference's procedure (the public ET graph code's `eval_nfold`): one model trained on every graph, then {} repeats of scoring subsets of those same graphs; these are training-set accuracies, listed because they are how the ET (and CDAT) papers' TU numbers were produced, not as a cross-validation.",
            opts.et_paper_repeats
        ));
    }
    if opts.code_cv_folds > 0 {
        md.push_str(&format!(
            " **code-cv** — the CDAT classification code's evaluation: {}-fold shuffled (not stratified) cross-validation, a fresh model per fold, the final epoch's weights, no validation (leak-free, but it selects nothing).",
            opts.code_cv_folds
        ));
    }
    if opts.baseline_epochs > 0 {
        md.push_str(&format!(
            " **Baselines**, on the same folds with the same epoch choice ({} epochs, Adam lr 1e-3): *no-graph* — per graph the mean and standard deviation of its standardised node attributes (the label histogram for one-hot labels), node and edge counts and degree statistics, into an MLP (hidden {}, dropout {}); *GIN* — {} GIN layers of width {}, sum readout of every layer, dropout {}, {}. A model below the no-graph row has not learned from the graph.",
            opts.baseline_epochs,
            opts.pooled.hidden,
            opts.pooled.dropout,
            opts.gin.layers,
            opts.gin.hidden,
            opts.gin.dropout,
            match opts.gin.max_nodes {
                Some(m) => format!("each graph's first {m} nodes"),
                None => "whole graphs".into(),
            }
        ));
    }
    md.push_str(&format!(
        " Models marked \"over the edges\" run their attention on the graph's edge list (`sparse_attention`, as the CPU presets do everywhere): the same model as the dense masked form, computed without the padded graph's masked pairs; the others go over the edges on sets whose graphs have {SPARSE_MEAN_NODES} or more nodes on average (DD)."
    ));
    md.push_str("\n\nModels:\n");
    for m in &opts.models {
        md.push_str(&format!("- **{}**: {}.\n", m.name, m.config.describe()));
    }
    md
}

/// Builds a fresh classifier per planned run (its own training items and seed).
fn maker<'a>(
    data: &'a Arc<GraphDataset>,
    pe: &'a Option<Arc<Vec<LaplacianPe>>>,
    config: &'a GraphClassifierConfig,
    ctx: &'a Context,
) -> impl Fn(&PlannedRun) -> std::result::Result<GraphClassifierLearner, TrainError> + Copy + 'a {
    move |run: &PlannedRun| {
        Ok(GraphClassifierLearner::new(
            data.clone(),
            pe.clone(),
            config,
            &run.train(),
            run.seed,
            ctx.device(),
        )?)
    }
}

/// A TU table under way: each dataset's results, the models paired fold by fold, the datasets
/// not found, and its report so far.
pub(crate) struct TuTable {
    /// Each dataset's results.
    pub results: Vec<TuResult>,
    /// The models against the baselines, fold by fold.
    paired: Vec<PairedRow>,
    /// The datasets not found.
    missing: Missing,
    /// The report so far.
    pub md: String,
}

/// Runs `opts` ([`run`]) and starts the table's report (`# title`, the preset banner saying
/// the folds and epochs, then `more`, and the protocol note).
pub(crate) fn run_table(
    opts: &TuOptions,
    ctx: &Context,
    title: &str,
    more: &str,
) -> Result<TuTable> {
    let (results, missing) = run(opts, ctx)?;
    let paired = paired_rows(&results);
    let mut md = format!("# {title}\n\n");
    let scale = format!("{} folds, {} epochs{more}", opts.folds, opts.epochs);
    md.push_str(&report::banner(ctx.preset, &scale));
    md.push_str(&protocol_note(opts));
    Ok(TuTable {
        results,
        paired,
        missing,
        md,
    })
}

impl TuTable {
    /// The end every TU table's report shares: the pairs and the datasets not found, then
    /// `curves` (the line that introduces the energy curves, if any) and the curves, the
    /// footer with the runs' training time, and the report with its JSON (the options, results,
    /// pairs and missing datasets) and `headline` cells.
    pub fn finish(
        self,
        opts: &TuOptions,
        ctx: &Context,
        curves: &str,
        headline: Vec<report::Headline>,
    ) -> Result<Report> {
        let Self {
            results,
            paired,
            missing,
            mut md,
        } = self;
        md.push_str(&paired_markdown(&paired));
        md.push_str(&missing.to_markdown());
        md.push_str(curves);
        md.push_str(&curves_markdown(&results));
        md.push_str(&report::footer(
            ctx,
            Some(results.iter().map(|r| r.seconds).sum()),
            "",
        ));
        let json = serde_json::json!({
            "options": opts,
            "results": results,
            "paired": paired,
            "missing": missing,
        });
        Ok(Report::new(md, &json, results.len())?.with_headline(headline))
    }
}

/// Runs every model (and the baselines) on every dataset of `opts` found under the data
/// directory: each model's CV, the baselines on the same folds, then each model's et-paper and
/// code-cv procedures; writes run records, `<dataset>/<model>/energy.png` and `<dataset>/loss.png`.
/// Also returns the datasets that were not found.
pub fn run(opts: &TuOptions, ctx: &Context) -> Result<(Vec<TuResult>, Missing)> {
    let (mut results, mut missing) = (Vec::new(), Missing::default());
    for spec in &opts.datasets {
        // A TU folder by its path (`--dataset PATH`), or a set by name under the data directory.
        let (name, dir) = match Path::new(spec) {
            p if p.is_dir() => (
                p.file_name()
                    .map_or_else(|| spec.clone(), |n| n.to_string_lossy().into_owned()),
                p.to_path_buf(),
            ),
            _ => (spec.clone(), ctx.data_dir().join("tu").join(spec)),
        };
        let name = &name;
        if !dir.is_dir() {
            match basin_data::registry::find(name) {
                Some(info) => missing.push(name, info.missing(ctx.data_dir())),
                None => missing.push(
                    name,
                    format!(
                        "{} not found (TUDataset, https://chrsmrrs.github.io/datasets/)",
                        dir.display()
                    ),
                ),
            }
            continue;
        }
        let t0 = Instant::now();
        let data = Arc::new(load_tu(&dir)?);
        let target: Vec<f64> = graph_classes(&data)?.0.iter().map(|&c| c as f64).collect();
        let first_graphs: Vec<usize> = (0..target.len().min(64)).collect();
        let mut models = Vec::new();
        let mut losses = Vec::new();
        let mut protocol = None;
        // Each model's configuration, encodings and training, kept for its later procedures.
        let mut prepared = Vec::new();
        for m in &opts.models {
            let out = ctx.out().join(name).join(&m.name);
            let config = for_dataset(&m.config, &data);
            let pe = dataset_pe(&data, &config.batching)?.map(Arc::new);
            let train = TrainConfig {
                ema: opts.ema,
                ..tu_train(opts.epochs, opts.lr)
            };
            let make = maker(&data, &pe, &config, ctx);
            let cv_protocol = CrossValidation {
                folds: cv_folds(opts.folds),
                repeats: opts.repeats,
                metric: Metric::Accuracy,
                selection: opts.selection,
                train: train.clone(),
                inner_folds: opts.inner_folds,
            };
            let mut views = report::DescentViews::default();
            let cv = cv_protocol.run(
                &target,
                make,
                |run, learner| {
                    if views.energy.is_empty() {
                        views.energy = learner.energy_curves(&first_graphs)?;
                        views.energy_by_group =
                            learner.graph_energy_by_class(&run.test(), &target)?;
                        views.landscape = Some(learner.landscape(0, LANDSCAPE_GRID)?);
                    }
                    Ok(())
                },
                &ctx.runs(format!("{name} {}", m.name), out.join("cv")),
            )?;
            if ctx.reports() {
                views.draw(
                    &out,
                    (&format!("{name}, {}", m.name), "CV fold 0, selected model"),
                    ("class_energy", "test graph"),
                    "the first block's descent on graph 0 over its energy",
                )?;
            }
            tracing::info!("{name} {}: CV {}", m.name, cv.show("test_accuracy", 100.0));
            losses.extend(loss_curves(&m.name, &cv));
            protocol = Some(cv_protocol);
            models.push(TuModelRuns {
                model: m.name.clone(),
                cv,
                et_paper: None,
                code_cv: None,
                views,
            });
            prepared.push((config, pe, train));
        }
        let (mut pooled, mut gin) = (None, None);
        if let Some(protocol) = protocol.filter(|_| opts.baseline_epochs > 0) {
            // The baselines, on the same folds (the same plan).
            let baseline = CrossValidation {
                train: TrainConfig {
                    epochs: opts.baseline_epochs,
                    ema: opts.ema,
                    ..TrainConfig::default()
                },
                ..protocol
            };
            let p = baseline_cv(
                &baseline,
                &target,
                ctx,
                (name, "no-graph", "pooled"),
                |run| {
                    let train = run.train();
                    Ok(PooledFeaturesLearner::new(
                        &data,
                        &opts.pooled,
                        &train,
                        run.seed,
                        ctx.device(),
                    )?)
                },
            )?;
            let g = baseline_cv(&baseline, &target, ctx, (name, "GIN", "gin"), |run| {
                let train = run.train();
                Ok(GinLearner::new(
                    data.clone(),
                    &opts.gin,
                    &train,
                    run.seed,
                    ctx.device(),
                )?)
            })?;
            tracing::info!(
                "{name}: no-graph {}, GIN {}",
                p.show("test_accuracy", 100.0),
                g.show("test_accuracy", 100.0)
            );
            losses.extend(loss_curves("no-graph MLP", &p));
            losses.extend(loss_curves("GIN", &g));
            pooled = Some(p);
            gin = Some(g);
        }
        // The training-set and code procedures come after the baselines: the comparison that
        // says whether a model learned the graph is CV against the baselines.
        for ((m, result), (config, pe, train)) in opts.models.iter().zip(&mut models).zip(&prepared)
        {
            let out = ctx.out().join(name).join(&m.name);
            let make = maker(&data, pe, config, ctx);
            let train = train.clone();
            let et_paper = if opts.et_paper_repeats > 0 && !m.cv_only {
                Some(
                    EtPaperProtocol {
                        repeats: opts.et_paper_repeats,
                        seed: 0,
                        train: train.clone(),
                    }
                    .run(
                        &target,
                        make,
                        nothing_after,
                        &ctx.runs(format!("{name} {}", m.name), &out),
                    )?,
                )
            } else {
                None
            };
            let code_cv = if opts.code_cv_folds > 0 && !m.cv_only {
                Some(
                    CodeCrossValidation {
                        folds: opts.code_cv_folds,
                        seed: 42,
                        train,
                    }
                    .run(
                        &target,
                        make,
                        nothing_after,
                        &ctx.runs(format!("{name} {}", m.name), &out),
                    )?,
                )
            } else {
                None
            };
            if let Some(r) = &et_paper {
                tracing::info!(
                    "{name} {}: et-paper {}",
                    m.name,
                    r.show("et_paper_accuracy", 100.0)
                );
            }
            result.et_paper = et_paper;
            result.code_cv = code_cv;
        }
        if ctx.reports() {
            report::plot_compared(
                &ctx.out().join(name).join("loss.png"),
                &format!(
                    "{name}: cross-entropy per epoch, mean over folds (training with label smoothing)"
                ),
                "epoch",
                &losses,
            )?;
        }
        let reports = models
            .iter()
            .flat_map(|m| [Some(&m.cv), m.et_paper.as_ref(), m.code_cv.as_ref()])
            .chain([pooled.as_ref(), gin.as_ref()])
            .flatten();
        let seconds = reports.map(ProtocolReport::seconds).sum();
        tracing::info!("{name}: {:.0} s here", t0.elapsed().as_secs_f64());
        results.push(TuResult {
            dataset: name.clone(),
            graphs: target.len(),
            models,
            pooled,
            gin,
            seconds,
            node_features: data.node_features.clone(),
        });
    }
    Ok((results, missing))
}

/// `config` as the TU tables run it on `data`: with sparse attention where the graphs are large
/// ([`large_graphs`]) and the adjacency mode allows it; the same model, energies and gradients
/// (to rounding), in work that grows with the edges instead of the square of the padded graph.
pub fn for_dataset(config: &GraphClassifierConfig, data: &GraphDataset) -> GraphClassifierConfig {
    let mut config = config.clone();
    if large_graphs(data) && config.adjacency != AdjacencyMode::ReferenceMultiply {
        config.sparse_attention = true;
    }
    config
}

/// Epochs of the CPU-scale TU runs (`--cpu` and the `et-graph`/`cdat-graph` examples): the CDAT
/// paper's 100 (Table 10).
pub const CPU_EPOCHS: usize = 100;

/// Peak learning rate of the CPU-scale TU runs: the CPU models (D = 32) fit ENZYMES slowly at
/// the papers' 1e-3.
pub const CPU_LR: f64 = 3e-3;

/// The TU tables' training: AdamW as the ET graph reference (β₂ 0.99, weight decay 0.05,
/// gradient centralisation) with the reference's warm-up + cosine from and to lr/200, a sixth of
/// the epochs warming up. Counted in epochs: each protocol trains on a different number of
/// graphs (CV folds, the whole set for et-paper) and size buckets change the batches per epoch,
/// so a count of steps fixed in advance would end the schedule early or late.
pub fn tu_train(epochs: usize, lr: f64) -> TrainConfig {
    let e = epochs as u64;
    TrainConfig {
        epochs,
        optim: OptimConfig {
            lr,
            ..OptimConfig::et_graph()
        },
        schedule: Some(Schedule::WarmupCosine {
            start: lr * 5e-3,
            peak: lr,
            end: lr * 5e-3,
            warmup: e.div_ceil(6),
            total: e,
        }),
        schedule_unit: Unit::Epoch,
        ema: None,
        implicit_warmup: 0,
    }
}

/// `mean ± std` of a protocol's metric ×100, or `–`.
pub fn show(report: Option<&ProtocolReport>, metric: &str) -> String {
    report.map_or("–".into(), |r| r.show(metric, 100.0))
}

/// Side of the grid the energy landscapes are evaluated on.
const LANDSCAPE_GRID: usize = 25;

/// The node features of a set that publishes none, then one line per dataset and model: the energy's (and V's) first and last value per block, and
/// the training loss's; the energy at the end of the block's descent and of plain gradient flow
/// on graph 0, drawn over the landscape (CDAT Figures 1 and 3).
pub fn curves_markdown(results: &[TuResult]) -> String {
    let mut md = String::new();
    for r in results {
        if let Some(made) = &r.node_features {
            md.push_str(&format!(
                "- **{}** node features (every model and baseline): {made}.\n",
                r.dataset
            ));
        }
        for m in &r.models {
            let landscape = m
                .views
                .landscape_markdown("on graph 0, ", &format!("{}/{}", r.dataset, m.model));
            md.push_str(&format!(
                "- {} / {}: {}; training loss (mean over folds) {} — `{}/{}/energy.png`, `{}/loss.png`{landscape}{}\n",
                r.dataset,
                m.model,
                report::curve_ends(&m.views.energy),
                report::curve_ends(&[(String::new(), mean_curve(&m.cv, "train_loss"))]).trim(),
                r.dataset,
                m.model,
                r.dataset,
                report::group_ends(
                    &m.views.energy_by_group,
                    &format!("{}/{}/class_energy.png", r.dataset, m.model)
                ),
            ));
        }
    }
    md
}

/// One model paired with one baseline on one dataset's folds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PairedRow {
    /// Dataset.
    pub dataset: String,
    /// The model (`ET`, `CDAT`, …, or `GIN` against the no-graph baseline).
    pub model: String,
    /// `no-graph` or `GIN`.
    pub baseline: String,
    /// Test accuracy, model − baseline, fold by fold.
    pub paired: Option<Paired>,
    /// Why the two could not be paired.
    pub error: Option<String>,
}

/// Each model against the baselines fold by fold (the same folds, paired by their test split),
/// and GIN against the no-graph baseline: the clearest sign of whether a model learned more
/// than the pooled features (fold-to-fold spread is several points on the TU sets, most of it
/// shared by every model).
pub fn paired_rows(results: &[TuResult]) -> Vec<PairedRow> {
    let mut rows = Vec::new();
    for r in results {
        let models = r.models.iter().map(|m| (m.model.as_str(), &m.cv));
        for (model, runs) in models.chain(r.gin.as_ref().map(|g| ("GIN", g))) {
            for (baseline, base) in [("no-graph", &r.pooled), ("GIN", &r.gin)] {
                let Some(base) = base.as_ref().filter(|_| model != baseline) else {
                    continue;
                };
                let p = Paired::new(&runs.runs, &base.runs, "test_accuracy");
                rows.push(PairedRow {
                    dataset: r.dataset.clone(),
                    model: model.into(),
                    baseline: baseline.into(),
                    error: p.as_ref().err().map(ToString::to_string),
                    paired: p.ok(),
                });
            }
        }
    }
    rows
}

/// [`paired_rows`] as a Markdown table (one row per dataset and model); empty without baselines.
pub fn paired_markdown(rows: &[PairedRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from(
        "\nPaired with the baselines, fold by fold (CV test accuracy, model − baseline, mean ± standard error over folds; wins / ties / losses):\n\n",
    );
    let mut t = report::Table::new(["dataset", "model", "model − no-graph", "model − GIN"]);
    let mut done = Vec::new();
    for row in rows {
        if done.contains(&(&row.dataset, &row.model)) {
            continue;
        }
        done.push((&row.dataset, &row.model));
        let cell = |baseline: &str| {
            rows.iter()
                .find(|o| {
                    o.dataset == row.dataset && o.model == row.model && o.baseline == baseline
                })
                .map_or("–".into(), |o| match (&o.paired, &o.error) {
                    (Some(p), _) => p.show(100.0),
                    (None, e) => format!("not paired: {}", e.as_deref().unwrap_or("?")),
                })
        };
        t.row([
            row.dataset.clone(),
            row.model.clone(),
            cell("no-graph"),
            cell("GIN"),
        ]);
    }
    md.push_str(&t.to_markdown());
    md
}

/// The headline cells of a TU table: for each dataset and each `(model, what)` the model's CV
/// accuracy as `<dataset> <what>`, beside the paper's cell `paper(dataset, model)` (already
/// written as the table prints it).
pub fn headline(
    results: &[TuResult],
    models: &[(&str, &str)],
    paper: impl Fn(&str, &str) -> Option<String>,
) -> Vec<report::Headline> {
    let mut cells = Vec::new();
    for r in results {
        for &(name, what) in models {
            if let Some(m) = r.model(name) {
                cells.push(report::Headline::new(
                    format!("{} {what}", r.dataset),
                    show(Some(&m.cv), "test_accuracy"),
                    paper(&r.dataset, name),
                ));
            }
        }
    }
    cells
}

/// A baseline's cross-validation on the models' folds (`protocol`), its runs named
/// `<dataset> <label>` under `<out>/<dataset>/baseline-<dir>`.
fn baseline_cv<L: basin_train::runner::Learner>(
    protocol: &CrossValidation,
    target: &[f64],
    ctx: &Context,
    (dataset, label, dir): (&str, &str, &str),
    make: impl FnMut(&PlannedRun) -> std::result::Result<L, TrainError>,
) -> Result<ProtocolReport> {
    let out = ctx.out().join(dataset).join(format!("baseline-{dir}"));
    let runs = ctx.runs(format!("{dataset} {label}"), out);
    Ok(protocol.run(target, make, |_, _| Ok(()), &runs)?)
}

/// The TU sets of ET Table 2, in its order (CDAT Table 1 has all but the last).
pub const PAPER_SETS: &[&str] = &[
    "PROTEINS",
    "NCI1",
    "NCI109",
    "DD",
    "ENZYMES",
    "MUTAG",
    "Mutagenicity",
    "FRANKENSTEIN",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// A report names the readout its model ran with, not only the block.
    #[test]
    fn the_model_line_names_the_readout() {
        let cpu = GraphClassifierConfig {
            readout_init_gain: 0.0,
            ..basin_et::graph::tu_cpu()
        }
        .describe();
        assert!(
            cpu.ends_with("readout of CLS ‖ mean ‖ ln(n + 1)·mean ‖ std ‖ max by an MLP (hidden 64), last layer started at zero"),
            "{cpu}"
        );
        let paper = basin_et::graph::tu_paper().describe();
        assert!(paper.ends_with("readout of CLS by a linear map"), "{paper}");
        // Whether Â's A′ reads the edge features: the paper preset does, the CPU one does not.
        let edges = "A′ from the edge features";
        assert!(
            paper.contains(edges) && !cpu.contains(edges),
            "{paper}\n{cpu}"
        );
    }

    /// Large graphs (mean ≥ [`SPARSE_MEAN_NODES`] nodes) run sparse attention, small ones dense;
    /// the reference's every-pair Â stays dense.
    #[test]
    fn attention_runs_sparse_on_large_graphs_only() {
        let path = |n: usize| {
            let src: Vec<u32> = (1..n as u32).collect();
            let dst: Vec<u32> = (0..n as u32 - 1).collect();
            let (adj, _) = basin_graph::Csr::from_edges(n, &src, &dst).expect("a path");
            basin_graph::Graph::new(adj, ndarray::Array2::zeros((n, 1))).expect("a graph")
        };
        let set = |sizes: &[usize]| GraphDataset {
            name: "paths".into(),
            graphs: sizes.iter().map(|&n| path(n)).collect(),
            targets: basin_graph::Targets::Classes {
                labels: vec![0; sizes.len()],
                num_classes: 2,
            },
            class_values: vec![0, 1],
            official_split: None,
            node_features: None,
        };
        // The CPU presets run sparse everywhere; the rule is for the dense ones.
        assert!(basin_et::graph::tu_cpu().sparse_attention);
        assert!(basin_cdat::graph::tu_cpu().sparse_attention);
        let cpu = basin_et::graph::tu_cpu_k15();
        assert!(!cpu.sparse_attention);
        assert!(!for_dataset(&cpu, &set(&[20, 30, 249])).sparse_attention);
        assert!(for_dataset(&cpu, &set(&[20, 30, 250])).sparse_attention);
        let reference = basin_et::graph::tu_reference();
        assert!(!for_dataset(&reference, &set(&[300])).sparse_attention);
        let sparse = for_dataset(&cpu, &set(&[300]));
        assert_eq!(
            GraphClassifierConfig {
                sparse_attention: false,
                ..sparse
            },
            cpu,
            "nothing else changes"
        );
    }

    /// The schedule spans the run whatever the number of batches per epoch: peak after a sixth
    /// of the epochs, lr/200 at the end (a step count fixed in advance ended it early or late).
    #[test]
    fn the_tu_schedule_spans_the_epochs() {
        for epochs in [30, 60, 100] {
            let t = tu_train(epochs, 1e-3);
            assert_eq!(t.schedule_unit, Unit::Epoch);
            let Some(s) = &t.schedule else {
                panic!("a schedule")
            };
            let lr = |e: usize| s.lr(e as u64);
            assert!(
                (lr(epochs.div_ceil(6)) - 1e-3).abs() < 1e-12,
                "{epochs}: peak"
            );
            assert!(
                lr(epochs - 1) <= 1e-3 * 0.02,
                "{epochs}: last epoch at {}",
                lr(epochs - 1)
            );
            assert!((lr(epochs) - 5e-6).abs() < 1e-12, "{epochs}: end");
        }
    }
}
