//! Laplacian positional encodings: the `k` smallest non-trivial eigenvectors of the symmetric
//! normalised Laplacian `L = I − D^{-1/2} A D^{-1/2}` (ET Appendix D, eq. 23), by default of
//! the CLS-augmented adjacency `Ã` (the CLS token is node 0, joined to every node and to
//! itself: `A` "padded in the upper left corner with ones").
//!
//! - **Dense** (faer's symmetric eigensolver) for graphs up to
//!   [`PeConfig::dense_max_nodes`], one graph per task in parallel over a dataset;
//!   **sparse** block LOBPCG ([`crate::lobpcg`]) above that.
//! - **Null space, disconnected graphs.** `L` has one zero eigenvalue per connected component
//!   `c`, with eigenvector `D^{1/2} 1_c`. The trivial vector that is dropped is the global
//!   `D^{1/2} 1` (normalised); the other `c − 1` directions of the null space come first among
//!   the non-trivial ones, in a deterministic basis (a Householder complement of the
//!   component weights `√vol(c)`), so the result does not depend on how a solver happened to
//!   rotate a degenerate eigenspace. An isolated node is its own component (`L_ii = 0`, the
//!   scipy `csgraph.laplacian(normed=True)` convention). With CLS the graph is connected.
//! - **Repeated eigenvalues** are resolved by both solvers (a block method, not Lanczos);
//!   the basis inside a repeated eigenspace is whatever the solver returns, so compare
//!   projectors, never columns.
//! - **Small graphs.** Fewer than `k + 1` nodes leave `n − 1` non-trivial vectors; the
//!   remaining columns are zeros (as the graph ET reference pads).
//! - **Signs.** Each vector is oriented so that its largest-magnitude entry (the first one,
//!   up to a 1e-8 relative tie) is positive. For training, [`SignFlip`] draws random signs:
//!   per eigenvector (the standard augmentation, GraphGPS) or per entry (what the graph ET
//!   reference does: `tools_utils.py` multiplies by a ±1 mask of the matrix's shape).
//! - An asymmetric adjacency is replaced by its symmetrised union `A ∪ Aᵀ` (unit weights)
//!   first; edge weights of a symmetric adjacency are used as given and must be ≥ 0.

use faer::Mat;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{ComputeEigenvectors, self_adjoint_evd, self_adjoint_evd_scratch};
use ndarray::{Array2, ArrayViewMut2};
use rand::{Rng, RngExt};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::Csr;
use crate::error::{GraphError, Result};
use crate::lobpcg::{Constraints, LobpcgConfig, NormalizedLaplacian, lobpcg};

/// Which eigensolver to use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Solver {
    /// Dense up to [`PeConfig::dense_max_nodes`] nodes, LOBPCG above.
    #[default]
    Auto,
    /// Always dense (exact; `O(n³)` time, `O(n²)` memory).
    Dense,
    /// Always sparse LOBPCG (falls back to dense only when the graph is too small for a block).
    Sparse,
}

/// Random sign changes for training (evaluation keeps the deterministic convention).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignFlip {
    /// Keep the deterministic signs.
    #[default]
    None,
    /// One random sign per eigenvector (per graph): the standard augmentation (ET paper
    /// Appendix D "the sign of the top k eigen-vectors is flipped randomly", GraphGPS).
    PerEigenvector,
    /// An independent random sign per entry: what the graph ET reference code actually does.
    PerEntry,
}

impl SignFlip {
    /// Applies the flips in place to a `[n, k]` encoding.
    pub fn apply<R: Rng + ?Sized>(&self, pe: &mut ArrayViewMut2<'_, f32>, rng: &mut R) {
        match self {
            Self::None => {}
            Self::PerEigenvector => {
                for mut col in pe.columns_mut() {
                    if rng.random_bool(0.5) {
                        col.mapv_inplace(|v| -v);
                    }
                }
            }
            Self::PerEntry => {
                for v in pe.iter_mut() {
                    if rng.random_bool(0.5) {
                        *v = -*v;
                    }
                }
            }
        }
    }
}

/// Laplacian positional-encoding settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PeConfig {
    /// Number of eigenvectors (ET graph: 15). The paper presets take 15, the CPU presets 8
    /// (`BatchConfig::tu_cpu`, which says why).
    pub k: usize,
    /// Use the CLS-augmented adjacency (row/column 0 = CLS; ET eq. 23).
    pub cls: bool,
    /// Solver choice.
    pub solver: Solver,
    /// Largest graph (after CLS) the `Auto` solver decomposes densely.
    pub dense_max_nodes: usize,
    /// LOBPCG settings for the sparse path.
    pub lobpcg: LobpcgConfig,
}

impl Default for PeConfig {
    fn default() -> Self {
        Self::et_graph()
    }
}

impl PeConfig {
    /// The graph ET setting: k = 15 on the CLS-augmented adjacency.
    pub fn et_graph() -> Self {
        Self {
            k: 15,
            cls: true,
            solver: Solver::Auto,
            dense_max_nodes: 2000,
            lobpcg: LobpcgConfig::default(),
        }
    }

    /// Plain (no CLS) eigenvectors with the given `k`.
    pub fn plain(k: usize) -> Self {
        Self {
            k,
            cls: false,
            ..Self::et_graph()
        }
    }

    fn validate(&self) -> Result<()> {
        if self.k == 0 {
            return Err(GraphError::invalid("PE config", "k must be at least 1"));
        }
        Ok(())
    }
}

/// Eigenpairs in `f64`: `values[j]` belongs to column `j` of `vectors` (`[n, values.len()]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Spectrum {
    /// Eigenvalues, ascending.
    pub values: Vec<f64>,
    /// Unit eigenvectors as columns.
    pub vectors: Array2<f64>,
    /// Whether the sparse solver produced them.
    pub sparse: bool,
    /// LOBPCG iterations (0 for the dense solver).
    pub iterations: usize,
    /// Largest LOBPCG residual `‖L x − λ x‖` at exit (0 for the dense solver).
    pub max_residual: f64,
}

/// A graph's positional encoding.
#[derive(Clone, Debug, PartialEq)]
pub struct LaplacianPe {
    /// `[n', k]` (n' = n + 1 with CLS, CLS in row 0); columns past `values.len()` are zero.
    pub vectors: Array2<f32>,
    /// The eigenvalues of the filled columns.
    pub values: Vec<f64>,
}

/// The symmetric graph the encoding is computed on, in CSR: `A` (symmetrised if needed), or
/// `Ã` with CLS as node 0 (`Ã_00 = 1`, `Ã_0i = Ã_i0 = 1`).
pub fn pe_graph(adj: &Csr, cls: bool) -> Result<Csr> {
    if adj
        .weights()
        .is_some_and(|w| w.iter().any(|&x| x.is_nan() || x < 0.0 || x.is_infinite()))
    {
        return Err(GraphError::invalid(
            "adjacency",
            "Laplacian encodings need non-negative, finite edge weights",
        ));
    }
    let a = if adj.is_symmetric() {
        adj.clone()
    } else {
        adj.symmetrized()
    };
    if !cls {
        return Ok(a);
    }
    let n = a.num_nodes();
    let mut indptr = Vec::with_capacity(n + 2);
    let mut indices = Vec::with_capacity(a.nnz() + 2 * n + 1);
    let mut weights = a.weights().map(|_| Vec::with_capacity(a.nnz() + 2 * n + 1));
    indptr.push(0);
    indices.extend(0..=n as u32);
    if let Some(w) = &mut weights {
        w.extend(std::iter::repeat_n(1.0, n + 1));
    }
    indptr.push(indices.len());
    for r in 0..n {
        indices.push(0);
        indices.extend(a.row(r).iter().map(|&c| c + 1));
        if let Some(w) = &mut weights {
            w.push(1.0);
            w.extend(a.row_weights(r).iter());
        }
        indptr.push(indices.len());
    }
    Csr::from_parts(n + 1, indptr, indices, weights)
}

/// The dense normalised Laplacian of [`pe_graph`]`(adj, cls)`, for checks and other tools.
pub fn normalized_laplacian(adj: &Csr, cls: bool) -> Result<Array2<f64>> {
    let g = pe_graph(adj, cls)?;
    let l = dense_laplacian(&g);
    Ok(Array2::from_shape_fn((l.nrows(), l.ncols()), |(i, j)| {
        l[(i, j)]
    }))
}

/// `d^{-1/2}` per node (0 for isolated nodes).
fn inv_sqrt_degrees(a: &Csr) -> Vec<f64> {
    a.row_sums()
        .into_iter()
        .map(|d| if d > 0.0 { 1.0 / d.sqrt() } else { 0.0 })
        .collect()
}

fn dense_laplacian(a: &Csr) -> Mat<f64> {
    let n = a.num_nodes();
    let dinv = inv_sqrt_degrees(a);
    let mut l = Mat::zeros(n, n);
    for i in 0..n {
        if dinv[i] > 0.0 {
            l[(i, i)] = 1.0;
        }
    }
    let w = a.weights();
    for i in 0..n {
        let base = a.indptr()[i];
        for (p, &j) in a.row(i).iter().enumerate() {
            let j = j as usize;
            let wij = w.map_or(1.0, |w| w[base + p] as f64);
            l[(i, j)] -= dinv[i] * wij * dinv[j];
        }
    }
    l
}

/// Orients `v` so its largest-magnitude entry (the first one up to a 1e-8 relative tie) is
/// positive.
pub fn orient(v: &mut [f64]) {
    let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return;
    }
    if let Some(&x) = v.iter().find(|x| x.abs() >= max * (1.0 - 1e-8))
        && x < 0.0
    {
        v.iter_mut().for_each(|x| *x = -*x);
    }
}

/// The null-space part: the `min(c − 1, want)` non-trivial unit vectors of the null space of
/// `L` (one zero eigenvalue per component), orthogonal to the trivial `D^{1/2} 1`.
fn null_complement(a: &Csr, want: usize) -> (Constraints, Vec<Vec<f64>>) {
    let n = a.num_nodes();
    let (c, comp) = a.connected_components();
    let deg = a.row_sums();
    let mut vol = vec![0.0f64; c];
    let mut size = vec![0usize; c];
    for i in 0..n {
        vol[comp[i] as usize] += deg[i];
        size[comp[i] as usize] += 1;
    }
    // z_c = D^{1/2} 1_c / √vol(c), or the unit vector of an isolated node.
    let value: Vec<f64> = (0..n)
        .map(|i| {
            let k = comp[i] as usize;
            if vol[k] > 0.0 {
                (deg[i] / vol[k]).sqrt()
            } else {
                1.0 / (size[k] as f64).sqrt()
            }
        })
        .collect();
    let total: f64 = vol.iter().sum();
    let w: Vec<f64> = if total > 0.0 {
        vol.iter().map(|v| (v / total).sqrt()).collect()
    } else {
        vec![1.0 / (c as f64).sqrt(); c]
    };
    // Householder H with H w = e_0; columns 1.. of H span w⊥.
    let mut h_v = w.clone();
    if let Some(first) = h_v.first_mut() {
        *first -= 1.0;
    }
    let vv: f64 = h_v.iter().map(|x| x * x).sum();
    let h = |r: usize, col: usize| -> f64 {
        let id = if r == col { 1.0 } else { 0.0 };
        if vv < 1e-30 {
            id
        } else {
            id - 2.0 * h_v[r] * h_v[col] / vv
        }
    };
    let take = want.min(c.saturating_sub(1));
    let vectors: Vec<Vec<f64>> = (1..=take)
        .map(|col| {
            let mut v: Vec<f64> = (0..n)
                .map(|i| h(comp[i] as usize, col) * value[i])
                .collect();
            orient(&mut v);
            v
        })
        .collect();
    (
        Constraints {
            comp,
            value,
            count: c,
        },
        vectors,
    )
}

/// The `count` smallest eigenpairs of a dense symmetric matrix ([`crate::partial_eigh`]: only
/// the wanted vectors are back-transformed), the full solver when a check of that fails.
fn smallest_dense(l: &Mat<f64>, count: usize) -> Result<(Vec<f64>, Mat<f64>)> {
    if let Some(r) = crate::partial_eigh::smallest_eigh(l, count) {
        return Ok(r);
    }
    dense_eigh(l)
}

/// Dense symmetric eigendecomposition, sequential (callers parallelise over graphs) or on the
/// rayon pool for big matrices.
pub(crate) fn dense_eigh(l: &Mat<f64>) -> Result<(Vec<f64>, Mat<f64>)> {
    let n = l.nrows();
    let par = if n >= 256 {
        faer::Par::rayon(0)
    } else {
        faer::Par::Seq
    };
    let mut s = faer::diag::Diag::<f64>::zeros(n);
    let mut u = Mat::<f64>::zeros(n, n);
    let mut buf = MemBuffer::new(self_adjoint_evd_scratch::<f64>(
        n,
        ComputeEigenvectors::Yes,
        par,
        Default::default(),
    ));
    self_adjoint_evd(
        l.as_ref(),
        s.as_mut(),
        Some(u.as_mut()),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .map_err(|e| GraphError::NoConvergence {
        what: "dense symmetric eigensolver".into(),
        message: format!("{e:?}"),
    })?;
    let sc = s.column_vector();
    Ok(((0..n).map(|i| sc[i]).collect(), u))
}

/// The `k` smallest non-trivial eigenpairs of the normalised Laplacian of `adj` (with CLS if
/// `cfg.cls`); fewer when the graph has fewer than `k + 1` nodes.
pub fn smallest_nontrivial(adj: &Csr, cfg: &PeConfig) -> Result<Spectrum> {
    cfg.validate()?;
    let a = pe_graph(adj, cfg.cls)?;
    let n = a.num_nodes();
    let k = cfg.k.min(n.saturating_sub(1));
    let (constraints, null) = null_complement(&a, k);
    let rest = k - null.len();
    let sparse = match cfg.solver {
        Solver::Dense => false,
        Solver::Sparse => true,
        Solver::Auto => n > cfg.dense_max_nodes,
    } && rest > 0
        && n.saturating_sub(constraints.count) >= 3 * (rest + cfg.lobpcg.guard);
    let mut values = vec![0.0; null.len()];
    let mut cols: Vec<Vec<f64>> = null;
    let (mut iterations, mut max_residual) = (0, 0.0f64);
    if rest > 0 && sparse {
        let dinv = inv_sqrt_degrees(&a);
        let op = NormalizedLaplacian {
            indptr: a.indptr(),
            indices: a.indices(),
            weights: a.weights(),
            dinv,
        };
        let pairs = lobpcg(&op, &constraints, rest, &cfg.lobpcg)?;
        iterations = pairs.iterations;
        max_residual = pairs.residuals.iter().copied().fold(0.0, f64::max);
        for j in 0..pairs.values.len() {
            let mut v: Vec<f64> = (0..n)
                .map(|i| pairs.vectors.data[i * pairs.vectors.m + j])
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            orient(&mut v);
            cols.push(v);
            values.push(pairs.values[j]);
        }
    } else if rest > 0 {
        let c = constraints.count;
        let (vals, u) = smallest_dense(&dense_laplacian(&a), c + rest)?;
        for j in c..(c + rest).min(n) {
            let mut v: Vec<f64> = (0..n).map(|i| u[(i, j)]).collect();
            orient(&mut v);
            cols.push(v);
            values.push(vals[j]);
        }
    }
    let mut vectors = Array2::zeros((n, cols.len()));
    for (j, col) in cols.iter().enumerate() {
        for (i, &x) in col.iter().enumerate() {
            vectors[[i, j]] = x;
        }
    }
    Ok(Spectrum {
        values,
        vectors,
        sparse,
        iterations,
        max_residual,
    })
}

/// The encoding of one graph: `[n', k]` `f32`, zero columns past the available eigenvectors.
pub fn laplacian_pe(adj: &Csr, cfg: &PeConfig) -> Result<LaplacianPe> {
    let s = smallest_nontrivial(adj, cfg)?;
    Ok(to_pe(&s, cfg.k))
}

fn to_pe(s: &Spectrum, k: usize) -> LaplacianPe {
    let n = s.vectors.nrows();
    let mut vectors = Array2::<f32>::zeros((n, k));
    for j in 0..s.values.len().min(k) {
        for i in 0..n {
            vectors[[i, j]] = s.vectors[[i, j]] as f32;
        }
    }
    LaplacianPe {
        vectors,
        values: s.values.clone(),
    }
}

/// Encodings of many graphs, in parallel over graphs (each dense solve is sequential; the
/// biggest graphs are started first so no core idles at the end).
pub fn laplacian_pe_many(adjs: &[&Csr], cfg: &PeConfig) -> Result<Vec<LaplacianPe>> {
    cfg.validate()?;
    let mut order: Vec<usize> = (0..adjs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(adjs[i].num_nodes()));
    let mut out: Vec<Option<LaplacianPe>> = vec![None; adjs.len()];
    let results: Vec<(usize, Result<LaplacianPe>)> = order
        .par_iter()
        .with_max_len(1)
        .map(|&i| (i, laplacian_pe(adjs[i], cfg)))
        .collect();
    for (i, r) in results {
        out[i] = Some(r.map_err(|e| GraphError::invalid(format!("graph {i}"), e.to_string()))?);
    }
    Ok(out.into_iter().flatten().collect())
}

/// The graph ET reference's encoding of a graph padded to `padded` nodes with sink nodes
/// (`tools_utils.py`): `Ã` is `[padded + 1]²` with a full CLS
/// row and column, the real adjacency, and padded rows joined to CLS and every real node
/// (columns not, so `Ã` is asymmetric); `L = I − D^{-1/2} Ã D^{-1/2}` with row-sum degrees,
/// symmetrised as `(L + Lᵀ)/2` (what `jnp.linalg.eigh` does), columns 1..=k of its
/// eigenvectors, zero-padded. The real nodes' encoding then depends on the batch's padding.
pub fn reference_sink_pe(adj: &Csr, padded: usize, k: usize) -> Result<LaplacianPe> {
    let n = adj.num_nodes();
    if padded < n {
        return Err(GraphError::invalid(
            "sink padding",
            format!("padded size {padded} is below the graph's {n} nodes"),
        ));
    }
    let np = padded + 1;
    let mut a = Mat::<f64>::zeros(np, np);
    for j in 0..np {
        a[(0, j)] = 1.0;
        a[(j, 0)] = 1.0;
    }
    for (r, c, w) in adj.iter() {
        a[(r as usize + 1, c as usize + 1)] += w as f64;
    }
    for r in n + 1..np {
        for c in 1..=n {
            a[(r, c)] = 1.0;
        }
    }
    let d: Vec<f64> = (0..np)
        .map(|i| {
            let s: f64 = (0..np).map(|j| a[(i, j)]).sum();
            if s > 0.0 { 1.0 / s.sqrt() } else { 0.0 }
        })
        .collect();
    let mut l = Mat::<f64>::zeros(np, np);
    for i in 0..np {
        for j in 0..np {
            let m_ij = -d[i] * a[(i, j)] * d[j] - d[j] * a[(j, i)] * d[i];
            l[(i, j)] = 0.5 * m_ij + if i == j { 1.0 } else { 0.0 };
        }
    }
    let avail = k.min(np - 1);
    let (vals, u) = smallest_dense(&l, avail + 1)?;
    let mut vectors = Array2::<f32>::zeros((np, k));
    let mut values = Vec::with_capacity(avail);
    for j in 0..avail {
        let mut v: Vec<f64> = (0..np).map(|i| u[(i, j + 1)]).collect();
        orient(&mut v);
        for (i, x) in v.iter().enumerate() {
            vectors[[i, j]] = *x as f32;
        }
        values.push(vals[j + 1]);
    }
    Ok(LaplacianPe { vectors, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(n: u32) -> Csr {
        let e: Vec<(u32, u32)> = (0..n - 1).map(|i| (i, i + 1)).collect();
        Csr::from_undirected(n as usize, &e).unwrap()
    }

    #[test]
    fn path_graph_matches_closed_form() {
        // Normalised Laplacian of a path P_n has eigenvalues 1 − cos(π j/(n−1)), j = 0..n−1.
        let n = 9;
        let s = smallest_nontrivial(&path(n), &PeConfig::plain(4)).unwrap();
        for (j, v) in s.values.iter().enumerate() {
            let want = 1.0 - (std::f64::consts::PI * (j + 1) as f64 / (n - 1) as f64).cos();
            assert!((v - want).abs() < 1e-12, "{j}: {v} vs {want}");
        }
    }

    #[test]
    fn small_graphs_are_zero_padded() {
        let pe = laplacian_pe(&path(3), &PeConfig::et_graph()).unwrap();
        assert_eq!(pe.vectors.dim(), (4, 15));
        assert_eq!(pe.values.len(), 3);
        assert!(
            pe.vectors
                .slice(ndarray::s![.., 3..])
                .iter()
                .all(|&x| x == 0.0)
        );
        assert!(pe.vectors.column(2).iter().any(|&x| x != 0.0));
    }

    #[test]
    fn sign_convention_is_deterministic() {
        let mut v = vec![0.1, -0.5, 0.3];
        orient(&mut v);
        assert_eq!(v, vec![-0.1, 0.5, -0.3]);
        let mut w = vec![0.5, -0.5];
        orient(&mut w);
        assert_eq!(w, vec![0.5, -0.5]);
    }
}
