//! The CSR adjacency every loader, batch and model reads: a square sparse matrix in
//! compressed sparse row form with optional weights, and its graph operations (symmetrise,
//! self-loops, induced subgraphs, components, k-hop). Conversions to and from petgraph, sprs,
//! dense arrays and PyG's edge index are in [`convert`].
//!
//! Conventions. A CSR entry `(r, c)` is the directed edge `r → c` (the order of a TU `A.txt`
//! line, PyG's `edge_index = [source; target]`). Undirected graphs store both directions.
//! Edge features and edge labels are aligned with the CSR entries (row-major, columns
//! ascending within a row). For attention, token `q` may attend token `k` when `(q, k)` is an
//! entry, as the graph ET reference reads its dense adjacency `A[q, k]`; for symmetric graphs
//! the direction does not matter.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};

pub mod convert;
#[cfg(test)]
mod tests;

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
