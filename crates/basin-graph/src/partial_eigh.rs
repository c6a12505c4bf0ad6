//! The smallest eigenpairs of a dense symmetric matrix without a full eigendecomposition:
//! Householder tridiagonalisation (faer), all the tridiagonal matrix's
//! eigenvalues (faer's implicit QR on the tridiagonal matrix, without vectors: `O(n²)`), inverse
//! iteration with reorthogonalisation inside eigenvalue clusters for their eigenvectors
//! (LAPACK's `dstein` scheme), and the back-transformation by the
//! Householder reflectors. About `4/3 n³ + O(n² k)` flops instead of a full solve's `≈ 9 n³`,
//! which is what the encodings need (`k + 1` of `n` eigenvectors).
//!
//! Every eigenpair is checked (`‖T z − λ z‖` and orthogonality inside clusters); if a check
//! fails the caller falls back to the full solver.

use faer::diag::{DiagMut, DiagRef};
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::evd::tridiag::{tridiag_in_place, tridiag_in_place_scratch};
use faer::linalg::evd::tridiagonal_self_adjoint_evd;
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj,
};
use faer::linalg::qr::no_pivoting::factor::recommended_block_size;
use faer::linalg::temp_mat_scratch;
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
    // All eigenvalues of T by faer's implicit QR without vectors (O(n²)), ascending.
    let mut all = vec![0.0; n];
    let mut e_full = e.to_vec();
    e_full.push(0.0);
    let mut buf = MemBuffer::new(temp_mat_scratch::<f64>(n, 1).array(4));
    tridiagonal_self_adjoint_evd(
        DiagRef::from_slice(d),
        DiagRef::from_slice(&e_full),
        DiagMut::from_slice_mut(&mut all),
        None,
        Par::Seq,
        MemStack::new(&mut buf),
        Default::default(),
    )
    .ok()?;
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

/// The `count` smallest eigenpairs of the symmetric `a` (lower triangle read): eigenvalues
/// ascending and unit eigenvectors as columns, or `None` when a check fails (use the full
/// solver then).
pub(crate) fn smallest_eigh(a: &Mat<f64>, count: usize) -> Option<(Vec<f64>, Mat<f64>)> {
    let n = a.nrows();
    if count == 0 || n < 3 || count > n {
        return None;
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

    #[test]
    fn matches_the_full_solver() {
        // A random symmetric matrix, a matrix with a 5-fold eigenvalue and a block diagonal one.
        let n = 40;
        let mut s = 1u64;
        let mut rnd = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let r = Mat::<f64>::from_fn(n, n, |_, _| rnd());
        let sym = &r + r.transpose();
        check(&sym, 12);
        let k7 = Mat::<f64>::from_fn(6, 6, |i, j| if i == j { 1.0 } else { -0.2 });
        check(&k7, 6);
        let blocks = Mat::<f64>::from_fn(12, 12, |i, j| {
            if i / 4 != j / 4 {
                0.0
            } else if i == j {
                2.0
            } else {
                -1.0
            }
        });
        check(&blocks, 7);
    }
}
