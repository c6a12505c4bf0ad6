//! Every term's closed-form gradient equals autograd (float64, rel < 1e-8) and central finite
//! differences (< 1e-5), dense and sparse, with masks and padding.
#![allow(clippy::unwrap_used)]

mod common;

use basin_core::energy::autograd_grad;
use basin_core::testing::{finite_difference, max_rel_error};
use basin_core::{Activation, Energy, EnergySum, Structure};
use common::*;

const B: i64 = 3;
const N: i64 = 6;
const D: i64 = 5;

fn check_term(term: &dyn Energy, label: &str, structures: &[(&str, Structure)]) {
    for (name, s) in structures {
        let g = tokens(B, N, D);
        let (energy, closed) = term.energy_and_grad(&g, s);
        let auto = autograd_grad(term, &g, s);
        let err_auto = max_rel_error(&closed, &auto, 1e-12);
        assert!(
            err_auto < 1e-8,
            "{label} [{name}]: closed form vs autograd rel err {err_auto:e}"
        );
        // energy_and_grad's energy must be the energy.
        let err_e = max_rel_error(&energy, &term.energy(&g, s), 1e-12);
        assert!(
            err_e < 1e-12,
            "{label} [{name}]: energy_and_grad energy differs ({err_e:e})"
        );
        assert!(
            closed.abs().max().double_value(&[]) > 1e-6,
            "{label} [{name}]: gradient is zero"
        );
        let fd = finite_difference(|x| total(term, x, s), &g, 1e-5);
        let err_fd = max_rel_error(&closed, &fd, 1e-12);
        assert!(
            err_fd < 1e-5,
            "{label} [{name}]: closed form vs finite differences rel err {err_fd:e}"
        );
    }
}

#[test]
fn attention_closed_form_matches_autograd_and_finite_differences() {
    tch::manual_seed(1);
    for learn_beta in [false, true] {
        let mut vs = store();
        let att = attention(&vs, D, 3, 4, learn_beta);
        vs.double();
        check_term(&att, "attention", &structures(B, N, 3));
    }
}

#[test]
fn hopfield_closed_forms_match_autograd_and_finite_differences() {
    tch::manual_seed(2);
    for act in [
        Activation::Relu,
        Activation::Power,
        Activation::Exp,
        Activation::Softmax,
    ] {
        let mut vs = store();
        let hop = hopfield(&vs, D, 7, act);
        vs.double();
        check_term(&hop, &format!("hopfield/{act:?}"), &structures(B, N, 2));
    }
}

#[test]
fn weighted_sum_gradient_is_the_weighted_sum_of_gradients() {
    tch::manual_seed(3);
    let mut vs = store();
    let att = attention(&vs, D, 2, 3, false);
    let hop = hopfield(&vs, D, 4, Activation::Relu);
    vs.double();
    let sum = EnergySum::new().with(0.7, att).with(-1.3, hop);
    check_term(&sum, "sum", &structures(B, N, 2));
    // The parts add up to the total.
    let g = tokens(B, N, D);
    let s = Structure::full();
    let parts: f64 = sum
        .parts(&g, &s)
        .iter()
        .map(|(_, e)| e.sum(tch::Kind::Double).double_value(&[]))
        .sum();
    assert!((parts - total(&sum, &g, &s)).abs() < 1e-10);
}

/// The attention gradient really has the key-side (second) term: dropping it breaks agreement.
#[test]
fn attention_gradient_needs_the_key_side_term() {
    tch::manual_seed(4);
    let mut vs = store();
    let att = attention(&vs, D, 2, 3, false);
    vs.double();
    let g = tokens(B, N, D);
    let s = Structure::full();
    let grad = att.grad(&g, &s);
    // Query-side term only: −Σ_h ω K W_Q, i.e. the gradient with keys held fixed.
    let fixed_keys = tch::with_grad(|| {
        let gq = g.detach().set_requires_grad(true);
        let q = gq
            .matmul(&att.w_q.view([-1, D]).tr())
            .view([B, N, 2, 3])
            .transpose(1, 2);
        let k = g
            .matmul(&att.w_k.view([-1, D]).tr())
            .view([B, N, 2, 3])
            .transpose(1, 2);
        let mask = tch::Tensor::eye(N, (tch::Kind::Bool, tch::Device::Cpu));
        let logits = (q.matmul(&k.transpose(-1, -2)) * 0.7).masked_fill(&mask, -1e30);
        let e = -(logits.logsumexp(-1, false) / 0.7).sum(tch::Kind::Double);
        tch::Tensor::run_backward(&[e], &[&gq], false, false)
            .pop()
            .unwrap()
    });
    assert!(
        max_rel_error(&fixed_keys, &grad, 1e-12) > 1e-3,
        "key-side term missing from the closed form"
    );
}
