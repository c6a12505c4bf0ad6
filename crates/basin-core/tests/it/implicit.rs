//! Training at the attractor: on small blocks that converge, the implicit gradient equals the
//! gradient of a long unrolled descent and finite differences of the loss at the converged
//! state; the phantom gradient tends to it as its steps grow; the solvers' residuals are
//! reported; a descent that stops at its cap is counted; the combinations without a fixed
//! point are refused, naming the field. Float64 throughout.

use crate::common::*;
use basin_core::implicit::{attach, standardise};
use basin_core::testing::{max_rel_error, seeded};
use basin_core::{
    AttentionConfig, BlockConfig, ControlledConfig, DynamicsConfig, EnergyBlock, FixedPoint,
    GradientConfig, GradientMode, HopfieldMemoryConfig, NormConfig, Solver, Structure, TermConfig,
    TraceOptions, VmfAttentionConfig,
};
use tch::{Kind, Tensor, nn::VarStore};

const D: i64 = 6;

fn et_config() -> BlockConfig {
    let mut cfg = BlockConfig::et(D, 2, 3, 8, 4);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.3)
        .unwrap();
    cfg.edit_terms(|h: &mut HopfieldMemoryConfig| h.init_std = 0.3)
        .unwrap();
    cfg.dynamics = DynamicsConfig::gradient_flow(0.2);
    cfg
}

fn cdat_config() -> BlockConfig {
    BlockConfig {
        dim: D,
        steps: 4,
        norm: NormConfig::default(),
        terms: vec![
            TermConfig::new(&VmfAttentionConfig {
                heads: 2,
                head_dim: 3,
                beta: Some(1.0),
                init_std: 1.0,
                ..Default::default()
            }),
            TermConfig::new(&HopfieldMemoryConfig {
                memories: 8,
                init_std: 1.0,
                ..HopfieldMemoryConfig::default()
            }),
        ],
        // Smaller weights leave x* so small that LN's 1/σ makes the step chatter (reported as
        // unconverged); at this scale the descent settles in a few hundred steps.
        dynamics: DynamicsConfig::new(&ControlledConfig {
            alpha: 0.1,
            ..ControlledConfig::default()
        }),
        gradient: GradientConfig::default(),
    }
}

fn tight(mode: GradientMode, solver: Solver) -> GradientConfig {
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

struct Case {
    vs: VarStore,
    block: EnergyBlock,
    x0: Tensor,
    weights: Tensor,
}

fn case(mut cfg: BlockConfig, seed: i64) -> Case {
    cfg.gradient = tight(GradientMode::Implicit, Solver::Gmres);
    seeded(seed, || {
        let mut vs = store();
        let block = EnergyBlock::new(&vs.root(), &cfg).unwrap();
        vs.double();
        let x0 = Tensor::randn([2, 4, D], F64);
        let weights = Tensor::randn([2, 4, D], F64);
        Case {
            vs,
            block,
            x0,
            weights,
        }
    })
}

fn params(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The loss read at the block's output: a fixed linear functional of the tokens.
fn loss_of(c: &Case, y: &Tensor) -> Tensor {
    (y * &c.weights).sum(Kind::Double)
}

/// The block's implicit gradient of the loss, for every parameter.
fn implicit_grads(c: &Case) -> Vec<Tensor> {
    let s = Structure::full();
    let y = c.block.forward(&c.x0, &s, true);
    let loss = attach(&loss_of(c, &y), [&c.block]);
    let ps = params(&c.vs);
    let refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
    Tensor::run_backward(&[loss], &refs, false, false)
}

/// The gradient through `steps` unrolled steps of the same settling map from `x0`.
fn unrolled_grads(c: &Case, steps: usize) -> Vec<Tensor> {
    let s = Structure::full();
    let mut x = if c.block.dynamics.name() == "controlled" {
        c.x0.shallow_clone()
    } else {
        standardise(&c.x0, None)
    };
    for t in 0..steps {
        x = c.block.settle_step(&x, &s, t, true);
    }
    let ps = params(&c.vs);
    let refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
    Tensor::run_backward(&[loss_of(c, &x)], &refs, false, false)
}

fn assert_grads_close(label: &str, c: &Case, a: &[Tensor], b: &[Tensor], tol: f64) {
    for ((name, _), (ga, gb)) in params(&c.vs).iter().zip(a.iter().zip(b)) {
        assert!(
            ga.defined() && gb.defined(),
            "{label}: {name} has no gradient"
        );
        let err = max_rel_error(ga, gb, 1e-8);
        assert!(err < tol, "{label}: {name} differs by {err:e}\n{ga}\n{gb}");
    }
}

#[test]
fn implicit_gradient_equals_a_long_unrolled_descent() {
    for (label, cfg) in [("et", et_config()), ("cdat", cdat_config())] {
        let c = case(cfg, 3);
        let implicit = implicit_grads(&c);
        let stats = c.block.take_settle_stats();
        assert_eq!(stats.forwards, 1, "{label}");
        assert_eq!(stats.unconverged, 0, "{label}: {stats:?}");
        assert_eq!(stats.solves, 1, "{label}");
        assert!(
            stats.max_solver_residual < 1e-11,
            "{label}: adjoint residual {stats:?}"
        );
        // The unrolled gradient through many more steps than the descent needed.
        let unrolled = unrolled_grads(&c, stats.steps + 600);
        assert_grads_close(label, &c, &implicit, &unrolled, 1e-6);
    }
}

#[test]
fn implicit_gradient_equals_finite_differences_at_the_attractor() {
    for (label, cfg) in [("et", et_config()), ("cdat", cdat_config())] {
        let c = case(cfg, 5);
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
}

#[test]
fn both_solvers_agree_and_the_phantom_gradient_tends_to_the_implicit_one() {
    let mut c = case(et_config(), 7);
    let gmres = implicit_grads(&c);
    // The step contracts slowly (hundreds of forward steps), and so does the iteration.
    c.block.gradient = GradientConfig {
        solver_iters: 3000,
        ..tight(GradientMode::Implicit, Solver::FixedPoint)
    };
    let fixed = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    assert_eq!(stats.solves_unconverged, 0, "{stats:?}");
    assert_grads_close("fixed point against GMRES", &c, &fixed, &gmres, 1e-6);

    let error_at = |c: &mut Case, steps: usize| {
        let mut cfg = tight(GradientMode::Phantom, Solver::Gmres);
        cfg.phantom_steps = steps;
        c.block.gradient = cfg;
        let s = Structure::full();
        let y = c.block.forward(&c.x0, &s, true);
        let ps = params(&c.vs);
        let refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
        let g = Tensor::run_backward(&[loss_of(c, &y)], &refs, false, false);
        g.iter()
            .zip(&gmres)
            // γ's gradient is ~1e-14 (the re-standardised state leaves it only ε to act on).
            .map(|(a, b)| max_rel_error(a, b, 1e-3))
            .fold(0.0, f64::max)
    };
    let (few, many) = (error_at(&mut c, 2), error_at(&mut c, 1500));
    assert!(many < 1e-6, "1500 phantom steps: {many:e}");
    assert!(
        few > many,
        "2 phantom steps ({few:e}) no farther than 1500 ({many:e})"
    );
}

#[test]
fn the_settling_descent_lowers_the_energy_and_reports_a_capped_forward() {
    let mut c = case(et_config(), 11);
    let s = Structure::full();
    let (_, trace) = tch::no_grad(|| c.block.run(&c.x0, &s, false, Some(TraceOptions::default())));
    let e = trace.unwrap().mean_total();
    assert!(
        e.len() > 10,
        "a descent to 1e-13 takes more than ten steps: {}",
        e.len()
    );
    for w in e.windows(2) {
        assert!(w[1] <= w[0] + 1e-10, "the energy rose: {e:?}");
    }
    let stats = c.block.take_settle_stats();
    assert_eq!((stats.forwards, stats.unconverged), (1, 0), "{stats:?}");

    c.block.gradient.max_steps = 2;
    let _ = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    assert_eq!(
        (stats.forwards, stats.unconverged, stats.steps),
        (1, 1, 2),
        "{stats:?}"
    );
    let metrics = stats.metrics();
    assert!(
        metrics
            .iter()
            .any(|(k, v)| k == "settle_unconverged" && *v == 1.0),
        "{metrics:?}"
    );
    // The state forgets its start: a nearby x0, in the same basin, settles to the same x*.
    c.block.gradient.max_steps = 5000;
    let a = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let nudged = &c.x0 + Tensor::randn([2, 4, D], F64) * 1e-3;
    let b = tch::no_grad(|| c.block.forward(&nudged, &s, false));
    assert!(
        max_rel_error(&a, &b, 1e-8) < 1e-8,
        "the attractor moved with its start"
    );
}

#[test]
fn without_a_fixed_point_the_block_is_refused_naming_the_field() {
    let refused = |mut cfg: BlockConfig| {
        cfg.gradient = GradientConfig::implicit();
        cfg.validate().unwrap_err().to_string()
    };
    let mut noisy = et_config();
    noisy.dynamics = DynamicsConfig::langevin(0.1, 0.02);
    assert!(refused(noisy).contains("dynamics.sigma"));
    let mut per_feature = et_config();
    per_feature.norm.per_feature_gain = true;
    assert!(refused(per_feature).contains("norm.per_feature_gain"));
    for (edit, field) in [
        (
            (|c: &mut ControlledConfig| c.drive_dropout = 0.1) as fn(&mut ControlledConfig),
            "dynamics.drive_dropout",
        ),
        (|c| c.inhibition = false, "dynamics.inhibition"),
        (|c| c.sigma = 0.1, "dynamics.sigma"),
    ] {
        let mut cfg = cdat_config();
        cfg.dynamics.edit(edit).unwrap();
        assert!(refused(cfg).contains(field), "{field}");
    }
    // Noiseless Langevin is a gradient flow, and a controlled block with a gain per feature
    // settles in x: both are accepted.
    let mut quiet = et_config();
    quiet.dynamics = DynamicsConfig::langevin(0.1, 0.0);
    quiet.gradient = GradientConfig::implicit();
    quiet.validate().unwrap();
    let mut cdat = cdat_config();
    cdat.norm.per_feature_gain = true;
    cdat.gradient = GradientConfig::implicit();
    cdat.validate().unwrap();
    assert_eq!(
        cdat.dynamics.fixed_point("dynamics").unwrap(),
        FixedPoint::Tokens
    );
}

#[test]
fn the_gradient_section_reads_as_a_word_or_a_table() {
    let base = toml::to_string(&et_config()).unwrap();
    assert!(
        !base.contains("[gradient]") && !base.contains("gradient ="),
        "the default is left out of files:\n{base}"
    );
    let word = BlockConfig::from_toml(&format!("gradient = \"implicit\"\n{base}")).unwrap();
    assert_eq!(word.gradient, GradientConfig::implicit());
    let table = BlockConfig::from_toml(&format!(
        "{base}\n[gradient]\nmode = \"phantom\"\nphantom_steps = 3\n"
    ))
    .unwrap();
    assert_eq!(table.gradient.mode, GradientMode::Phantom);
    assert_eq!(table.gradient.phantom_steps, 3);
    let again = BlockConfig::from_toml(&toml::to_string(&table).unwrap()).unwrap();
    assert_eq!(again, table);
    for (bad, field) in [
        ("gradient = \"sideways\"", "sideways"),
        (
            "[gradient]\nmode = \"implicit\"\ntolerance = 1.0",
            "tolerance",
        ),
        ("[gradient]\nmode = \"implicit\"\ntol = 0.0", "gradient.tol"),
    ] {
        let text = if bad.starts_with('[') {
            format!("{base}\n{bad}\n")
        } else {
            format!("{bad}\n{base}")
        };
        let e = BlockConfig::from_toml(&text).unwrap_err().to_string();
        assert!(e.contains(field), "{bad}: {e}");
    }
}
