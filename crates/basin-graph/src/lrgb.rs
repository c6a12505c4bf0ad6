//! The Long Range Graph Benchmark (Dwivedi et al. 2022) and the GNN-Benchmark superpixel and ZINC
//! sets, in one npz layout, read ([`load`]) and written ([`save`]).
//!
//! Peptides-func is here (15,535 peptide graphs featurised with OGB's `smiles2graph`: 9 integer
//! atom features, 3 integer bond features, 10 binary function labels, the official stratified
//! split). The others are not in the shared data; basin reads each from the same layout, which
//! is what the data mirror serves (the published files are Python pickles and `.pt` tensors,
//! and Peptides-struct needs RDKit to featurise its SMILES, so they are converted once, outside
//! basin):
//!
//! | array | shape | dtype | sets |
//! |---|---|---|---|
//! | `node_feat` | `[ΣN, F]` | int or float | all |
//! | `edge_feat` | `[ΣE, P]` | int or float | all |
//! | `edge_index` | `[2, ΣE]`, local to each graph | i64 | all |
//! | `node_ptr`, `edge_ptr` | `[G + 1]` offsets | i64 | all |
//! | `labels` | `[G, T]` | f32 | Peptides-func (T = 10, binary), Peptides-struct (T = 11, real), ZINC (T = 1) |
//! | `labels` | `[G]` | i64 | MNIST, CIFAR10 superpixels (classes) |
//! | `node_labels` | `[ΣN]` | i64 | PascalVOC-SP, COCO-SP (a class per superpixel) |
//! | `link_index`, `link_label`, `link_ptr` | `[2, ΣL]` local, `[ΣL]` 0/1, `[G + 1]` | i64 | PCQM-Contact |
//!
//! beside a split JSON `{"train": [...], "val": [...], "test": [...]}` of graph indices.
//! Features stay as stored (OGB category indices as `f32`, for embedding layers).

use std::path::Path;

use ndarray::{Axis, s};
use rayon::prelude::*;

use crate::error::{GraphError, Result};
use crate::npz::{NpzReader, NpzWriter};
use crate::{Csr, Graph, GraphDataset, LinkTargets, Targets};
use basin_data::split::Split;

/// Peptides-func's npz inside its folder.
pub const PEPTIDES_FUNC_NPZ: &str = "peptides-func.npz";
/// Peptides-func's official split inside its folder.
pub const PEPTIDES_SPLIT_JSON: &str = "splits_random_stratified_peptide.json";

/// What a set predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LrgbTask {
    /// Several binary labels per graph (`labels [G, T]`).
    MultiLabel(usize),
    /// Several real targets per graph (`labels [G, T]`).
    Regression(usize),
    /// One class per graph (`labels [G]`).
    GraphClasses(usize),
    /// One class per node (`node_labels [ΣN]`).
    NodeClasses(usize),
    /// Candidate node pairs per graph with a 0/1 label (`link_*`).
    Links,
}

/// A set in the layout of the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LrgbSet {
    /// Peptides-func: 10 binary functions per peptide (AP).
    PeptidesFunc,
    /// Peptides-struct: 11 standardised 3-D properties per peptide (MAE).
    PeptidesStruct,
    /// PascalVOC-SP: SLIC superpixels of VOC images, 21 classes per superpixel (macro F1).
    PascalVocSp,
    /// COCO-SP: SLIC superpixels of COCO images, 81 classes per superpixel (macro F1).
    CocoSp,
    /// PCQM-Contact: which atom pairs of a molecule are in 3-D contact (MRR).
    PcqmContact,
    /// MNIST superpixels (GNN Benchmark): 10 classes per graph.
    MnistSuperpixels,
    /// CIFAR10 superpixels (GNN Benchmark): 10 classes per graph.
    Cifar10Superpixels,
    /// ZINC (GNN Benchmark's 12k subset): constrained solubility per molecule (MAE).
    Zinc,
}

impl LrgbSet {
    /// Every set.
    pub const ALL: [Self; 8] = [
        Self::PeptidesFunc,
        Self::PeptidesStruct,
        Self::PascalVocSp,
        Self::CocoSp,
        Self::PcqmContact,
        Self::MnistSuperpixels,
        Self::Cifar10Superpixels,
        Self::Zinc,
    ];

    /// The registry's name (`data/datasets.toml`).
    pub fn name(self) -> &'static str {
        match self {
            Self::PeptidesFunc => "peptides-func",
            Self::PeptidesStruct => "peptides-struct",
            Self::PascalVocSp => "pascalvoc-sp",
            Self::CocoSp => "coco-sp",
            Self::PcqmContact => "pcqm-contact",
            Self::MnistSuperpixels => "mnist-superpixels",
            Self::Cifar10Superpixels => "cifar10-superpixels",
            Self::Zinc => "zinc",
        }
    }

    /// The set whose registry name is `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The npz inside the set's folder.
    pub fn npz(self) -> &'static str {
        match self {
            Self::PeptidesFunc => PEPTIDES_FUNC_NPZ,
            Self::PeptidesStruct => "peptides-struct.npz",
            Self::PascalVocSp => "pascalvoc-sp.npz",
            Self::CocoSp => "coco-sp.npz",
            Self::PcqmContact => "pcqm-contact.npz",
            Self::MnistSuperpixels => "mnist-superpixels.npz",
            Self::Cifar10Superpixels => "cifar10-superpixels.npz",
            Self::Zinc => "zinc.npz",
        }
    }

    /// The split JSON inside the set's folder (the published split, as JSON).
    pub fn split_json(self) -> &'static str {
        match self {
            Self::PeptidesFunc => PEPTIDES_SPLIT_JSON,
            Self::PeptidesStruct => "splits_random_stratified_peptide_structure.json",
            _ => "splits.json",
        }
    }

    /// What it predicts.
    pub fn task(self) -> LrgbTask {
        match self {
            Self::PeptidesFunc => LrgbTask::MultiLabel(10),
            Self::PeptidesStruct => LrgbTask::Regression(11),
            Self::PascalVocSp => LrgbTask::NodeClasses(21),
            Self::CocoSp => LrgbTask::NodeClasses(81),
            Self::PcqmContact => LrgbTask::Links,
            Self::MnistSuperpixels | Self::Cifar10Superpixels => LrgbTask::GraphClasses(10),
            Self::Zinc => LrgbTask::Regression(1),
        }
    }

    /// Widths of the node and edge features (LRGB / benchmarking-gnns conventions: OGB's 9 atom
    /// and 3 bond columns; 14 superpixel statistics and 2 edge weights; intensity or RGB plus
    /// the centre, and one distance weight; ZINC's atom and bond type indices).
    pub fn feature_widths(self) -> (usize, usize) {
        match self {
            Self::PeptidesFunc | Self::PeptidesStruct | Self::PcqmContact => (9, 3),
            Self::PascalVocSp | Self::CocoSp => (14, 2),
            Self::MnistSuperpixels => (3, 1),
            Self::Cifar10Superpixels => (5, 1),
            Self::Zinc => (1, 1),
        }
    }
}

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

/// Checks that the index array `name` holds `n` pairs, its shape `[2, n]`.
fn pairs_check(path: &Path, name: &str, index: &ndarray::Array2<i64>, n: usize) -> Result<()> {
    if index.nrows() == 2 && index.ncols() == n {
        return Ok(());
    }
    Err(GraphError::format(
        path,
        format!(
            "array `{name}`: expected shape [2, {n}], found {:?}",
            index.dim()
        ),
    ))
}

/// `v` if it lies in `0..n`, else the error naming `what` (a node id or class of an array) and
/// the entry.
fn in_range(
    path: &Path,
    what: impl FnOnce() -> String,
    entry: usize,
    v: i64,
    n: usize,
) -> Result<usize> {
    if v < 0 || v as usize >= n {
        let range = (0, n as i64 - 1);
        return Err(GraphError::out_of_range(path, entry + 1, what(), v, range));
    }
    Ok(v as usize)
}

/// A local node id of graph `graph` (`n` nodes) in column `column` of `array`.
fn local_id(
    path: &Path,
    array: &str,
    graph: usize,
    column: usize,
    v: i64,
    n: usize,
) -> Result<u32> {
    let what = || format!("local node id in `{array}` column (graph {graph})");
    in_range(path, what, column, v, n).map(|v| v as u32)
}

/// A class label in `0..classes` at `entry` of `array`.
fn class_of(path: &Path, array: &str, entry: usize, v: i64, classes: usize) -> Result<usize> {
    in_range(path, || format!("class in `{array}`"), entry, v, classes)
}

/// Loads `set` from its folder, with the official split when the split JSON is present.
pub fn load(dir: &Path, set: LrgbSet) -> Result<GraphDataset> {
    let path = dir.join(set.npz());
    let (fw, pw) = set.feature_widths();
    let mut z = NpzReader::open(&path)?;
    let x = z.read2::<f32>("node_feat", Some(fw))?;
    let ef = z.read2::<f32>("edge_feat", Some(pw))?;
    let ei = z.read2::<i64>("edge_index", None)?;
    pairs_check(&path, "edge_index", &ei, ef.nrows())?;
    let np = z.read1::<i64>("node_ptr")?;
    let ep = z.read1::<i64>("edge_ptr")?;
    let node_ptr = pointers(&path, "node_ptr", np.as_slice().unwrap_or(&[]), x.nrows())?;
    let edge_ptr = pointers(&path, "edge_ptr", ep.as_slice().unwrap_or(&[]), ef.nrows())?;
    let g = node_ptr.len() - 1;
    GraphError::check_count(
        &path,
        "graphs in `edge_ptr` (as in `node_ptr`)",
        g,
        edge_ptr.len() - 1,
    )?;
    let mut graphs: Vec<Graph> = (0..g)
        .into_par_iter()
        .map(|i| {
            let (n0, n1) = (node_ptr[i], node_ptr[i + 1]);
            let (e0, e1) = (edge_ptr[i], edge_ptr[i + 1]);
            let n = n1 - n0;
            let mut src = Vec::with_capacity(e1 - e0);
            let mut dst = Vec::with_capacity(e1 - e0);
            for e in e0..e1 {
                src.push(local_id(&path, "edge_index", i, e, ei[[0, e]], n)?);
                dst.push(local_id(&path, "edge_index", i, e, ei[[1, e]], n)?);
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
    let targets = match set.task() {
        LrgbTask::MultiLabel(t) | LrgbTask::Regression(t) => {
            let y = z.read2::<f32>("labels", Some(t))?;
            GraphError::check_count(&path, "rows of `labels` (one per graph)", g, y.nrows())?;
            if y.iter().any(|v| !v.is_finite()) {
                return Err(GraphError::format(
                    &path,
                    "array `labels`: non-finite value",
                ));
            }
            if matches!(set.task(), LrgbTask::MultiLabel(_)) {
                if let Some(v) = y.iter().find(|&&v| v != 0.0 && v != 1.0) {
                    return Err(GraphError::format(
                        &path,
                        format!("array `labels`: binary labels expected (0 or 1), found {v}"),
                    ));
                }
                Targets::MultiLabel(y)
            } else {
                Targets::Regression(y)
            }
        }
        LrgbTask::GraphClasses(c) => {
            let y = z.read1::<i64>("labels")?;
            GraphError::check_count(&path, "entries of `labels` (one per graph)", g, y.len())?;
            let labels = y
                .iter()
                .enumerate()
                .map(|(i, &v)| class_of(&path, "labels", i, v, c))
                .collect::<Result<_>>()?;
            Targets::Classes {
                labels,
                num_classes: c,
            }
        }
        LrgbTask::NodeClasses(c) => {
            let y = z.read1::<i64>("node_labels")?;
            GraphError::check_count(
                &path,
                "entries of `node_labels` (one per node)",
                x.nrows(),
                y.len(),
            )?;
            for (i, graph) in graphs.iter_mut().enumerate() {
                let labels = (node_ptr[i]..node_ptr[i + 1])
                    .map(|v| class_of(&path, "node_labels", v, y[v], c).map(|c| c as i64))
                    .collect::<Result<_>>()?;
                graph.node_labels = Some(labels);
            }
            Targets::NodeClasses { num_classes: c }
        }
        LrgbTask::Links => {
            let li = z.read2::<i64>("link_index", None)?;
            let ll = z.read1::<i64>("link_label")?;
            let lp = z.read1::<i64>("link_ptr")?;
            pairs_check(&path, "link_index", &li, ll.len())?;
            let link_ptr = pointers(&path, "link_ptr", lp.as_slice().unwrap_or(&[]), ll.len())?;
            GraphError::check_count(
                &path,
                "graphs in `link_ptr` (as in `node_ptr`)",
                g,
                link_ptr.len() - 1,
            )?;
            let links = (0..g)
                .map(|i| {
                    let n = graphs[i].num_nodes();
                    let mut t = LinkTargets::default();
                    for l in link_ptr[i]..link_ptr[i + 1] {
                        let a = local_id(&path, "link_index", i, l, li[[0, l]], n)?;
                        let b = local_id(&path, "link_index", i, l, li[[1, l]], n)?;
                        t.pairs.push([a, b]);
                        t.labels
                            .push(class_of(&path, "link_label", l, ll[l], 2)? as f32);
                    }
                    Ok(t)
                })
                .collect::<Result<_>>()?;
            Targets::Links(links)
        }
    };
    let split_path = dir.join(set.split_json());
    let official_split = if split_path.is_file() {
        Some(read_split_json(&split_path, g)?)
    } else {
        None
    };
    Ok(GraphDataset {
        name: set.name().into(),
        graphs,
        targets,
        class_values: Vec::new(),
        official_split,
        node_features: None,
    })
}

/// Writes `ds` into `dir` in `set`'s layout (`set.npz()` atomically, and its official split, if
/// it has one, as `set.split_json()`), so [`load`] reads it back: how a converted or generated
/// set is stored.
pub fn save(dir: &Path, set: LrgbSet, ds: &GraphDataset) -> Result<()> {
    let (fw, pw) = set.feature_widths();
    let path = dir.join(set.npz());
    let bad = |what: String| GraphError::invalid(format!("{} as {}", ds.name, set.name()), what);
    let (mut x, mut ef, mut src, mut dst) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut node_ptr, mut edge_ptr) = (vec![0i64], vec![0i64]);
    for (i, g) in ds.graphs.iter().enumerate() {
        if g.node_features.ncols() != fw {
            return Err(bad(format!(
                "graph {i}: {fw} node feature columns expected"
            )));
        }
        x.extend(g.node_features.iter());
        for (r, w) in g.adjacency.indptr().windows(2).enumerate() {
            for e in w[0]..w[1] {
                src.push(r as i64);
                dst.push(i64::from(g.adjacency.indices()[e]));
                match &g.edge_features {
                    Some(f) if f.ncols() == pw && f.nrows() == g.adjacency.nnz() => {
                        ef.extend(f.row(e).iter());
                    }
                    _ => {
                        return Err(bad(format!(
                            "graph {i}: {pw} edge feature columns expected"
                        )));
                    }
                }
            }
        }
        node_ptr.push(x.len() as i64 / fw as i64);
        edge_ptr.push(src.len() as i64);
    }
    let (nodes, edges) = (x.len() / fw, src.len());
    std::fs::create_dir_all(dir).map_err(|e| GraphError::io(dir, e))?;
    let mut w = NpzWriter::create(&path)?;
    w.add_f32("node_feat", &[nodes, fw], &x)?;
    w.add_f32("edge_feat", &[edges, pw], &ef)?;
    w.add_i64("edge_index", &[2, edges], &[src, dst].concat())?;
    w.add_i64("node_ptr", &[node_ptr.len()], &node_ptr)?;
    w.add_i64("edge_ptr", &[edge_ptr.len()], &edge_ptr)?;
    match (&ds.targets, set.task()) {
        (Targets::MultiLabel(y), LrgbTask::MultiLabel(t))
        | (Targets::Regression(y), LrgbTask::Regression(t))
            if y.ncols() == t =>
        {
            w.add_f32(
                "labels",
                &[y.nrows(), t],
                &y.iter().copied().collect::<Vec<_>>(),
            )?;
        }
        (Targets::Classes { labels, .. }, LrgbTask::GraphClasses(_)) => {
            let y: Vec<i64> = labels.iter().map(|&c| c as i64).collect();
            w.add_i64("labels", &[y.len()], &y)?;
        }
        (Targets::NodeClasses { .. }, LrgbTask::NodeClasses(_)) => {
            let mut y = Vec::with_capacity(nodes);
            for (i, g) in ds.graphs.iter().enumerate() {
                let l = g
                    .node_labels
                    .as_ref()
                    .ok_or_else(|| bad(format!("graph {i}: no node labels")))?;
                y.extend_from_slice(l);
            }
            w.add_i64("node_labels", &[y.len()], &y)?;
        }
        (Targets::Links(links), LrgbTask::Links) => {
            let (mut a, mut b, mut label, mut ptr) = (Vec::new(), Vec::new(), Vec::new(), vec![0]);
            for l in links {
                for (p, &y) in l.pairs.iter().zip(&l.labels) {
                    a.push(i64::from(p[0]));
                    b.push(i64::from(p[1]));
                    label.push(i64::from(y > 0.5));
                }
                ptr.push(a.len() as i64);
            }
            w.add_i64("link_index", &[2, a.len()], &[a, b].concat())?;
            w.add_i64("link_label", &[label.len()], &label)?;
            w.add_i64("link_ptr", &[ptr.len()], &ptr)?;
        }
        _ => return Err(bad(format!("its targets are not {:?}", set.task()))),
    }
    w.finish()?;
    if let Some(split) = &ds.official_split {
        let json =
            serde_json::json!({ "train": split.train, "val": split.val, "test": split.test });
        let target = dir.join(set.split_json());
        let tmp = target.with_extension("json.partial");
        std::fs::write(&tmp, json.to_string()).map_err(|e| GraphError::io(&tmp, e))?;
        std::fs::rename(&tmp, &target).map_err(|e| GraphError::io(&target, e))?;
    }
    Ok(())
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
