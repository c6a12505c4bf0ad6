//! The CSR adjacency to and from other forms: PyG's edge index, dense arrays, sprs and
//! petgraph.

use ndarray::Array2;

use super::Csr;
use crate::error::{GraphError, Result};

impl Csr {
    /// `[2, E]` edge index `[rows; cols]` = `[source; target]` in PyG's convention.
    pub fn edge_index(&self) -> Array2<i64> {
        let mut out = Array2::zeros((2, self.nnz()));
        for (i, (r, c, _)) in self.iter().enumerate() {
            out[[0, i]] = r as i64;
            out[[1, i]] = c as i64;
        }
        out
    }

    /// `[2, E]` edge index for `basin_core::Structure`'s sparse form: row 0 = key (`c`), row 1 =
    /// query (`r`), since entry `(q, k)` lets `q` attend `k`.
    pub fn attention_edge_index(&self) -> Array2<i64> {
        let mut out = self.edge_index();
        out.invert_axis(ndarray::Axis(0));
        out
    }

    /// Dense `[n, n]` matrix (duplicates add up).
    pub fn to_dense(&self) -> Array2<f32> {
        let mut a = Array2::zeros((self.num_nodes, self.num_nodes));
        for (r, c, w) in self.iter() {
            a[[r as usize, c as usize]] += w;
        }
        a
    }

    /// Converts to a `sprs` CSR matrix (weights, or ones).
    pub fn to_sprs(&self) -> sprs::CsMat<f32> {
        let data = self
            .weights
            .clone()
            .unwrap_or_else(|| vec![1.0; self.nnz()]);
        sprs::CsMat::new(
            (self.num_nodes, self.num_nodes),
            self.indptr.clone(),
            self.indices.iter().map(|&c| c as usize).collect(),
            data,
        )
    }

    /// Converts from a square `sprs` matrix (CSR or CSC), keeping its values as weights.
    pub fn from_sprs(m: &sprs::CsMat<f32>) -> Result<Self> {
        if m.rows() != m.cols() {
            return Err(GraphError::invalid(
                "sprs matrix",
                format!("adjacency must be square, got {}x{}", m.rows(), m.cols()),
            ));
        }
        let csr = m.to_csr();
        let indptr = csr.indptr().to_proper().into_owned();
        let indices = csr.indices().iter().map(|&c| c as u32).collect();
        Self::from_parts(m.rows(), indptr, indices, Some(csr.data().to_vec()))
    }

    /// Converts to a petgraph directed graph: node `i` is `NodeIndex(i)`, edge weights are the
    /// entry weights, edges in CSR order.
    pub fn to_petgraph(&self) -> petgraph::Graph<(), f32, petgraph::Directed, u32> {
        let mut g = petgraph::Graph::with_capacity(self.num_nodes, self.nnz());
        for _ in 0..self.num_nodes {
            g.add_node(());
        }
        for (r, c, w) in self.iter() {
            g.add_edge(r.into(), c.into(), w);
        }
        g
    }

    /// Converts from any petgraph `Graph` (unit weights). An undirected petgraph edge becomes
    /// both directions; duplicate edges are kept.
    pub fn from_petgraph<N, E, Ty: petgraph::EdgeType, Ix: petgraph::graph::IndexType>(
        g: &petgraph::Graph<N, E, Ty, Ix>,
    ) -> Result<Self> {
        use petgraph::visit::EdgeRef;
        let mut src = Vec::with_capacity(g.edge_count() * 2);
        let mut dst = Vec::with_capacity(g.edge_count() * 2);
        for e in g.edge_references() {
            let (a, b) = (e.source().index() as u32, e.target().index() as u32);
            src.push(a);
            dst.push(b);
            if !g.is_directed() && a != b {
                src.push(b);
                dst.push(a);
            }
        }
        Ok(Self::from_edges(g.node_count(), &src, &dst)?.0)
    }
}
