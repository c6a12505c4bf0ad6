//! `sfi-table1`: SFi-Former Table 1 on the LRGB set that is here, Peptides-func (AP over the
//! 10 functions, official split, best validation epoch): GatedGCN, GraphGPS, DFi-Former and
//! SFi-Former beside the model that ignores the graph, with the share of zero flows and the
//! train − test gap of Figure 3.

use std::sync::Arc;
use std::time::Instant;

use basin_data::registry;
use basin_graph::Split;
use basin_sfi::learner::GpsData;
use basin_sfi::presets::{self, Dataset, Variant};
use basin_train::protocol::Metric;
use serde::Deserialize;

use super::{ModelSpec, RunPlan, gap_figure, no_graph, row_cells, run_rows};
use crate::report::{self, Missing, Report};
use crate::{Context, Override, Preset, ReproError, Reproduction, Result};

/// The other LRGB sets of the paper's Table 1: basin reads them, the shared data lacks them.
const OTHER_SETS: &[&str] = &["peptides-struct", "pascalvoc-sp", "coco-sp", "pcqm-contact"];

/// SFi-Former Table 1 (Peptides-func column).
#[derive(Debug)]
pub struct SfiTable1;

#[derive(Debug, Deserialize)]
struct PaperRow {
    model: String,
    value: [f64; 2],
    published: Option<[f64; 2]>,
}

#[derive(Debug, Deserialize)]
struct PaperTable {
    rows: Vec<PaperRow>,
}

/// One Peptides-func model of `variant` at `preset` (`cpu`: 30 epochs at lr 10⁻³, warm-up 3;
/// `quick`: 1 layer of width 16, 2 epochs).
pub(crate) fn spec(preset: Preset, name: &str, v: Variant) -> ModelSpec {
    let d = Dataset::PeptidesFunc;
    match preset {
        Preset::Paper => ModelSpec::new(name, presets::paper(d, v), presets::training(d, v)),
        Preset::Cpu => ModelSpec::new(
            name,
            presets::cpu(d, v),
            presets::warmup_cosine(30, 3, 1e-3, 0.0),
        ),
        Preset::Quick => {
            let mut cfg = presets::cpu(d, v);
            cfg.layers = 1;
            cfg.layer.attention.dim = 16;
            cfg.layer.attention.head_dim = 8;
            cfg.pe = basin_sfi::model::PosEnc::LapPe {
                k: 4,
                dim: 4,
                model: Default::default(),
                sign_flip: Default::default(),
            };
            cfg.batch = 16;
            ModelSpec::new(name, cfg, presets::warmup_cosine(2, 1, 1e-3, 0.0))
        }
    }
}

/// `--epochs e`: the same schedule shape over `e` epochs (warm-up a tenth, at least 1).
pub(crate) fn with_epochs(rows: &mut [ModelSpec], epochs: Option<usize>) {
    if let Some(e) = epochs {
        for r in rows {
            let (lr, wd) = (r.train.optim.lr, r.train.optim.weight_decay);
            r.train = presets::warmup_cosine(e, (e / 10).max(1), lr, wd);
        }
    }
}

/// The parts of the official split each preset uses (training graphs, validation, test).
pub(crate) fn sizes(preset: Preset) -> [Option<usize>; 3] {
    match preset {
        Preset::Paper => [None, None, None],
        Preset::Cpu => [Some(2048), None, None],
        Preset::Quick => [Some(96), Some(48), Some(48)],
    }
}

/// The banner of a Peptides-func table: the parts of the split, runs and epochs.
pub(crate) fn banner(preset: Preset, runs: usize, epochs: usize) -> String {
    let part = |n: Option<usize>| n.map_or("all".into(), |n: usize| n.to_string());
    let [train, val, test] = sizes(preset);
    report::banner(
        preset,
        &format!(
            "training graphs {}, validation {}, test {} of the official split; {runs} run(s); {epochs} epochs",
            part(train),
            part(val),
            part(test)
        ),
    )
}

/// The models of the table at `preset`.
fn models(preset: Preset, epochs: Option<usize>) -> Vec<ModelSpec> {
    let mut rows = vec![
        spec(preset, "GatedGCN", Variant::GatedGcn),
        spec(preset, "GPS", Variant::Gps),
        spec(preset, "DFi-Former", Variant::Dfi),
        spec(preset, "SFi-Former", Variant::Sfi),
    ];
    rows.push(ModelSpec::warm_started(
        "SFi-Former+",
        &rows[3],
        "DFi-Former",
    ));
    rows.insert(0, no_graph(&rows[1]));
    with_epochs(&mut rows, epochs);
    rows
}

/// Peptides-func with the statistics `models` need, on the preset's part of the official split;
/// `None` (and a line in `missing`) when the dataset is not here.
pub(crate) fn load(
    ctx: &Context,
    models: &[ModelSpec],
    missing: &mut Missing,
) -> Result<Option<(Arc<GpsData>, Split)>> {
    let info = registry::get("peptides-func")?;
    let dir = info.location(&ctx.data_dir);
    if !dir.is_dir() {
        missing.push(info.name.as_str(), info.missing(&ctx.data_dir));
        return Ok(None);
    }
    let ds = basin_graph::lrgb::load(&dir, basin_graph::lrgb::LrgbSet::PeptidesFunc)?;
    let official = ds.official_split.clone().ok_or_else(|| {
        ReproError::config(
            dir.display().to_string(),
            "no official split (splits_random_stratified_peptide.json)",
        )
    })?;
    let split = official.subset(sizes(ctx.preset), 0);
    let k = models
        .iter()
        .map(|r| r.config.pe.frequencies())
        .max()
        .unwrap_or(0);
    let t0 = Instant::now();
    let data = Arc::new(GpsData::new(Arc::new(ds), k, 0)?);
    tracing::info!(
        "peptides-func: Laplacian statistics in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(Some((data, split)))
}

impl Reproduction for SfiTable1 {
    fn id(&self) -> &'static str {
        "sfi-table1"
    }
    fn title(&self) -> &'static str {
        "SFi-Former Table 1: Peptides-func AP — GatedGCN, GPS, DFi, SFi beside a no-graph model"
    }
    fn paper(&self) -> &'static str {
        "sfi-former.txt, Table 1 (Peptides-Func column; configs: Table 5 and the GraphGPS code)"
    }
    fn datasets(&self) -> &'static [&'static str] {
        &["peptides-func"]
    }
    fn presets(&self) -> &'static [Preset] {
        &[Preset::Paper, Preset::Cpu, Preset::Quick]
    }
    fn accepts(&self) -> &'static [Override] {
        &[Override::Epochs]
    }
    fn run(&self, ctx: &Context) -> Result<Report> {
        let paper: PaperTable = report::paper("sfi-table1")?;
        let rows = models(ctx.preset, ctx.overrides.epochs);
        let plan = RunPlan {
            runs: if ctx.preset == Preset::Paper { 4 } else { 1 },
            seed: 0,
            metric: Metric::MeanAp,
            curves: true,
        };
        let mut missing = Missing::default();
        let mut md = String::from("# SFi-Former Table 1 — LRGB Peptides-func (AP)\n\n");
        md.push_str(&banner(ctx.preset, plan.runs, rows[1].train.epochs));
        let results = match load(ctx, &rows, &mut missing)? {
            Some((data, split)) => run_rows(ctx, "peptides-func", &data, &split, &rows, &plan)?,
            None => Vec::new(),
        };
        super::absent_sets(ctx, OTHER_SETS, &mut missing)?;
        md.push_str("Protocol: the official stratified split (subsets as the banner says, drawn with seed 0), AdamW with gradient clipping at 1.0 and cosine decay after a linear warm-up (per epoch, from 10⁻⁶ of the peak, as GraphGPS), the epoch of best validation AP, AP averaged over the 10 functions (OGB `eval_ap`). Models: the configs of `basin_sfi::presets` (`paper`: GraphGPS's Peptides-func config for GPS and GatedGCN, SFi Table 5 for DFi/SFi; `cpu`: width 64, 2 layers, 2 heads, 5 unrolled iterations). The no-graph row has the GPS row's encoders and head and no layer: the mean of the atom embeddings → head. **SFi-Former+**: SFi-Former started from DFi-Former's selected weights of the same seed (its friction branch, which DFi lacks, from scratch), then trained on SFi's schedule.\n\n");
        let mut t = report::Table::new([
            "model",
            "paper AP ×100",
            "parameters",
            "AP ×100 (test)",
            "AP ×100 (val, selected epoch)",
            "zero flows",
            "training (s)",
        ]);
        for r in &results {
            let p = paper.rows.iter().find(|p| p.model == r.model);
            let mut cells = vec![
                r.model.clone(),
                p.map_or("–".into(), |p| {
                    let mut s = format!("{:.2} ± {:.2}", p.value[0] * 100.0, p.value[1] * 100.0);
                    if let Some(q) = p.published {
                        s.push_str(&format!(
                            " (GraphGPS paper: {:.2} ± {:.2})",
                            q[0] * 100.0,
                            q[1] * 100.0
                        ));
                    }
                    s
                }),
            ];
            cells.extend(row_cells(r, "ap", 100.0));
            t.row(cells);
        }
        for p in &paper.rows {
            if !results.iter().any(|r| r.model == p.model) {
                t.row([
                    p.model.clone(),
                    format!("{:.2} ± {:.2}", p.value[0] * 100.0, p.value[1] * 100.0),
                    "not run".into(),
                ]);
            }
        }
        md.push_str(&t.to_markdown());
        md.push_str(super::ZERO_NOTE);
        md.push_str("\nAn AP of a model that predicts each function's base rate is each function's positive share (≈ 0.2 averaged); the no-graph row is the bar a graph model must clear.\n");
        md.push_str(&gap_figure(
            &ctx.out.join("gap.png"),
            "Peptides-func: train − test AP (Figure 3)",
            &results,
        )?);
        md.push_str(&super::attention_figure(
            &ctx.out.join("attention.png"),
            &results,
        )?);
        md.push_str(&missing.to_markdown());
        md.push_str(&report::footer(
            ctx,
            Some(results.iter().map(|r| r.seconds).sum()),
            "",
        ));
        let ran = usize::from(!results.is_empty());
        let headline = results
            .iter()
            .map(|r| {
                let p = report::find_row(&paper.rows, &r.model, |p| p.model.clone());
                report::Headline::new(
                    format!("Peptides-func {} AP", r.model),
                    r.show("test_ap", 100.0),
                    p.map(|p| format!("{:.2}", p.value[0] * 100.0)),
                )
            })
            .collect();
        Ok(Report::new(
            md,
            &serde_json::json!({ "plan": plan, "models": rows, "results": results, "missing": missing }),
            ran,
        )?
        .with_headline(headline))
    }
}
