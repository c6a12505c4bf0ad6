//! Graph types: a CSR adjacency, a graph with node/edge features and labels, graph-level and
//! node-level datasets, and conversions to and from petgraph and sprs.
//!
//! Conventions. A CSR entry `(r, c)` is the directed edge `r → c` (the order of a TU `A.txt`
//! line, PyG's `edge_index = [source; target]`). Undirected graphs store both directions.
//! Edge features and edge labels are aligned with the CSR entries (row-major, columns
//! ascending within a row). For attention, token `q` may attend token `k` when `(q, k)` is an
//! entry, as the graph ET reference reads its dense adjacency `A[q, k]`; for symmetric graphs
//! the direction does not matter.

use ndarray::Array2;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::split::Split;

/// Sentinel for "not in the subgraph" in id maps.
const ABSENT: u32 = u32::MAX;

/// A square sparse adjacency in compressed sparse row form, with optional `f32` weights
/// (absent = every entry weighs 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Csr {
    num_nodes: usize,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    weights: Option<Vec<f32>>,
}

impl Csr {
    /// An `n`-node graph with no edges.
    pub fn empty(n: usize) -> Self {
        Self {
            num_nodes: n,
            indptr: vec![0; n + 1],
            indices: Vec::new(),
            weights: None,
        }
    }

    /// Builds a CSR from parts, checking that `indptr` is monotone with `n + 1` entries, that
    /// every index is below `n`, that each row's columns are sorted, and that `weights` (if
    /// any) has one value per entry.
    pub fn from_parts(
        n: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        weights: Option<Vec<f32>>,
    ) -> Result<Self> {
        let bad = |m: String| GraphError::invalid("CSR", m);
        if n > ABSENT as usize {
            return Err(bad(format!("{n} nodes exceed the u32 id range")));
        }
        if indptr.len() != n + 1 || indptr.first() != Some(&0) {
            return Err(bad(format!(
                "indptr must have n + 1 = {} entries starting at 0, has {}",
                n + 1,
                indptr.len()
            )));
        }
        if indptr.windows(2).any(|w| w[0] > w[1]) || indptr[n] != indices.len() {
            return Err(bad(format!(
                "indptr must be non-decreasing and end at nnz = {}",
                indices.len()
            )));
        }
        if let Some(w) = &weights
            && w.len() != indices.len()
        {
            return Err(bad(format!(
                "{} weights for {} entries",
                w.len(),
                indices.len()
            )));
        }
        for r in 0..n {
            let row = &indices[indptr[r]..indptr[r + 1]];
            if row.iter().any(|&c| c as usize >= n) {
                return Err(bad(format!("row {r} has a column id >= {n}")));
            }
            if row.windows(2).any(|w| w[0] > w[1]) {
                return Err(bad(format!("row {r} is not sorted")));
            }
        }
        Ok(Self {
            num_nodes: n,
            indptr,
            indices,
            weights,
        })
    }

    /// Builds a CSR from directed edges `src[e] → dst[e]` (duplicates kept). Returns the CSR
    /// and `perm`, where CSR entry `i` is input edge `perm[i]` (to reorder edge features).
    /// Linear time: a counting sort by row, then a sort of each (short) row.
    pub fn from_edges(n: usize, src: &[u32], dst: &[u32]) -> Result<(Self, Vec<usize>)> {
        if src.len() != dst.len() {
            return Err(GraphError::invalid(
                "edge list",
                format!("{} sources but {} targets", src.len(), dst.len()),
            ));
        }
        if n > ABSENT as usize {
            return Err(GraphError::invalid(
                "edge list",
                format!("{n} nodes exceed the u32 id range"),
            ));
        }
        if let Some((e, (&s, &d))) = src
            .iter()
            .zip(dst)
            .enumerate()
            .find(|(_, (s, d))| **s as usize >= n || **d as usize >= n)
        {
            return Err(GraphError::invalid(
                "edge list",
                format!("edge {e} ({s} → {d}) names a node >= {n}"),
            ));
        }
        let mut indptr = vec![0usize; n + 1];
        for &s in src {
            indptr[s as usize + 1] += 1;
        }
        for i in 0..n {
            indptr[i + 1] += indptr[i];
        }
        let mut next = indptr.clone();
        let mut perm = vec![0usize; src.len()];
        for (e, &s) in src.iter().enumerate() {
            let slot = &mut next[s as usize];
            perm[*slot] = e;
            *slot += 1;
        }
        // Sort each row by column, stably, carrying the permutation.
        let mut pairs: Vec<(u32, usize)> = perm.iter().map(|&e| (dst[e], e)).collect();
        for r in 0..n {
            let row = &mut pairs[indptr[r]..indptr[r + 1]];
            if row.windows(2).any(|w| w[0].0 > w[1].0) {
                row.sort_by_key(|&(c, _)| c);
            }
        }
        let (indices, perm): (Vec<u32>, Vec<usize>) = pairs.into_iter().unzip();
        Ok((
            Self {
                num_nodes: n,
                indptr,
                indices,
                weights: None,
            },
            perm,
        ))
    }

    /// Builds an undirected graph: every pair `(a, b)` gives `a → b` and `b → a`, duplicates
    /// and self loops listed once. Ids must be below `n`.
    pub fn from_undirected(n: usize, pairs: &[(u32, u32)]) -> Result<Self> {
        let mut src = Vec::with_capacity(2 * pairs.len());
        let mut dst = Vec::with_capacity(2 * pairs.len());
        for &(a, b) in pairs {
            src.push(a);
            dst.push(b);
            if a != b {
                src.push(b);
                dst.push(a);
            }
        }
        Ok(Self::from_edges(n, &src, &dst)?.0.deduplicated())
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of stored (directed) entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Row pointers (`n + 1` entries).
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }

    /// Column ids of all entries, row after row.
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }

    /// Entry weights, if any (absent = all ones).
    pub fn weights(&self) -> Option<&[f32]> {
        self.weights.as_deref()
    }

    /// The same graph with the given entry weights.
    pub fn with_weights(mut self, weights: Vec<f32>) -> Result<Self> {
        if weights.len() != self.nnz() {
            return Err(GraphError::invalid(
                "CSR weights",
                format!("{} weights for {} entries", weights.len(), self.nnz()),
            ));
        }
        self.weights = Some(weights);
        Ok(self)
    }

    /// The neighbours (columns) of row `r`. Panics if `r >= n` (a programming error).
    pub fn row(&self, r: usize) -> &[u32] {
        &self.indices[self.indptr[r]..self.indptr[r + 1]]
    }

    /// The weights of row `r`'s entries (all ones when the graph is unweighted).
    pub fn row_weights(&self, r: usize) -> std::borrow::Cow<'_, [f32]> {
        match &self.weights {
            Some(w) => std::borrow::Cow::Borrowed(&w[self.indptr[r]..self.indptr[r + 1]]),
            None => std::borrow::Cow::Owned(vec![1.0; self.indptr[r + 1] - self.indptr[r]]),
        }
    }

    /// Out-degree (entries per row).
    pub fn degree(&self, r: usize) -> usize {
        self.indptr[r + 1] - self.indptr[r]
    }

    /// Weighted row sums `d_r = Σ_c A[r, c]`, in f64.
    pub fn row_sums(&self) -> Vec<f64> {
        match &self.weights {
            None => (0..self.num_nodes).map(|r| self.degree(r) as f64).collect(),
            Some(w) => (0..self.num_nodes)
                .map(|r| {
                    w[self.indptr[r]..self.indptr[r + 1]]
                        .iter()
                        .map(|&x| x as f64)
                        .sum()
                })
                .collect(),
        }
    }

    /// Iterates over entries as `(row, col, weight)`.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, f32)> + '_ {
        (0..self.num_nodes).flat_map(move |r| {
            (self.indptr[r]..self.indptr[r + 1]).map(move |i| {
                (
                    r as u32,
                    self.indices[i],
                    self.weights.as_ref().map_or(1.0, |w| w[i]),
                )
            })
        })
    }

    /// Whether entry `(r, c)` exists (binary search in row `r`).
    pub fn contains(&self, r: usize, c: u32) -> bool {
        r < self.num_nodes && self.row(r).binary_search(&c).is_ok()
    }

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

    /// The transpose (`c → r` for every `r → c`); weights follow their entries.
    pub fn transpose(&self) -> Self {
        let n = self.num_nodes;
        let mut indptr = vec![0usize; n + 1];
        for &c in &self.indices {
            indptr[c as usize + 1] += 1;
        }
        for i in 0..n {
            indptr[i + 1] += indptr[i];
        }
        let mut next = indptr.clone();
        let mut indices = vec![0u32; self.nnz()];
        let mut weights = self.weights.as_ref().map(|_| vec![0f32; self.nnz()]);
        for r in 0..n {
            for i in self.indptr[r]..self.indptr[r + 1] {
                let c = self.indices[i] as usize;
                let slot = next[c];
                next[c] += 1;
                indices[slot] = r as u32;
                if let (Some(dst), Some(src)) = (&mut weights, &self.weights) {
                    dst[slot] = src[i];
                }
            }
        }
        // Rows come out sorted because r increases.
        Self {
            num_nodes: n,
            indptr,
            indices,
            weights,
        }
    }

    /// Merges duplicate entries (weights add up) so each `(r, c)` appears once.
    pub fn deduplicated(&self) -> Self {
        let mut indptr = Vec::with_capacity(self.num_nodes + 1);
        let mut indices = Vec::with_capacity(self.nnz());
        let mut weights = self
            .weights
            .as_ref()
            .map(|_| Vec::with_capacity(self.nnz()));
        indptr.push(0);
        for r in 0..self.num_nodes {
            let start = indices.len();
            for i in self.indptr[r]..self.indptr[r + 1] {
                let c = self.indices[i];
                let w = self.weights.as_ref().map_or(1.0, |w| w[i]);
                if indices.len() > start && indices.last() == Some(&c) {
                    if let Some(last) = weights.as_mut().and_then(|ws| ws.last_mut()) {
                        *last += w;
                    }
                } else {
                    indices.push(c);
                    if let Some(ws) = &mut weights {
                        ws.push(w);
                    }
                }
            }
            indptr.push(indices.len());
        }
        Self {
            num_nodes: self.num_nodes,
            indptr,
            indices,
            weights,
        }
    }

    /// `A ∪ Aᵀ` as an unweighted graph without duplicates (self loops kept once).
    pub fn symmetrized(&self) -> Self {
        let t = self.transpose();
        let mut indptr = Vec::with_capacity(self.num_nodes + 1);
        let mut indices = Vec::with_capacity(2 * self.nnz());
        indptr.push(0);
        for r in 0..self.num_nodes {
            let (a, b) = (self.row(r), t.row(r));
            let (mut i, mut j) = (0, 0);
            while i < a.len() || j < b.len() {
                let next = match (a.get(i), b.get(j)) {
                    (Some(&x), Some(&y)) if x <= y => {
                        i += 1;
                        if x == y {
                            j += 1;
                        }
                        x
                    }
                    (Some(_), Some(&y)) | (None, Some(&y)) => {
                        j += 1;
                        y
                    }
                    (Some(&x), None) => {
                        i += 1;
                        x
                    }
                    (None, None) => break,
                };
                if indices.len() == *indptr.last().unwrap_or(&0) || indices.last() != Some(&next) {
                    indices.push(next);
                }
            }
            indptr.push(indices.len());
        }
        Self {
            num_nodes: self.num_nodes,
            indptr,
            indices,
            weights: None,
        }
    }

    /// Whether `(r, c)` is an entry exactly when `(c, r)` is (weights ignored).
    pub fn is_symmetric(&self) -> bool {
        let t = self.transpose();
        self.indptr == t.indptr && self.indices == t.indices
    }

    /// Number of entries on the diagonal.
    pub fn num_self_loops(&self) -> usize {
        (0..self.num_nodes)
            .filter(|&r| self.row(r).binary_search(&(r as u32)).is_ok())
            .count()
    }

    /// Unordered pairs `{r, c}`, `r ≠ c`, joined in either direction (the "edges" count the
    /// TU and anomaly statistics use).
    pub fn num_undirected_edges(&self) -> usize {
        let s = self.symmetrized();
        (s.nnz() - s.num_self_loops()) / 2
    }

    /// The graph with a unit self loop on every node (existing self loops kept as they are).
    pub fn with_self_loops(&self) -> Self {
        let n = self.num_nodes;
        let mut indptr = Vec::with_capacity(n + 1);
        let mut indices = Vec::with_capacity(self.nnz() + n);
        let mut weights = self
            .weights
            .as_ref()
            .map(|_| Vec::with_capacity(self.nnz() + n));
        indptr.push(0);
        for r in 0..n {
            let row = self.row(r);
            let has = row.binary_search(&(r as u32));
            let pos = match has {
                Ok(p) | Err(p) => p,
            };
            let base = self.indptr[r];
            for (i, &c) in row.iter().enumerate() {
                if i == pos && has.is_err() {
                    indices.push(r as u32);
                    if let Some(ws) = &mut weights {
                        ws.push(1.0);
                    }
                }
                indices.push(c);
                if let (Some(ws), Some(src)) = (&mut weights, &self.weights) {
                    ws.push(src[base + i]);
                }
            }
            if pos == row.len() && has.is_err() {
                indices.push(r as u32);
                if let Some(ws) = &mut weights {
                    ws.push(1.0);
                }
            }
            indptr.push(indices.len());
        }
        Self {
            num_nodes: n,
            indptr,
            indices,
            weights,
        }
    }

    /// The graph with every self loop removed.
    pub fn without_self_loops(&self) -> Self {
        self.filter_entries(|r, c| r != c).0
    }

    /// Keeps the entries for which `keep(row, col)` holds; returns the new CSR and, for each
    /// kept entry, its position in `self` (to carry edge features along).
    pub fn filter_entries(&self, keep: impl Fn(u32, u32) -> bool) -> (Self, Vec<usize>) {
        let mut indptr = Vec::with_capacity(self.num_nodes + 1);
        let mut indices = Vec::new();
        let mut pos = Vec::new();
        indptr.push(0);
        for r in 0..self.num_nodes {
            for i in self.indptr[r]..self.indptr[r + 1] {
                if keep(r as u32, self.indices[i]) {
                    indices.push(self.indices[i]);
                    pos.push(i);
                }
            }
            indptr.push(indices.len());
        }
        let weights = self
            .weights
            .as_ref()
            .map(|w| pos.iter().map(|&i| w[i]).collect());
        (
            Self {
                num_nodes: self.num_nodes,
                indptr,
                indices,
                weights,
            },
            pos,
        )
    }

    /// The subgraph induced by `nodes` (distinct ids, in the order given: local id `i` is
    /// `nodes[i]`). Returns it and the positions in `self` of the kept entries.
    pub fn induced(&self, nodes: &[u32]) -> Result<(Self, Vec<usize>)> {
        let mut local = vec![ABSENT; self.num_nodes];
        for (i, &v) in nodes.iter().enumerate() {
            let slot = local.get_mut(v as usize).ok_or_else(|| {
                GraphError::invalid(
                    "subgraph nodes",
                    format!("node {v} is not below {}", self.num_nodes),
                )
            })?;
            if *slot != ABSENT {
                return Err(GraphError::invalid(
                    "subgraph nodes",
                    format!("node {v} listed twice"),
                ));
            }
            *slot = i as u32;
        }
        let mut indptr = Vec::with_capacity(nodes.len() + 1);
        let mut entries: Vec<(u32, usize)> = Vec::new();
        indptr.push(0);
        for &v in nodes {
            let start = entries.len();
            for i in self.indptr[v as usize]..self.indptr[v as usize + 1] {
                let c = local[self.indices[i] as usize];
                if c != ABSENT {
                    entries.push((c, i));
                }
            }
            entries[start..].sort_by_key(|&(c, _)| c);
            indptr.push(entries.len());
        }
        let (indices, pos): (Vec<u32>, Vec<usize>) = entries.into_iter().unzip();
        let weights = self
            .weights
            .as_ref()
            .map(|w| pos.iter().map(|&i| w[i]).collect());
        Ok((
            Self {
                num_nodes: nodes.len(),
                indptr,
                indices,
                weights,
            },
            pos,
        ))
    }

    /// Weakly connected components: their number and each node's component id (ids in order
    /// of each component's smallest node).
    pub fn connected_components(&self) -> (usize, Vec<u32>) {
        let n = self.num_nodes;
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn find(parent: &mut [u32], mut x: u32) -> u32 {
            while parent[x as usize] != x {
                let p = parent[x as usize];
                parent[x as usize] = parent[p as usize];
                x = p;
            }
            x
        }
        for (r, c, _) in self.iter() {
            let (a, b) = (find(&mut parent, r), find(&mut parent, c));
            if a != b {
                let (lo, hi) = if a < b { (a, b) } else { (b, a) };
                parent[hi as usize] = lo;
            }
        }
        let mut label = vec![ABSENT; n];
        let mut count = 0u32;
        let mut comp = vec![0u32; n];
        for (v, slot) in comp.iter_mut().enumerate() {
            let root = find(&mut parent, v as u32) as usize;
            if label[root] == ABSENT {
                label[root] = count;
                count += 1;
            }
            *slot = label[root];
        }
        (count as usize, comp)
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

    /// The nodes within `k` hops along entries (`k ≥ 1`), as a new unweighted CSR; `self_loops`
    /// adds each node to its own row. Breadth-first per node, in parallel over nodes.
    pub fn k_hop(&self, k: usize, self_loops: bool) -> Self {
        let n = self.num_nodes;
        let rows: Vec<Vec<u32>> = (0..n)
            .into_par_iter()
            .map_init(
                || (vec![false; n], Vec::new()),
                |(seen, touched): &mut (Vec<bool>, Vec<u32>), v| {
                    touched.clear();
                    seen[v] = true;
                    touched.push(v as u32);
                    let mut frontier = vec![v as u32];
                    for _ in 0..k {
                        let mut next = Vec::new();
                        for &u in &frontier {
                            for &w in self.row(u as usize) {
                                if !seen[w as usize] {
                                    seen[w as usize] = true;
                                    touched.push(w);
                                    next.push(w);
                                }
                            }
                        }
                        if next.is_empty() {
                            break;
                        }
                        frontier = next;
                    }
                    // A node reaches itself through a cycle only if it is its own neighbour
                    // within k hops; the paper's 1-hop CSR excludes it unless asked.
                    let mut row: Vec<u32> = touched
                        .iter()
                        .copied()
                        .filter(|&u| self_loops || u as usize != v || self.contains(v, v as u32))
                        .collect();
                    for &u in touched.iter() {
                        seen[u as usize] = false;
                    }
                    row.sort_unstable();
                    row
                },
            )
            .collect();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0);
        let mut indices = Vec::with_capacity(rows.iter().map(Vec::len).sum());
        for r in rows {
            indices.extend_from_slice(&r);
            indptr.push(indices.len());
        }
        Self {
            num_nodes: n,
            indptr,
            indices,
            weights: None,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn triangle_plus_tail() -> Csr {
        Csr::from_undirected(5, &[(0, 1), (1, 2), (2, 0), (3, 4)]).unwrap()
    }

    #[test]
    fn from_edges_sorts_rows_and_tracks_the_permutation() {
        let (a, perm) = Csr::from_edges(3, &[2, 0, 0, 1], &[1, 2, 1, 0]).unwrap();
        assert_eq!(a.indptr(), &[0, 2, 3, 4]);
        assert_eq!(a.indices(), &[1, 2, 0, 1]);
        assert_eq!(perm, vec![2, 1, 3, 0]);
        assert!(Csr::from_edges(2, &[0], &[2]).is_err());
    }

    #[test]
    fn symmetrize_transpose_dedup() {
        let (a, _) = Csr::from_edges(3, &[0, 0, 1, 1], &[1, 1, 2, 1]).unwrap();
        let d = a.deduplicated();
        assert_eq!(d.nnz(), 3);
        let s = a.symmetrized();
        assert!(s.is_symmetric());
        assert_eq!(s.indices(), &[1, 0, 1, 2, 1]);
        assert_eq!(a.transpose().transpose(), a);
        assert_eq!(s.num_self_loops(), 1);
        assert_eq!(s.num_undirected_edges(), 2);
    }

    #[test]
    fn self_loops_and_components() {
        let a = triangle_plus_tail();
        let l = a.with_self_loops();
        assert_eq!(l.nnz(), a.nnz() + 5);
        assert_eq!(l.num_self_loops(), 5);
        assert_eq!(l.with_self_loops(), l);
        assert_eq!(l.without_self_loops(), a);
        let (c, comp) = a.connected_components();
        assert_eq!(c, 2);
        assert_eq!(comp, vec![0, 0, 0, 1, 1]);
    }

    #[test]
    fn induced_and_khop() {
        let a = Csr::from_undirected(5, &[(0, 1), (1, 2), (2, 3), (3, 4)]).unwrap();
        let (s, _) = a.induced(&[3, 2, 1]).unwrap();
        assert_eq!(s.to_dense().sum(), 4.0);
        assert!(s.contains(0, 1) && s.contains(1, 2) && !s.contains(0, 2));
        assert!(a.induced(&[1, 1]).is_err());
        let k2 = a.k_hop(2, false);
        assert_eq!(k2.row(0), &[1, 2]);
        assert_eq!(k2.row(2), &[0, 1, 3, 4]);
        let k1 = a.k_hop(1, true);
        assert_eq!(k1, a.with_self_loops());
    }

    #[test]
    fn petgraph_and_sprs_round_trips() {
        let a = triangle_plus_tail();
        let p = a.to_petgraph();
        assert_eq!(p.edge_count(), a.nnz());
        assert_eq!(Csr::from_petgraph(&p).unwrap(), a);
        let mut u = petgraph::graph::UnGraph::<(), ()>::new_undirected();
        let n: Vec<_> = (0..5).map(|_| u.add_node(())).collect();
        for (x, y) in [(0, 1), (1, 2), (2, 0), (3, 4)] {
            u.add_edge(n[x], n[y], ());
        }
        assert_eq!(Csr::from_petgraph(&u).unwrap(), a);
        let s = a.to_sprs();
        assert_eq!(s.nnz(), a.nnz());
        let back = Csr::from_sprs(&s).unwrap();
        assert_eq!(back.indices(), a.indices());
        assert_eq!(back.weights().unwrap(), vec![1.0; a.nnz()].as_slice());
    }

    #[test]
    fn graph_with_self_loops_carries_edge_features() {
        let a = Csr::from_undirected(3, &[(0, 1), (1, 2)]).unwrap();
        let mut g = Graph::structure_only(a.clone());
        g.edge_features = Some(Array2::from_shape_fn((a.nnz(), 1), |(i, _)| i as f32 + 1.0));
        g.edge_labels = Some((0..a.nnz() as i64).collect());
        let l = g.with_self_loops();
        l.validate().unwrap();
        let ef = l.edge_features.unwrap();
        // Row 0 of the new CSR: 0 (loop), 1 (old entry 0).
        assert_eq!(ef[[0, 0]], 0.0);
        assert_eq!(ef[[1, 0]], 1.0);
        assert_eq!(l.edge_labels.unwrap()[..2], [-1, 0]);
    }
}
