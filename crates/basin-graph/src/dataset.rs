//! Datasets: many labelled graphs ([`GraphDataset`]) or one graph with node labels
//! ([`NodeDataset`]), their targets and summary statistics.

use ndarray::Array2;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::csr::Csr;
use crate::error::{GraphError, Result};
use crate::graph::Graph;
use basin_data::split::Split;

/// What a graph-level dataset predicts.
#[derive(Clone, Debug, PartialEq)]
pub enum Targets {
    /// One class per graph, `0..num_classes`.
    Classes {
        /// Class of each graph.
        labels: Vec<usize>,
        /// Number of classes.
        num_classes: usize,
    },
    /// Several binary labels per graph, `[G, C]` (e.g. Peptides-func's 10 functions).
    MultiLabel(Array2<f32>),
    /// A class per node, held in each graph's `node_labels` (`0..num_classes`; SBM PATTERN and
    /// CLUSTER).
    NodeClasses {
        /// Number of classes.
        num_classes: usize,
    },
    /// Several real targets per graph, `[G, T]` (e.g. Peptides-struct's 11 properties).
    Regression(Array2<f32>),
    /// Labelled node pairs per graph (e.g. PCQM-Contact's atom contacts).
    Links(Vec<LinkTargets>),
}

/// The labelled node pairs of one graph (link prediction).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkTargets {
    /// Node pairs `[a, b]`, local to the graph.
    pub pairs: Vec<[u32; 2]>,
    /// Their labels, 0 or 1, one per pair.
    pub labels: Vec<f32>,
}

impl Targets {
    /// Number of graph-level targets (`None` for node-level targets).
    pub fn graph_count(&self) -> Option<usize> {
        match self {
            Self::Classes { labels, .. } => Some(labels.len()),
            Self::MultiLabel(y) | Self::Regression(y) => Some(y.nrows()),
            Self::Links(l) => Some(l.len()),
            Self::NodeClasses { .. } => None,
        }
    }

    /// Class labels, if single-label per graph.
    pub fn classes(&self) -> Option<&[usize]> {
        match self {
            Self::Classes { labels, .. } => Some(labels),
            _ => None,
        }
    }
}

/// Many graphs with one target each (TU, Peptides-func).
#[derive(Clone, Debug, PartialEq)]
pub struct GraphDataset {
    /// Dataset name (e.g. "MUTAG").
    pub name: String,
    /// The graphs.
    pub graphs: Vec<Graph>,
    /// Their targets.
    pub targets: Targets,
    /// For class targets: the raw label value of each class (class `i` was `class_values[i]`
    /// in the files, e.g. MUTAG's −1 and 1).
    pub class_values: Vec<i64>,
    /// The dataset's official split, if it has one (LRGB).
    pub official_split: Option<Split>,
    /// How the node features were made where they are not the published ones (a TU set with
    /// neither node labels nor attributes gets its nodes' one-hot degree: see
    /// [`crate::tu::NodeFeatures`]); `None` when they are as published. Reports print it.
    pub node_features: Option<String>,
}

impl GraphDataset {
    /// Checks every graph and that there is one target per graph (or per node).
    pub fn validate(&self) -> Result<()> {
        if let Some(t) = self.targets.graph_count()
            && t != self.graphs.len()
        {
            return Err(GraphError::invalid(
                "graph dataset",
                format!("{t} targets for {} graphs", self.graphs.len()),
            ));
        }
        if let Targets::NodeClasses { num_classes } = self.targets {
            for (i, g) in self.graphs.iter().enumerate() {
                let ok = g
                    .node_labels
                    .as_ref()
                    .is_some_and(|l| l.iter().all(|&c| c >= 0 && (c as usize) < num_classes));
                if !ok {
                    return Err(GraphError::invalid(
                        format!("graph {i}"),
                        format!("node-level targets need node labels in 0..{num_classes}"),
                    ));
                }
            }
        }
        if let Targets::Links(links) = &self.targets {
            for (i, (t, g)) in links.iter().zip(&self.graphs).enumerate() {
                let n = g.num_nodes() as u32;
                if t.pairs.len() != t.labels.len() || t.pairs.iter().flatten().any(|&v| v >= n) {
                    return Err(GraphError::invalid(
                        format!("graph {i}"),
                        format!("link targets need one label per pair and nodes in 0..{n}"),
                    ));
                }
            }
        }
        for (i, g) in self.graphs.iter().enumerate() {
            g.validate()
                .map_err(|e| GraphError::invalid(format!("graph {i}"), e.to_string()))?;
        }
        Ok(())
    }

    /// The graphs `ids`, in that order, with their targets; the result has no official split.
    /// An id out of range is an error.
    pub fn select(&self, ids: &[u32]) -> Result<Self> {
        let n = self.graphs.len();
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= n) {
            return Err(GraphError::invalid(
                format!("{} graph ids", self.name),
                format!("id {bad} is out of range (the dataset has {n} graphs)"),
            ));
        }
        let rows: Vec<usize> = ids.iter().map(|&i| i as usize).collect();
        let graphs = rows.iter().map(|&i| self.graphs[i].clone()).collect();
        let targets = match &self.targets {
            Targets::Classes {
                labels,
                num_classes,
            } => Targets::Classes {
                labels: rows.iter().map(|&i| labels[i]).collect(),
                num_classes: *num_classes,
            },
            Targets::MultiLabel(y) => Targets::MultiLabel(y.select(ndarray::Axis(0), &rows)),
            Targets::Regression(y) => Targets::Regression(y.select(ndarray::Axis(0), &rows)),
            Targets::Links(l) => Targets::Links(rows.iter().map(|&i| l[i].clone()).collect()),
            Targets::NodeClasses { num_classes } => Targets::NodeClasses {
                num_classes: *num_classes,
            },
        };
        Ok(Self {
            name: self.name.clone(),
            graphs,
            targets,
            class_values: self.class_values.clone(),
            official_split: None,
            node_features: self.node_features.clone(),
        })
    }

    /// Summary statistics (what `basin data inspect` prints).
    pub fn stats(&self) -> DatasetStats {
        let sizes: Vec<usize> = self.graphs.iter().map(Graph::num_nodes).collect();
        let nodes: usize = sizes.iter().sum();
        let edges: usize = self.graphs.par_iter().map(|g| g.adjacency.nnz()).sum();
        let undirected: usize = self
            .graphs
            .par_iter()
            .map(|g| g.adjacency.num_undirected_edges())
            .sum();
        let g = self.graphs.len().max(1) as f64;
        let (classes, class_counts) = match &self.targets {
            Targets::Classes {
                labels,
                num_classes,
            } => (*num_classes, class_counts(labels, *num_classes)),
            Targets::MultiLabel(y) => (
                y.ncols(),
                (0..y.ncols())
                    .map(|c| y.column(c).iter().filter(|&&v| v > 0.5).count())
                    .collect(),
            ),
            Targets::Regression(y) => (y.ncols(), Vec::new()),
            Targets::Links(l) => (
                2,
                (0..2)
                    .map(|c| {
                        l.iter()
                            .flat_map(|t| &t.labels)
                            .filter(|&&v| (v > 0.5) == (c == 1))
                            .count()
                    })
                    .collect(),
            ),
            Targets::NodeClasses { num_classes } => {
                let mut counts = vec![0usize; *num_classes];
                for l in self.graphs.iter().filter_map(|g| g.node_labels.as_ref()) {
                    for &c in l {
                        if c >= 0 && (c as usize) < *num_classes {
                            counts[c as usize] += 1;
                        }
                    }
                }
                (*num_classes, counts)
            }
        };
        DatasetStats {
            name: self.name.clone(),
            kind: "graph".into(),
            graphs: self.graphs.len(),
            nodes,
            avg_nodes: nodes as f64 / g,
            min_nodes: sizes.iter().copied().min().unwrap_or(0),
            max_nodes: sizes.iter().copied().max().unwrap_or(0),
            directed_edges: edges,
            undirected_edges: undirected,
            avg_edges: undirected as f64 / g,
            node_features: self.graphs.first().map_or(0, |g| g.node_features.ncols()),
            edge_features: self
                .graphs
                .first()
                .and_then(|g| g.edge_features.as_ref())
                .map_or(0, |f| f.ncols()),
            classes,
            multi_label: matches!(self.targets, Targets::MultiLabel(_)),
            class_counts,
            class_values: self.class_values.clone(),
            labelled_nodes: None,
            anomaly_ratio: None,
            relations: Vec::new(),
            splits: self
                .official_split
                .iter()
                .map(|s| s.sizes())
                .collect::<Vec<_>>(),
        }
    }
}

/// A named relation subgraph of a multi-relational node-level dataset (e.g. YelpChi's R-U-R).
#[derive(Clone, Debug, PartialEq)]
pub struct Relation {
    /// Relation name as stored (e.g. "net_rur").
    pub name: String,
    /// Its adjacency over all nodes.
    pub adjacency: Csr,
}

/// One graph with a label per node (anomaly detection, SBM node classification).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeDataset {
    /// Dataset name.
    pub name: String,
    /// The (homogeneous) graph with node features.
    pub graph: Graph,
    /// Relation subgraphs, if the dataset has several (empty otherwise).
    pub relations: Vec<Relation>,
    /// Node labels `0..num_classes` (for anomaly sets 1 = anomaly); unlabelled nodes hold 0.
    pub labels: Vec<usize>,
    /// Number of classes.
    pub num_classes: usize,
    /// The nodes that carry a label, ascending (all nodes unless the dataset says otherwise,
    /// e.g. Amazon's first 3305 users are unlabelled).
    pub labelled: Vec<u32>,
    /// Published splits, if any (e.g. Tolokers' ten masks).
    pub official_splits: Vec<Split>,
}

impl NodeDataset {
    /// Checks labels against the graph.
    pub fn validate(&self) -> Result<()> {
        self.graph.validate()?;
        let n = self.graph.num_nodes();
        if self.labels.len() != n {
            return Err(GraphError::invalid(
                "node dataset",
                format!("{} labels for {n} nodes", self.labels.len()),
            ));
        }
        if let Some(&l) = self.labels.iter().find(|&&l| l >= self.num_classes) {
            return Err(GraphError::invalid(
                "node dataset",
                format!("label {l} >= {} classes", self.num_classes),
            ));
        }
        if self.labelled.iter().any(|&v| v as usize >= n) {
            return Err(GraphError::invalid(
                "node dataset",
                "a labelled node id is out of range",
            ));
        }
        for r in &self.relations {
            if r.adjacency.num_nodes() != n {
                return Err(GraphError::invalid(
                    "node dataset",
                    format!(
                        "relation {} has {} nodes, not {n}",
                        r.name,
                        r.adjacency.num_nodes()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Labels of the labelled nodes, in `labelled` order.
    pub fn labelled_labels(&self) -> Vec<usize> {
        self.labelled
            .iter()
            .map(|&v| self.labels[v as usize])
            .collect()
    }

    /// Summary statistics (what `basin data inspect` prints).
    pub fn stats(&self) -> DatasetStats {
        let a = &self.graph.adjacency;
        let n = a.num_nodes();
        let labels = self.labelled_labels();
        let counts = class_counts(&labels, self.num_classes);
        let anomaly_ratio = (self.num_classes == 2 && !labels.is_empty())
            .then(|| counts[1] as f64 / labels.len() as f64);
        let undirected = a.num_undirected_edges();
        DatasetStats {
            name: self.name.clone(),
            kind: "node".into(),
            graphs: 1,
            nodes: n,
            avg_nodes: n as f64,
            min_nodes: n,
            max_nodes: n,
            directed_edges: a.nnz(),
            undirected_edges: undirected,
            avg_edges: undirected as f64,
            node_features: self.graph.node_features.ncols(),
            edge_features: self.graph.edge_features.as_ref().map_or(0, |f| f.ncols()),
            classes: self.num_classes,
            multi_label: false,
            class_counts: counts,
            class_values: (0..self.num_classes as i64).collect(),
            labelled_nodes: Some(self.labelled.len()),
            anomaly_ratio,
            relations: self
                .relations
                .iter()
                .map(|r| (r.name.clone(), r.adjacency.nnz()))
                .collect(),
            splits: self.official_splits.iter().map(Split::sizes).collect(),
        }
    }
}

/// Per-class counts of `labels`.
pub fn class_counts(labels: &[usize], num_classes: usize) -> Vec<usize> {
    let mut c = vec![0; num_classes];
    for &l in labels {
        if l < num_classes {
            c[l] += 1;
        }
    }
    c
}

/// A dataset's statistics, as `basin data inspect` prints them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetStats {
    /// Dataset name.
    pub name: String,
    /// "graph" (many graphs, one target each) or "node" (one graph, a label per node).
    pub kind: String,
    /// Number of graphs.
    pub graphs: usize,
    /// Total nodes.
    pub nodes: usize,
    /// Mean nodes per graph.
    pub avg_nodes: f64,
    /// Smallest graph.
    pub min_nodes: usize,
    /// Largest graph.
    pub max_nodes: usize,
    /// Stored directed entries (both directions of an undirected edge count).
    pub directed_edges: usize,
    /// Unordered node pairs joined by an edge (self loops excluded).
    pub undirected_edges: usize,
    /// Mean undirected edges per graph (the published "avg edges").
    pub avg_edges: f64,
    /// Node feature width.
    pub node_features: usize,
    /// Edge feature width.
    pub edge_features: usize,
    /// Number of classes (labels for multi-label sets).
    pub classes: usize,
    /// Whether targets are multi-label.
    pub multi_label: bool,
    /// Items per class (positives per label for multi-label sets; nodes for node-level
    /// targets; labelled nodes only).
    pub class_counts: Vec<usize>,
    /// Raw label value of each class.
    pub class_values: Vec<i64>,
    /// Node-level sets: how many nodes carry a label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labelled_nodes: Option<usize>,
    /// Node-level binary sets: fraction of labelled nodes in class 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anomaly_ratio: Option<f64>,
    /// Relation subgraphs and their stored entries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub relations: Vec<(String, usize)>,
    /// Sizes `[train, val, test]` of the official splits.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<[usize; 3]>,
}
