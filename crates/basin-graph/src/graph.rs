//! One graph: its adjacency, node features, optional edge features and raw labels.

use ndarray::Array2;

use crate::csr::Csr;
use crate::error::{GraphError, Result};

/// One graph: adjacency, node features `[N, F]` (F may be 0), optional edge features `[E, P]`
/// aligned with the CSR entries, optional raw node and edge labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// The adjacency.
    pub adjacency: Csr,
    /// Node features `[N, F]`.
    pub node_features: Array2<f32>,
    /// Edge features `[E, P]`, row `i` belongs to CSR entry `i`.
    pub edge_features: Option<Array2<f32>>,
    /// Raw integer node labels (e.g. atom types), one per node.
    pub node_labels: Option<Vec<i64>>,
    /// Raw integer edge labels, one per CSR entry.
    pub edge_labels: Option<Vec<i64>>,
}

impl Graph {
    /// A graph with the given adjacency and node features and nothing else; checks shapes.
    pub fn new(adjacency: Csr, node_features: Array2<f32>) -> Result<Self> {
        let g = Self {
            adjacency,
            node_features,
            edge_features: None,
            node_labels: None,
            edge_labels: None,
        };
        g.validate()?;
        Ok(g)
    }

    /// A featureless graph (`F = 0`).
    pub fn structure_only(adjacency: Csr) -> Self {
        let n = adjacency.num_nodes();
        Self {
            adjacency,
            node_features: Array2::zeros((n, 0)),
            edge_features: None,
            node_labels: None,
            edge_labels: None,
        }
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.adjacency.num_nodes()
    }

    /// Checks that every per-node and per-edge array has the right length.
    pub fn validate(&self) -> Result<()> {
        let (n, e) = (self.num_nodes(), self.adjacency.nnz());
        let bad = |m: String| Err(GraphError::invalid("graph", m));
        if self.node_features.nrows() != n {
            return bad(format!(
                "{} feature rows for {n} nodes",
                self.node_features.nrows()
            ));
        }
        if let Some(ef) = &self.edge_features
            && ef.nrows() != e
        {
            return bad(format!("{} edge-feature rows for {e} edges", ef.nrows()));
        }
        if let Some(l) = &self.node_labels
            && l.len() != n
        {
            return bad(format!("{} node labels for {n} nodes", l.len()));
        }
        if let Some(l) = &self.edge_labels
            && l.len() != e
        {
            return bad(format!("{} edge labels for {e} edges", l.len()));
        }
        Ok(())
    }

    /// The subgraph induced by `nodes` (distinct, local id `i` = `nodes[i]`), with features and
    /// labels carried along.
    pub fn induced(&self, nodes: &[u32]) -> Result<Self> {
        let (adjacency, pos) = self.adjacency.induced(nodes)?;
        let idx: Vec<usize> = nodes.iter().map(|&v| v as usize).collect();
        Ok(Self {
            adjacency,
            node_features: self.node_features.select(ndarray::Axis(0), &idx),
            edge_features: self
                .edge_features
                .as_ref()
                .map(|f| f.select(ndarray::Axis(0), &pos)),
            node_labels: self
                .node_labels
                .as_ref()
                .map(|l| idx.iter().map(|&i| l[i]).collect()),
            edge_labels: self
                .edge_labels
                .as_ref()
                .map(|l| pos.iter().map(|&i| l[i]).collect()),
        })
    }

    /// The first `max_nodes` nodes and the edges among them (the reference's truncation of
    /// graphs above the node cap); the graph itself when it is small enough.
    pub fn truncated(&self, max_nodes: usize) -> Self {
        if self.num_nodes() <= max_nodes {
            return self.clone();
        }
        let nodes: Vec<u32> = (0..max_nodes as u32).collect();
        // Ids are distinct and in range, so `induced` cannot fail here.
        self.induced(&nodes).unwrap_or_else(|_| self.clone())
    }

    /// The graph with self loops added (zero edge features/labels `-1` for the new entries).
    pub fn with_self_loops(&self) -> Self {
        let adjacency = self.adjacency.with_self_loops();
        if adjacency.nnz() == self.adjacency.nnz() {
            return self.clone();
        }
        // Map new entries back to old ones: the new row is the old row with `r` inserted.
        let mut old_pos: Vec<Option<usize>> = Vec::with_capacity(adjacency.nnz());
        for r in 0..self.num_nodes() {
            let had_loop = self.adjacency.contains(r, r as u32);
            let mut j = self.adjacency.indptr()[r];
            for &c in adjacency.row(r) {
                if c as usize == r && !had_loop {
                    old_pos.push(None);
                } else {
                    old_pos.push(Some(j));
                    j += 1;
                }
            }
        }
        let edge_features = self.edge_features.as_ref().map(|f| {
            let mut out = Array2::zeros((adjacency.nnz(), f.ncols()));
            for (i, p) in old_pos.iter().enumerate() {
                if let Some(p) = p {
                    out.row_mut(i).assign(&f.row(*p));
                }
            }
            out
        });
        let edge_labels = self
            .edge_labels
            .as_ref()
            .map(|l| old_pos.iter().map(|p| p.map_or(-1, |p| l[p])).collect());
        Self {
            adjacency,
            node_features: self.node_features.clone(),
            edge_features,
            node_labels: self.node_labels.clone(),
            edge_labels,
        }
    }
}
