//! LRGB Peptides-func (Dwivedi et al. 2022): 15,535 peptide graphs featurised with OGB's
//! `smiles2graph` (9 integer atom features, 3 integer bond features), 10 binary function
//! labels per graph, and the official stratified split
//! (`splits_random_stratified_peptide.json`).
//!
//! Read from the folder's `peptides-func.npz` (`node_feat` `[ΣN, 9]`, `edge_feat` `[ΣE, 3]`,
//! `edge_index` `[2, ΣE]` local to each graph, `node_ptr`/`edge_ptr` `[G + 1]`, `labels`
//! `[G, 10]`). Features stay the OGB category indices (as `f32`), for embedding layers.

use std::path::Path;

use ndarray::{Array2, Axis, s};
use rayon::prelude::*;

use crate::error::{GraphError, Result};
use crate::npz::NpzReader;
use crate::split::Split;
use crate::types::{Csr, Graph, GraphDataset, Targets};

/// The npz file inside the folder.
pub const PEPTIDES_FUNC_NPZ: &str = "peptides-func.npz";
/// The official split inside the folder.
pub const PEPTIDES_SPLIT_JSON: &str = "splits_random_stratified_peptide.json";

fn pointers(path: &Path, name: &str, p: &[i64], total: usize) -> Result<Vec<usize>> {
    if p.first() != Some(&0)
        || p.last().copied() != Some(total as i64)
        || p.windows(2).any(|w| w[0] > w[1])
    {
        return Err(GraphError::format(
            path,
            format!("array `{name}`: expected non-decreasing offsets from 0 to {total}"),
        ));
    }
    Ok(p.iter().map(|&v| v as usize).collect())
}

/// Loads Peptides-func from its folder (`.../lrgb/peptides-functional`), with the official
/// split when the JSON is present.
pub fn load_peptides_func(dir: &Path) -> Result<GraphDataset> {
    let path = dir.join(PEPTIDES_FUNC_NPZ);
    let mut z = NpzReader::open(&path)?;
    let x = z.read2::<f32>("node_feat", None)?;
    let ef = z.read2::<f32>("edge_feat", None)?;
    let ei = z.read2::<i64>("edge_index", None)?;
    if ei.nrows() != 2 || ei.ncols() != ef.nrows() {
        return Err(GraphError::format(
            &path,
            format!(
                "array `edge_index`: expected shape [2, {}], found {:?}",
                ef.nrows(),
                ei.dim()
            ),
        ));
    }
    let np = z.read1::<i64>("node_ptr")?;
    let ep = z.read1::<i64>("edge_ptr")?;
    let labels = z.read2::<f32>("labels", None)?;
    let node_ptr = pointers(&path, "node_ptr", np.as_slice().unwrap_or(&[]), x.nrows())?;
    let edge_ptr = pointers(&path, "edge_ptr", ep.as_slice().unwrap_or(&[]), ef.nrows())?;
    let g = node_ptr.len() - 1;
    if edge_ptr.len() != g + 1 || labels.nrows() != g {
        return Err(GraphError::CountMismatch {
            path: path.clone(),
            what: "graphs in `edge_ptr`/`labels` (as in `node_ptr`)".into(),
            expected: g,
            found: if edge_ptr.len() != g + 1 {
                edge_ptr.len() - 1
            } else {
                labels.nrows()
            },
        });
    }
    let graphs: Vec<Graph> = (0..g)
        .into_par_iter()
        .map(|i| {
            let (n0, n1) = (node_ptr[i], node_ptr[i + 1]);
            let (e0, e1) = (edge_ptr[i], edge_ptr[i + 1]);
            let n = n1 - n0;
            let mut src = Vec::with_capacity(e1 - e0);
            let mut dst = Vec::with_capacity(e1 - e0);
            for e in e0..e1 {
                let (a, b) = (ei[[0, e]], ei[[1, e]]);
                if a < 0 || b < 0 || a as usize >= n || b as usize >= n {
                    return Err(GraphError::OutOfRange {
                        path: path.clone(),
                        line: e + 1,
                        what: format!("local node id in `edge_index` column (graph {i})"),
                        value: if a < 0 || a as usize >= n { a } else { b },
                        lo: 0,
                        hi: n as i64 - 1,
                    });
                }
                src.push(a as u32);
                dst.push(b as u32);
            }
            let (adjacency, perm) = Csr::from_edges(n, &src, &dst)?;
            let rows: Vec<usize> = perm.iter().map(|&p| e0 + p).collect();
            Ok(Graph {
                adjacency,
                node_features: x.slice(s![n0..n1, ..]).to_owned(),
                edge_features: Some(ef.select(Axis(0), &rows)),
                node_labels: None,
                edge_labels: None,
            })
        })
        .collect::<Result<_>>()?;
    let split_path = dir.join(PEPTIDES_SPLIT_JSON);
    let official_split = if split_path.is_file() {
        Some(read_split_json(&split_path, g)?)
    } else {
        None
    };
    Ok(GraphDataset {
        name: "peptides-func".into(),
        graphs,
        targets: Targets::MultiLabel(labels),
        class_values: Vec::new(),
        official_split,
    })
}

/// Reads a `{"train": [...], "val": [...], "test": [...]}` split of `count` items.
pub fn read_split_json(path: &Path, count: usize) -> Result<Split> {
    let text = std::fs::read_to_string(path).map_err(|e| GraphError::io(path, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| GraphError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        expected: "JSON".into(),
        found: e.to_string(),
    })?;
    let part = |name: &str| -> Result<Vec<u32>> {
        let arr = v.get(name).and_then(|a| a.as_array()).ok_or_else(|| {
            GraphError::format(path, format!("expected a list `{name}` of indices"))
        })?;
        arr.iter()
            .map(|x| {
                let i = x.as_i64().ok_or_else(|| {
                    GraphError::format(path, format!("`{name}`: expected integers, found {x}"))
                })?;
                if i < 0 || i as usize >= count {
                    return Err(GraphError::format(
                        path,
                        format!("`{name}`: index {i} is out of range 0..{count}"),
                    ));
                }
                Ok(i as u32)
            })
            .collect()
    };
    let split = Split::new(part("train")?, part("val")?, part("test")?);
    split
        .check_disjoint()
        .map_err(|e| GraphError::format(path, e.to_string()))?;
    Ok(split)
}

/// `[G, 10]` labels of the graphs `ids` (a convenience for per-split evaluation).
pub fn labels_of(ds: &GraphDataset, ids: &[u32]) -> Option<Array2<f32>> {
    match &ds.targets {
        Targets::MultiLabel(y) => {
            let idx: Vec<usize> = ids.iter().map(|&i| i as usize).collect();
            Some(y.select(Axis(0), &idx))
        }
        _ => None,
    }
}
