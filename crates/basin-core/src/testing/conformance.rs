//! The checks every energy term must pass, in one call (burn's backend-test idea):
//!
//! ```ignore
//! basin_core::testing::conformance::energy_term("projection", 3, |path, dim| {
//!     Box::new(Projection::new(path, dim, &ProjectionConfig::default()))
//! });
//! ```
//!
//! On every kind of [`Structure`] — all pairs with and without the diagonal, a dense mask, a
//! per-head bias with blocked pairs, a multiplicative per-head scale, a sparse edge list, and
//! padding on dense and sparse forms — in float64 on the CPU:
//! - the gradient (`grad`, and `energy_and_grad`'s, with autograd recording and without: a
//!   term may take other kernels then) equals autograd's (relative 1e-8) and central finite
//!   differences (1e-5), and is not identically zero;
//! - `energy_and_grad`'s energy is `energy`, with autograd recording and without;
//! - padded tokens change nothing: the energy and the real tokens' gradients are the same
//!   whatever the padded tokens hold;
//! - gradient flow on `x` through the energy layer norm, at a small step, never raises the
//!   energy (ET eq. 7).
//!
//! Panics with the term's label, the structure and the error when a check fails.

use tch::{Device, Kind, Tensor, nn};

use crate::block::{EnergyBlock, TraceOptions};
use crate::dynamics::GradientFlow;
use crate::energy::{Energy, autograd_grad};
use crate::norm::{EnergyLayerNorm, NormConfig};
use crate::structure::{SparseEdges, Structure};
use crate::testing::{finite_difference, max_rel_error, seeded};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);
const B: i64 = 3;
const N: i64 = 6;
const D: i64 = 5;

/// A random boolean mask `[b, n, n]` with density `p`; row 1 of sample 0 is entirely blocked,
/// so that the "query without keys" path is exercised.
pub fn random_mask(b: i64, n: i64, p: f64) -> Tensor {
    let m = Tensor::rand([b, n, n], F64).lt(p);
    let _ = m.get(0).get(1).fill_(0);
    m
}

/// The sparse edge list equivalent to a dense mask `[B, N, N]`.
pub fn edges_of(mask: &Tensor) -> SparseEdges {
    let s = mask.size();
    let (b, n) = (s[0], s[1]);
    let nz = mask.nonzero(); // [E, 3] (sample, query, key)
    let query = nz.select(1, 0) * n + nz.select(1, 1);
    let key = nz.select(1, 0) * n + nz.select(1, 2);
    match SparseEdges::new(&query, &key, b * n) {
        Ok(e) => e,
        Err(e) => panic!("edges_of: {e}"),
    }
}

/// A padding mask `[b, n]`: the last `pad` tokens of every other sample are padding.
pub fn padding(b: i64, n: i64, pad: i64) -> Tensor {
    let p = Tensor::ones([b, n], (Kind::Bool, Device::Cpu));
    for i in (0..b).step_by(2) {
        let _ = p.get(i).narrow(0, n - pad, pad).fill_(0);
    }
    p
}

fn ok<T>(r: crate::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("conformance fixture: {e}"),
    }
}

/// Every kind of structure, for `b` samples of `n` tokens and terms with `heads` heads (the
/// per-head bias and scale need it): dense (full, with and without the diagonal, padding; mask;
/// bias with blocked pairs; mask with a scale) and sparse (with and without the diagonal;
/// padding; a per-edge scale).
pub fn structures(b: i64, n: i64, heads: i64) -> Vec<(&'static str, Structure)> {
    let mask = random_mask(b, n, 0.5);
    let bias = Tensor::randn([b, heads, n, n], F64);
    let blocked = Tensor::rand([b, heads, n, n], F64).lt(0.3);
    let bias = bias.masked_fill(&blocked, f64::NEG_INFINITY);
    vec![
        ("full", Structure::full()),
        ("full+self", Structure::full().with_self_attention(true)),
        (
            "full+padding",
            ok(Structure::full().with_padding(padding(b, n, 2))),
        ),
        ("mask", ok(Structure::mask(mask.shallow_clone()))),
        (
            "mask+self+padding",
            ok(ok(Structure::mask(mask.shallow_clone()))
                .with_self_attention(true)
                .with_padding(padding(b, n, 1))),
        ),
        ("bias", ok(Structure::bias(bias))),
        (
            "mask+scale",
            ok(ok(Structure::mask(mask.shallow_clone()))
                .with_scale(Tensor::randn([b, heads, n, n], F64))),
        ),
        ("sparse", Structure::sparse(edges_of(&mask))),
        (
            "sparse+self",
            Structure::sparse(edges_of(&mask)).with_self_attention(true),
        ),
        (
            "sparse+padding",
            ok(Structure::sparse(edges_of(&mask)).with_padding(padding(b, n, 2))),
        ),
        ("sparse+self+padding+scale", {
            let s = ok(Structure::sparse(edges_of(&mask))
                .with_self_attention(true)
                .with_padding(padding(b, n, 1)));
            let e = s.sparse_edges().map_or(0, |e| e.len());
            ok(s.with_edge_scale(Tensor::randn([e, heads], F64)))
        }),
    ]
}

fn total(energy: &dyn Energy, g: &Tensor, s: &Structure) -> f64 {
    energy.energy(g, s).sum(Kind::Double).double_value(&[])
}

/// Runs every check on the term that `make(path, dim)` builds (see the module docs). `heads` is
/// the term's number of heads (any value for terms without heads).
pub fn energy_term(label: &str, heads: i64, make: impl Fn(&nn::Path, i64) -> Box<dyn Energy>) {
    seeded(0x5eed, || {
        let mut vs = nn::VarStore::new(Device::Cpu);
        let term = make(&(vs.root() / "term"), D);
        let norm = EnergyLayerNorm::new(&(vs.root() / "norm"), D, &NormConfig::default());
        vs.double();
        for (name, s) in structures(B, N, heads) {
            gradients(label, name, term.as_ref(), &s);
            padding_invariance(label, name, term.as_ref(), &s);
        }
        descent(label, term, norm, heads);
    });
}

fn gradients(label: &str, name: &str, term: &dyn Energy, s: &Structure) {
    let g = Tensor::randn([B, N, D], F64);
    let (energy, closed) = term.energy_and_grad(&g, s);
    let grad = term.grad(&g, s);
    // Without autograd recording (a descent in evaluation) a term may take other kernels.
    let (energy_ng, closed_ng) = tch::no_grad(|| term.energy_and_grad(&g, s));
    let grad_ng = tch::no_grad(|| term.grad(&g, s));
    let auto = autograd_grad(term, &g, s);
    for (what, t) in [
        ("energy_and_grad", &closed),
        ("grad", &grad),
        ("energy_and_grad without autograd", &closed_ng),
        ("grad without autograd", &grad_ng),
    ] {
        let err = max_rel_error(t, &auto, 1e-12);
        assert!(
            err < 1e-8,
            "{label} [{name}]: {what} differs from autograd (relative error {err:e})"
        );
    }
    let err_e = max_rel_error(&energy, &term.energy(&g, s), 1e-12);
    assert!(
        err_e < 1e-12,
        "{label} [{name}]: energy_and_grad's energy differs from energy ({err_e:e})"
    );
    for (what, e) in [
        ("energy_and_grad's energy without autograd", &energy_ng),
        (
            "energy without autograd",
            &tch::no_grad(|| term.energy(&g, s)),
        ),
    ] {
        let err = max_rel_error(e, &energy, 1e-12);
        assert!(
            err < 1e-10,
            "{label} [{name}]: {what} differs from the energy with it ({err:e})"
        );
    }
    assert!(
        closed.abs().max().double_value(&[]) > 1e-6,
        "{label} [{name}]: the gradient is identically zero"
    );
    // A term split over tokens sums, over them, to its energy.
    if let Some(tokens) = term.token_energy(&g, s) {
        assert_eq!(
            tokens.size(),
            [B, N],
            "{label} [{name}]: token_energy's shape"
        );
        let summed = tokens.sum_dim_intlist(-1, false, Kind::Double);
        let err = max_rel_error(&summed, &energy, 1e-12);
        assert!(
            err < 1e-10,
            "{label} [{name}]: token_energy does not sum to the energy ({err:e})"
        );
    }
    let fd = finite_difference(|x| total(term, x, s), &g, 1e-5);
    let err_fd = max_rel_error(&closed, &fd, 1e-12);
    assert!(
        err_fd < 1e-5,
        "{label} [{name}]: gradient differs from central finite differences (relative error {err_fd:e})"
    );
}

fn padding_invariance(label: &str, name: &str, term: &dyn Energy, s: &Structure) {
    let Some(real) = s.padding() else {
        return;
    };
    let real = real.to_kind(Kind::Double).unsqueeze(-1);
    let g = Tensor::randn([B, N, D], F64);
    // Different values in the padded slots only.
    let other = &g * &real + Tensor::randn([B, N, D], F64) * (1.0 - &real) * 10.0;
    let (e1, d1) = term.energy_and_grad(&g, s);
    let (e2, d2) = term.energy_and_grad(&other, s);
    let err_e = max_rel_error(&e2, &e1, 1e-12);
    assert!(
        err_e < 1e-10,
        "{label} [{name}]: the energy depends on padded tokens ({err_e:e})"
    );
    let err_d = max_rel_error(&(d2 * &real), &(d1 * &real), 1e-12);
    assert!(
        err_d < 1e-10,
        "{label} [{name}]: real tokens' gradients depend on padded tokens ({err_d:e})"
    );
}

fn descent(label: &str, term: Box<dyn Energy>, norm: EnergyLayerNorm, heads: i64) {
    let block = EnergyBlock::from_parts(norm, term, Box::new(GradientFlow { alpha: 1e-3 }), 25);
    for (name, s) in structures(B, N, heads) {
        let x = Tensor::randn([B, N, D], F64);
        let (_, trace) = block.run(&x, &s, false, Some(TraceOptions::default()));
        let Some(trace) = trace else {
            panic!("{label} [{name}]: no trace recorded");
        };
        let per_sample = trace.total.tr().contiguous(); // [B, T + 1]
        let rows: Vec<Vec<f64>> = match Vec::try_from(&per_sample) {
            Ok(r) => r,
            Err(e) => panic!("{label} [{name}]: {e}"),
        };
        for (b, row) in rows.iter().enumerate() {
            for (t, w) in row.windows(2).enumerate() {
                assert!(
                    w[1] <= w[0] + 1e-9 * w[0].abs().max(1.0),
                    "{label} [{name}]: the energy of sample {b} rose at step {t}: {} → {}",
                    w[0],
                    w[1]
                );
            }
        }
    }
}
