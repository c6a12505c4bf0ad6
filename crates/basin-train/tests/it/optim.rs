//! Optimiser, schedule and losses against independent computations.

use std::collections::HashMap;

use basin_train::TrainError;
use basin_train::loss::*;
use basin_train::optim::{AdamW, DecayTargets, OptimConfig};
use basin_train::schedule::Schedule;
use tch::nn::{self, OptimizerConfig};
use tch::{Device, Kind, Tensor};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

fn store() -> (nn::VarStore, Tensor, Tensor) {
    let mut vs = nn::VarStore::new(Device::Cpu);
    let w = vs.root().var(
        "w",
        &[3, 4],
        nn::Init::Randn {
            mean: 0.0,
            stdev: 1.0,
        },
    );
    let b = vs.root().var(
        "b",
        &[4],
        nn::Init::Randn {
            mean: 0.0,
            stdev: 1.0,
        },
    );
    vs.double();
    (vs, w, b)
}

/// Two stores (see [`store`]) holding the same values.
fn twin_stores() -> (
    (nn::VarStore, Tensor, Tensor),
    (nn::VarStore, Tensor, Tensor),
) {
    let (vs, w, b) = store();
    let (vs2, w2, b2) = store();
    tch::no_grad(|| {
        w2.shallow_clone().copy_(&w);
        b2.shallow_clone().copy_(&b);
    });
    ((vs, w, b), (vs2, w2, b2))
}

/// libtorch's AdamW at lr 0.05 and weight decay 0.05 (β1 0.9, ε 1e-8).
fn libtorch_adamw(vs: &nn::VarStore, beta2: f64) -> nn::Optimizer {
    nn::AdamW {
        beta1: 0.9,
        beta2,
        wd: 0.05,
        eps: 1e-8,
        amsgrad: false,
    }
    .build(vs, 0.05)
    .unwrap()
}

fn loss(w: &Tensor, b: &Tensor, x: &Tensor) -> Tensor {
    (x.matmul(w) + b).tanh().square().sum(Kind::Double)
}

#[test]
fn adamw_matches_libtorch_adamw() {
    tch::manual_seed(1);
    let ((vs, w, b), (vs2, w2, b2)) = twin_stores();
    let x = Tensor::randn([5, 3], F64);
    let cfg = OptimConfig {
        lr: 0.05,
        beta2: 0.99,
        weight_decay: 0.05,
        ..OptimConfig::default()
    };
    let mut ours = AdamW::new(&vs, cfg).unwrap();
    let mut theirs = libtorch_adamw(&vs2, 0.99);
    for _ in 0..5 {
        ours.zero_grad();
        loss(&w, &b, &x).backward();
        ours.step(0.05).unwrap();
        theirs.zero_grad();
        loss(&w2, &b2, &x).backward();
        theirs.step();
    }
    assert!(
        w.allclose(&w2, 1e-12, 1e-12, false),
        "w differs from libtorch's AdamW"
    );
    assert!(
        b.allclose(&b2, 1e-12, 1e-12, false),
        "b differs from libtorch's AdamW"
    );
    assert_eq!(ours.steps(), 5);
}

#[test]
fn weight_decay_targets_and_centralisation() {
    tch::manual_seed(2);
    let (vs, w, b) = store();
    let b0 = b.detach().copy();
    // No gradient at all: only decoupled decay acts, and only on matrices.
    let cfg = OptimConfig {
        lr: 0.1,
        weight_decay: 0.5,
        decay: DecayTargets::Matrices,
        ..OptimConfig::default()
    };
    let mut opt = AdamW::new(&vs, cfg).unwrap();
    let w0 = w.detach().copy();
    opt.zero_grad();
    (w.sum(Kind::Double) * 0.0 + b.sum(Kind::Double) * 0.0).backward();
    opt.step(0.1).unwrap();
    assert!(
        w.allclose(&(&w0 * 0.95), 1e-12, 1e-12, false),
        "matrix not decayed by 1 − lr·wd"
    );
    assert!(
        b.allclose(&b0, 1e-12, 1e-12, false),
        "vector decayed under DecayTargets::Matrices"
    );

    // Centralisation: the applied first moment of w has zero mean over axis 1.
    let (vs, w, b) = store();
    let x = Tensor::randn([5, 3], F64);
    let mut opt = AdamW::new(
        &vs,
        OptimConfig {
            centralize: true,
            ..OptimConfig::default()
        },
    )
    .unwrap();
    loss(&w, &b, &x).backward();
    let g = w.grad().copy();
    opt.step(0.1).unwrap();
    let m = opt
        .state()
        .into_iter()
        .find(|(n, _)| n == "adamw.m.w")
        .unwrap()
        .1;
    let expect = (&g - g.mean_dim(1, true, Kind::Double)) * 0.1;
    assert!(m.allclose(&expect, 1e-12, 1e-12, false));
    assert!(
        m.sum_dim_intlist(1, false, Kind::Double)
            .abs()
            .max()
            .double_value(&[])
            < 1e-12
    );
}

#[test]
fn clipping_scales_to_the_threshold() {
    tch::manual_seed(3);
    let (vs, w, b) = store();
    let x = Tensor::randn([5, 3], F64) * 10.0;
    let mut opt = AdamW::new(
        &vs,
        OptimConfig {
            clip_norm: Some(0.01),
            beta1: 0.0,
            ..OptimConfig::default()
        },
    )
    .unwrap();
    loss(&w, &b, &x).backward();
    let stats = opt.step(0.1).unwrap();
    assert!(stats.clipped && stats.grad_norm > 0.01);
    // With β1 = 0 the first moment is the clipped gradient.
    let norm: f64 = opt
        .state()
        .iter()
        .filter(|(n, _)| n.starts_with("adamw.m."))
        .map(|(_, m)| m.square().sum(Kind::Double).double_value(&[]))
        .sum::<f64>()
        .sqrt();
    assert!((norm - 0.01).abs() < 1e-6, "clipped norm {norm}");
}

#[test]
fn state_round_trip_continues_identically() {
    tch::manual_seed(4);
    let x = Tensor::randn([5, 3], F64);
    let ((vs, w, b), (vs2, w2, b2)) = twin_stores();
    let cfg = OptimConfig {
        weight_decay: 0.01,
        ..OptimConfig::default()
    };
    let mut a = AdamW::new(&vs, cfg.clone()).unwrap();
    for _ in 0..3 {
        a.zero_grad();
        loss(&w, &b, &x).backward();
        a.step(0.01).unwrap();
    }
    // Copy parameters and optimiser state into a fresh optimiser, then both continue.
    tch::no_grad(|| {
        w2.shallow_clone().copy_(&w);
        b2.shallow_clone().copy_(&b);
    });
    let mut c = AdamW::new(&vs2, cfg).unwrap();
    let state: HashMap<String, Tensor> =
        a.state().into_iter().map(|(n, t)| (n, t.copy())).collect();
    c.load_state(&state).unwrap();
    for _ in 0..3 {
        a.zero_grad();
        loss(&w, &b, &x).backward();
        a.step(0.01).unwrap();
        c.zero_grad();
        loss(&w2, &b2, &x).backward();
        c.step(0.01).unwrap();
    }
    assert!(w.equal(&w2) && b.equal(&b2), "resumed optimiser diverged");
    // A state with a missing moment is refused.
    let mut partial = state;
    partial.remove("adamw.v.b");
    let err = c.load_state(&partial).unwrap_err().to_string();
    assert!(err.contains("adamw.v.b"), "{err}");
}

#[test]
fn non_finite_gradients_stop_the_step() {
    let (vs, w, b) = store();
    let mut opt = AdamW::new(&vs, OptimConfig::default()).unwrap();
    let before = w.detach().copy();
    ((&w * f64::NAN).sum(Kind::Double) + b.sum(Kind::Double)).backward();
    let err = opt.step(0.1).unwrap_err();
    assert!(matches!(err, TrainError::NonFinite { .. }));
    assert!(err.to_string().contains("gradient of w"), "{err}");
    assert!(w.equal(&before), "parameters changed despite the error");
}

/// Finite gradients of 1e30 (float32) used to overflow in the norm's float32 squares and stop the
/// run with an empty parameter name: the norm is taken in float64 and the step goes on.
#[test]
fn huge_finite_gradients_are_not_reported_as_non_finite() {
    let (vs, w, b) = store();
    let mut opt = AdamW::new(
        &vs,
        OptimConfig {
            clip_norm: Some(1.0),
            ..OptimConfig::default()
        },
    )
    .unwrap();
    ((&w * 1e30).sum(Kind::Float) + b.sum(Kind::Float)).backward();
    opt.step(0.1).unwrap();
    assert!(w.isfinite().all().int64_value(&[]) == 1);
}

#[test]
fn warmup_cosine_at_its_key_points() {
    let s = Schedule::WarmupCosine {
        start: 5e-7,
        peak: 5e-4,
        end: 5e-7,
        warmup: 10,
        total: 110,
    };
    assert_eq!(s.lr(0), 5e-7);
    assert!((s.lr(5) - (5e-7 + (5e-4 - 5e-7) * 0.5)).abs() < 1e-18);
    assert_eq!(s.lr(10), 5e-4);
    assert!(
        (s.lr(60) - (5e-4 + 5e-7) / 2.0).abs() < 1e-15,
        "half-way through the decay"
    );
    assert!((s.lr(110) - 5e-7).abs() < 1e-18);
    assert!((s.lr(500) - 5e-7).abs() < 1e-18);
    // Closed form at an arbitrary point: end + (peak − end)·½(1 + cos(π·(t − w)/(T − w))).
    let t = 37.0;
    let expect =
        5e-7 + (5e-4 - 5e-7) * 0.5 * (1.0 + (std::f64::consts::PI * (t - 10.0) / 100.0).cos());
    assert!((s.lr(37) - expect).abs() < 1e-18);
    let h = Schedule::HoldCosine {
        lr: 1e-3,
        hold: 50,
        end: 5e-5,
        total: 150,
    };
    assert_eq!(h.lr(0), 1e-3);
    assert_eq!(h.lr(49), 1e-3);
    assert!((h.lr(150) - 5e-5).abs() < 1e-18);
    assert!(
        Schedule::WarmupCosine {
            start: 0.0,
            peak: 1.0,
            end: 0.0,
            warmup: 20,
            total: 10
        }
        .validate("s")
        .is_err()
    );
    // The hold is checked against the total as the warm-up is, and every rate must be ≥ 0.
    let long_hold = Schedule::HoldCosine {
        lr: 1e-3,
        hold: 200,
        end: 0.0,
        total: 150,
    };
    assert!(
        long_hold
            .validate("s")
            .unwrap_err()
            .to_string()
            .contains("s.hold")
    );
    assert!(Schedule::Constant { lr: -1.0 }.validate("s").is_err());
    let constant = Schedule::Constant { lr: 3e-4 };
    assert!(constant.validate("s").is_ok());
    assert_eq!((constant.lr(0), constant.lr(1000)), (3e-4, 3e-4));
}

#[test]
fn losses_follow_pytorch_semantics() {
    tch::manual_seed(5);
    let logits = Tensor::randn([6, 3], F64);
    let targets = Tensor::from_slice(&[0i64, 2, 1, 1, 0, 2]);
    let logp = logits.log_softmax(-1, Kind::Double);
    let nll = -logp.gather(1, &targets.unsqueeze(1), false).squeeze_dim(1);
    // Plain and smoothed.
    let plain = cross_entropy(&logits, &targets, 0.0);
    assert!((plain.double_value(&[]) - nll.mean(Kind::Double).double_value(&[])).abs() < 1e-12);
    let eps = 0.05;
    let smooth =
        (&nll * (1.0 - eps) - logp.mean_dim(1, false, Kind::Double) * eps).mean(Kind::Double);
    assert!(
        (cross_entropy(&logits, &targets, eps).double_value(&[]) - smooth.double_value(&[])).abs()
            < 1e-12
    );
    // Weighted: divides by the sum of the targets' weights.
    let weights = Tensor::from_slice(&[1.0f64, 2.0, 5.0]);
    let w = weights.index_select(0, &targets);
    let expect = (&nll * &w).sum(Kind::Double) / w.sum(Kind::Double);
    assert!(
        (weighted_cross_entropy(&logits, &targets, &weights, 0.0).double_value(&[])
            - expect.double_value(&[]))
        .abs()
            < 1e-12
    );
    // Weighted BCE equals the reference's two-class weighted cross-entropy.
    let z = Tensor::randn([7], F64);
    let y = Tensor::from_slice(&[1i64, 0, 0, 1, 0, 0, 0]);
    let omega = anomaly_weight(&[true, false, false, true, false, false, false]);
    assert_eq!(omega, 2.5);
    let two = Tensor::stack(&[z.zeros_like(), z.shallow_clone()], 1);
    let reference = weighted_cross_entropy(&two, &y, &Tensor::from_slice(&[1.0f64, omega]), 0.0);
    assert!(
        (weighted_bce(&z, &y, omega).double_value(&[]) - reference.double_value(&[])).abs() < 1e-12
    );
    // Masked MSE averages over the scored patches only.
    let pred = Tensor::zeros([1, 3, 2], F64);
    let target = Tensor::from_slice(&[1.0f64, 1.0, 3.0, 3.0, 100.0, 100.0]).view([1, 3, 2]);
    let scored = Tensor::from_slice(&[true, true, false]).view([1, 3]);
    assert_eq!(masked_mse(&pred, &target, &scored).double_value(&[]), 5.0);
    assert_eq!(
        mse(&pred.narrow(1, 0, 2), &target.narrow(1, 0, 2)).double_value(&[]),
        5.0
    );
    assert_eq!(
        mae(&pred.narrow(1, 0, 2), &target.narrow(1, 0, 2)).double_value(&[]),
        2.0
    );
}

/// A parameter that receives no gradient keeps its value and its moments, while the others
/// step as libtorch's AdamW steps them (the flat multi-tensor step must not leak across them).
#[test]
fn a_parameter_without_a_gradient_is_left_alone() {
    tch::manual_seed(3);
    let ((vs, w, b), (vs2, w2, _)) = twin_stores();
    let b_before = b.copy();
    let x = Tensor::randn([5, 3], F64);
    let cfg = OptimConfig {
        lr: 0.05,
        weight_decay: 0.05,
        ..OptimConfig::default()
    };
    let mut ours = AdamW::new(&vs, cfg).unwrap();
    // Moments b carries from before (say, a resumed run in which b stopped being used).
    let mut start: HashMap<String, Tensor> = ours
        .state()
        .into_iter()
        .map(|(n, t)| (n, t.copy()))
        .collect();
    start.insert("adamw.m.b".into(), Tensor::full([4], 0.5, F64));
    start.insert("adamw.v.b".into(), Tensor::full([4], 0.25, F64));
    ours.load_state(&start).unwrap();
    let mut theirs = libtorch_adamw(&vs2, 0.999);
    for _ in 0..3 {
        ours.zero_grad();
        x.matmul(&w).tanh().square().sum(Kind::Double).backward();
        ours.step(0.05).unwrap();
        theirs.zero_grad();
        x.matmul(&w2).tanh().square().sum(Kind::Double).backward();
        theirs.step();
    }
    assert!(!b.grad().defined());
    assert!(b.equal(&b_before), "b moved without a gradient");
    let state: HashMap<String, Tensor> = ours.state().into_iter().collect();
    assert!(
        state["adamw.m.b"].equal(&start["adamw.m.b"]),
        "b's first moment changed"
    );
    assert!(
        state["adamw.v.b"].equal(&start["adamw.v.b"]),
        "b's second moment changed"
    );
    assert!(state["adamw.m.w"].abs().max().double_value(&[]) > 0.0);
    assert!(
        w.allclose(&w2, 1e-10, 1e-12, false),
        "w differs from libtorch's AdamW"
    );
}
