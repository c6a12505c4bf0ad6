//! The datasets of the SFi tables at each preset: how much of each published split a preset
//! uses, how each row's model is scaled, and where the graphs come from (the data directory in
//! the layout of `basin_graph::lrgb`, or the SBM generator for PATTERN and CLUSTER).

use std::sync::Arc;
use std::time::Instant;

use basin_data::registry;
use basin_graph::Split;
use basin_graph::sbm::{ClusterConfig, PatternConfig, generate_cluster, generate_pattern};
use basin_sfi::learner::GpsData;
use basin_sfi::model::PosEnc;
use basin_sfi::presets::{self, Dataset, Variant};
use basin_train::protocol::Metric;

use super::ModelSpec;
use crate::report::Missing;
use crate::{Context, Preset, Result, TaskError};

/// The parts of the official split each preset uses (training graphs, validation, test; `None`
/// for all of a part). The generated sets are sized by their generator instead.
pub(crate) fn sizes(d: Dataset, preset: Preset) -> [Option<usize>; 3] {
    match (preset, d) {
        (Preset::Paper, _) | (_, Dataset::Pattern | Dataset::Cluster) => [None; 3],
        (Preset::Quick, _) => [Some(96), Some(48), Some(48)],
        (Preset::Cpu, Dataset::PeptidesFunc | Dataset::PeptidesStruct) => [Some(2048), None, None],
        (Preset::Cpu, _) => [Some(2048), Some(512), Some(512)],
    }
}

/// One row's model of `variant` on `d` at `preset`: the paper's configuration and training,
/// [`presets::cpu`] with [`presets::cpu_training`], or (`quick`) one layer of width 16 for 2
/// epochs.
pub(crate) fn spec(d: Dataset, preset: Preset, name: &str, v: Variant) -> ModelSpec {
    match preset {
        Preset::Paper => ModelSpec::new(name, presets::paper(d, v), presets::training(d, v)),
        Preset::Cpu => ModelSpec::new(name, presets::cpu(d, v), presets::cpu_training(d)),
        Preset::Quick => {
            let mut cfg = presets::cpu(d, v);
            cfg.layers = 1;
            cfg.layer.attention.dim = 16;
            cfg.layer.attention.head_dim = 8;
            cfg.batch = 8;
            if d.lrgb().is_some() {
                cfg.batch = 16;
                if let PosEnc::LapPe { k, dim, .. } = &mut cfg.pe {
                    (*k, *dim) = (4, 4);
                }
            }
            let wd = presets::cpu_training(d).optim.weight_decay;
            ModelSpec::new(name, cfg, presets::warmup_cosine(2, 1, 1e-3, wd))
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

/// The rows of Tables 1 and 2 on `d`: the model that ignores the graph, GatedGCN, GPS,
/// DFi-Former, SFi-Former and SFi-Former+ (SFi started from DFi's selected weights).
pub(crate) fn table_models(d: Dataset, preset: Preset, epochs: Option<usize>) -> Vec<ModelSpec> {
    let mut rows = vec![
        spec(d, preset, "GatedGCN", Variant::GatedGcn),
        spec(d, preset, "GPS", Variant::Gps),
        spec(d, preset, "DFi-Former", Variant::Dfi),
        spec(d, preset, "SFi-Former", Variant::Sfi),
    ];
    rows.push(ModelSpec::warm_started(
        "SFi-Former+",
        &rows[3],
        "DFi-Former",
    ));
    rows.insert(0, super::no_graph(&rows[1]));
    with_epochs(&mut rows, epochs);
    rows
}

/// `d` with the positional statistics `models` need, on the preset's part of its split; `None`
/// (and a line in `missing`) when the set is not in the data directory.
pub(crate) fn load(
    ctx: &Context,
    d: Dataset,
    models: &[ModelSpec],
    missing: &mut Missing,
) -> Result<Option<(Arc<GpsData>, Split)>> {
    let t0 = Instant::now();
    let ds = match d.lrgb() {
        None => generate(d, ctx.preset)?,
        Some(set) => {
            let info = registry::get(d.name())?;
            let dir = info.location(ctx.data_dir());
            if !dir.is_dir() {
                missing.push(info.name.as_str(), info.missing(ctx.data_dir()));
                return Ok(None);
            }
            basin_graph::lrgb::load(&dir, set)?
        }
    };
    let official = ds.official_split.clone().ok_or_else(|| {
        TaskError::invalid(
            d.name(),
            "no official split (the split JSON beside the npz)",
        )
    })?;
    let split = official.subset(sizes(d, ctx.preset), 0);
    let data = super::gps_data(ds, models)?;
    tracing::info!(
        "{}: loaded with Laplacian statistics in {:.1} s",
        d.name(),
        t0.elapsed().as_secs_f64()
    );
    Ok(Some((data, split)))
}

/// How a report shows `d`'s metric: the record key (`test_<key>`), the scale of its cells (×100
/// for every metric, MAE included, so that two decimals keep four digits) and the column's name.
pub(crate) fn metric_cell(d: Dataset) -> (&'static str, f64, &'static str) {
    let m = d.metric();
    let label = match m {
        Metric::Accuracy => "accuracy %",
        Metric::AccuracySbm => "weighted accuracy %",
        Metric::MacroF1 => "macro-F1 ×100",
        Metric::MeanAp => "AP ×100",
        Metric::Mae => "MAE ×100",
        Metric::Mrr => "MRR ×100",
        _ => "metric",
    };
    (m.name(), 100.0, label)
}

/// A published `mean ± s.d.` (or a single run's mean) at `scale`.
pub(crate) fn published(v: &[f64], scale: f64) -> String {
    match v {
        [m, s] => format!("{:.2} ± {:.2}", m * scale, s * scale),
        [m] => format!("{:.2} (one run)", m * scale),
        _ => "–".into(),
    }
}

/// The generated PATTERN or CLUSTER at `preset` (train/val/test graphs).
pub(crate) fn generate(d: Dataset, preset: Preset) -> Result<basin_graph::GraphDataset> {
    Ok(match d {
        Dataset::Pattern => generate_pattern(&match preset {
            Preset::Paper => PatternConfig::default(),
            Preset::Cpu => PatternConfig {
                per_pattern: [10, 2, 2],
                ..PatternConfig::default()
            },
            Preset::Quick => PatternConfig {
                patterns: 10,
                per_pattern: [4, 1, 1],
                ..PatternConfig::default()
            },
        })?,
        Dataset::Cluster => generate_cluster(&match preset {
            Preset::Paper => ClusterConfig::default(),
            Preset::Cpu => ClusterConfig {
                sizes: [1000, 200, 200],
                ..ClusterConfig::default()
            },
            Preset::Quick => ClusterConfig {
                sizes: [40, 10, 10],
                ..ClusterConfig::default()
            },
        })?,
        other => {
            return Err(TaskError::invalid(
                other.name(),
                "only PATTERN and CLUSTER are generated",
            ));
        }
    })
}
