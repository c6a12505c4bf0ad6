//! `et-table2`: TU graph classification (ET Table 2) on every TU dataset found, under a
//! leak-free stratified 10-fold cross-validation (model selection on an inner validation split)
//! and under the paper's own `et-paper` procedure (train on every graph, score subsets of the
//! same graphs — training-set accuracies), beside the paper's numbers and two baselines on the
//! same folds (see [`crate::tu_classification`]).

use crate::papers;
use crate::report::{self, Report};
use crate::tu_classification::{self as tu, TuModel, TuOptions};
use crate::{Context, Preset, Reproduction, Result, Table, selected};

/// ET Table 2.
#[derive(Debug)]
pub struct EtTable2;

const DATASETS: &[&str] = tu::PAPER_SETS;

impl Reproduction for EtTable2 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let mut opts = tu::with_overrides(options(ctx.preset), ctx);
        let default: Vec<&str> = opts.datasets.iter().map(String::as_str).collect();
        opts.datasets = selected(table, ctx, &default);
        run(&opts, ctx)
    }
}
crate::register_table!(EtTable2, "et-table2", DATASETS);

/// The options of a preset.
///
/// - `paper` (Table 9; for a GPU): every dataset, 10 folds, 300 epochs (warm-up from 5e-6 to
///   1e-3, cosine back to 5e-6), the Table 9 model, 100 et-paper repeats, baselines for 100
///   epochs.
/// - `cpu` (about an hour on two cores): MUTAG and ENZYMES, 10 folds of 100 epochs at peak lr
///   3e-3 ([`tu::CPU_LR`]) of the CPU model (`basin_et::graph::tu_cpu`), 10 et-paper repeats.
///   Table 9's model (D = 128) trains several times slower, so the full table is for a GPU;
///   `--dataset` adds the others.
/// - `quick` (CI): MUTAG and ENZYMES, 3 folds, 2 epochs, 5 et-paper repeats.
pub fn options(preset: Preset) -> TuOptions {
    let model = TuModel {
        name: "ET".into(),
        config: basin_et::graph::tu_paper(),
        cv_only: false,
    };
    let paper = TuOptions {
        et_paper_repeats: 100,
        ..TuOptions::ten_fold(DATASETS, vec![model], 300)
    };
    let cpu_model = vec![TuModel {
        name: "ET".into(),
        config: basin_et::graph::tu_cpu(),
        cv_only: false,
    }];
    match preset {
        Preset::Paper => paper,
        Preset::Cpu => TuOptions {
            datasets: vec!["MUTAG".into(), "ENZYMES".into()],
            epochs: tu::CPU_EPOCHS,
            lr: tu::CPU_LR,
            et_paper_repeats: 10,
            models: cpu_model,
            ..paper
        },
        Preset::Quick => TuOptions {
            datasets: vec!["MUTAG".into(), "ENZYMES".into()],
            folds: 3,
            epochs: 2,
            et_paper_repeats: 5,
            models: cpu_model,
            baseline_epochs: 2,
            ..paper
        },
    }
}

/// Runs Table 2 with `opts` (its first model is ET's column).
pub fn run(opts: &TuOptions, ctx: &Context) -> Result<Report> {
    // Each dataset's published accuracy and its standard deviation.
    let paper: Vec<(String, [f64; 2])> = papers::rows("et-table2")?
        .iter()
        .map(|r| {
            Ok((
                r.text("dataset")?.to_owned(),
                r.columns(["accuracy", "std"])?,
            ))
        })
        .collect::<Result<_>>()?;
    let et = opts.models.first().map_or("ET", |m| m.name.as_str());
    let dim = opts.models.first().map_or(0, |m| m.config.block.dim);
    let title = "ET Table 2 — TU graph classification";
    let mut table = tu::run_table(opts, ctx, title, &format!(", a D = {dim} model"))?;
    let (results, md) = (&table.results, &mut table.md);
    let mut t = report::Table::new([
        "dataset",
        "graphs",
        "paper (ET)",
        "ours: ET, CV accuracy",
        "no-graph baseline, CV",
        "GIN, CV",
        "ours: ET, et-paper accuracy",
        "runs (s)",
    ]);
    for (dataset, published) in &paper {
        let p = report::pair(*published);
        match results.iter().find(|r| r.dataset == *dataset) {
            Some(r) => {
                let m = r.model(et);
                t.row([
                    r.dataset.clone(),
                    r.graphs.to_string(),
                    p,
                    tu::show(m.map(|m| &m.cv), "test_accuracy"),
                    tu::show(r.pooled.as_ref(), "test_accuracy"),
                    tu::show(r.gin.as_ref(), "test_accuracy"),
                    tu::show(m.and_then(|m| m.et_paper.as_ref()), "et_paper_accuracy"),
                    format!("{:.0}", r.seconds),
                ]);
            }
            None => {
                let why = if opts.datasets.contains(dataset) {
                    "missing (below)"
                } else {
                    "not selected"
                };
                t.row([dataset.as_str(), "–", p.as_str(), why, "–", "–", why, "–"]);
            }
        }
    }
    md.push('\n');
    md.push_str(&t.to_markdown());
    let what = format!("{et} CV accuracy");
    let headline = tu::headline(results, &[(et, &what)], |d, _| {
        let (_, [accuracy, _]) = paper.iter().find(|(dataset, _)| dataset == d)?;
        Some(format!("{accuracy:.1} (training-set procedure)"))
    });
    let curves = "\nEnergy per step of CV fold 0's selected model (mean over the first 64 graphs, evaluation mode) and the training loss:\n";
    table.finish(opts, ctx, curves, headline)
}
