//! One run from a config file (`basin train`) and its re-evaluation from disk (`basin eval`),
//! for both graph models.
//!
//! A run file names the model, the dataset and the protocol:
//!
//! ```toml
//! model = "et-graph"          # or "et-anomaly"
//! data = "MUTAG"              # a name under the data directory, or a path
//! [architecture]              # EtGraphConfig / EtAnomalyConfig (defaults: the paper's)
//! dim = 32
//! [protocol]                  # CrossValidation / AnomalyProtocol
//! repeats = 1
//! ```
//!
//! `train` writes `run.toml` (the resolved file), one directory per run or fold with its
//! `record.json` and `checkpoint.safetensors` (the selected epoch's weights included),
//! `report.md` / `report.json` and `energy.png` (each block's energy per step for the first
//! run's selected model). `eval` rebuilds every split from `run.toml`, checks it against the
//! hash in the run's record, loads the selected weights and scores the held-out part again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use basin_graph::source::{Dataset, open};
use basin_graph::{GraphDataset, KFoldConfig, NodeDataset, stratified_kfold, stratified_split};
use basin_train::TrainError;
use basin_train::metrics;
use basin_train::plot::{Series, line_panels};
use basin_train::protocol::{AnomalyProtocol, CrossValidation, ProtocolReport};
use basin_train::record::{RunRecord, split_hash};
use basin_train::runner::{Learner, load_best};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::EtError;
use crate::anomaly::{AnomalyLearner, EtAnomalyConfig};
use crate::graph::{EtGraphConfig, GraphLearner, dataset_pe};

/// What `basin train` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case")]
pub enum RunSpec {
    /// [`crate::anomaly::EtAnomaly`] under the node anomaly protocol (ET Table 1).
    EtAnomaly(AnomalyRun),
    /// [`crate::graph::EtGraphClassifier`] under stratified k-fold cross-validation with an
    /// inner validation split (ET Table 2, leak-free).
    EtGraph(GraphRun),
}

/// Node anomaly detection: a node dataset, the model and the protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnomalyRun {
    /// Dataset name (`tolokers`, `reddit`, `yelpchi`, `amazon`, `planted`) or path.
    pub data: String,
    /// The model (default: the paper's).
    #[serde(default)]
    pub architecture: EtAnomalyConfig,
    /// Split, runs, training (default: 40 % train, 5 runs of 100 epochs).
    #[serde(default)]
    pub protocol: AnomalyProtocol,
}

/// Graph classification: a graph dataset, the model and the protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphRun {
    /// Dataset name (a TU folder such as `MUTAG`, `pattern`, `cluster`) or path.
    pub data: String,
    /// The model (default: ET Table 9).
    #[serde(default)]
    pub architecture: EtGraphConfig,
    /// Folds, repeats, training (default: 10 folds, 1 repeat, 100 epochs).
    #[serde(default)]
    pub protocol: CrossValidation,
}

impl RunSpec {
    /// A complete example for `model` (`et-anomaly` or `et-graph`) at CPU scale, as TOML.
    pub fn example(model: &str) -> Result<String, EtError> {
        let spec = match model {
            "et-anomaly" => RunSpec::EtAnomaly(AnomalyRun {
                data: "tolokers".into(),
                architecture: EtAnomalyConfig::default(),
                protocol: AnomalyProtocol {
                    runs: 1,
                    ..AnomalyProtocol::default()
                },
            }),
            "et-graph" => RunSpec::EtGraph(GraphRun {
                data: "MUTAG".into(),
                architecture: EtGraphConfig::tu_cpu(),
                protocol: CrossValidation::default(),
            }),
            other => {
                return Err(EtError::Config {
                    field: "model".into(),
                    message: format!("`{other}` is not a model; expected et-anomaly or et-graph"),
                });
            }
        };
        spec.to_toml()
    }

    /// Parses a run file; errors name the file and the field.
    pub fn read(path: &Path) -> Result<Self, EtError> {
        let text = std::fs::read_to_string(path).map_err(|e| EtError::Config {
            field: path.display().to_string(),
            message: format!("cannot read the run file: {e}"),
        })?;
        toml::from_str(&text).map_err(|e| EtError::Config {
            field: path.display().to_string(),
            message: e.to_string(),
        })
    }

    fn to_toml(&self) -> Result<String, EtError> {
        toml::to_string(self).map_err(|e| EtError::Config {
            field: "run".into(),
            message: format!("cannot serialise: {e}"),
        })
    }
}

/// What a train or eval call produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The run file.
    pub spec: RunSpec,
    /// Per run or fold: its directory and metrics.
    pub runs: Vec<(String, BTreeMap<String, f64>)>,
    /// Each block's (or relation's) energy per step, selected model of the first run.
    pub energy: Vec<(String, Vec<f64>)>,
}

fn data_err(field: &str, message: impl Into<String>) -> EtError {
    EtError::Config {
        field: field.into(),
        message: message.into(),
    }
}

fn node_data(spec: &str, data_dir: Option<&Path>) -> Result<NodeDataset, EtError> {
    match open(spec, data_dir)? {
        Dataset::Nodes(d) => Ok(d),
        Dataset::Graphs(_) => Err(data_err(
            "data",
            format!(
                "`{spec}` is a graph-level dataset; et-anomaly needs one graph with node labels"
            ),
        )),
    }
}

fn graph_data(spec: &str, data_dir: Option<&Path>) -> Result<GraphDataset, EtError> {
    match open(spec, data_dir)? {
        Dataset::Graphs(d) => Ok(d),
        Dataset::Nodes(_) => Err(data_err(
            "data",
            format!("`{spec}` is a node-level dataset; et-graph needs many labelled graphs"),
        )),
    }
}

fn graph_classes(data: &GraphDataset) -> Result<Vec<usize>, EtError> {
    data.targets
        .classes()
        .map(<[usize]>::to_vec)
        .ok_or_else(|| data_err("data", "graph classification needs one class per graph"))
}

fn ids(v: &[u32]) -> Vec<usize> {
    v.iter().map(|&i| i as usize).collect()
}

/// Trains as `spec` says, writing everything under `out` (resuming an interrupted run there).
pub fn train(
    spec: &RunSpec,
    data_dir: Option<&Path>,
    out: &Path,
    device: Device,
) -> Result<RunOutcome, EtError> {
    let file = out.join("run.toml");
    let text = spec.to_toml()?;
    if let Ok(old) = std::fs::read_to_string(&file)
        && old != text
    {
        return Err(data_err(
            &file.display().to_string(),
            "this directory holds another run; choose another --out or remove it",
        ));
    }
    basin_core::checkpoint::write_atomic(&file, text.as_bytes())?;
    let dev = basin_core::device::describe(device);
    let report = match spec {
        RunSpec::EtAnomaly(run) => {
            let data = node_data(&run.data, data_dir)?;
            let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
            run.protocol.run(
                &data.name,
                &data.labelled,
                &is_anomaly,
                |_, seed| {
                    AnomalyLearner::new(&data, &run.architecture, seed, device)
                        .map_err(|e| TrainError::State(e.to_string()))
                },
                Some(out),
                &dev,
            )?
        }
        RunSpec::EtGraph(run) => {
            let data = Arc::new(graph_data(&run.data, data_dir)?);
            let target: Vec<f64> = graph_classes(&data)?.iter().map(|&c| c as f64).collect();
            let pe = dataset_pe(&data, &run.architecture)?.map(Arc::new);
            let name = data.name.clone();
            run.protocol.run(
                &name,
                &target,
                |_, _, seed| {
                    GraphLearner::new(data.clone(), pe.clone(), &run.architecture, seed, device)
                        .map_err(|e| TrainError::State(e.to_string()))
                },
                Some(out),
                &dev,
            )?
        }
    };
    // Scoring the saved weights again checks that what was written is what was measured.
    let outcome = evaluate(spec, data_dir, out, device)?;
    write_outputs(out, &outcome, Some(&report), "report")?;
    Ok(outcome)
}

/// Scores the held-out part of every run under `out` again from its saved weights and writes
/// `eval.md`, `eval.json` and `energy.png` there.
pub fn eval(out: &Path, data_dir: Option<&Path>, device: Device) -> Result<RunOutcome, EtError> {
    let spec = RunSpec::read(&out.join("run.toml"))?;
    let outcome = evaluate(&spec, data_dir, out, device)?;
    write_outputs(out, &outcome, None, "eval")?;
    Ok(outcome)
}

/// Every run directory of a run with its train/val/test split, in the protocol's order.
fn run_dirs(
    spec: &RunSpec,
    data_dir: Option<&Path>,
    out: &Path,
) -> Result<Vec<(String, basin_graph::Split)>, EtError> {
    match spec {
        RunSpec::EtAnomaly(run) => {
            let data = node_data(&run.data, data_dir)?;
            let labels: Vec<usize> = data
                .labelled
                .iter()
                .map(|&i| usize::from(data.labels[i as usize] == 1))
                .collect();
            let split = stratified_split(&data.labelled, &labels, &run.protocol.split)?;
            Ok((0..run.protocol.runs)
                .map(|r| (format!("run-{r}"), split.clone()))
                .collect())
        }
        RunSpec::EtGraph(run) => {
            let data = graph_data(&run.data, data_dir)?;
            let classes = graph_classes(&data)?;
            let items: Vec<u32> = (0..classes.len() as u32).collect();
            let mut dirs = Vec::new();
            for r in 0..run.protocol.repeats {
                let cfg = KFoldConfig {
                    seed: run.protocol.folds.seed + r as u64,
                    ..run.protocol.folds.clone()
                };
                for (f, split) in stratified_kfold(&items, &classes, &cfg)?
                    .into_iter()
                    .enumerate()
                {
                    dirs.push((format!("repeat-{r}/fold-{f}"), split));
                }
            }
            Ok(dirs)
        }
    }
    .map(|dirs| {
        dirs.into_iter()
            .filter(|(d, _)| out.join(d).join("checkpoint.safetensors").exists())
            .collect()
    })
}

fn evaluate(
    spec: &RunSpec,
    data_dir: Option<&Path>,
    out: &Path,
    device: Device,
) -> Result<RunOutcome, EtError> {
    let dirs = run_dirs(spec, data_dir, out)?;
    if dirs.is_empty() {
        return Err(data_err(
            &out.display().to_string(),
            "no run with a checkpoint here (train first: basin train)",
        ));
    }
    let mut runs = Vec::new();
    let mut energy = Vec::new();
    match spec {
        RunSpec::EtAnomaly(run) => {
            let data = node_data(&run.data, data_dir)?;
            for (i, (dir, split)) in dirs.iter().enumerate() {
                let mut learner = AnomalyLearner::new(&data, &run.architecture, 0, device)?;
                let test = ids(&split.test);
                let threshold = restore(out, dir, &learner, &test)?
                    .carry
                    .get("threshold")
                    .copied()
                    .unwrap_or(0.5);
                let p = learner.predict(&test)?.positive();
                let y: Vec<bool> = test.iter().map(|&i| data.labels[i] == 1).collect();
                let truth: Vec<i64> = y.iter().map(|&b| i64::from(b)).collect();
                let m = BTreeMap::from([
                    (
                        "test_macro_f1".to_owned(),
                        metrics::macro_f1(&truth, &metrics::threshold(&p, threshold))?,
                    ),
                    ("test_auc".to_owned(), metrics::roc_auc(&y, &p)?),
                    ("test_ap".to_owned(), metrics::average_precision(&y, &p)?),
                    ("threshold".to_owned(), threshold),
                ]);
                if i == 0 {
                    energy = learner.energy_per_step();
                }
                runs.push((dir.clone(), m));
            }
        }
        RunSpec::EtGraph(run) => {
            let data = Arc::new(graph_data(&run.data, data_dir)?);
            let pe = dataset_pe(&data, &run.architecture)?.map(Arc::new);
            for (i, (dir, split)) in dirs.iter().enumerate() {
                let mut learner =
                    GraphLearner::new(data.clone(), pe.clone(), &run.architecture, 0, device)?;
                let test = ids(&split.test);
                restore(out, dir, &learner, &test)?;
                let pred = learner.predict(&test)?.argmax();
                let truth = graph_classes(&data)?;
                let y: Vec<i64> = test.iter().map(|&i| truth[i] as i64).collect();
                let m =
                    BTreeMap::from([("test_accuracy".to_owned(), metrics::accuracy(&y, &pred)?)]);
                if i == 0 {
                    energy = graph_energy(
                        data.clone(),
                        pe.clone(),
                        &run.architecture,
                        &out.join(dir),
                        &test,
                        device,
                    )?;
                }
                runs.push((dir.clone(), m));
            }
        }
    }
    Ok(RunOutcome {
        spec: spec.clone(),
        runs,
        energy,
    })
}

/// Loads a run's selected weights, after checking that its record was made on `test`.
fn restore<L: Learner>(
    out: &Path,
    dir: &str,
    learner: &L,
    test: &[usize],
) -> Result<basin_train::runner::Validation, EtError> {
    let run_dir = out.join(dir);
    let record = RunRecord::read(&run_dir.join("record.json"))?;
    let recorded = record.split_hashes.get("test").cloned().unwrap_or_default();
    if recorded != split_hash(test) {
        return Err(data_err(
            &run_dir.join("record.json").display().to_string(),
            "the test split rebuilt from run.toml differs from the one this run was trained with (was the dataset changed?)",
        ));
    }
    Ok(load_best(
        &run_dir.join("checkpoint.safetensors"),
        learner.vars(),
    )?)
}

/// The graph's energy per step (one curve per relation) under the selected weights of the
/// anomaly run in `run_dir`.
pub fn anomaly_energy(
    data: &NodeDataset,
    cfg: &EtAnomalyConfig,
    run_dir: &Path,
    device: Device,
) -> Result<Vec<(String, Vec<f64>)>, EtError> {
    let learner = AnomalyLearner::new(data, cfg, 0, device)?;
    load_best(&run_dir.join("checkpoint.safetensors"), learner.vars())?;
    Ok(learner.energy_per_step())
}

/// Each block's energy per step, averaged over the graphs `items` (at most 64 are used), under
/// the selected weights of the classification run in `run_dir`.
pub fn graph_energy(
    data: Arc<GraphDataset>,
    pe: Option<Arc<Vec<basin_graph::laplacian::LaplacianPe>>>,
    cfg: &EtGraphConfig,
    run_dir: &Path,
    items: &[usize],
    device: Device,
) -> Result<Vec<(String, Vec<f64>)>, EtError> {
    let learner = GraphLearner::new(data, pe, cfg, 0, device)?;
    load_best(&run_dir.join("checkpoint.safetensors"), learner.vars())?;
    let sample: Vec<usize> = items.iter().copied().take(64).collect();
    Ok(learner
        .energy_per_step(&sample)?
        .into_iter()
        .enumerate()
        .map(|(b, e)| (format!("block {b}"), e))
        .collect())
}

/// Plots each curve of `energy` in its own panel (energies of different blocks differ in scale).
pub fn plot_energy(path: &Path, title: &str, energy: &[(String, Vec<f64>)]) -> Result<(), EtError> {
    let series: Vec<Series> = energy
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| Series::new(n.clone(), v.clone()))
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    line_panels(path, title, "step", &series)
        .map_err(|e| data_err(&path.display().to_string(), e.to_string()))
}

fn write_outputs(
    out: &Path,
    outcome: &RunOutcome,
    report: Option<&ProtocolReport>,
    stem: &str,
) -> Result<(), EtError> {
    let title = match &outcome.spec {
        RunSpec::EtAnomaly(r) => format!("et-anomaly on {}", r.data),
        RunSpec::EtGraph(r) => format!("et-graph on {}", r.data),
    };
    plot_energy(
        &out.join("energy.png"),
        &format!("{title}: energy per step (selected model, first run)"),
        &outcome.energy,
    )?;
    let mut md = format!("# {title} — {stem}\n\n");
    if let Some(r) = report {
        md.push_str(&r.to_markdown());
        md.push('\n');
    } else {
        md.push_str("Each run's selected weights, re-scored on the held-out split rebuilt from `run.toml` (split hashes checked against the run records).\n\n");
    }
    md.push_str("| run | metrics |\n|---|---|\n");
    for (dir, m) in &outcome.runs {
        let cells: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v:.4}")).collect();
        md.push_str(&format!("| {dir} | {} |\n", cells.join(", ")));
    }
    md.push_str("\nEnergy per step: `energy.png`.\n");
    let json = serde_json::json!({ "outcome": outcome, "report": report });
    let (md_path, json_path): (PathBuf, PathBuf) = (
        out.join(format!("{stem}.md")),
        out.join(format!("{stem}.json")),
    );
    basin_core::checkpoint::write_atomic(&md_path, md.as_bytes())?;
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| data_err("outcome", format!("cannot serialise: {e}")))?;
    basin_core::checkpoint::write_atomic(&json_path, text.as_bytes())?;
    Ok(())
}
