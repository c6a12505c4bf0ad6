//! Block LOBPCG (Knyazev 2001) for the smallest eigenpairs of a symmetric normalised
//! Laplacian too large for a dense solver.
//!
//! Why a block method: single-vector Lanczos misses or duplicates repeated eigenvalues
//! (grids, symmetric graphs, disconnected graphs: faer's Lanczos dropped copies of a 40 × 40
//! grid's degenerate pairs and found a ghost fourth zero on three components), while a block
//! of `m > k` vectors resolves every copy. The known null space (one vector per connected
//! component) is passed as a constraint block and projected out, so the iteration only sees
//! the non-trivial spectrum.
//!
//! Blocks are row-major `n × m` arrays (one node's `m` values contiguous, so the sparse product
//! streams each neighbour's row once); the tall-skinny products go through faer's GEMM on the
//! rayon pool, the small Rayleigh–Ritz problems through faer's dense symmetric solver.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};

/// LOBPCG settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LobpcgConfig {
    /// Stop when every wanted residual `‖L x − λ x‖₂` is below this (‖L‖ ≤ 2, so it is
    /// also a relative tolerance).
    pub tol: f64,
    /// Iteration limit; reaching it is an error.
    pub max_iter: usize,
    /// Extra guard vectors beyond the `k` wanted (a bigger block converges in fewer
    /// iterations on clustered spectra).
    pub guard: usize,
    /// Seed of the random start block.
    pub seed: u64,
}

impl Default for LobpcgConfig {
    fn default() -> Self {
        Self {
            tol: 1e-6,
            max_iter: 2000,
            guard: 5,
            seed: 0,
        }
    }
}

/// A row-major `n × m` block of vectors.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    pub n: usize,
    pub m: usize,
    pub data: Vec<f64>,
}

impl Block {
    pub fn zeros(n: usize, m: usize) -> Self {
        Self {
            n,
            m,
            data: vec![0.0; n * m],
        }
    }

    /// The columns `cols`, as a new block.
    pub fn columns(&self, cols: &[usize]) -> Self {
        let mut out = Self::zeros(self.n, cols.len());
        out.data
            .par_chunks_mut(cols.len().max(1))
            .zip(self.data.par_chunks(self.m.max(1)))
            .for_each(|(dst, src)| {
                for (d, &c) in dst.iter_mut().zip(cols) {
                    *d = src[c];
                }
            });
        out
    }

    pub fn col_norms(&self) -> Vec<f64> {
        let m = self.m;
        let sq = self
            .data
            .par_chunks(1 << 16)
            .map(|chunk| {
                let mut acc = vec![0.0; m];
                for row in chunk.chunks(m) {
                    for (a, x) in acc.iter_mut().zip(row) {
                        *a += x * x;
                    }
                }
                acc
            })
            .reduce(
                || vec![0.0; m],
                |mut a, b| {
                    for (x, y) in a.iter_mut().zip(b) {
                        *x += y;
                    }
                    a
                },
            );
        sq.into_iter().map(f64::sqrt).collect()
    }
}

/// Rows per parallel task in the tall-skinny kernels.
const ROWS_PER_TASK: usize = 4096;

/// `aᵀ b` for tall row-major blocks: each task multiplies its slab of rows with faer's
/// sequential GEMM, then the small partial products are added (parallelising a GEMM over a
/// long inner dimension is what libraries do poorly).
pub(crate) fn gram(a: &Block, b: &Block) -> Mat<f64> {
    let (ma, mb) = (a.m, b.m);
    if ma == 0 || mb == 0 || a.n == 0 {
        return Mat::zeros(ma, mb);
    }
    a.data
        .par_chunks(ROWS_PER_TASK * ma)
        .zip(b.data.par_chunks(ROWS_PER_TASK * mb))
        .map(|(ca, cb)| {
            let rows = ca.len() / ma;
            let mut g = Mat::<f64>::zeros(ma, mb);
            matmul(
                g.as_mut(),
                Accum::Replace,
                MatRef::from_row_major_slice(ca, rows, ma).transpose(),
                MatRef::from_row_major_slice(cb, rows, mb),
                1.0,
                Par::Seq,
            );
            g
        })
        .reduce(|| Mat::zeros(ma, mb), |x, y| x + y)
}

/// `out (+)= a c` (`c` small), slab by slab.
fn mul_into(out: &mut Block, a: &Block, c: MatRef<'_, f64>, add: bool) {
    let cols = c.ncols();
    if cols == 0 || a.n == 0 {
        return;
    }
    let am = a.m;
    if am == 0 {
        if !add {
            out.data.fill(0.0);
        }
        return;
    }
    out.data
        .par_chunks_mut(ROWS_PER_TASK * cols)
        .zip(a.data.par_chunks(ROWS_PER_TASK * am))
        .for_each(|(o, ar)| {
            let rows = ar.len() / am;
            matmul(
                MatMut::from_row_major_slice_mut(o, rows, cols),
                if add { Accum::Add } else { Accum::Replace },
                MatRef::from_row_major_slice(ar, rows, am),
                c,
                1.0,
                Par::Seq,
            );
        });
}

/// `a c` (n × c.ncols()).
pub(crate) fn mul(a: &Block, c: MatRef<'_, f64>) -> Block {
    let mut out = Block::zeros(a.n, c.ncols());
    mul_into(&mut out, a, c, false);
    out
}

/// `out += a c`.
fn mul_add(out: &mut Block, a: &Block, c: MatRef<'_, f64>) {
    mul_into(out, a, c, true);
}

/// The symmetric normalised Laplacian `L = S − D^{-1/2} A D^{-1/2}` of a symmetric CSR, as an
/// operator (`S_ii = 1` where `d_i > 0`, else 0 — an isolated node is its own component).
pub(crate) struct NormalizedLaplacian<'a> {
    pub indptr: &'a [usize],
    pub indices: &'a [u32],
    pub weights: Option<&'a [f32]>,
    /// `d_i^{-1/2}`, 0 for isolated nodes.
    pub dinv: Vec<f64>,
}

impl NormalizedLaplacian<'_> {
    pub fn n(&self) -> usize {
        self.dinv.len()
    }

    /// `L x` for a block.
    pub fn apply(&self, x: &Block) -> Block {
        let m = x.m;
        let mut y = Block::zeros(x.n, m);
        if m == 0 {
            return y;
        }
        y.data
            .par_chunks_mut(m)
            .enumerate()
            .with_min_len(256)
            .for_each(|(i, yi)| {
                let di = self.dinv[i];
                if di == 0.0 {
                    return;
                }
                let mut acc = [0.0f64; 64];
                let acc = &mut acc[..m.min(64)];
                let (s, e) = (self.indptr[i], self.indptr[i + 1]);
                if m <= 64 {
                    for p in s..e {
                        let j = self.indices[p] as usize;
                        let w = self.weights.map_or(1.0, |w| w[p] as f64) * self.dinv[j];
                        let xj = &x.data[j * m..(j + 1) * m];
                        for (a, v) in acc.iter_mut().zip(xj) {
                            *a += w * v;
                        }
                    }
                    let xi = &x.data[i * m..(i + 1) * m];
                    for ((o, a), v) in yi.iter_mut().zip(acc.iter()).zip(xi) {
                        *o = v - di * a;
                    }
                } else {
                    yi.copy_from_slice(&x.data[i * m..(i + 1) * m]);
                    for p in s..e {
                        let j = self.indices[p] as usize;
                        let w = self.weights.map_or(1.0, |w| w[p] as f64) * self.dinv[j] * di;
                        for (o, v) in yi.iter_mut().zip(&x.data[j * m..(j + 1) * m]) {
                            *o -= w * v;
                        }
                    }
                }
            });
        y
    }
}

/// An orthonormal constraint block whose columns have disjoint supports (one per connected
/// component): `comp[i]` is node i's column, `value[i]` its entry.
pub(crate) struct Constraints {
    pub comp: Vec<u32>,
    pub value: Vec<f64>,
    pub count: usize,
}

impl Constraints {
    /// `x ← x − Y (Yᵀ x)`.
    pub fn project(&self, x: &mut Block) {
        let (m, c) = (x.m, self.count);
        if m == 0 || c == 0 {
            return;
        }
        let coef = x
            .data
            .par_chunks(m)
            .enumerate()
            .fold(
                || vec![0.0; c * m],
                |mut acc, (i, row)| {
                    let (k, v) = (self.comp[i] as usize, self.value[i]);
                    if v != 0.0 {
                        for (a, x) in acc[k * m..(k + 1) * m].iter_mut().zip(row) {
                            *a += v * x;
                        }
                    }
                    acc
                },
            )
            .reduce(
                || vec![0.0; c * m],
                |mut a, b| {
                    for (x, y) in a.iter_mut().zip(b) {
                        *x += y;
                    }
                    a
                },
            );
        x.data.par_chunks_mut(m).enumerate().for_each(|(i, row)| {
            let (k, v) = (self.comp[i] as usize, self.value[i]);
            if v != 0.0 {
                for (x, a) in row.iter_mut().zip(&coef[k * m..(k + 1) * m]) {
                    *x -= v * a;
                }
            }
        });
    }
}

/// Symmetric eigendecomposition of a small dense matrix (ascending).
pub(crate) fn small_eigh(a: MatRef<'_, f64>) -> Result<(Vec<f64>, Mat<f64>)> {
    let n = a.nrows();
    let mut sym = Mat::zeros(n, n);
    for j in 0..n {
        for i in 0..n {
            sym[(i, j)] = 0.5 * (a[(i, j)] + a[(j, i)]);
        }
    }
    let e = sym
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|e| GraphError::NoConvergence {
            what: "dense symmetric eigensolver".into(),
            message: format!("{e:?}"),
        })?;
    let s = e.S();
    let vals = (0..n).map(|i| s[i]).collect();
    Ok((vals, e.U().to_owned()))
}

/// Orthonormalises a block by the eigendecomposition of its Gram matrix (SVQB), dropping
/// directions whose Gram eigenvalue is below `1e-12 × max`. Returns the new block and the
/// transform `T` (so the same combination can be applied to `A v`).
fn orthonormalize(v: &Block) -> Result<(Block, Mat<f64>)> {
    let g = gram(v, v);
    let (vals, vecs) = small_eigh(g.as_ref())?;
    let max = vals.iter().copied().fold(0.0f64, f64::max);
    let keep: Vec<usize> = (0..vals.len())
        .filter(|&i| vals[i] > 1e-12 * max && vals[i] > 1e-300)
        .collect();
    let mut t = Mat::zeros(v.m, keep.len());
    for (c, &i) in keep.iter().enumerate() {
        let s = 1.0 / vals[i].sqrt();
        for r in 0..v.m {
            t[(r, c)] = vecs[(r, i)] * s;
        }
    }
    Ok((mul(v, t.as_ref()), t))
}

/// Cholesky factor `L` of a small SPD matrix (`G = L Lᵀ`), or `None` if it is not positive.
fn cholesky(g: &Mat<f64>) -> Option<Mat<f64>> {
    let n = g.nrows();
    let mut l = Mat::zeros(n, n);
    for j in 0..n {
        let mut d = g[(j, j)];
        for p in 0..j {
            d -= l[(j, p)] * l[(j, p)];
        }
        if d.is_nan() || d <= 1e-14 * g[(j, j)].abs().max(1e-300) {
            return None;
        }
        let d = d.sqrt();
        l[(j, j)] = d;
        for i in j + 1..n {
            let mut s = g[(i, j)];
            for p in 0..j {
                s -= l[(i, p)] * l[(j, p)];
            }
            l[(i, j)] = s / d;
        }
    }
    Some(l)
}

/// Solves `A c = μ B c` for symmetric `A` and SPD `B` (small, dense); `None` if `B` is not
/// numerically positive definite.
fn generalized_eigh(a: &Mat<f64>, b: &Mat<f64>) -> Result<Option<(Vec<f64>, Mat<f64>)>> {
    let Some(l) = cholesky(b) else {
        return Ok(None);
    };
    let n = a.nrows();
    // Linv = L⁻¹ by forward substitution.
    let mut linv = Mat::zeros(n, n);
    for c in 0..n {
        for i in 0..n {
            let mut s = if i == c { 1.0 } else { 0.0 };
            for p in 0..i {
                s -= l[(i, p)] * linv[(p, c)];
            }
            linv[(i, c)] = s / l[(i, i)];
        }
    }
    let m = &linv * a * linv.transpose();
    let (vals, y) = small_eigh(m.as_ref())?;
    let c = linv.transpose() * &y;
    Ok(Some((vals, c)))
}

/// Block assembly helper: `blocks[i]ᵀ blocks[j]` into a big matrix.
fn assemble(left: &[&Block], right: &[&Block], sym_diag: &[Option<Mat<f64>>]) -> Mat<f64> {
    let sizes: Vec<usize> = left.iter().map(|b| b.m).collect();
    let total: usize = sizes.iter().sum();
    let offs: Vec<usize> = sizes
        .iter()
        .scan(0, |acc, &s| {
            let o = *acc;
            *acc += s;
            Some(o)
        })
        .collect();
    let mut g = Mat::zeros(total, total);
    for i in 0..left.len() {
        for j in i..left.len() {
            let block = match (&sym_diag[i], i == j) {
                (Some(d), true) => d.clone(),
                _ => gram(left[i], right[j]),
            };
            for r in 0..sizes[i] {
                for c in 0..sizes[j] {
                    g[(offs[i] + r, offs[j] + c)] = block[(r, c)];
                    g[(offs[j] + c, offs[i] + r)] = block[(r, c)];
                }
            }
        }
    }
    g
}

/// The result of [`lobpcg`].
pub(crate) struct Eigenpairs {
    pub values: Vec<f64>,
    pub vectors: Block,
    pub iterations: usize,
    pub residuals: Vec<f64>,
}

/// The `k` smallest eigenpairs of `op` orthogonal to the constraint block, by block LOBPCG
/// with `k + guard` vectors (fewer if the space is smaller).
pub(crate) fn lobpcg(
    op: &NormalizedLaplacian<'_>,
    constraints: &Constraints,
    k: usize,
    cfg: &LobpcgConfig,
) -> Result<Eigenpairs> {
    let n = op.n();
    let free = n.saturating_sub(constraints.count);
    let k = k.min(free);
    if k == 0 {
        return Ok(Eigenpairs {
            values: Vec::new(),
            vectors: Block::zeros(n, 0),
            iterations: 0,
            residuals: Vec::new(),
        });
    }
    let m = (k + cfg.guard).min(free);
    if 3 * m > free {
        return Err(GraphError::invalid(
            "LOBPCG",
            format!("{free} free dimensions are too few for a block of {m}; use the dense solver"),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut x = Block::zeros(n, m);
    for v in &mut x.data {
        *v = rng.random_range(-1.0..1.0);
    }
    constraints.project(&mut x);
    let (mut x, _) = orthonormalize(&x)?;
    if x.m < m {
        return Err(GraphError::NoConvergence {
            what: "LOBPCG".into(),
            message: "random start block is rank deficient".into(),
        });
    }
    let mut ax = op.apply(&x);
    // Initial Rayleigh–Ritz.
    let (mut lambda, c) = small_eigh(gram(&x, &ax).as_ref())?;
    x = mul(&x, c.as_ref());
    ax = mul(&ax, c.as_ref());
    let mut p: Option<(Block, Block)> = None;
    let mut residuals = vec![f64::INFINITY; m];
    for iter in 0..cfg.max_iter {
        // R = AX − X Λ.
        let mut r = ax.clone();
        r.data
            .par_chunks_mut(m)
            .zip(x.data.par_chunks(m))
            .for_each(|(ri, xi)| {
                for ((a, b), l) in ri.iter_mut().zip(xi).zip(&lambda) {
                    *a -= l * b;
                }
            });
        residuals = r.col_norms();
        if residuals[..k].iter().all(|&v| v < cfg.tol) {
            return Ok(Eigenpairs {
                values: lambda[..k].to_vec(),
                vectors: x.columns(&(0..k).collect::<Vec<_>>()),
                iterations: iter,
                residuals: residuals[..k].to_vec(),
            });
        }
        let active: Vec<usize> = (0..m).filter(|&j| residuals[j] >= cfg.tol).collect();
        let mut ra = r.columns(&active);
        drop(r);
        constraints.project(&mut ra);
        // Orthogonalise the residuals against X, then orthonormalise them.
        let xr = gram(&x, &ra);
        let mut neg = xr.clone();
        for v in neg.col_iter_mut().flat_map(|c| c.iter_mut()) {
            *v = -*v;
        }
        mul_add(&mut ra, &x, neg.as_ref());
        let (ra, _) = orthonormalize(&ra)?;
        if ra.m == 0 {
            break;
        }
        let ara = op.apply(&ra);
        let pa = match p.take() {
            Some((pb, apb)) => {
                let (pcols, apcols) = (pb.columns(&active), apb.columns(&active));
                let (pn, t) = orthonormalize(&pcols)?;
                if pn.m == 0 {
                    None
                } else {
                    Some((pn, mul(&apcols, t.as_ref())))
                }
            }
            None => None,
        };
        // Rayleigh–Ritz on [X, R, P] (retried on [X, R] if the basis is ill-conditioned).
        let mut solved = None;
        for use_p in [true, false] {
            let blocks: Vec<&Block> = match (&pa, use_p) {
                (Some((pn, _)), true) => vec![&x, &ra, pn],
                _ => vec![&x, &ra],
            };
            let ablocks: Vec<&Block> = match (&pa, use_p) {
                (Some((_, apn)), true) => vec![&ax, &ara, apn],
                _ => vec![&ax, &ara],
            };
            let none = vec![None; blocks.len()];
            let ga = assemble(&blocks, &ablocks, &none);
            // R and P were just orthonormalised: their own Gram blocks are the identity.
            let mut unit: Vec<Option<Mat<f64>>> = vec![None];
            unit.extend(
                blocks[1..]
                    .iter()
                    .map(|b| Some(Mat::<f64>::identity(b.m, b.m))),
            );
            let gb = assemble(&blocks, &blocks, &unit);
            if let Some(sol) = generalized_eigh(&ga, &gb)? {
                solved = Some((sol, blocks.len() == 3));
                break;
            }
            if !use_p || pa.is_none() {
                break;
            }
        }
        let Some(((mu, coef), with_p)) = solved else {
            return Err(GraphError::NoConvergence {
                what: "LOBPCG".into(),
                message: format!("Rayleigh–Ritz basis lost rank at iteration {iter}"),
            });
        };
        let (mx, mr) = (x.m, ra.m);
        let take = |r0: usize, rows: usize| {
            let mut c = Mat::zeros(rows, m);
            for j in 0..m {
                for i in 0..rows {
                    c[(i, j)] = coef[(r0 + i, j)];
                }
            }
            c
        };
        let cx = take(0, mx);
        let cr = take(mx, mr);
        let mut pp = mul(&ra, cr.as_ref());
        let mut app = mul(&ara, cr.as_ref());
        if with_p && let Some((pn, apn)) = &pa {
            let cp = take(mx + mr, pn.m);
            mul_add(&mut pp, pn, cp.as_ref());
            mul_add(&mut app, apn, cp.as_ref());
        }
        let mut xn = mul(&x, cx.as_ref());
        let mut axn = mul(&ax, cx.as_ref());
        for (a, b) in xn.data.iter_mut().zip(&pp.data) {
            *a += b;
        }
        for (a, b) in axn.data.iter_mut().zip(&app.data) {
            *a += b;
        }
        x = xn;
        ax = axn;
        lambda = mu[..m].to_vec();
        p = Some((pp, app));
        // Every 20 iterations, restore exact orthonormality of X (rounding drifts); P stays a
        // valid search direction.
        if iter % 20 == 19 {
            let (xo, t) = orthonormalize(&x)?;
            if xo.m == m {
                let axo = mul(&ax, t.as_ref());
                let (l2, c2) = small_eigh(gram(&xo, &axo).as_ref())?;
                x = mul(&xo, c2.as_ref());
                ax = mul(&axo, c2.as_ref());
                lambda = l2;
            }
        }
    }
    Err(GraphError::NoConvergence {
        what: "LOBPCG".into(),
        message: format!(
            "{} iterations; wanted residuals {:?} (tolerance {:e})",
            cfg.max_iter,
            &residuals[..k],
            cfg.tol
        ),
    })
}
