//! One run from a run file (`basin train`) and its re-evaluation from disk (`basin eval`).
//!
//! A run file names the task, the dataset, the model and the protocol:
//!
//! ```toml
//! task = "graph-classification"   # or "node-anomaly", "image-completion", "gps"
//! data = "MUTAG"                  # a name under the data directory, or a path
//! [architecture]                  # the task's config (default: ET's preset)
//! blocks = 2
//! [architecture.block]            # the energy block: any registered terms and dynamics
//! dim = 32
//! [[architecture.block.terms]]
//! kind = "attention"
//! heads = 4
//! [protocol]                      # CrossValidation / AnomalyProtocol
//! repeats = 1
//! ```
//!
//! `train` writes `run.toml` (the resolved file), one directory per run or fold with its
//! `record.json` and `checkpoint.safetensors` (the selected epoch's weights included),
//! `report.md` / `report.json` and `energy.png` (each block's energy per step for the first
//! run's selected model). The data are loaded and encoded once, the splits come from the
//! protocol, and each run's model is built once. `eval` rebuilds every split from `run.toml`,
//! checks it against the hash in the run's record, loads the selected weights and scores the
//! held-out part again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use basin_graph::source::{Dataset, open};
use basin_graph::{GraphDataset, NodeDataset};
use basin_sfi::learner::{GpsData, GpsLearner};
use basin_tasks::graph_classification::{
    AdjacencyMode, GraphClassifierConfig, GraphClassifierLearner, SPARSE_MEAN_NODES, dataset_pe,
    graph_classes, large_graphs,
};
use basin_tasks::image_completion::ImageCompletionConfig;
use basin_tasks::node_anomaly::{NodeAnomalyConfig, NodeAnomalyLearner};
use basin_train::metrics;
use basin_train::protocol::{
    AnomalyProtocol, CrossValidation, FixedSplitProtocol, Metric, PlannedRun, ProtocolReport,
    anomaly_metrics,
};
use basin_train::record::{RunRecord, split_hash};
use basin_train::runner::{Learner, Validation, load_best};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::image::{self, ImageProtocol};
use crate::report::plot_energy;
use crate::{ReproError, Result};

/// The one run directory of an image-completion run.
const IMAGE_RUN: &str = "run-0";

/// What `basin train` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "kebab-case")]
pub enum RunSpec {
    /// [`basin_tasks::node_anomaly`] under the node anomaly protocol (ET Table 1).
    NodeAnomaly(AnomalyRun),
    /// [`basin_tasks::graph_classification`] under stratified k-fold cross-validation with an
    /// inner validation split (ET Table 2, leak-free).
    GraphClassification(GraphRun),
    /// [`basin_tasks::image_completion`]: masked patches completed by the energy descent, on
    /// seeded draws of training, validation and test images ([`crate::image`]).
    ImageCompletion(ImageRun),
    /// A GPS-family model ([`basin_sfi`]: SFi-Former, DFi-Former, GraphGPS, GatedGCN) on a
    /// dataset's published split (Peptides-func, PATTERN, CLUSTER), best validation epoch.
    Gps(GpsRun),
}

/// A GPS-family model on a dataset with a published split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpsRun {
    /// Dataset name (`peptides-func`, `pattern`, `cluster`) or path; it must have a split.
    pub data: String,
    /// Use only this many training, validation and test items of the split (seeded draws;
    /// absent: all of it).
    #[serde(default)]
    pub subset: Option<[usize; 3]>,
    /// The model (default: SFi-Former at CPU scale for PATTERN).
    #[serde(default = "default_gps")]
    pub architecture: basin_sfi::model::GpsModelConfig,
    /// Runs, metric, training.
    #[serde(default)]
    pub protocol: FixedSplitProtocol,
}

fn default_gps() -> basin_sfi::model::GpsModelConfig {
    basin_sfi::presets::cpu(
        basin_sfi::presets::Dataset::Pattern,
        basin_sfi::presets::Variant::Sfi,
    )
}

/// Masked image completion: an image dataset, the model and the protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRun {
    /// Dataset name (`fashion-mnist`, `cifar10`) or path (IDX folder, image tar).
    pub data: String,
    /// The model (default: ET's Fashion-MNIST model at CPU scale).
    #[serde(default = "basin_et::image::fashion_mnist_cpu")]
    pub architecture: ImageCompletionConfig,
    /// Draws, epochs, masking seeds (default: 2,000 training images, 3 epochs).
    #[serde(default)]
    pub protocol: ImageProtocol,
}

/// Node anomaly detection: a node dataset, the model and the protocol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnomalyRun {
    /// Dataset name (`tolokers`, `reddit`, `yelpchi`, `amazon`, `planted`) or path.
    pub data: String,
    /// The model (default: ET's model for datasets outside Table 6).
    #[serde(default = "basin_et::anomaly::default_model")]
    pub architecture: NodeAnomalyConfig,
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
    #[serde(default = "basin_et::graph::tu_paper")]
    pub architecture: GraphClassifierConfig,
    /// Folds, repeats, training (default: 10 folds, 1 repeat, 100 epochs).
    #[serde(default)]
    pub protocol: CrossValidation,
}

/// The run files `basin train --example` prints.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "et-graph",
        "graph classification with ET blocks at CPU scale on MUTAG, 10-fold CV",
    ),
    (
        "et-anomaly",
        "node anomaly detection with an ET block on tolokers, one run",
    ),
    (
        "cdat-graph",
        "graph classification with CDAT blocks (vMF attention, controlled dynamics) on MUTAG",
    ),
    (
        "cdat-anomaly",
        "node anomaly detection with a CDAT block (Table 8's row) on tolokers, one run",
    ),
    (
        "sfi-pattern",
        "SFi-Former at CPU scale on PATTERN (1,000/200/200 of the generated split, 10 epochs)",
    ),
    (
        "et-image",
        "masked image completion with an ET block on Fashion-MNIST (2,000 images, 3 epochs)",
    ),
];

/// The CPU-scale TU protocol of the graph examples: leak-free 10-fold CV on the TU tables'
/// folds ([`crate::tu::cv_folds`]) with their training ([`crate::tu::tu_train`]) at their CPU
/// budget.
fn cpu_cross_validation() -> CrossValidation {
    CrossValidation {
        folds: crate::tu::cv_folds(10),
        train: crate::tu::tu_train(crate::tu::CPU_EPOCHS, crate::tu::CPU_LR),
        ..CrossValidation::default()
    }
}

impl RunSpec {
    /// The complete example run file `name` (see [`EXAMPLES`]), as TOML.
    pub fn example(name: &str) -> Result<String> {
        let spec = match name {
            "et-anomaly" => RunSpec::NodeAnomaly(AnomalyRun {
                data: "tolokers".into(),
                architecture: basin_et::anomaly::default_model(),
                protocol: AnomalyProtocol {
                    runs: 1,
                    ..AnomalyProtocol::default()
                },
            }),
            "et-graph" => RunSpec::GraphClassification(GraphRun {
                data: "MUTAG".into(),
                architecture: basin_et::graph::tu_cpu(),
                protocol: cpu_cross_validation(),
            }),
            "cdat-graph" => RunSpec::GraphClassification(GraphRun {
                data: "MUTAG".into(),
                architecture: basin_cdat::graph::tu_cpu(),
                protocol: cpu_cross_validation(),
            }),
            "cdat-anomaly" => RunSpec::NodeAnomaly(AnomalyRun {
                data: "tolokers".into(),
                architecture: basin_cdat::anomaly::model(basin_cdat::anomaly::TABLE8),
                protocol: AnomalyProtocol {
                    runs: 1,
                    ..AnomalyProtocol::default()
                },
            }),
            "sfi-pattern" => RunSpec::Gps(GpsRun {
                data: "pattern".into(),
                subset: Some([1000, 200, 200]),
                architecture: default_gps(),
                protocol: FixedSplitProtocol {
                    runs: 1,
                    seed: 0,
                    metric: Metric::AccuracySbm,
                    train: basin_sfi::presets::warmup_cosine(10, 1, 1e-3, 1e-5),
                    curves: false,
                },
            }),
            "et-image" => RunSpec::ImageCompletion(ImageRun {
                data: "fashion-mnist".into(),
                architecture: basin_et::image::fashion_mnist_cpu(),
                protocol: ImageProtocol::default(),
            }),
            other => {
                let known: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
                return Err(ReproError::config(
                    "--example",
                    format!("`{other}` is not an example; expected {}", known.join(", ")),
                ));
            }
        };
        let mut text = spec.to_toml()?;
        // A field at its default of 0 is left out of files (older records lack it), so the
        // example names it in a comment.
        if let RunSpec::GraphClassification(_) = spec {
            text = text.replacen(
                "\n[protocol]\n",
                "\n[protocol]\n# inner_folds = 3   # choose each fold's epoch count on 3 inner folds of its \
                 training part instead of its validation split\n",
                1,
            );
        }
        Ok(text)
    }

    /// Parses a run file; errors name the file and the field.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| basin_core::CoreError::io(path, e))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Reads a run file with `sets` applied over it (`basin train --set KEY=VALUE`, see
    /// [`apply_sets`]); errors name the file, and the override where one is at fault.
    pub fn read_with(path: &Path, sets: &[String]) -> Result<Self> {
        if sets.is_empty() {
            return Self::read(path);
        }
        let text = std::fs::read_to_string(path).map_err(|e| basin_core::CoreError::io(path, e))?;
        let file = format!("{} (with --set {})", path.display(), sets.join(", --set "));
        Self::parse(&apply_sets(&text, sets, &file)?, &file)
    }

    /// Parses run-file text (`file` names it in errors) and checks the model config.
    pub fn parse(text: &str, file: &str) -> Result<Self> {
        let spec = Self::from_text(text)
            .map_err(|e| ReproError::config(file, e.to_string().trim_end().to_owned()))?;
        let checked = match &spec {
            RunSpec::NodeAnomaly(r) => r.architecture.validate(),
            RunSpec::GraphClassification(r) => r.architecture.validate(),
            RunSpec::ImageCompletion(r) => r.architecture.validate(),
            RunSpec::Gps(r) => r
                .architecture
                .validate()
                .map_err(basin_tasks::TaskError::from),
        };
        checked.map_err(|e| ReproError::config(format!("{file}: architecture"), e.to_string()))?;
        match &spec {
            RunSpec::NodeAnomaly(r) => r.protocol.validate("protocol").map_err(|e| e.to_string()),
            RunSpec::GraphClassification(r) => {
                r.protocol.validate("protocol").map_err(|e| e.to_string())
            }
            RunSpec::ImageCompletion(r) => {
                r.protocol.validate("protocol").map_err(|e| e.to_string())
            }
            RunSpec::Gps(r) => r
                .protocol
                .train
                .validate("protocol.train")
                .map_err(|e| e.to_string()),
        }
        .map_err(|e| ReproError::config(file, e))?;
        Ok(spec)
    }

    /// The run file's task, then its fields read from the text itself: serde's tagged enums
    /// read a whole file into a buffer first and lose where a value was, so a wrong type
    /// (`k = -3`) would say only "invalid value: integer `-3`, expected usize". Read this way,
    /// the error shows the line and the field.
    fn from_text(text: &str) -> std::result::Result<Self, toml::de::Error> {
        #[derive(Deserialize)]
        struct Task {
            task: toml::Spanned<String>,
        }
        let task: Task = toml::from_str(text)?;
        // The `task` line blanked (its bytes kept, so lines and columns stay where they were).
        let span = task.task.span();
        let start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
        let end = text[span.end..]
            .find('\n')
            .map_or(text.len(), |i| span.end + i);
        let blank: String = text[start..end]
            .chars()
            .map(|c| if c == '\t' { c } else { ' ' })
            .collect();
        let fields = format!("{}{blank}{}", &text[..start], &text[end..]);
        Ok(match task.task.get_ref().as_str() {
            "node-anomaly" => Self::NodeAnomaly(toml::from_str(&fields)?),
            "graph-classification" => Self::GraphClassification(toml::from_str(&fields)?),
            "image-completion" => Self::ImageCompletion(toml::from_str(&fields)?),
            "gps" => Self::Gps(toml::from_str(&fields)?),
            // Unknown: serde's own message lists the tasks.
            _ => toml::from_str(text)?,
        })
    }

    /// The run file as TOML.
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self)
            .map_err(|e| ReproError::config("run", format!("cannot serialise: {e}")))
    }

    fn title(&self) -> String {
        match self {
            RunSpec::NodeAnomaly(r) => format!("node-anomaly on {}", r.data),
            RunSpec::GraphClassification(r) => format!("graph-classification on {}", r.data),
            RunSpec::ImageCompletion(r) => format!("image-completion on {}", r.data),
            RunSpec::Gps(r) => format!("gps on {}", r.data),
        }
    }
}

/// `text` (a run file) with each `KEY=VALUE` of `sets` applied in order: KEY a dotted path
/// (`architecture.batching.pe.k`; an array element by its index, `architecture.block.terms.1.memories`),
/// VALUE a TOML value (`8`, `0.5`, `true`, `"loss"`, `[1, 2]`), or a bare word taken as a string
/// (`data=PROTEINS`). Missing tables on the way are created; whether a key means anything is
/// left to the run file's own parsing, which refuses unknown fields by name.
pub fn apply_sets(text: &str, sets: &[String], file: &str) -> Result<String> {
    let mut doc = toml::Value::Table(
        toml::from_str(text)
            .map_err(|e| ReproError::config(file, e.to_string().trim_end().to_owned()))?,
    );
    for set in sets {
        let bad = |message: String| ReproError::config(format!("{file}: --set {set}"), message);
        let Some((key, value)) = set.split_once('=') else {
            return Err(bad(
                "expected KEY=VALUE (e.g. architecture.batching.pe.k=8)".into(),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
            Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(value.into())),
            Err(_) if !value.is_empty() && !value.contains(['"', '\'', '[', '{', '=']) => {
                toml::Value::String(value.into())
            }
            Err(e) => return Err(bad(format!("VALUE is not a TOML value: {}", e.message()))),
        };
        if key.split('.').any(str::is_empty) {
            return Err(bad("KEY is a dotted path of field names".into()));
        }
        // Down the path, a table's missing entry made on the way (the last one is overwritten).
        let upto = |n: usize| key.split('.').take(n).collect::<Vec<_>>().join(".");
        let mut node = &mut doc;
        for (i, part) in key.split('.').enumerate() {
            node = match node {
                toml::Value::Table(t) => t
                    .entry(part)
                    .or_insert_with(|| toml::Value::Table(toml::Table::new())),
                toml::Value::Array(a) => {
                    let len = a.len();
                    part.parse::<usize>()
                        .ok()
                        .and_then(|n| a.get_mut(n))
                        .ok_or_else(|| {
                            bad(format!(
                                "`{}`: an index below {len} was expected",
                                upto(i + 1)
                            ))
                        })?
                }
                _ => return Err(bad(format!("`{}` is a value, not a table", upto(i)))),
            };
        }
        *node = value;
    }
    toml::to_string(&doc).map_err(|e| ReproError::config(file, format!("cannot serialise: {e}")))
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

fn node_data(spec: &str, data_dir: Option<&Path>) -> Result<NodeDataset> {
    match open(spec, data_dir)? {
        Dataset::Nodes(d) => Ok(d),
        Dataset::Graphs(_) => Err(ReproError::config(
            "data",
            format!(
                "`{spec}` is a graph-level dataset; node-anomaly needs one graph with node labels"
            ),
        )),
    }
}

fn graph_data(spec: &str, data_dir: Option<&Path>) -> Result<GraphDataset> {
    match open(spec, data_dir)? {
        Dataset::Graphs(d) => Ok(d),
        Dataset::Nodes(_) => Err(ReproError::config(
            "data",
            format!(
                "`{spec}` is a node-level dataset; graph-classification needs many labelled graphs"
            ),
        )),
    }
}

/// A graph learner's energy curves over the first 64 graphs of `items`, named by block.
fn graph_energy(
    learner: &GraphClassifierLearner,
    items: &[usize],
) -> basin_tasks::Result<Vec<(String, Vec<f64>)>> {
    let sample: Vec<usize> = items.iter().copied().take(64).collect();
    Ok(learner
        .energy_per_step(&sample)?
        .into_iter()
        .enumerate()
        .map(|(b, e)| (format!("block {b}"), e))
        .collect())
}

/// The dataset of a GPS run with its statistics, and its published split (or the run's
/// subset of it).
fn gps_data(run: &GpsRun, data_dir: Option<&Path>) -> Result<(Arc<GpsData>, basin_graph::Split)> {
    let ds = graph_data(&run.data, data_dir)?;
    let split = ds.official_split.clone().ok_or_else(|| {
        ReproError::config(
            "data",
            format!(
                "`{}` has no published split; GPS runs use fixed splits",
                run.data
            ),
        )
    })?;
    // A subset keeps only its graphs, so statistics are computed for them alone.
    let (ds, split) = match run.subset {
        Some([a, b, c]) => {
            let sub = crate::sfi::subset(&split, [Some(a), Some(b), Some(c)], 0);
            let order: Vec<u32> = sub
                .train
                .iter()
                .chain(&sub.val)
                .chain(&sub.test)
                .copied()
                .collect();
            let (a, b) = (sub.train.len() as u32, sub.val.len() as u32);
            let c = sub.test.len() as u32;
            let split = basin_graph::Split::new(
                (0..a).collect(),
                (a..a + b).collect(),
                (a + b..a + b + c).collect(),
            );
            (ds.select(&order)?, split)
        }
        None => (ds, split),
    };
    let pe = &run.architecture.pe;
    let data = GpsData::new(Arc::new(ds), pe.frequencies(), pe.walk_steps())?;
    Ok((Arc::new(data), split))
}

/// A GPS learner's curves for `energy.png`: each SFi layer's energy of eq. 9 per unrolled
/// solver iteration, on the first 16 graphs of `items` (nothing for models without flows).
fn gps_energy(
    learner: &GpsLearner,
    items: &[usize],
) -> std::result::Result<Vec<(String, Vec<f64>)>, basin_train::TrainError> {
    let few: Vec<usize> = items.iter().copied().take(16).collect();
    Ok(learner
        .flow_traces(&few)?
        .into_iter()
        .enumerate()
        .map(|(l, (t, _))| (format!("layer {l} flow energy (eq. 9)"), t))
        .collect())
}

/// A protocol that does not fit the dataset (folds against its smallest class, …), named as
/// the run file's `protocol` section (the caller, who knows the file, names it).
fn in_run_file(e: basin_train::TrainError) -> ReproError {
    ReproError::config("protocol", e.to_string())
}

/// Whether the run file `old` found in the directory is `spec` with another number of
/// cross-validation repeats: a fold's run leaves that number out of its identity, so the
/// finished folds are read back and only the new repeats train (the run file is rewritten).
fn more_repeats(old: &str, spec: &RunSpec) -> bool {
    let (Ok(RunSpec::GraphClassification(mut old)), RunSpec::GraphClassification(new)) =
        (RunSpec::parse(old, "run.toml"), spec)
    else {
        return false;
    };
    old.protocol.repeats = new.protocol.repeats;
    &old == new
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
) -> Result<RunOutcome> {
    let file = out.join("run.toml");
    let text = spec.to_toml()?;
    basin_core::checkpoint::remove_stale_temporaries(out);
    if let Ok(old) = std::fs::read_to_string(&file)
        && old != text
        && !more_repeats(&old, spec)
    {
        return Err(ReproError::config(
            file.display().to_string(),
            "this directory holds another run (a graph run may change its `protocol.repeats` alone); choose another --out or remove it",
        ));
    }
    // The run file is written once the data is read and the protocol fits it: a refused run
    // leaves nothing behind.
    // In a data-parallel run rank 0 alone writes (the records too: see basin_train::runner).
    let writer = basin_dist::is_writer();
    let write_run_file = || match writer {
        true => basin_core::checkpoint::write_atomic(&file, text.as_bytes()),
        false => Ok(()),
    };
    let dev = basin_core::device::describe(device);
    let mut energy = Vec::new();
    let report = match spec {
        RunSpec::NodeAnomaly(run) => {
            let data = node_data(&run.data, data_dir)?;
            let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
            run.protocol
                .plan(&data.labelled, &is_anomaly)
                .map_err(in_run_file)?;
            write_run_file()?;
            run.protocol.run(
                &data.name,
                &data.labelled,
                &is_anomaly,
                |r: &PlannedRun| {
                    Ok(NodeAnomalyLearner::for_run(
                        &data,
                        &run.architecture,
                        r,
                        run.protocol.score,
                        device,
                    )?)
                },
                |_, learner| {
                    if energy.is_empty() {
                        energy = learner.energy_per_step();
                    }
                    Ok(())
                },
                Some(out),
                &dev,
            )?
        }
        RunSpec::GraphClassification(run) => {
            let data = Arc::new(graph_data(&run.data, data_dir)?);
            let target: Vec<f64> = graph_classes(&data)?.0.iter().map(|&c| c as f64).collect();
            run.protocol.plan(&target).map_err(in_run_file)?;
            // On CPU, a batch that cannot fit in memory is refused before any work.
            if device == Device::Cpu
                && let Some(available) = basin_core::device::available_memory_bytes()
            {
                let largest = data
                    .graphs
                    .iter()
                    .map(|g| g.adjacency.num_nodes())
                    .max()
                    .unwrap_or(0);
                run.architecture
                    .check_batch_memory(largest, data.graphs.len(), available)
                    .map_err(|e| ReproError::config("architecture", e.to_string()))?;
            }
            write_run_file()?;
            let arch = &run.architecture;
            if large_graphs(&data)
                && !arch.sparse_attention
                && arch.adjacency != AdjacencyMode::ReferenceMultiply
            {
                tracing::info!(
                    "{}: graphs of {SPARSE_MEAN_NODES} or more nodes on average; `sparse_attention = true` in [architecture] runs the same model over the edges, faster on graphs this large",
                    data.name
                );
            }
            let pe = dataset_pe(&data, &run.architecture.batching)?.map(Arc::new);
            let name = data.name.clone();
            run.protocol.run(
                &name,
                &target,
                |r: &PlannedRun| {
                    Ok(GraphClassifierLearner::new(
                        data.clone(),
                        pe.clone(),
                        &run.architecture,
                        &r.train(),
                        r.seed,
                        device,
                    )?)
                },
                |r, learner| {
                    if energy.is_empty() {
                        energy = graph_energy(learner, &ids(&r.split.test))?;
                    }
                    Ok(())
                },
                Some(out),
                &dev,
            )?
        }
        RunSpec::Gps(run) => {
            let (data, split) = gps_data(run, data_dir)?;
            run.protocol.plan(&split).map_err(in_run_file)?;
            write_run_file()?;
            let name = data.data.name.clone();
            run.protocol.run(
                &name,
                &split,
                data.targets(),
                |r: &PlannedRun| GpsLearner::new(data.clone(), &run.architecture, r.seed, device),
                |r, learner| {
                    if energy.is_empty() {
                        energy = gps_energy(learner, &ids(&r.split.test))?;
                    }
                    Ok(())
                },
                Some(out),
                &dev,
            )?
        }
        RunSpec::ImageCompletion(run) => {
            let dir = basin_graph::datadir::data_dir(data_dir);
            let (train_all, test_all) = image::load_images(&run.data, &dir)?;
            let d = image::draw(&train_all, &test_all, &run.protocol);
            write_run_file()?;
            let config =
                serde_json::json!({ "run": spec, "normalize": d.normalize, "drawn": d.drawn });
            let (learner, record) = image::fit(
                &format!("{}/{IMAGE_RUN}", run.data),
                &run.architecture,
                &d,
                &run.protocol,
                &out.join(IMAGE_RUN),
                device,
                dev.clone(),
                config,
            )?;
            if writer {
                energy = image::pictures(
                    &learner,
                    &d,
                    &run.protocol,
                    &out.join(IMAGE_RUN),
                    &spec.title(),
                )?;
            }
            ProtocolReport::new("image-completion", &run.data, vec![record], Vec::new())
        }
    };
    let outcome = RunOutcome {
        spec: spec.clone(),
        runs: report
            .runs
            .iter()
            .map(|r| {
                let dir = r.name.split_once('/').map_or(r.name.as_str(), |(_, d)| d);
                // What `eval` measures again (the selection's validation numbers stay in the
                // report).
                let test = r
                    .summary
                    .iter()
                    .filter(|(k, _)| !k.starts_with("selected_"))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                (dir.to_owned(), test)
            })
            .collect(),
        energy,
    };
    if writer {
        write_outputs(out, &outcome, Some(&report), "report")?;
    }
    Ok(outcome)
}

/// Scores the held-out part of every run under `out` again from its saved weights and writes
/// `eval.md`, `eval.json` and `energy.png` there.
pub fn eval(out: &Path, data_dir: Option<&Path>, device: Device) -> Result<RunOutcome> {
    let spec = RunSpec::read(&out.join("run.toml"))?;
    let with_checkpoint = |plan: Vec<PlannedRun>| -> Result<Vec<PlannedRun>> {
        let found: Vec<PlannedRun> = plan
            .into_iter()
            .filter(|r| out.join(&r.dir).join("checkpoint.safetensors").exists())
            .collect();
        if found.is_empty() {
            return Err(ReproError::config(
                out.display().to_string(),
                "no run with a checkpoint here (train first: basin train)",
            ));
        }
        Ok(found)
    };
    let mut runs = Vec::new();
    let mut energy = Vec::new();
    match &spec {
        RunSpec::NodeAnomaly(run) => {
            let data = node_data(&run.data, data_dir)?;
            let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
            for planned in with_checkpoint(
                run.protocol
                    .plan(&data.labelled, &is_anomaly)
                    .map_err(in_run_file)?,
            )? {
                let mut learner =
                    NodeAnomalyLearner::new(&data, &run.architecture, &planned.train(), 0, device)?;
                let test = ids(&planned.split.test);
                let threshold = restore(out, &planned.dir, &learner, &test)?
                    .for_test
                    .get("threshold")
                    .copied()
                    .unwrap_or(0.5);
                let p = learner.predict(&test)?.positive();
                let y: Vec<bool> = test.iter().map(|&i| is_anomaly[i]).collect();
                if energy.is_empty() {
                    energy = learner.energy_per_step();
                }
                runs.push((planned.dir, anomaly_metrics(&y, &p, threshold)?));
            }
        }
        RunSpec::GraphClassification(run) => {
            let data = Arc::new(graph_data(&run.data, data_dir)?);
            let (classes, _) = graph_classes(&data)?;
            let target: Vec<f64> = classes.iter().map(|&c| c as f64).collect();
            let pe = dataset_pe(&data, &run.architecture.batching)?.map(Arc::new);
            for planned in with_checkpoint(run.protocol.plan(&target).map_err(in_run_file)?)? {
                let mut learner = GraphClassifierLearner::new(
                    data.clone(),
                    pe.clone(),
                    &run.architecture,
                    &planned.train(),
                    0,
                    device,
                )?;
                let test = ids(&planned.split.test);
                restore(out, &planned.dir, &learner, &test)?;
                let pred = learner.predict(&test)?.argmax();
                let y: Vec<i64> = test.iter().map(|&i| classes[i]).collect();
                if energy.is_empty() {
                    energy = graph_energy(&learner, &test)?;
                }
                runs.push((
                    planned.dir,
                    BTreeMap::from([("test_accuracy".to_owned(), metrics::accuracy(&y, &pred)?)]),
                ));
            }
        }
        RunSpec::Gps(run) => {
            let (data, split) = gps_data(run, data_dir)?;
            let key = format!("test_{}", run.protocol.metric.name());
            for planned in with_checkpoint(run.protocol.plan(&split).map_err(in_run_file)?)? {
                let mut learner = GpsLearner::new(data.clone(), &run.architecture, 0, device)?;
                let test = ids(&planned.split.test);
                restore(out, &planned.dir, &learner, &test)?;
                let scores = learner.predict(&test)?;
                let value = run.protocol.metric.score(&scores, data.targets(), &test)?;
                if energy.is_empty() {
                    energy = gps_energy(&learner, &test)?;
                }
                runs.push((planned.dir, BTreeMap::from([(key.clone(), value)])));
            }
        }
        RunSpec::ImageCompletion(run) => {
            let dir = basin_graph::datadir::data_dir(data_dir);
            let (train_all, test_all) = image::load_images(&run.data, &dir)?;
            let d = image::draw(&train_all, &test_all, &run.protocol);
            if !out.join(IMAGE_RUN).join("checkpoint.safetensors").exists() {
                return Err(ReproError::config(
                    out.display().to_string(),
                    "no run with a checkpoint here (train first: basin train)",
                ));
            }
            let learner = image::learner(&run.architecture, &d, &run.protocol, device)?;
            restore(out, IMAGE_RUN, &learner, &d.test)?;
            let r = learner.evaluate(&d.test, &image::test_seeds(&run.protocol))?;
            energy = image::pictures(
                &learner,
                &d,
                &run.protocol,
                &out.join(IMAGE_RUN),
                &spec.title(),
            )?;
            runs.push((
                IMAGE_RUN.to_owned(),
                basin_tasks::image_completion::summary("test_", &r),
            ));
        }
    }
    let outcome = RunOutcome { spec, runs, energy };
    write_outputs(out, &outcome, None, "eval")?;
    Ok(outcome)
}

/// Loads a run's selected weights, after checking that its record was made on `test`.
fn restore<L: Learner>(out: &Path, dir: &str, learner: &L, test: &[usize]) -> Result<Validation> {
    let run_dir = out.join(dir);
    let record = RunRecord::read(&run_dir.join("record.json"))?;
    let recorded = record.split_hashes.get("test").cloned().unwrap_or_default();
    if recorded != split_hash(test) {
        return Err(ReproError::config(
            run_dir.join("record.json").display().to_string(),
            "the test split rebuilt from run.toml differs from the one this run was trained with (was the dataset changed?)",
        ));
    }
    Ok(load_best(
        &run_dir.join("checkpoint.safetensors"),
        learner.vars(),
    )?)
}

fn write_outputs(
    out: &Path,
    outcome: &RunOutcome,
    report: Option<&ProtocolReport>,
    stem: &str,
) -> Result<()> {
    // A sharded process holds only its share of the runs: the unsharded run writes the report.
    if basin_train::runner::shard().is_some() {
        return Ok(());
    }
    let title = outcome.spec.title();
    plot_energy(
        &out.join("energy.png"),
        &format!("{title}: energy per step (selected model, first run)"),
        &outcome.energy,
    )?;
    let mut md = format!("# {title} — {stem}\n\n");
    if let RunSpec::GraphClassification(g) = &outcome.spec {
        md.push_str(&format!(
            "Model: {} (every setting: `run.toml`).\n\n",
            crate::tu::describe(&g.architecture)
        ));
    }
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
    basin_core::checkpoint::write_atomic(&out.join(format!("{stem}.md")), md.as_bytes())?;
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| ReproError::config("outcome", format!("cannot serialise: {e}")))?;
    basin_core::checkpoint::write_atomic(&out.join(format!("{stem}.json")), text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sets_reach_nested_fields_array_elements_and_bare_strings() {
        let example = RunSpec::example("et-graph").unwrap();
        let text = apply_sets(
            &example,
            &sets(&[
                "architecture.batching.pe.k=15",
                "data=PROTEINS",
                "architecture.block.terms.1.memories = 256",
                "protocol.selection=\"loss\"",
                "protocol.repeats=3",
            ]),
            "f.toml",
        )
        .unwrap();
        let RunSpec::GraphClassification(run) = RunSpec::parse(&text, "f.toml").unwrap() else {
            panic!("a graph run file");
        };
        let RunSpec::GraphClassification(base) = RunSpec::parse(&example, "f.toml").unwrap() else {
            panic!("a graph run file");
        };
        assert_eq!(run.data, "PROTEINS");
        assert_eq!(run.architecture.batching.pe.as_ref().map(|p| p.k), Some(15));
        assert_eq!(base.architecture.batching.pe.as_ref().map(|p| p.k), Some(8));
        assert_eq!(run.protocol.repeats, 3);
        assert_ne!(run.architecture.block, base.architecture.block);
        assert!(text.contains("memories = 256"), "{text}");
        assert!(text.contains("selection = \"loss\""), "{text}");
    }

    #[test]
    fn a_wrong_type_names_its_line_and_field() {
        let example = RunSpec::example("et-graph").unwrap();
        let line = 1 + example.lines().position(|l| l == "k = 8").unwrap();
        let e = RunSpec::parse(&example.replacen("k = 8", "k = -3", 1), "f.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("line {line}")) && e.contains("k = -3"),
            "{e}"
        );
        let e = RunSpec::parse("task = \"graph\"\n", "f.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("graph-classification"), "the tasks listed: {e}");
    }

    #[test]
    fn bad_sets_are_refused_by_name() {
        let example = RunSpec::example("et-graph").unwrap();
        for (set, says) in [
            ("architecture.batching.pe.k", "KEY=VALUE"),
            ("architecture..k=3", "dotted path"),
            (
                "architecture.block.terms.7.memories=3",
                "`architecture.block.terms.7`: an index below 2",
            ),
            ("data.name=MUTAG", "`data` is a value"),
            ("protocol.selection=[1,", "not a TOML value"),
        ] {
            let e = apply_sets(&example, &sets(&[set]), "f.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("--set {set}")) && e.contains(says),
                "{set}: {e}"
            );
        }
        // A key the run file does not know is left to its parsing, which names the field.
        let text = apply_sets(
            &example,
            &sets(&["architecture.batching.pe.kk=8"]),
            "f.toml",
        )
        .unwrap();
        let e = RunSpec::parse(&text, "f.toml (with --set …)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("kk"), "{e}");
    }
}
