//! The smallest eigenpairs of a dense symmetric matrix without faer's full eigendecomposition:
//! Householder tridiagonalisation, one of two tridiagonal solvers, and the back-transformation
//! of only the wanted vectors by the Householder reflectors.
//!
//! - Small matrices (the molecules of NCI1, MUTAG, PROTEINS: tens to about a hundred nodes):
//!   unblocked tridiagonalisation, then implicit QL with Wilkinson shifts and the rotations
//!   accumulated (EISPACK's `tql2`), compiled for the CPU's best instruction set. faer's
//!   tridiagonal QR does the same, but its Givens rotations call `hypot`, which took a fifth of
//!   the NCI1 encodings' time, and its blocked tridiagonalisation a quarter; the entries of a
//!   normalised Laplacian are bounded by 2, so `√(f² + g²)` is safe here (with `hypot`'s
//!   scaling kept for squares that would leave the f64 range).
//! - Larger ones: faer's blocked tridiagonalisation, all the eigenvalues (implicit QL without
//!   vectors: `O(n²)`), inverse iteration with reorthogonalisation inside eigenvalue clusters
//!   for the wanted vectors (LAPACK's `dstein` scheme). About `4/3 n³ + O(n² k)` flops instead
//!   of a full solve's `≈ 9 n³`; every pair is checked (`‖T z − λ z‖` and orthogonality inside
//!   clusters).
//!
//! If a check fails or QL does not converge, the caller falls back to the full solver.

use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::evd::tridiag::{tridiag_in_place, tridiag_in_place_scratch};
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj,
};
use faer::linalg::qr::no_pivoting::factor::recommended_block_size;
use faer::{Conj, Mat, Par};

/// Solves `(T − λ I) x = b` by Gaussian elimination with partial pivoting on the tridiagonal,
/// tiny pivots replaced by `tiny` (the matrix is singular to working precision by design).
struct ShiftedLu {
    u0: Vec<f64>,
    u1: Vec<f64>,
    u2: Vec<f64>,
    mult: Vec<f64>,
    swap: Vec<bool>,
}

impl ShiftedLu {
    fn new(d: &[f64], e: &[f64], lambda: f64, tiny: f64) -> Self {
        let n = d.len();
        let mut u0: Vec<f64> = d.iter().map(|x| x - lambda).collect();
        let mut u1: Vec<f64> = e.to_vec();
        let mut u2 = vec![0.0; n.saturating_sub(2)];
        let mut mult = vec![0.0; n.saturating_sub(1)];
        let mut swap = vec![false; n.saturating_sub(1)];
        for i in 0..n.saturating_sub(1) {
            let sub = e[i];
            if u0[i].abs() >= sub.abs() {
                if u0[i].abs() < tiny {
                    u0[i] = tiny.copysign(if u0[i] == 0.0 { 1.0 } else { u0[i] });
                }
                let m = sub / u0[i];
                mult[i] = m;
                u0[i + 1] -= m * u1[i];
            } else {
                let m = u0[i] / sub;
                mult[i] = m;
                swap[i] = true;
                u0[i] = sub;
                let old_u1 = u1[i];
                u1[i] = u0[i + 1];
                u0[i + 1] = old_u1 - m * u0[i + 1];
                if i + 2 < n {
                    u2[i] = u1[i + 1];
                    u1[i + 1] = -m * u1[i + 1];
                }
            }
        }
        if let Some(last) = u0.last_mut()
            && last.abs() < tiny
        {
            *last = tiny.copysign(if *last == 0.0 { 1.0 } else { *last });
        }
        Self {
            u0,
            u1,
            u2,
            mult,
            swap,
        }
    }

    fn solve(&self, b: &mut [f64]) {
        let n = b.len();
        for i in 0..n.saturating_sub(1) {
            if self.swap[i] {
                b.swap(i, i + 1);
            }
            b[i + 1] -= self.mult[i] * b[i];
        }
        for i in (0..n).rev() {
            let mut s = b[i];
            if i + 1 < n {
                s -= self.u1[i] * b[i + 1];
            }
            if i + 2 < n {
                s -= self.u2[i] * b[i + 2];
            }
            b[i] = s / self.u0[i];
        }
    }
}

fn normalize(v: &mut [f64]) -> f64 {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    norm
}

/// Eigenpairs `0..count` (ascending) of the symmetric tridiagonal `(d, e)`: values and unit
/// vectors (column-major `n × count`), or `None` if a check fails.
fn tridiagonal_smallest(d: &[f64], e: &[f64], count: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    let n = d.len();
    let norm = (0..n)
        .map(|i| {
            d[i].abs()
                + if i > 0 { e[i - 1].abs() } else { 0.0 }
                + if i + 1 < n { e[i].abs() } else { 0.0 }
        })
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let eps = f64::EPSILON;
    // All eigenvalues of T by implicit QL without vectors (O(n²)), ascending.
    let (mut all, _) = implicit_ql(d, e, false)?;
    all.sort_by(f64::total_cmp);
    let values: Vec<f64> = all[..count].to_vec();
    // Inverse iteration; vectors of one cluster are kept orthogonal.
    let cluster_gap = 1e-3 * norm;
    let tiny = eps * norm;
    let mut z = vec![0.0; n * count];
    let mut cluster_start = 0;
    let mut prev_shift = f64::NEG_INFINITY;
    for j in 0..count {
        if j > 0 && values[j] - values[j - 1] > cluster_gap {
            cluster_start = j;
        }
        // Equal eigenvalues get slightly different shifts, as dstein does.
        let mut shift = values[j];
        if j > cluster_start && shift <= prev_shift + 10.0 * eps * norm {
            shift = prev_shift + 10.0 * eps * norm;
        }
        prev_shift = shift;
        let lu = ShiftedLu::new(d, e, shift, tiny);
        // A deterministic, generic start vector, different for each j.
        let mut x: Vec<f64> = (0..n)
            .map(|i| {
                let h = ((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    ^ (j as u64 + 7).wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
                    >> 11;
                (h as f64) / ((1u64 << 53) as f64) - 0.5
            })
            .collect();
        normalize(&mut x);
        for _ in 0..4 {
            lu.solve(&mut x);
            for k in cluster_start..j {
                let zk = &z[k * n..(k + 1) * n];
                let dot: f64 = x.iter().zip(zk).map(|(a, b)| a * b).sum();
                x.iter_mut().zip(zk).for_each(|(a, b)| *a -= dot * b);
            }
            if normalize(&mut x) == 0.0 || x.iter().any(|v| !v.is_finite()) {
                return None;
            }
        }
        // Check the residual ‖T x − λ x‖.
        let res = (0..n)
            .map(|i| {
                let mut t = (d[i] - values[j]) * x[i];
                if i > 0 {
                    t += e[i - 1] * x[i - 1];
                }
                if i + 1 < n {
                    t += e[i] * x[i + 1];
                }
                t * t
            })
            .sum::<f64>()
            .sqrt();
        if res > 1e-10 * norm {
            return None;
        }
        z[j * n..(j + 1) * n].copy_from_slice(&x);
    }
    // Orthogonality inside clusters (across clusters it follows from the gaps).
    let mut start = 0;
    for j in 1..=count {
        if j == count || values[j] - values[j - 1] > cluster_gap {
            for a in start..j {
                for b in a + 1..j {
                    let dot: f64 = z[a * n..(a + 1) * n]
                        .iter()
                        .zip(&z[b * n..(b + 1) * n])
                        .map(|(x, y)| x * y)
                        .sum();
                    if dot.abs() > 1e-9 {
                        return None;
                    }
                }
            }
            start = j;
        }
    }
    Some((values, z))
}

/// Below this size the small-matrix path (implicit QL with accumulated rotations), at and above
/// it inverse iteration (measured on NCI1 and DD).
const QL_MAX_NODES: usize = 128;

/// `√(a² + b²)` for the bounded entries of this module's matrices, with `hypot`'s scaling
/// only where the squares would leave the f64 range.
#[inline(always)]
fn pythag(a: f64, b: f64) -> f64 {
    let m = a.abs().max(b.abs());
    if m > 1e150 || (m < 1e-150 && m > 0.0) {
        a.hypot(b)
    } else {
        (a * a + b * b).sqrt()
    }
}

/// The eigenvalues of the symmetric tridiagonal `(d, e)` (unordered) and, if `vectors`, the
/// accumulated rotations (column-major `n × n`, column `j` the vector of value `j`; empty
/// otherwise), compiled for the best instruction set the CPU has (AVX2 for the rotations).
fn implicit_ql(d: &[f64], e: &[f64], vectors: bool) -> Option<(Vec<f64>, Vec<f64>)> {
    struct Ql<'a> {
        d: &'a [f64],
        e: &'a [f64],
        vectors: bool,
    }
    impl pulp::WithSimd for Ql<'_> {
        type Output = Option<(Vec<f64>, Vec<f64>)>;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
            implicit_ql_impl(self.d, self.e, self.vectors)
        }
    }
    pulp::Arch::new().dispatch(Ql { d, e, vectors })
}

#[inline(always)]
fn implicit_ql_impl(d: &[f64], e: &[f64], vectors: bool) -> Option<(Vec<f64>, Vec<f64>)> {
    let n = d.len();
    let mut d = d.to_vec();
    // e[i] couples i and i + 1; e[n − 1] = 0 is workspace.
    let mut e = e.to_vec();
    e.push(0.0);
    let mut z = Vec::new();
    if vectors {
        z = vec![0.0; n * n];
        for i in 0..n {
            z[i * n + i] = 1.0;
        }
    }
    for l in 0..n {
        let mut iterations = 0;
        loop {
            let mut m = l;
            while m + 1 < n {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() <= f64::EPSILON * dd || e[m].abs() < f64::MIN_POSITIVE {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            iterations += 1;
            if iterations > 60 {
                return None;
            }
            let mut g = (d[l + 1] - d[l]) / (2.0 * e[l]);
            let mut r = pythag(g, 1.0);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (1.0, 1.0, 0.0);
            let mut deflated = false;
            for i in (l..m).rev() {
                let f = s * e[i];
                let b = c * e[i];
                r = pythag(f, g);
                e[i + 1] = r;
                if r == 0.0 {
                    // Underflow: the matrix split; restart on the smaller block.
                    d[i + 1] -= p;
                    e[m] = 0.0;
                    deflated = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + 2.0 * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
                if vectors {
                    let (lo, hi) = z.split_at_mut((i + 1) * n);
                    for (a, b) in lo[i * n..].iter_mut().zip(hi[..n].iter_mut()) {
                        let (x, y) = (*a, *b);
                        *b = s * x + c * y;
                        *a = c * x - s * y;
                    }
                }
            }
            if deflated {
                continue;
            }
            d[l] -= p;
            e[l] = g;
            e[m] = 0.0;
        }
    }
    if d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    Some((d, z))
}

/// [`smallest_eigh`] for matrices of fewer than [`QL_MAX_NODES`] rows, in one pass compiled for
/// the best instruction set the CPU has: unblocked Householder tridiagonalisation (faer's
/// blocked one spent a quarter of the NCI1 encodings' time on 30-row matrices), implicit QL,
/// and the back-transformation of the `count` wanted vectors only.
fn small_eigh(a: &Mat<f64>, count: usize) -> Option<(Vec<f64>, Mat<f64>)> {
    struct Small<'a> {
        a: &'a Mat<f64>,
        count: usize,
    }
    impl pulp::WithSimd for Small<'_> {
        type Output = Option<(Vec<f64>, Mat<f64>)>;
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
            small_eigh_impl(self.a, self.count)
        }
    }
    pulp::Arch::new().dispatch(Small { a, count })
}

#[inline(always)]
fn small_eigh_impl(a: &Mat<f64>, count: usize) -> Option<(Vec<f64>, Mat<f64>)> {
    let n = a.nrows();
    // Column-major copy, symmetric from the lower triangle.
    let mut m = vec![0.0; n * n];
    for j in 0..n {
        for i in j..n {
            m[j * n + i] = a[(i, j)];
            m[i * n + j] = a[(i, j)];
        }
    }
    // Householder reflectors H_k = I − τ_k v_k v_kᵀ on rows k + 1.., v_k[0] = 1 (LAPACK dlarfg),
    // so that T = Qᵀ A Q with Q = H_0 ⋯ H_{n−3}.
    let mut d = vec![0.0; n];
    let mut e = vec![0.0; n - 1];
    let mut reflectors: Vec<(Vec<f64>, f64)> = Vec::with_capacity(n - 2);
    let mut p = vec![0.0; n];
    for k in 0..n - 2 {
        let len = n - k - 1;
        let x0 = m[k * n + k + 1];
        let tail = &m[k * n + k + 2..(k + 1) * n];
        let xnorm = tail.iter().map(|x| x * x).sum::<f64>().sqrt();
        d[k] = m[k * n + k];
        if xnorm == 0.0 {
            e[k] = x0;
            reflectors.push((Vec::new(), 0.0));
            continue;
        }
        let beta = -pythag(x0, xnorm).copysign(x0);
        let tau = (beta - x0) / beta;
        let scale = 1.0 / (x0 - beta);
        let mut v = Vec::with_capacity(len);
        v.push(1.0);
        v.extend(tail.iter().map(|x| x * scale));
        e[k] = beta;
        // A22 ← H A22 H = A22 − v wᵀ − w vᵀ with p = τ A22 v and w = p − (τ/2)(pᵀv) v.
        let base = k + 1;
        let p = &mut p[..len];
        p.fill(0.0);
        for (j, &vj) in v.iter().enumerate() {
            let col = &m[(base + j) * n + base..(base + j + 1) * n];
            for (pi, cij) in p.iter_mut().zip(col) {
                *pi += cij * vj;
            }
        }
        p.iter_mut().for_each(|x| *x *= tau);
        let half = 0.5 * tau * p.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>();
        p.iter_mut().zip(&v).for_each(|(w, vi)| *w -= half * vi);
        for j in 0..len {
            let (vj, wj) = (v[j], p[j]);
            let col = &mut m[(base + j) * n + base..(base + j + 1) * n];
            for ((c, vi), wi) in col.iter_mut().zip(&v).zip(p.iter()) {
                *c -= vi * wj + wi * vj;
            }
        }
        reflectors.push((v, tau));
    }
    d[n - 2] = m[(n - 2) * n + n - 2];
    d[n - 1] = m[(n - 1) * n + n - 1];
    e[n - 2] = m[(n - 2) * n + n - 1];
    let (values, z) = implicit_ql_impl(&d, &e, true)?;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    // u = Q z = H_0 (H_1 (⋯ H_{n−3} z)).
    let mut u = Mat::<f64>::zeros(n, count);
    let mut col = vec![0.0; n];
    for (out, &j) in order[..count].iter().enumerate() {
        col.copy_from_slice(&z[j * n..(j + 1) * n]);
        for (k, (v, tau)) in reflectors.iter().enumerate().rev() {
            if *tau == 0.0 {
                continue;
            }
            let seg = &mut col[k + 1..];
            let dot = tau * seg.iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
            seg.iter_mut().zip(v).for_each(|(a, b)| *a -= dot * b);
        }
        for (i, &x) in col.iter().enumerate() {
            u[(i, out)] = x;
        }
    }
    Some((order[..count].iter().map(|&j| values[j]).collect(), u))
}

/// The `count` smallest eigenpairs of the symmetric `a` (lower triangle read): eigenvalues
/// ascending and unit eigenvectors as columns, or `None` when a check fails (use the full
/// solver then).
pub(crate) fn smallest_eigh(a: &Mat<f64>, count: usize) -> Option<(Vec<f64>, Mat<f64>)> {
    let n = a.nrows();
    // Inverse iteration for every vector of a large matrix would cost more than the full solve.
    if count == 0 || n < 3 || count > n || (n >= QL_MAX_NODES && count == n) {
        return None;
    }
    if n < QL_MAX_NODES {
        return small_eigh(a, count);
    }
    let par = Par::Seq;
    let bs = recommended_block_size::<f64>(n - 1, n - 1).max(1);
    let mut trid = a.clone();
    let mut householder = Mat::<f64>::zeros(bs, n - 1);
    let mut buf = MemBuffer::new(StackReq::any_of(&[
        tridiag_in_place_scratch::<f64>(n, par, Default::default()),
        apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(n - 1, bs, count),
    ]));
    tridiag_in_place(
        trid.as_mut(),
        householder.as_mut(),
        par,
        MemStack::new(&mut buf),
        Default::default(),
    );
    let d: Vec<f64> = (0..n).map(|i| trid[(i, i)]).collect();
    let e: Vec<f64> = (0..n - 1).map(|i| trid[(i + 1, i)]).collect();
    let (values, z) = tridiagonal_smallest(&d, &e, count)?;
    let mut u = Mat::<f64>::from_fn(n, count, |i, j| z[j * n + i]);
    apply_block_householder_sequence_on_the_left_in_place_with_conj(
        trid.as_ref().submatrix(1, 0, n - 1, n - 1),
        householder.as_ref(),
        Conj::No,
        u.as_mut().subrows_mut(1, n - 1),
        par,
        MemStack::new(&mut buf),
    );
    Some((values, u))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(a: &Mat<f64>, count: usize) {
        let (vals, u) = smallest_eigh(a, count).unwrap();
        let full = a.self_adjoint_eigen(faer::Side::Lower).unwrap();
        for (j, v) in vals.iter().enumerate() {
            let want = full.S()[j];
            assert!((v - want).abs() < 1e-12, "λ{j}: {v} vs {want}");
        }
        let r = a * &u
            - &u * Mat::<f64>::from_fn(count, count, |i, j| if i == j { vals[i] } else { 0.0 });
        assert!(r.norm_max() < 1e-10, "residual {}", r.norm_max());
        let g = u.transpose() * &u - Mat::<f64>::identity(count, count);
        assert!(g.norm_max() < 1e-10, "orthogonality {}", g.norm_max());
    }

    /// A random symmetric matrix, a matrix with an `(n − 1)`-fold eigenvalue and a block
    /// diagonal one with repeated eigenvalues, of `n` rows.
    fn cases(n: usize) -> [Mat<f64>; 3] {
        let mut s = n as u64;
        let mut rnd = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let r = Mat::<f64>::from_fn(n, n, |_, _| rnd());
        let sym = &r + r.transpose();
        let equal = Mat::<f64>::from_fn(n, n, |i, j| if i == j { 1.0 } else { -0.2 });
        let blocks = Mat::<f64>::from_fn(n, n, |i, j| {
            if i / 4 != j / 4 {
                0.0
            } else if i == j {
                2.0
            } else {
                -1.0
            }
        });
        [sym, equal, blocks]
    }

    #[test]
    fn implicit_ql_matches_the_full_solver() {
        for n in [3, 6, 12, 40, QL_MAX_NODES - 1] {
            for a in cases(n) {
                check(&a, n.min(12));
            }
        }
    }

    #[test]
    fn inverse_iteration_matches_the_full_solver() {
        for n in [QL_MAX_NODES, QL_MAX_NODES + 30] {
            for a in cases(n) {
                check(&a, 12);
            }
        }
    }

    #[test]
    fn both_tridiagonal_solvers_agree() {
        // A path graph's Laplacian-like tridiagonal matrix: distinct eigenvalues, so the two
        // solvers must give the same vectors up to sign.
        let n = 30;
        let d: Vec<f64> = (0..n).map(|i| 1.0 + 0.01 * i as f64).collect();
        let e: Vec<f64> = (0..n - 1).map(|i| -0.5 + 0.003 * i as f64).collect();
        let (v1, z1) = implicit_ql(&d, &e, true).unwrap();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| v1[a].total_cmp(&v1[b]));
        let (v2, z2) = tridiagonal_smallest(&d, &e, 10).unwrap();
        for (j, &o) in order[..10].iter().enumerate() {
            assert!((v1[o] - v2[j]).abs() < 1e-12, "λ{j}");
            let dot: f64 = (0..n).map(|i| z1[o * n + i] * z2[j * n + i]).sum();
            assert!(
                (dot.abs() - 1.0).abs() < 1e-10,
                "vector {j}: |dot| = {}",
                dot.abs()
            );
        }
    }
}
