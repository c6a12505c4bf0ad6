//! Opening a dataset by path or by name, for the CLI and for scripts.
//!
//! A path is read by its shape: a folder with `peptides-func.npz` is Peptides-func, another
//! folder a TU dataset, a `.mat` file a CARE-GNN fraud graph, an `.npz` a node-anomaly graph.
//! A name is looked up under the data directory (`--data-dir`, else `BASIN_DATA_DIR`):
//! `tu/<NAME>` (any TU folder, case-insensitive), `reddit`/`tolokers` (`anomaly/<name>.npz`),
//! `peptides-func` (`lrgb/peptides-functional`), `yelpchi`/`amazon` (`YelpChi.mat`,
//! `Amazon.mat` in the data directory or its `fraud/`); `pattern`, `cluster` and `planted`
//! are generated with their default (published) settings and need no data.

use std::path::{Path, PathBuf};

use crate::anomaly::{PlantedConfig, generate_planted};
use crate::error::{GraphError, Result};
use crate::lrgb::{PEPTIDES_FUNC_NPZ, load_peptides_func};
use crate::mat::{FraudConfig, load_fraud_mat};
use crate::npz::{NodeLoadOptions, load_anomaly_npz};
use crate::sbm::{ClusterConfig, PatternConfig, generate_cluster, generate_pattern};
use crate::tu::load_tu;
use crate::types::{Csr, DatasetStats, GraphDataset, NodeDataset};

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
        if path.join(PEPTIDES_FUNC_NPZ).is_file() {
            return Ok(Dataset::Graphs(load_peptides_func(path)?));
        }
        return Ok(Dataset::Graphs(load_tu(path)?));
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("mat") => Ok(Dataset::Nodes(load_fraud_mat(
            path,
            &FraudConfig::for_path(path),
        )?)),
        Some("npz") if path.file_name().and_then(|n| n.to_str()) == Some(PEPTIDES_FUNC_NPZ) => {
            let dir = path.parent().unwrap_or(Path::new("."));
            Ok(Dataset::Graphs(load_peptides_func(dir)?))
        }
        Some("npz") => Ok(Dataset::Nodes(load_anomaly_npz(
            path,
            &NodeLoadOptions::default(),
        )?)),
        _ if !path.exists() => Err(GraphError::MissingFile {
            path: path.to_path_buf(),
            what: "a dataset folder or file".into(),
        }),
        _ => Err(GraphError::format(
            path,
            "expected a TU or Peptides-func folder, a .mat fraud graph or an .npz anomaly graph",
        )),
    }
}

/// The names [`open`] knows besides TU folders.
pub const KNOWN_NAMES: &[&str] = &[
    "pattern",
    "cluster",
    "planted",
    "reddit",
    "tolokers",
    "peptides-func",
    "yelpchi",
    "amazon",
];

/// Opens `spec`: an existing path, else a name under `data_dir` (see the module docs).
pub fn open(spec: &str, data_dir: Option<&Path>) -> Result<Dataset> {
    let as_path = Path::new(spec);
    if as_path.exists() {
        return open_path(as_path);
    }
    let lower = spec.to_ascii_lowercase();
    match lower.as_str() {
        "pattern" => {
            return Ok(Dataset::Graphs(
                generate_pattern(&PatternConfig::default())?,
            ));
        }
        "cluster" => {
            return Ok(Dataset::Graphs(
                generate_cluster(&ClusterConfig::default())?,
            ));
        }
        "planted" => return Ok(Dataset::Nodes(generate_planted(&PlantedConfig::default())?)),
        _ => {}
    }
    let dir = crate::datadir::data_dir(data_dir);
    let candidates: Vec<PathBuf> = match lower.as_str() {
        "reddit" | "tolokers" => vec![dir.join("anomaly").join(format!("{lower}.npz"))],
        "peptides-func" | "peptides-functional" => vec![dir.join("lrgb/peptides-functional")],
        "yelpchi" | "yelp" => vec![dir.join("YelpChi.mat"), dir.join("fraud/YelpChi.mat")],
        "amazon" => vec![dir.join("Amazon.mat"), dir.join("fraud/Amazon.mat")],
        _ => {
            // A TU folder, case-insensitively.
            let tu = dir.join("tu");
            std::fs::read_dir(&tu)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter(|p| {
                            p.is_dir()
                                && p.file_name()
                                    .and_then(|n| n.to_str())
                                    .is_some_and(|n| n.eq_ignore_ascii_case(spec))
                        })
                        .collect()
                })
                .unwrap_or_default()
        }
    };
    match candidates.iter().find(|p| p.exists()) {
        Some(p) => open_path(p),
        None => Err(GraphError::MissingFile {
            path: candidates
                .first()
                .cloned()
                .unwrap_or_else(|| dir.join("tu").join(spec)),
            what: format!(
                "dataset `{spec}`: not a path, not found under {} (the data directory: --data-dir, else BASIN_DATA_DIR, else the user cache); known names: {} or a TU folder under tu/",
                dir.display(),
                KNOWN_NAMES.join(", ")
            ),
        }),
    }
}
