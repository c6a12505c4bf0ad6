//! Checks of training at the attractor that every dynamics declaring a fixed point passes
//! ([`crate::registry::DynamicsParams::fixed_point`]): on a small block that converges, the
//! implicit gradient equals the gradient of a long unrolled descent and finite differences of
//! the loss at the converged state. Float64; a failed check panics with the parameter's name.

use tch::{Kind, Tensor, nn::VarStore};

use super::{max_rel_error, seeded};
use crate::block::{BlockConfig, EnergyBlock};
use crate::gradient::{FixedPoint, GradientConfig, GradientMode, Solver};
use crate::implicit::{attach, standardise};
use crate::structure::Structure;

/// Tolerances tight enough that the implicit gradient is exact to about 1e-10.
pub fn tight(mode: GradientMode, solver: Solver) -> GradientConfig {
    GradientConfig {
        mode,
        tol: 1e-13,
        max_steps: 3000,
        solver,
        solver_tol: 1e-11,
        solver_iters: 400,
        ..GradientConfig::default()
    }
}

/// A float64 block in implicit mode with tight tolerances, a start `x0` `[2, 4, D]` and the
/// weights of a linear loss read at its output.
#[derive(Debug)]
pub struct Case {
    /// The block's parameters.
    pub vs: VarStore,
    /// The block.
    pub block: EnergyBlock,
    /// Where the descent starts.
    pub x0: Tensor,
    /// The loss is `Σ y ⊙ weights`.
    pub weights: Tensor,
}

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("implicit-gradient fixture: {e}"),
    }
}

/// The case of `cfg` (its gradient set to [`tight`] implicit GMRES), drawn from `seed`.
pub fn case(mut cfg: BlockConfig, seed: i64) -> Case {
    cfg.gradient = tight(GradientMode::Implicit, Solver::Gmres);
    let d = cfg.dim;
    seeded(seed, || {
        let mut vs = VarStore::new(tch::Device::Cpu);
        let block = ok(EnergyBlock::new(&vs.root(), &cfg));
        vs.double();
        let f64 = (Kind::Double, tch::Device::Cpu);
        Case {
            vs,
            block,
            x0: Tensor::randn([2, 4, d], f64),
            weights: Tensor::randn([2, 4, d], f64),
        }
    })
}

/// The trainable parameters in name order.
pub fn params(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The loss read at the block's output: a fixed linear functional of the tokens.
pub fn loss_of(c: &Case, y: &Tensor) -> Tensor {
    (y * &c.weights).sum(Kind::Double)
}

/// The gradient of `loss` for every parameter, in [`params`]' order.
pub fn grads_of(c: &Case, loss: &Tensor) -> Vec<Tensor> {
    let ps = params(&c.vs);
    let refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
    Tensor::run_backward(&[loss], &refs, false, false)
}

/// The gradient of a training forward's loss through its own graph, without [`attach`]: a
/// phantom forward's gradient (an implicit one's owes its adjoint).
pub fn forward_grads(c: &Case) -> Vec<Tensor> {
    let y = c.block.forward(&c.x0, &Structure::full(), true);
    grads_of(c, &loss_of(c, &y))
}

/// The block's implicit gradient of the loss, for every parameter.
pub fn implicit_grads(c: &Case) -> Vec<Tensor> {
    let y = c.block.forward(&c.x0, &Structure::full(), true);
    grads_of(c, &attach(&loss_of(c, &y), [&c.block]))
}

/// The gradient through `steps` unrolled steps of the same settling map from `x0`.
pub fn unrolled_grads(c: &Case, steps: usize) -> Vec<Tensor> {
    let s = Structure::full();
    let mut x = match c.block.fixed_point {
        FixedPoint::Tokens => c.x0.shallow_clone(),
        FixedPoint::Normalised => standardise(&c.x0, None),
    };
    for t in 0..steps {
        x = c.block.settle_step(&x, &s, t, true);
    }
    let ps = params(&c.vs);
    let refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
    Tensor::run_backward(&[loss_of(c, &x)], &refs, false, false)
}

/// Every parameter's two gradients within `tol` (relative), naming the first that is not. A
/// gradient that is zero at the attractor up to rounding (vMF attention's β: about 1e-13,
/// whose last digits vary with libtorch's parallel sums) is compared against a floor of 1e-6,
/// not against its own noise.
pub fn assert_grads_close(label: &str, c: &Case, a: &[Tensor], b: &[Tensor], tol: f64) {
    for ((name, _), (ga, gb)) in params(&c.vs).iter().zip(a.iter().zip(b)) {
        assert!(
            ga.defined() && gb.defined(),
            "{label}: {name} has no gradient"
        );
        let err = max_rel_error(ga, gb, 1e-6);
        assert!(err < tol, "{label}: {name} differs by {err:e}\n{ga}\n{gb}");
    }
}

/// The implicit gradient of `cfg`'s block equals the gradient through many more unrolled steps
/// than its descent needed; the descent and the adjoint solve converged.
pub fn equals_unrolled(label: &str, cfg: BlockConfig, seed: i64) {
    let c = case(cfg, seed);
    let implicit = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    assert_eq!(stats.forwards, 1, "{label}");
    assert_eq!(stats.unconverged, 0, "{label}: {stats:?}");
    assert_eq!(stats.solves, 1, "{label}");
    assert!(
        stats.max_solver_residual < 1e-11,
        "{label}: adjoint residual {stats:?}"
    );
    let unrolled = unrolled_grads(&c, stats.steps + 600);
    assert_grads_close(label, &c, &implicit, &unrolled, 1e-6);
}

/// The implicit gradient of `cfg`'s block equals central finite differences of the loss at
/// the converged state (the first three entries of every parameter).
pub fn equals_finite_differences(label: &str, cfg: BlockConfig, seed: i64) {
    let c = case(cfg, seed);
    let implicit = implicit_grads(&c);
    let s = Structure::full();
    let at = |c: &Case| {
        tch::no_grad(|| loss_of(c, &c.block.forward(&c.x0, &s, false)).double_value(&[]))
    };
    let h = 1e-5;
    for ((name, var), g) in params(&c.vs).iter().zip(&implicit) {
        let flat = var.view([-1]);
        let n = flat.size()[0].min(3);
        for i in 0..n {
            let old = flat.double_value(&[i]);
            let set = |v: f64| tch::no_grad(|| flat.get(i).fill_(v));
            let _ = set(old + h);
            let up = at(&c);
            let _ = set(old - h);
            let down = at(&c);
            let _ = set(old);
            let fd = (up - down) / (2.0 * h);
            let got = g.view([-1]).double_value(&[i]);
            assert!(
                (fd - got).abs() <= 1e-5 * (1.0 + fd.abs()),
                "{label}: {name}[{i}] implicit {got} vs finite difference {fd}"
            );
        }
    }
}
