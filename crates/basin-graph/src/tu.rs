//! The TU Dortmund text format (`DS_A.txt`, `DS_graph_indicator.txt`, `DS_graph_labels.txt`,
//! and optionally `DS_node_labels.txt`, `DS_node_attributes.txt`, `DS_edge_labels.txt`,
//! `DS_edge_attributes.txt`), read the way PyTorch Geometric's `TUDataset(use_node_attr=True,
//! use_edge_attr=True)` reads it:
//!
//! - node features = node attributes, then the one-hot node labels (each label column shifted
//!   so its minimum is 0, one-hot over `max + 1` values);
//! - edge features = edge attributes, then the one-hot edge labels, aligned with CSR entries;
//! - graph classes = the sorted distinct values of `DS_graph_labels.txt` (MUTAG's −1/1 become
//!   0/1, PROTEINS' 1/2 become 0/1).
//!
//! Every line of `DS_A.txt` is one directed entry (the files list both directions of each
//! undirected edge). Unlike PyG, self loops and duplicates are kept as stored.
//!
//! The collection's social-network sets (IMDB, REDDIT, COLLAB) publish neither node labels nor
//! attributes. Such a set gets its nodes' one-hot degree, as GIN (Xu et al., 2019, Section 7)
//! and PyG's `OneHotDegree` give them ([`NodeFeatures`]), and the dataset says so
//! ([`GraphDataset::node_features`]), so that every task, table and baseline trains on it.

use std::path::{Path, PathBuf};

use ndarray::{Array2, Axis, concatenate};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::text::{Table, parse_table, read};
use crate::{Csr, Graph, GraphDataset, Targets};

/// The highest degree [`NodeFeatures::Degree`] encodes on its own; nodes of higher degree share
/// its last column (PyG's `OneHotDegree(max_degree)` refuses them instead).
pub const MAX_DEGREE: usize = 64;

/// What the nodes of a TU set carry as features.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeFeatures {
    /// The published features (attributes, then one-hot labels; [`TuOptions`]); for a set
    /// published with neither, the one-hot degree ([`NodeFeatures::Degree`]).
    #[default]
    Auto,
    /// The published features only: a set with neither labels nor attributes is refused.
    Published,
    /// Each node's degree (its stored entries in `DS_A.txt`), one-hot over `0..=d` where `d` is
    /// the largest degree of the set capped at [`MAX_DEGREE`], in place of the published ones.
    Degree,
    /// One feature, 1, for every node (PyG's `Constant`), in place of the published ones.
    Constant,
}

/// Which optional TU files become features.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuOptions {
    /// Put `DS_node_attributes.txt` into the node features (PyG `use_node_attr=True`).
    pub node_attributes: bool,
    /// Put the one-hot `DS_node_labels.txt` into the node features.
    pub node_labels_one_hot: bool,
    /// Put `DS_edge_attributes.txt` into the edge features (PyG `use_edge_attr=True`).
    pub edge_attributes: bool,
    /// Put the one-hot `DS_edge_labels.txt` into the edge features.
    pub edge_labels_one_hot: bool,
    /// What the nodes carry (default: the published features, else the one-hot degree).
    pub node_features: NodeFeatures,
}

impl Default for TuOptions {
    fn default() -> Self {
        Self {
            node_attributes: true,
            node_labels_one_hot: true,
            edge_attributes: true,
            edge_labels_one_hot: true,
            node_features: NodeFeatures::Auto,
        }
    }
}

/// Loads the TU dataset in `dir`, named after the folder (`.../MUTAG` → `MUTAG_A.txt`, ...);
/// if no `<folder>_A.txt` exists, the single `*_A.txt` in the folder names it.
pub fn load_tu(dir: &Path) -> Result<GraphDataset> {
    load_tu_with(dir, None, &TuOptions::default())
}

/// Finds the dataset name of a TU folder: its own name if `<name>_A.txt` exists, else the
/// prefix of the only `*_A.txt` file.
pub fn tu_name(dir: &Path) -> Result<String> {
    if let Some(n) = dir.file_name().and_then(|n| n.to_str())
        && dir.join(format!("{n}_A.txt")).is_file()
    {
        return Ok(n.to_string());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| GraphError::io(dir, e))?;
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|f| f.strip_suffix("_A.txt"))
                .map(String::from)
        })
        .collect();
    names.sort();
    match names.len() {
        1 => Ok(names.remove(0)),
        0 => Err(GraphError::missing_file(
            dir.join("<name>_A.txt"),
            "the TU adjacency list; no *_A.txt in this folder",
        )),
        _ => Err(GraphError::format(
            dir,
            format!("several TU datasets in one folder: {names:?}; pass the name"),
        )),
    }
}

fn file(dir: &Path, name: &str, suffix: &str) -> PathBuf {
    dir.join(format!("{name}_{suffix}.txt"))
}

fn optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(GraphError::io(path, e)),
    }
}

fn expect_rows<T>(path: &Path, t: &Table<T>, rows: usize, what: &str) -> Result<()> {
    GraphError::check_count(path, what, rows, t.rows)
}

/// Widest one-hot block accepted (a label range beyond this is a malformed file, not a
/// feature).
const MAX_ONE_HOT: i64 = 1 << 16;

/// One-hot encodes each column of an integer table (shifted to start at 0), concatenated.
fn one_hot(path: &Path, t: &Table<i64>) -> Result<Array2<f32>> {
    let mut blocks = Vec::with_capacity(t.cols);
    for c in 0..t.cols {
        let col = (0..t.rows).map(|r| t.values[r * t.cols + c]);
        let min = col.clone().min().unwrap_or(0);
        let max = col.clone().max().unwrap_or(0);
        if max.saturating_sub(min) >= MAX_ONE_HOT {
            return Err(GraphError::format(
                path,
                format!(
                    "labels span {min}..={max}: expected at most {MAX_ONE_HOT} distinct values for a one-hot encoding"
                ),
            ));
        }
        let width = (max - min + 1) as usize;
        let mut m = Array2::<f32>::zeros((t.rows, width));
        for (r, v) in col.enumerate() {
            m[[r, (v - min) as usize]] = 1.0;
        }
        blocks.push(m);
    }
    Ok(hcat(t.rows, blocks))
}

fn table_to_array(t: Table<f32>) -> Array2<f32> {
    Array2::from_shape_vec((t.rows, t.cols), t.values).unwrap_or_else(|_| Array2::zeros((0, 0)))
}

/// Concatenates feature blocks column-wise (`rows` rows even when there are none).
fn hcat(rows: usize, blocks: Vec<Array2<f32>>) -> Array2<f32> {
    if blocks.is_empty() {
        return Array2::zeros((rows, 0));
    }
    let views: Vec<_> = blocks.iter().map(|b| b.view()).collect();
    concatenate(Axis(1), &views).unwrap_or_else(|_| Array2::zeros((rows, 0)))
}

/// A side's feature blocks and raw labels ([`side_features`]).
type SideFeatures = (Vec<Array2<f32>>, Option<Vec<i64>>);

/// The two sides of a TU dataset that may carry features.
#[derive(Clone, Copy)]
enum Side {
    Node,
    Edge,
}

/// The optional `<name>_<side>_attributes.txt` and `<name>_<side>_labels.txt` of a side, each
/// checked for `rows` lines: the feature blocks (the attributes, then the labels one-hot, as
/// `opts` asks) and the raw labels (first column).
fn side_features(
    (dir, name): (&Path, &str),
    side: Side,
    opts: &TuOptions,
    rows: usize,
) -> Result<SideFeatures> {
    let (side, attributes, one_hot_labels, per) = match side {
        Side::Node => (
            "node",
            opts.node_attributes,
            opts.node_labels_one_hot,
            "lines (one per node in graph_indicator)",
        ),
        Side::Edge => (
            "edge",
            opts.edge_attributes,
            opts.edge_labels_one_hot,
            "lines (one per line of A.txt)",
        ),
    };
    let mut blocks = Vec::new();
    let attributes_path = file(dir, name, &format!("{side}_attributes"));
    if attributes && let Some(b) = optional(&attributes_path)? {
        let t: Table<f32> = parse_table(&attributes_path, &b, None)?;
        expect_rows(&attributes_path, &t, rows, per)?;
        blocks.push(table_to_array(t));
    }
    let labels_path = file(dir, name, &format!("{side}_labels"));
    let Some(b) = optional(&labels_path)? else {
        return Ok((blocks, None));
    };
    let t: Table<i64> = parse_table(&labels_path, &b, None)?;
    expect_rows(&labels_path, &t, rows, per)?;
    if one_hot_labels {
        blocks.push(one_hot(&labels_path, &t)?);
    }
    let raw = (0..rows).map(|r| t.values[r * t.cols]).collect();
    Ok((blocks, Some(raw)))
}

/// Checks that every 1-based id of the table read from `path` is in `1..=hi`; an error names
/// the line and `what`.
fn check_ids(path: &Path, t: &Table<i64>, hi: usize, what: &str) -> Result<()> {
    match t
        .values
        .iter()
        .enumerate()
        .find(|(_, v)| **v < 1 || **v > hi as i64)
    {
        Some((i, &v)) => {
            let line = i / t.cols.max(1) + 1;
            Err(GraphError::out_of_range(
                path,
                line,
                what,
                v,
                (1, hi as i64),
            ))
        }
        None => Ok(()),
    }
}

/// Loads a TU dataset with an explicit `name` (else [`tu_name`]) and feature options.
pub fn load_tu_with(dir: &Path, name: Option<&str>, opts: &TuOptions) -> Result<GraphDataset> {
    let name = match name {
        Some(n) => n.to_string(),
        None => tu_name(dir)?,
    };
    // The mandatory files.
    let gi_path = file(dir, &name, "graph_indicator");
    let indicator: Table<i64> = parse_table(&gi_path, &read(&gi_path)?, Some(1))?;
    let n = indicator.rows;
    let gl_path = file(dir, &name, "graph_labels");
    let graph_labels: Table<i64> = parse_table(&gl_path, &read(&gl_path)?, Some(1))?;
    let num_graphs = graph_labels.rows;
    let what = format!("graph id (graph_labels has {num_graphs} lines)");
    check_ids(&gi_path, &indicator, num_graphs, &what)?;
    let a_path = file(dir, &name, "A");
    let a: Table<i64> = parse_table(&a_path, &read(&a_path)?, Some(2))?;
    let m = a.rows;
    check_ids(
        &a_path,
        &a,
        n,
        &format!("node id (graph_indicator has {n} lines)"),
    )?;

    // Node → (graph, local id): local ids follow global order within each graph.
    let graph_of: Vec<usize> = indicator.values.iter().map(|&g| g as usize - 1).collect();
    let mut sizes = vec![0usize; num_graphs];
    let mut local = vec![0u32; n];
    for (v, &g) in graph_of.iter().enumerate() {
        local[v] = sizes[g] as u32;
        sizes[g] += 1;
    }
    // Global node ids of each graph.
    let mut nodes_of: Vec<Vec<usize>> = sizes.iter().map(|&s| Vec::with_capacity(s)).collect();
    for (v, &g) in graph_of.iter().enumerate() {
        nodes_of[g].push(v);
    }
    // Edges bucketed by graph, in file order.
    let mut edges_of: Vec<Vec<usize>> = vec![Vec::new(); num_graphs];
    for e in 0..m {
        let (s, t) = (
            a.values[2 * e] as usize - 1,
            a.values[2 * e + 1] as usize - 1,
        );
        if graph_of[s] != graph_of[t] {
            return Err(GraphError::Parse {
                path: a_path,
                line: e + 1,
                expected: "an edge inside one graph".into(),
                found: format!(
                    "{}, {} (graphs {} and {})",
                    s + 1,
                    t + 1,
                    graph_of[s] + 1,
                    graph_of[t] + 1
                ),
            });
        }
        edges_of[graph_of[s]].push(e);
    }

    // Optional per-node and per-edge files.
    let (node_blocks, node_labels_raw) = side_features((dir, &name), Side::Node, opts, n)?;
    let published = !node_blocks.is_empty();
    let node_features = hcat(n, node_blocks);
    let (edge_blocks, edge_labels_raw) = side_features((dir, &name), Side::Edge, opts, m)?;
    let edge_features = (!edge_blocks.is_empty()).then(|| hcat(m, edge_blocks));

    // Classes.
    let mut class_values = graph_labels.values.clone();
    class_values.sort_unstable();
    class_values.dedup();
    let labels: Vec<usize> = graph_labels
        .values
        .iter()
        .map(|v| class_values.binary_search(v).unwrap_or(0))
        .collect();

    // Graphs, in parallel.
    let graphs: Vec<Graph> = (0..num_graphs)
        .into_par_iter()
        .map(|g| {
            let nodes = &nodes_of[g];
            let edges = &edges_of[g];
            let src: Vec<u32> = edges
                .iter()
                .map(|&e| local[a.values[2 * e] as usize - 1])
                .collect();
            let dst: Vec<u32> = edges
                .iter()
                .map(|&e| local[a.values[2 * e + 1] as usize - 1])
                .collect();
            let (adjacency, perm) = Csr::from_edges(nodes.len(), &src, &dst)?;
            let order: Vec<usize> = perm.iter().map(|&p| edges[p]).collect();
            Ok(Graph {
                adjacency,
                node_features: node_features.select(Axis(0), nodes),
                edge_features: edge_features.as_ref().map(|f| f.select(Axis(0), &order)),
                node_labels: node_labels_raw
                    .as_ref()
                    .map(|l| nodes.iter().map(|&v| l[v]).collect()),
                edge_labels: edge_labels_raw
                    .as_ref()
                    .map(|l| order.iter().map(|&e| l[e]).collect()),
            })
        })
        .collect::<Result<_>>()?;

    let ds = GraphDataset {
        name,
        graphs,
        targets: Targets::Classes {
            labels,
            num_classes: class_values.len(),
        },
        class_values,
        official_split: None,
        node_features: None,
    };
    match (opts.node_features, published) {
        (NodeFeatures::Auto, true) | (NodeFeatures::Published, true) => Ok(ds),
        (NodeFeatures::Auto, false) => {
            let mut ds = NodeFeatures::Degree.apply(ds)?;
            if let Some(made) = ds.node_features.as_mut() {
                made.push_str(": the set publishes no node labels or attributes");
            }
            Ok(ds)
        }
        (chosen, _) => chosen.apply(ds),
    }
}

impl NodeFeatures {
    /// `ds` with its nodes' features made as `self` says ([`GraphDataset::node_features`] names
    /// them); `Auto` leaves it as loaded, `Published` refuses a set whose features were made.
    pub fn apply(self, mut ds: GraphDataset) -> Result<GraphDataset> {
        match self {
            Self::Auto => {}
            Self::Published => {
                let none = ds
                    .graphs
                    .first()
                    .is_some_and(|g| g.node_features.ncols() == 0);
                if none || ds.node_features.is_some() {
                    return Err(GraphError::invalid(
                        format!("{} node features", ds.name),
                        "the set publishes no node labels or attributes; choose node_features = \"degree\" or \"constant\"",
                    ));
                }
            }
            Self::Degree => {
                let degree = |g: &Graph| -> Vec<usize> {
                    (0..g.num_nodes())
                        .map(|v| g.adjacency.row(v).len())
                        .collect()
                };
                let largest = ds.graphs.iter().flat_map(degree).max().unwrap_or(0);
                let top = largest.min(MAX_DEGREE);
                for g in &mut ds.graphs {
                    let d = degree(g);
                    let mut f = Array2::zeros((d.len(), top + 1));
                    for (v, &k) in d.iter().enumerate() {
                        f[[v, k.min(top)]] = 1.0;
                    }
                    g.node_features = f;
                }
                let capped = if largest > top {
                    ", higher degrees in the last column"
                } else {
                    ""
                };
                ds.node_features = Some(format!("one-hot node degree (0..={top}{capped})"));
            }
            Self::Constant => {
                for g in &mut ds.graphs {
                    g.node_features = Array2::ones((g.num_nodes(), 1));
                }
                ds.node_features = Some("one constant feature per node".to_owned());
            }
        }
        Ok(ds)
    }
}

/// Writes `ds` in the TU text format into `dir` as `<name>_*.txt` (node attributes = the node
/// features, when `F > 0` and there are no raw node labels; raw node/edge labels when
/// present). Class `i` is written as `class_values[i]`. Used for round-trip tests and to hand
/// generated datasets to other tools.
pub fn write_tu(ds: &GraphDataset, dir: &Path) -> Result<()> {
    use std::fmt::Write as _;
    let io = |p: &Path, e| GraphError::io(p, e);
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let labels = ds.targets.classes().ok_or_else(|| {
        GraphError::invalid("write_tu", "only single-label class targets can be written")
    })?;
    let [mut a, mut gi, mut gl, mut nl, mut na, mut el, mut ea] =
        std::array::from_fn::<String, 7, _>(|_| String::new());
    let mut offset = 0usize;
    for (gidx, g) in ds.graphs.iter().enumerate() {
        let value = ds
            .class_values
            .get(labels[gidx])
            .copied()
            .unwrap_or(labels[gidx] as i64);
        let _ = writeln!(&mut gl, "{value}");
        for v in 0..g.num_nodes() {
            let _ = writeln!(&mut gi, "{}", gidx + 1);
            if let Some(l) = &g.node_labels {
                let _ = writeln!(&mut nl, "{}", l[v]);
            } else if g.node_features.ncols() > 0 {
                let row: Vec<String> = g
                    .node_features
                    .row(v)
                    .iter()
                    .map(|x| format!("{x}"))
                    .collect();
                let _ = writeln!(&mut na, "{}", row.join(", "));
            }
        }
        for (i, (r, c, _)) in g.adjacency.iter().enumerate() {
            let _ = writeln!(
                &mut a,
                "{}, {}",
                offset + r as usize + 1,
                offset + c as usize + 1
            );
            if let Some(l) = &g.edge_labels {
                let _ = writeln!(&mut el, "{}", l[i]);
            } else if let Some(f) = &g.edge_features {
                let row: Vec<String> = f.row(i).iter().map(|x| format!("{x}")).collect();
                let _ = writeln!(&mut ea, "{}", row.join(", "));
            }
        }
        offset += g.num_nodes();
    }
    let name = &ds.name;
    for (suffix, body) in [
        ("A", &a),
        ("graph_indicator", &gi),
        ("graph_labels", &gl),
        ("node_labels", &nl),
        ("node_attributes", &na),
        ("edge_labels", &el),
        ("edge_attributes", &ea),
    ] {
        if body.is_empty() && !matches!(suffix, "A" | "graph_indicator" | "graph_labels") {
            continue;
        }
        let p = file(dir, name, suffix);
        std::fs::write(&p, body.as_bytes()).map_err(|e| io(&p, e))?;
    }
    Ok(())
}
