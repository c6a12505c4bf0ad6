//! Datasets by name or path as PyTorch tensors (the Python side turns them into PyG `Data`
//! objects where PyG is installed, NumPy arrays otherwise), and Laplacian encodings of an
//! `edge_index` by basin-graph's solvers.

use std::path::PathBuf;

use basin_graph::laplacian::{PeConfig, laplacian_pe as pe_of};
use basin_graph::source::{Dataset, open};
use basin_graph::{Csr, Graph, Targets};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_tch::PyTensor;
use tch::Tensor;

use crate::errors::{OrPy, guard};

/// An ndarray as a CPU tensor of its shape (tch's own conversion, after making the layout
/// standard).
fn tensor<S, D>(a: &ndarray::ArrayBase<S, D>) -> PyResult<Tensor>
where
    S: ndarray::Data,
    S::Elem: tch::kind::Element,
    D: ndarray::Dimension,
{
    Tensor::try_from(&a.as_standard_layout())
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

/// One graph's tensors: `x [N, F]`, `edge_index [2, E]` (PyG's source → target),
/// `edge_attr [E, P]` when the graph has edge features.
fn graph_dict<'py>(py: Python<'py>, g: &Graph) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("x", PyTensor(tensor(&g.node_features)?))?;
    d.set_item("edge_index", PyTensor(tensor(&g.adjacency.edge_index())?))?;
    if let Some(e) = &g.edge_features {
        d.set_item("edge_attr", PyTensor(tensor(e)?))?;
    }
    Ok(d)
}

/// Opens `spec` (a path, or a registered name found under `data_dir`, else `BASIN_DATA_DIR`,
/// else the user cache) and returns `(info, items)`: `info` with `name`, `level` (`graphs` or
/// `nodes`), `task` and `num_classes`; one dict of tensors per graph (`x`, `edge_index`,
/// `edge_attr`, `y`), or one for a node-level set with `y` per node and `labelled`.
#[pyfunction]
#[pyo3(signature = (spec, data_dir = None))]
pub fn load_dataset<'py>(
    py: Python<'py>,
    spec: &str,
    data_dir: Option<PathBuf>,
) -> PyResult<(Bound<'py, PyDict>, Vec<Bound<'py, PyDict>>)> {
    guard(|| {
        let set = open(spec, data_dir.as_deref()).py()?;
        let info = PyDict::new(py);
        let mut items = Vec::new();
        match &set {
            Dataset::Graphs(d) => {
                info.set_item("name", &d.name)?;
                info.set_item("level", "graphs")?;
                let (task, classes) = match &d.targets {
                    Targets::Classes { num_classes, .. } => ("classification", Some(*num_classes)),
                    Targets::MultiLabel(_) => ("multilabel", None),
                    Targets::NodeClasses { num_classes } => {
                        ("node-classification", Some(*num_classes))
                    }
                    Targets::Regression(_) => ("regression", None),
                    Targets::Links(_) => ("links", None),
                };
                info.set_item("task", task)?;
                info.set_item("num_classes", classes)?;
                for (i, g) in d.graphs.iter().enumerate() {
                    let item = graph_dict(py, g)?;
                    let y = match &d.targets {
                        Targets::Classes { labels, .. } => {
                            Some(Tensor::from_slice(&[labels[i] as i64]))
                        }
                        Targets::MultiLabel(a) | Targets::Regression(a) => {
                            let row: Vec<f32> = a.row(i).to_vec();
                            Some(Tensor::from_slice(&row).view([1, -1]))
                        }
                        Targets::NodeClasses { .. } => {
                            g.node_labels.as_ref().map(|l| Tensor::from_slice(l))
                        }
                        Targets::Links(l) => {
                            let pairs: Vec<i64> = l[i]
                                .pairs
                                .iter()
                                .flat_map(|p| [p[0] as i64, p[1] as i64])
                                .collect();
                            item.set_item(
                                "edge_label_index",
                                PyTensor(Tensor::from_slice(&pairs).view([-1, 2]).tr()),
                            )?;
                            Some(Tensor::from_slice(&l[i].labels))
                        }
                    };
                    if let Some(y) = y {
                        item.set_item("y", PyTensor(y))?;
                    }
                    items.push(item);
                }
            }
            Dataset::Nodes(d) => {
                info.set_item("name", &d.name)?;
                info.set_item("level", "nodes")?;
                info.set_item("task", "node-classification")?;
                info.set_item("num_classes", d.num_classes)?;
                let item = graph_dict(py, &d.graph)?;
                let y: Vec<i64> = d.labels.iter().map(|&l| l as i64).collect();
                item.set_item("y", PyTensor(Tensor::from_slice(&y)))?;
                let lab: Vec<i64> = d.labelled.iter().map(|&l| l as i64).collect();
                item.set_item("labelled", PyTensor(Tensor::from_slice(&lab)))?;
                items.push(item);
            }
        }
        Ok((info, items))
    })
}

/// The `k` Laplacian eigenvectors of the graph `edge_index [2, E]` on `num_nodes` nodes
/// (symmetrised; ET eq. 23–25 with `cls`, which adds the CLS node as row 0), `[N (+1), k]`
/// float32, columns past the available eigenvectors zero.
#[pyfunction]
#[pyo3(signature = (edge_index, num_nodes, k, cls = false))]
pub fn laplacian_pe(
    edge_index: PyTensor,
    num_nodes: usize,
    k: usize,
    cls: bool,
) -> PyResult<PyTensor> {
    guard(|| {
        let e = &edge_index.0;
        if e.dim() != 2 || e.size()[0] != 2 {
            return Err(PyValueError::new_err(format!(
                "edge_index: expected shape [2, E], got {:?}",
                e.size()
            )));
        }
        let e = e
            .to_kind(tch::Kind::Int64)
            .to_device(tch::Device::Cpu)
            .contiguous();
        let flat: Vec<i64> = Vec::try_from(e.view([-1]))
            .map_err(|err| PyValueError::new_err(format!("edge_index: {err}")))?;
        let m = flat.len() / 2;
        let mut idx = Vec::with_capacity(flat.len());
        for &v in &flat {
            if v < 0 || v as usize >= num_nodes {
                return Err(PyValueError::new_err(format!(
                    "edge_index: node {v} outside 0..{num_nodes}"
                )));
            }
            idx.push(v as u32);
        }
        let (adj, _) = Csr::from_edges(num_nodes, &idx[..m], &idx[m..]).py()?;
        let cfg = PeConfig {
            cls,
            ..PeConfig::plain(k)
        };
        let pe = pe_of(&adj, &cfg).py()?;
        Ok(PyTensor(tensor(&pe.vectors)?))
    })
}
