//! Training through the unrolled descent: a loss on the block output backpropagates to W_Q,
//! W_K, ξ, γ and δ, and matches finite differences on a tiny case — for closed-form terms
//! (dense and sparse) and for a term that only defines its energy (autograd with create_graph).
//! Every test holds `lock_generator`: they seed libtorch's global generator and compare draws.

use crate::common::*;
use basin_core::testing::{finite_difference, lock_generator, max_rel_error};
use basin_core::{
    AttentionConfig, DynamicsConfig, Energy, EnergyBlock, EnergySum, HopfieldMemoryConfig,
    Structure,
};
use tch::{Kind, Tensor, nn::VarStore};

const D: i64 = 4;

fn tiny_block(vs: &VarStore) -> EnergyBlock {
    let mut cfg = basin_core::testing::et_block(D, 2, 3, 5, 3);
    cfg.edit_terms(|a: &mut AttentionConfig| {
        a.init_std = 0.5;
        a.learn_beta = true;
    })
    .unwrap();
    cfg.edit_terms(|h: &mut HopfieldMemoryConfig| h.init_std = 0.5)
        .unwrap();
    cfg.dynamics = DynamicsConfig::gradient_flow(0.3);
    EnergyBlock::new(&vs.root(), &cfg).unwrap()
}

/// Checks autograd of `loss(block(x))` against finite differences for every variable of `vs`.
fn check_params(vs: &VarStore, blk: &EnergyBlock, x: &Tensor, s: &Structure, expect: &[&str]) {
    let c = Tensor::randn(x.size(), F64);
    let loss = |blk: &EnergyBlock| (blk.forward(x, s, true) * &c).sum(Kind::Double);
    let l = loss(blk);
    let vars = vs.variables();
    let names: Vec<&String> = vars.keys().collect();
    for want in expect {
        assert!(
            names.iter().any(|n| n == want),
            "no variable {want} in {names:?}"
        );
    }
    let params: Vec<(String, Tensor)> = vars
        .into_iter()
        .filter(|(n, _)| expect.contains(&n.as_str()))
        .collect();
    let refs: Vec<&Tensor> = params.iter().map(|(_, v)| v).collect();
    let grads = Tensor::run_backward(&[l], &refs, false, false);
    for ((name, var), grad) in params.iter().zip(grads) {
        assert!(grad.defined(), "{name}: no gradient reached it");
        let fd = finite_difference(
            |p| {
                let saved = var.detach().copy();
                tch::no_grad(|| {
                    var.shallow_clone().copy_(p);
                });
                let v = tch::no_grad(|| loss(blk).double_value(&[]));
                tch::no_grad(|| {
                    var.shallow_clone().copy_(&saved);
                });
                v
            },
            var,
            1e-6,
        );
        let err = max_rel_error(&grad, &fd, 1e-10);
        assert!(
            err < 1e-5,
            "{name}: backprop vs finite differences rel err {err:e}"
        );
        assert!(
            grad.abs().max().double_value(&[]) > 1e-8,
            "{name}: gradient is zero"
        );
    }
}

const NAMES: [&str; 6] = [
    "attention.w_q",
    "attention.w_k",
    "attention.beta",
    "hopfield.xi",
    "norm.gamma",
    "norm.delta",
];

#[test]
fn backprop_through_the_descent_matches_finite_differences_dense() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    tch::manual_seed(40);
    let mut vs = store();
    let blk = tiny_block(&vs);
    vs.double();
    let x = tokens(2, 3, D);
    check_params(&vs, &blk, &x, &Structure::full(), &NAMES);
}

#[test]
fn backprop_through_the_descent_matches_finite_differences_sparse() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    tch::manual_seed(41);
    let mut vs = store();
    let blk = tiny_block(&vs);
    vs.double();
    let x = tokens(2, 4, D);
    let mask = random_mask(2, 4, 0.6);
    let s = Structure::sparse(edges_of(&mask)).with_self_attention(true);
    check_params(&vs, &blk, &x, &s, &NAMES);
}

/// A term with no closed form: `E = ½ Σ (w · g)²`-style quartic, gradient from autograd.
struct Quartic {
    w: Tensor,
}

impl Energy for Quartic {
    fn name(&self) -> &str {
        "quartic"
    }
    fn energy(&self, g: &Tensor, _s: &Structure) -> Tensor {
        let h = g.matmul(&self.w);
        (h.square().square() * 0.25).sum_dim_intlist(&[1i64, 2][..], false, g.kind())
    }
}

#[test]
fn backprop_through_autograd_terms_uses_create_graph() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    tch::manual_seed(42);
    let mut vs = store();
    let mut blk = tiny_block(&vs);
    let w = (vs.root() / "quartic").var(
        "w",
        &[D, 3],
        tch::nn::Init::Randn {
            mean: 0.0,
            stdev: 0.5,
        },
    );
    vs.double();
    blk.energy = Box::new(EnergySum::new().with(0.5, Quartic { w }));
    let x = tokens(2, 3, D);
    check_params(
        &vs,
        &blk,
        &x,
        &Structure::full(),
        &["quartic.w", "norm.gamma", "norm.delta"],
    );
}

/// Gradients of every weight and of the input's own graph after the recomputed backward pass
/// equal the unrolled graph's, dense and sparse, with and without Langevin noise (same seed in
/// both forward passes; the recomputation draws new noise, which must not matter).
#[test]
fn recomputed_backward_equals_the_unrolled_graph() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    let langevin = DynamicsConfig::new(&basin_core::Langevin {
        alpha: 0.3,
        sigma: 0.1,
        decay: None,
        in_eval: false,
    });
    for (case, noisy) in [(0, false), (1, true), (2, false)] {
        tch::manual_seed(50 + case);
        let mut vs = store();
        let mut blk = tiny_block(&vs);
        if noisy {
            blk.dynamics = langevin
                .build(&vs.root(), &vs.root(), D, "dynamics")
                .unwrap();
        }
        let enc = (vs.root() / "enc").var(
            "w",
            &[D, D],
            tch::nn::Init::Randn {
                mean: 0.0,
                stdev: 0.5,
            },
        );
        vs.double();
        let (b, n) = (2, 4);
        let z = tokens(b, n, D);
        let c = Tensor::randn([b, n, D], F64);
        let s = if case == 2 {
            Structure::sparse(edges_of(&random_mask(b, n, 0.6))).with_self_attention(true)
        } else {
            Structure::full()
        };
        let vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        let grads = |recompute: bool| -> Vec<Tensor> {
            for (_, v) in &vars {
                let mut g = v.grad();
                if g.defined() {
                    let _ = g.zero_();
                }
            }
            tch::manual_seed(7);
            let x0 = z.matmul(&enc);
            if recompute {
                let (y, rec) = blk.run_recomputed(&x0, &s, true);
                (y * &c).sum(Kind::Double).backward();
                rec.backward(&blk, &s);
            } else {
                (blk.forward(&x0, &s, true) * &c)
                    .sum(Kind::Double)
                    .backward();
            }
            vars.iter().map(|(_, v)| v.grad().copy()).collect()
        };
        let plain = grads(false);
        let recomputed = grads(true);
        for (((name, _), p), r) in vars.iter().zip(&plain).zip(&recomputed) {
            assert!(
                p.defined() && r.defined(),
                "case {case}: {name} got no gradient"
            );
            let err = max_rel_error(r, p, 1e-12);
            assert!(
                err < 1e-10,
                "case {case}: {name}: recomputed vs unrolled rel err {err:e}"
            );
            assert!(
                p.abs().max().double_value(&[]) > 1e-8,
                "case {case}: {name}: zero gradient"
            );
        }
    }
}
