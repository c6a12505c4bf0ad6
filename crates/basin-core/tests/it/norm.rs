//! The energy layer norm is the gradient of its Lagrangian (eq. 2) and its Jacobian is
//! symmetric positive semi-definite (eq. 7–8); the batch norm of the message-passing ports is
//! PyTorch's.

use crate::common::*;
use basin_core::testing::max_rel_error;
use basin_core::{EnergyLayerNorm, NormConfig};
use tch::{Device, Kind, Tensor, nn};

fn norm(vs: &tch::nn::VarStore, d: i64, gamma: f64) -> EnergyLayerNorm {
    let n = EnergyLayerNorm::new(
        &(vs.root() / "norm"),
        d,
        &NormConfig {
            eps: 1e-5,
            gamma_init: gamma,
            per_feature_gain: false,
        },
    );
    tch::no_grad(|| {
        n.delta
            .shallow_clone()
            .copy_(&Tensor::randn([d], F64).to_kind(n.delta.kind()));
    });
    n
}

#[test]
fn g_is_the_gradient_of_the_lagrangian() {
    tch::manual_seed(10);
    let mut vs = store();
    let ln = norm(&vs, 7, 1.7);
    vs.double();
    let x = tokens(3, 4, 7).set_requires_grad(true);
    let l = ln.lagrangian(&x).unwrap();
    assert_eq!(l.size(), [3, 4]);
    let grad = Tensor::run_backward(&[l.sum(Kind::Double)], &[&x], false, false)
        .pop()
        .unwrap();
    let g = ln.forward(&x.detach());
    let err = max_rel_error(&grad, &g, 1e-12);
    assert!(err < 1e-10, "∂L/∂x differs from g: {err:e}");
    // And g really is a layer norm: zero mean (before δ), per-token variance γ²·var/(var+ε).
    let centred = &g - &ln.delta;
    assert!(
        centred
            .mean_dim(-1, false, Kind::Double)
            .abs()
            .max()
            .double_value(&[])
            < 1e-10
    );
}

/// `∂g/∂x` of one token `x: [D]` by autograd, row by row.
fn autograd_jacobian(ln: &EnergyLayerNorm, x: &Tensor) -> Tensor {
    let rows: Vec<Tensor> = (0..x.size()[0])
        .map(|i| {
            let xr = x.detach().set_requires_grad(true);
            let gi = ln.forward(&xr).get(i);
            Tensor::run_backward(&[gi], &[&xr], false, false)
                .pop()
                .unwrap()
        })
        .collect();
    Tensor::stack(&rows, 0)
}

#[test]
fn jacobian_is_symmetric_psd_and_matches_autograd() {
    tch::manual_seed(11);
    let mut vs = store();
    let ln = norm(&vs, 6, 0.8);
    vs.double();
    for _ in 0..20 {
        let x = Tensor::randn([6], F64) * 3.0;
        let jac = ln.jacobian(&x);
        let auto = autograd_jacobian(&ln, &x);
        assert!(
            max_rel_error(&jac, &auto, 1e-12) < 1e-10,
            "Jacobian differs from autograd"
        );
        assert!(
            max_rel_error(&jac, &jac.tr(), 1e-12) < 1e-12,
            "Jacobian is not symmetric"
        );
        let eig = jac.linalg_eigvalsh("L");
        let min = eig.min().double_value(&[]);
        let max = eig.max().double_value(&[]);
        assert!(
            min > -1e-10 * max.abs().max(1.0),
            "Jacobian has a negative eigenvalue {min}"
        );
    }
}

#[test]
fn negative_gain_breaks_positive_semi_definiteness() {
    // The PSD condition needs γ ≥ 0; the check above must be able to fail.
    let mut vs = store();
    let ln = norm(&vs, 5, -1.0);
    vs.double();
    let jac = ln.jacobian(&(Tensor::randn([5], F64)));
    assert!(jac.linalg_eigvalsh("L").min().double_value(&[]) < -1e-3);
}

#[test]
fn legendre_energy_is_consistent() {
    // E_LN = Σ g x − L; its gradient with respect to g (through x) is x, i.e. ∂E/∂x = M x.
    tch::manual_seed(12);
    let mut vs = store();
    let ln = norm(&vs, 5, 1.2);
    vs.double();
    let x = Tensor::randn([5], F64).set_requires_grad(true);
    let e = ln.legendre_energy(&x).unwrap();
    let grad = Tensor::run_backward(&[e], &[&x], false, false)
        .pop()
        .unwrap();
    let expect = ln.jacobian(&x.detach()).matmul(&x.detach());
    assert!(max_rel_error(&grad, &expect, 1e-12) < 1e-9);
}

#[test]
fn a_gain_per_feature_is_torch_layer_norm_and_has_no_lagrangian() {
    tch::manual_seed(13);
    let mut vs = store();
    let ln = EnergyLayerNorm::new(
        &(vs.root() / "norm"),
        6,
        &NormConfig {
            per_feature_gain: true,
            ..NormConfig::default()
        },
    );
    vs.double();
    let gamma = Tensor::randn([6], F64);
    tch::no_grad(|| {
        ln.gamma.shallow_clone().copy_(&gamma);
        ln.delta.shallow_clone().copy_(&Tensor::randn([6], F64));
    });
    let x = tokens(2, 3, 6);
    // torch.nn.functional.layer_norm with a per-feature weight and bias.
    let want = x.layer_norm([6], Some(&gamma), Some(&ln.delta), 1e-5, false);
    assert!(max_rel_error(&ln.forward(&x), &want, 1e-12) < 1e-10);
    // Its Jacobian (rows scaled by γ_i) matches autograd and is not symmetric.
    let x1 = Tensor::randn([6], F64);
    let jac = ln.jacobian(&x1);
    assert!(max_rel_error(&jac, &autograd_jacobian(&ln, &x1), 1e-12) < 1e-10);
    assert!(max_rel_error(&jac, &jac.tr(), 1e-12) > 1e-3);
    let err = ln.lagrangian(&x).unwrap_err();
    assert!(err.to_string().contains("per_feature_gain"), "{err}");
}

/// PyTorch's batch norm: the same outputs and running statistics as tch's `forward_t` on a
/// batch of rows; one training row is an error (tch's panics), evaluation scores it, and an
/// empty batch passes through with the running statistics untouched.
#[test]
fn batch_norm_is_torchs_and_refuses_one_training_row() {
    use basin_core::norm::BatchNorm1d;
    use tch::nn::ModuleT;
    tch::manual_seed(3);
    let vs = nn::VarStore::new(Device::Cpu);
    let ours = BatchNorm1d::new(vs.root() / "ours", 5);
    let theirs = basin_core::init::batch_norm1d(vs.root() / "theirs", 5);
    let x = Tensor::randn([7, 5], (Kind::Float, Device::Cpu)) * 3.0 + 1.0;
    for train in [true, true, false] {
        let a = ours.forward_t(&x, train).expect("seven rows");
        let b = theirs.forward_t(&x, train);
        assert!(a.allclose(&b, 1e-6, 1e-6, false), "train = {train}");
    }
    let (mean, var) = (&ours.inner().running_mean, &ours.inner().running_var);
    assert!(mean.allclose(&theirs.running_mean, 1e-6, 1e-6, false));
    assert!(var.allclose(&theirs.running_var, 1e-6, 1e-6, false));
    let (mean0, var0) = (mean.copy(), var.copy());

    let one = x.narrow(0, 0, 1);
    let err = ours
        .forward_t(&one, true)
        .expect_err("one training row")
        .to_string();
    assert!(
        err.contains("1 row(s)") && err.contains("two or more"),
        "{err}"
    );
    assert_eq!(
        ours.forward_t(&one, false).expect("evaluation").size(),
        [1, 5]
    );
    let empty = x.narrow(0, 0, 0);
    assert_eq!(
        ours.forward_t(&empty, true).expect("no rows").size(),
        [0, 5]
    );
    let (mean, var) = (&ours.inner().running_mean, &ours.inner().running_var);
    assert!(
        mean.equal(&mean0) && var.equal(&var0),
        "an empty batch moved the statistics"
    );
    assert_eq!(mean.isnan().sum(Kind::Int64).int64_value(&[]), 0);
}
