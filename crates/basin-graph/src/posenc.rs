//! Positional and structural statistics of the GraphGPS family (SFi-Former's input encoders),
//! precomputed once per graph:
//!
//! - [`gps_laplacian`]: the LapPE statistics of the GPS code (`posenc_stats.py`): eigenpairs of
//!   the combinatorial Laplacian `L = D − A` of the undirected graph (self loops dropped), the
//!   `k` smallest **including** the trivial λ = 0 vector, eigenvalues clamped at 0, NaN-padded
//!   when the graph has fewer than `k` nodes. The GPS code keeps whatever signs `eigh` returns;
//!   here each vector is oriented (largest entry positive) so the statistics are deterministic;
//!   training flips signs at random anyway.
//! - [`rwse`]: random-walk structural encodings, `diag(Pᵏ)` for `k = 1..=steps` with
//!   `P = D⁻¹A` (a node without out-edges has a zero row), the return probabilities of a walk.
//!
//! (ET's encodings, normalised Laplacian without the trivial vector and zero padding, are
//! [`crate::laplacian`].)

use faer::Mat;
use ndarray::Array2;
use rayon::prelude::*;

use crate::Csr;
use crate::error::Result;
use crate::laplacian::{dense_eigh, orient};

/// A graph's LapPE statistics: `vectors` `[n, k]` and `values` `[k]`, NaN past the graph's
/// `n` frequencies.
#[derive(Clone, Debug, PartialEq)]
pub struct GpsLaplacian {
    /// Eigenvector entries per node and frequency.
    pub vectors: Array2<f32>,
    /// Eigenvalues, ascending.
    pub values: Vec<f32>,
}

/// The LapPE statistics of `adj` with `k` frequencies (see the module docs).
pub fn gps_laplacian(adj: &Csr, k: usize) -> Result<GpsLaplacian> {
    let n = adj.num_nodes();
    let sym = adj.symmetrized();
    let mut l = Mat::<f64>::zeros(n, n);
    for i in 0..n {
        for &j in sym.row(i) {
            let j = j as usize;
            if j != i {
                l[(i, j)] -= 1.0;
                l[(i, i)] += 1.0;
            }
        }
    }
    let mut vectors = Array2::from_elem((n, k), f32::NAN);
    let mut values = vec![f32::NAN; k];
    if n > 0 {
        let (vals, vecs) = dense_eigh(&l)?;
        for j in 0..k.min(n) {
            let mut v: Vec<f64> = (0..n).map(|i| vecs[(i, j)]).collect();
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= norm);
            orient(&mut v);
            for (i, x) in v.into_iter().enumerate() {
                vectors[(i, j)] = x as f32;
            }
            values[j] = vals[j].max(0.0) as f32;
        }
    }
    Ok(GpsLaplacian { vectors, values })
}

/// [`gps_laplacian`] of many graphs, in parallel.
pub fn gps_laplacian_many(adjs: &[&Csr], k: usize) -> Result<Vec<GpsLaplacian>> {
    adjs.par_iter().map(|a| gps_laplacian(a, k)).collect()
}

/// Random-walk return probabilities `[n, steps]`: column `k − 1` is `diag(Pᵏ)`, `P = D⁻¹A`
/// (row-stochastic over out-edges, edge weights ignored).
pub fn rwse(adj: &Csr, steps: usize) -> Array2<f32> {
    let n = adj.num_nodes();
    let mut out = Array2::zeros((n, steps));
    // M = Pᵏ kept dense; M ← P·M costs nnz·n per step.
    let mut m = Array2::<f64>::eye(n);
    for s in 0..steps {
        let mut next = Array2::<f64>::zeros((n, n));
        for i in 0..n {
            let row = adj.row(i);
            if row.is_empty() {
                continue;
            }
            let p = 1.0 / row.len() as f64;
            let mut acc = next.row_mut(i);
            for &j in row {
                acc.scaled_add(p, &m.row(j as usize));
            }
        }
        m = next;
        for i in 0..n {
            out[(i, s)] = m[(i, i)] as f32;
        }
    }
    out
}

/// [`rwse`] of many graphs, in parallel.
pub fn rwse_many(adjs: &[&Csr], steps: usize) -> Vec<Array2<f32>> {
    adjs.par_iter().map(|a| rwse(a, steps)).collect()
}
