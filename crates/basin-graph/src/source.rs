//! Opening a dataset by path or by name, for the CLI and for scripts.
//!
//! A path is read by its shape: a folder with `peptides-func.npz` is Peptides-func, another
//! folder a TU dataset, a `.mat` file a CARE-GNN fraud graph, an `.npz` a node-anomaly graph.
//! A name is looked up in `basin_data::registry` and found under the data directory
//! (`--data-dir`, else `BASIN_DATA_DIR`, else the user cache) where the registry puts it
//! (`tu/MUTAG`, `anomaly/reddit.npz`, `anomaly/YelpChi.mat`, `lrgb/peptides-functional`);
//! any other TU folder under `tu/` opens by its name too; `pattern`, `cluster` and `planted`
//! are generated with their default (published) settings and need no data.

use std::path::Path;

use crate::anomaly::{PlantedConfig, generate_planted};
use crate::error::{GraphError, Result};
use crate::lrgb::LrgbSet;
use crate::mat::{FraudConfig, load_fraud_mat};
use crate::npz::{NodeLoadOptions, load_anomaly_npz};
use crate::sbm::{ClusterConfig, PatternConfig, generate_cluster, generate_pattern};
use crate::tu::load_tu;
use crate::{Csr, DatasetStats, GraphDataset, NodeDataset};
use basin_data::registry::{DataKind, DatasetInfo};
use basin_data::source::{Source, resolve};

/// A loaded dataset of either level.
#[derive(Clone, Debug, PartialEq)]
pub enum Dataset {
    /// Many graphs.
    Graphs(GraphDataset),
    /// One graph with node labels.
    Nodes(NodeDataset),
}

impl Dataset {
    /// Summary statistics.
    pub fn stats(&self) -> DatasetStats {
        match self {
            Self::Graphs(d) => d.stats(),
            Self::Nodes(d) => d.stats(),
        }
    }

    /// The adjacency of every graph.
    pub fn adjacencies(&self) -> Vec<&Csr> {
        match self {
            Self::Graphs(d) => d.graphs.iter().map(|g| &g.adjacency).collect(),
            Self::Nodes(d) => vec![&d.graph.adjacency],
        }
    }
}

/// Reads a dataset from a path (see the module docs).
pub fn open_path(path: &Path) -> Result<Dataset> {
    if path.is_dir() {
        if let Some(set) = LrgbSet::ALL
            .into_iter()
            .find(|s| path.join(s.npz()).is_file())
        {
            return Ok(Dataset::Graphs(crate::lrgb::load(path, set)?));
        }
        return Ok(Dataset::Graphs(load_tu(path)?));
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let name = path.file_name().and_then(|n| n.to_str());
    let lrgb = LrgbSet::ALL.into_iter().find(|s| name == Some(s.npz()));
    match (ext.as_deref(), lrgb) {
        (Some("npz"), Some(set)) => {
            let dir = path.parent().unwrap_or(Path::new("."));
            Ok(Dataset::Graphs(crate::lrgb::load(dir, set)?))
        }
        (Some("mat"), _) => Ok(Dataset::Nodes(load_fraud_mat(
            path,
            &FraudConfig::for_path(path),
        )?)),
        (Some("npz"), None) => Ok(Dataset::Nodes(load_anomaly_npz(
            path,
            &NodeLoadOptions::default(),
        )?)),
        _ if !path.exists() => Err(GraphError::missing_file(path, "a dataset folder or file")),
        _ => Err(GraphError::format(
            path,
            "expected a TU or LRGB folder, a .mat fraud graph or an .npz anomaly graph",
        )),
    }
}

/// Opens `spec`: an existing path, else a registered name (`basin_data::registry`) under the data
/// directory (`data_dir`, else `BASIN_DATA_DIR`, else the user cache), else any TU folder
/// `tu/<spec>` there (case-insensitive). A registered dataset that is missing is an error that
/// names where it was looked for and the `basin data fetch` command that gets it.
pub fn open(spec: &str, data_dir: Option<&Path>) -> Result<Dataset> {
    let dir = match resolve(spec, data_dir) {
        Source::Path(path) => return open_path(&path),
        Source::Registered { info, data_dir } => return open_registered(info, &data_dir),
        Source::Unknown { data_dir, .. } => data_dir,
    };
    // An unregistered TU folder, case-insensitively.
    let tu = dir.join("tu");
    let found = std::fs::read_dir(&tu).ok().and_then(|entries| {
        entries.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.eq_ignore_ascii_case(spec))
        })
    });
    match found {
        Some(p) => open_path(&p),
        None => Err(GraphError::missing_file(
            tu.join(spec),
            format!(
                "dataset `{spec}`: not a path, not a registered name (`basin data list` shows them), and no TU folder of that name under {} (the data directory is --data-dir, else BASIN_DATA_DIR, else the user cache)",
                tu.display()
            ),
        )),
    }
}

/// Opens a registered graph dataset from `data_dir` (generated ones need no files).
pub fn open_registered(info: &DatasetInfo, data_dir: &Path) -> Result<Dataset> {
    match info.kind {
        DataKind::Generated => match info.name.as_str() {
            "pattern" => Ok(Dataset::Graphs(
                generate_pattern(&PatternConfig::default())?,
            )),
            "cluster" => Ok(Dataset::Graphs(
                generate_cluster(&ClusterConfig::default())?,
            )),
            "planted" => Ok(Dataset::Nodes(generate_planted(&PlantedConfig::default())?)),
            other => Err(GraphError::invalid(
                "dataset",
                format!("`{other}` is registered as generated but has no generator"),
            )),
        },
        DataKind::Lrgb => match LrgbSet::from_name(&info.name) {
            Some(set) => Ok(Dataset::Graphs(crate::lrgb::load(
                &info.require(data_dir)?,
                set,
            )?)),
            None => Err(GraphError::invalid(
                "dataset",
                format!(
                    "`{}` is registered as an LRGB set but has no layout",
                    info.name
                ),
            )),
        },
        DataKind::Tu | DataKind::AnomalyNpz | DataKind::FraudMat => {
            open_path(&info.require(data_dir)?)
        }
        DataKind::IdxImages
        | DataKind::ImageTar
        | DataKind::ImageFolder
        | DataKind::MilCsv
        | DataKind::MilFte => Err(GraphError::invalid(
            "dataset",
            format!(
                "`{}` is not a graph dataset ({:?}); graph commands read TU, anomaly, fraud and LRGB sets",
                info.name, info.kind
            ),
        )),
    }
}
