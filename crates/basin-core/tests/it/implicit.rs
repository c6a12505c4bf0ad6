//! Training at the attractor: on small blocks that converge, the implicit gradient equals the
//! gradient of a long unrolled descent and finite differences of the loss at the converged
//! state; the phantom gradient tends to it as its steps grow; the solvers' residuals are
//! reported; a descent that stops at its cap is counted; the combinations without a fixed
//! point are refused, naming the field. Float64 throughout.

use crate::common::*;
use basin_core::testing::implicit::{
    self, Case, assert_grads_close, case, forward_grads, implicit_grads, loss_of, params, tight,
};
use basin_core::testing::max_rel_error;
use basin_core::{
    AttentionConfig, BlockConfig, DynamicsConfig, ForwardSolver, GradientConfig, GradientMode,
    HopfieldMemoryConfig, Solver, Structure, TraceOptions,
};
use tch::Tensor;

const D: i64 = 6;

fn et_config() -> BlockConfig {
    let mut cfg = basin_core::testing::et_block(D, 2, 3, 8, 4);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.3)
        .unwrap();
    cfg.edit_terms(|h: &mut HopfieldMemoryConfig| h.init_std = 0.3)
        .unwrap();
    cfg.dynamics = DynamicsConfig::gradient_flow(0.2);
    cfg
}

#[test]
fn implicit_gradient_equals_a_long_unrolled_descent() {
    implicit::equals_unrolled("et", et_config(), 3);
}

#[test]
fn implicit_gradient_equals_finite_differences_at_the_attractor() {
    implicit::equals_finite_differences("et", et_config(), 5);
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
    assert_eq!(
        (stats.forwards, stats.unconverged, stats.train_forwards),
        (1, 0, 0),
        "an evaluation forward is not a training one: {stats:?}"
    );

    c.block.gradient.max_steps = 2;
    let _ = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    assert_eq!(
        (stats.forwards, stats.unconverged, stats.steps),
        (1, 1, 2),
        "{stats:?}"
    );
    assert_eq!(
        (stats.train_forwards, stats.train_unconverged),
        (1, 1),
        "{stats:?}"
    );
    let metrics = stats.metrics();
    let metric = |key: &str| metrics.iter().find(|(k, _)| k == key).map(|(_, v)| *v);
    assert_eq!(
        (metric("settle_unconverged"), metric("settle_forwards")),
        (Some(1.0), Some(1.0)),
        "{metrics:?}"
    );
    assert_eq!(
        (
            metric("settle_train_unconverged"),
            metric("settle_train_forwards")
        ),
        (Some(1.0), Some(1.0)),
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

/// Anderson acceleration reaches the fixed point the plain iteration reaches, in far fewer
/// steps on a slowly contracting block, and the implicit gradient at it is the same.
#[test]
fn anderson_settles_at_the_same_fixed_point_in_fewer_steps() {
    let mut c = case(et_config(), 7);
    let s = Structure::full();
    let plain = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let iterated = c.block.take_settle_stats();
    let plain_grads = implicit_grads(&c);
    let _ = c.block.take_settle_stats();
    c.block.gradient.forward_solver = ForwardSolver::Anderson;
    let fast = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let anderson = c.block.take_settle_stats();
    assert_eq!(
        (iterated.unconverged, anderson.unconverged),
        (0, 0),
        "{iterated:?} {anderson:?}"
    );
    assert!(
        anderson.steps * 4 < iterated.steps,
        "Anderson {} steps against {} iterated",
        anderson.steps,
        iterated.steps
    );
    assert!(
        max_rel_error(&fast, &plain, 1e-6) < 1e-9,
        "another fixed point"
    );
    let grads = implicit_grads(&c);
    assert_grads_close("Anderson against iteration", &c, &grads, &plain_grads, 1e-5);
    eprintln!(
        "settling steps: {} iterated, {} Anderson",
        iterated.steps, anderson.steps
    );
}

/// A training forward stops at `train_max_steps` (and `train_tol`), an evaluation forward at
/// `max_steps`; each sample of an Anderson forward counts as converged on its own, and a bad
/// mixing or history is refused by name.
#[test]
fn training_forwards_settle_by_their_own_tolerance_and_cap() {
    let mut c = case(et_config(), 7);
    let s = Structure::full();
    c.block.gradient.train_max_steps = Some(4);
    let _ = implicit_grads(&c);
    let train = c.block.take_settle_stats();
    assert_eq!((train.steps, train.unconverged), (4, 1), "{train:?}");
    let _ = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let eval = c.block.take_settle_stats();
    assert!(eval.steps > 4 && eval.unconverged == 0, "{eval:?}");
    c.block.gradient.train_max_steps = None;
    c.block.gradient.train_tol = Some(1e-3);
    let _ = implicit_grads(&c);
    let loose = c.block.take_settle_stats();
    assert!(
        loose.steps < eval.steps && loose.max_residual <= 1e-3,
        "{loose:?}"
    );

    for (edit, field) in [
        (
            (|g: &mut GradientConfig| g.anderson_mixing = 0.0) as fn(&mut GradientConfig),
            "gradient.anderson_mixing",
        ),
        (|g| g.anderson_history = 0, "gradient.anderson_history"),
        (|g| g.train_tol = Some(-1.0), "gradient.train_tol"),
        (|g| g.train_max_steps = Some(0), "gradient.train_max_steps"),
    ] {
        let mut cfg = et_config();
        cfg.gradient = GradientConfig::implicit();
        edit(&mut cfg.gradient);
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
}

/// The settling map's Jacobian at the case's attractor, `[n, n]` for the flattened state,
/// row by row from vector–Jacobian products; and `x*`.
fn exact_jacobian(c: &Case) -> (Tensor, Tensor) {
    let s = Structure::full();
    let x_star = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let x = x_star.detach().set_requires_grad(true);
    let y = c.block.settle_step(&x, &s, 0, false);
    let n = x.numel() as i64;
    let rows: Vec<Tensor> = (0..n)
        .map(|i| {
            let e = Tensor::zeros([n], F64).index_fill(0, &Tensor::from_slice(&[i]), 1.0);
            let s = (&y * e.view_as(&y)).sum(tch::Kind::Double);
            Tensor::run_backward(&[&s], &[&x], true, false)[0].reshape([n])
        })
        .collect();
    (Tensor::stack(&rows, 0), x_star)
}

/// Power iteration in the adjoint solve estimates ρ(J) at the attractor, reported per epoch.
#[test]
fn the_spectral_radius_of_the_step_is_measured_at_the_attractor() {
    let mut c = case(et_config(), 7);
    c.block.gradient.spectral_iters = 300;
    let (j, _) = exact_jacobian(&c);
    let eig = j.linalg_eigvals();
    let exact = eig.abs().max().double_value(&[]);
    let _ = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    assert_eq!(stats.radius_estimates, 1, "{stats:?}");
    assert!(exact < 1.0, "the map contracts at its attractor: {exact}");
    assert!(
        (stats.max_spectral_radius - exact).abs() < 1e-3,
        "power iteration {} against the eigenvalues' {exact}",
        stats.max_spectral_radius
    );
    assert!(stats.metrics().iter().any(|(k, _)| k == "spectral_radius"));
    c.block.gradient.spectral_iters = 0;
    let _ = implicit_grads(&c);
    let off = c.block.take_settle_stats();
    assert!(!off.metrics().iter().any(|(k, _)| k == "spectral_radius"));
}

/// With a weight, the Jacobian regulariser adds `γ ‖J‖²_F / d` (one Hutchinson probe) to the
/// attached loss, and training on it alone lowers the exact ‖J‖_F at the attractor.
#[test]
fn jacobian_regularisation_makes_the_step_more_contractive() {
    let mut c = case(et_config(), 7);
    c.block.gradient.jacobian_weight = 10.0;
    c.weights = c.weights.zeros_like(); // the regulariser is the only loss
    let frobenius = |c: &Case| {
        exact_jacobian(c)
            .0
            .square()
            .sum(tch::Kind::Double)
            .double_value(&[])
    };
    let before = frobenius(&c);
    let s = Structure::full();
    let ps = params(&c.vs);
    for step in 0..30 {
        for (_, p) in &ps {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
        let y = c.block.forward(&c.x0, &s, true);
        let plain = loss_of(&c, &y);
        let loss = basin_core::implicit::attach(&plain, [&c.block]);
        let stats = c.block.take_settle_stats();
        assert_eq!(stats.jacobian_estimates, 1, "{stats:?}");
        let added = (&loss - &plain).double_value(&[]);
        assert!(
            (added - 10.0 * stats.jacobian_frobenius).abs() < 1e-9 * added.abs().max(1.0),
            "step {step}: the loss grew by {added}, the estimate was {}",
            stats.jacobian_frobenius
        );
        loss.backward();
        tch::no_grad(|| {
            for (_, p) in &ps {
                let g = p.grad();
                if g.defined() {
                    let _ = p.shallow_clone().f_sub_(&(g * 0.02)).unwrap();
                }
            }
        });
    }
    let after = frobenius(&c);
    eprintln!("‖J‖²_F at the attractor: {before} → {after}");
    assert!(after < 0.8 * before, "‖J‖²_F {before} → {after}");
}

/// The damped phantom gradient is the gradient through `k` steps `x ← τ f(x) + (1 − τ) x`
/// from the detached attractor; the implicit solve falls back to it when its forward did not
/// converge, and says so in the record.
#[test]
fn damped_phantom_steps_and_the_fallback_of_an_unconverged_solve() {
    let mut c = case(et_config(), 7);
    let s = Structure::full();
    let ps = params(&c.vs);
    let refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
    let mut cfg = tight(GradientMode::Phantom, Solver::Gmres);
    cfg.phantom_steps = 4;
    cfg.phantom_damping = 0.5;
    c.block.gradient = cfg.clone();
    let y = c.block.forward(&c.x0, &s, true);
    let damped = Tensor::run_backward(&[loss_of(&c, &y)], &refs, false, false);
    // By hand: the same damped steps from the detached state the block settles in.
    let x_star = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let mut x = x_star.detach();
    for t in 0..4 {
        x = c.block.settle_step(&x, &s, t, true) * 0.5 + &x * 0.5;
    }
    let by_hand = Tensor::run_backward(&[loss_of(&c, &x)], &refs, false, false);
    assert_grads_close(
        "damped phantom against by hand",
        &c,
        &damped,
        &by_hand,
        1e-10,
    );
    c.block.gradient.phantom_damping = 1.0;
    let y = c.block.forward(&c.x0, &s, true);
    let plain = Tensor::run_backward(&[loss_of(&c, &y)], &refs, false, false);
    let differs = plain
        .iter()
        .zip(&damped)
        .any(|(a, b)| max_rel_error(a, b, 1e-6) > 1e-3);
    assert!(differs, "damping changed no gradient");

    // A forward capped at 3 steps: with the fallback, the phantom gradient from where it
    // stopped; without, the adjoint's.
    let capped = |fallback: bool| {
        let mut g = cfg.clone();
        g.mode = GradientMode::Implicit;
        g.max_steps = 3;
        g.phantom_fallback = fallback;
        g
    };
    c.block.gradient = capped(true);
    let fell_back = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    // The capped forward's adjoint is not solved: it would be thrown away.
    assert_eq!(
        (
            stats.unconverged,
            stats.fallbacks,
            stats.fallback_samples,
            stats.solves
        ),
        (1, 1, 2, 0),
        "{stats:?}"
    );
    assert!(
        stats
            .metrics()
            .iter()
            .any(|(k, v)| k == "phantom_fallbacks" && *v == 1.0)
    );
    let mut phantom = capped(false);
    phantom.mode = GradientMode::Phantom;
    c.block.gradient = phantom;
    let want = forward_grads(&c);
    assert_grads_close("fallback against phantom", &c, &fell_back, &want, 1e-10);
    c.block.gradient = capped(false);
    let adjoint = implicit_grads(&c);
    assert_eq!(c.block.take_settle_stats().fallbacks, 0);
    assert!(
        adjoint
            .iter()
            .zip(&fell_back)
            .any(|(a, b)| max_rel_error(a, b, 1e-6) > 1e-3),
        "the fallback changed nothing"
    );
}

/// The fallback is per sample: in a batch where one sample settles and the other stops at the
/// cap, the first keeps the adjoint's gradient and only the second takes the phantom one.
#[test]
fn the_fallback_is_taken_by_the_unsettled_sample_alone() {
    let mut c = case(et_config(), 7);
    let s = Structure::full();
    // Sample 0 starts at its attractor (it settles at once), sample 1 where it was drawn.
    let x_star = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    c.x0 = Tensor::cat(&[x_star.narrow(0, 0, 1), c.x0.narrow(0, 1, 1)], 0);
    let _ = c.block.take_settle_stats();
    let capped = |mode: GradientMode, fallback: bool| {
        let mut g = tight(mode, Solver::Gmres);
        g.max_steps = 3;
        g.phantom_fallback = fallback;
        g
    };
    c.block.gradient = capped(GradientMode::Implicit, true);
    let mixed = implicit_grads(&c);
    let stats = c.block.take_settle_stats();
    assert_eq!(
        (
            stats.unconverged,
            stats.fallbacks,
            stats.fallback_samples,
            stats.solves
        ),
        (1, 1, 1, 1),
        "{stats:?}"
    );
    // Each sample's share of the linear loss, by the gradient it should have.
    let weights = c.weights.shallow_clone();
    let only = |i: i64| {
        let keep = Tensor::zeros([2, 1, 1], (tch::Kind::Double, tch::Device::Cpu));
        let _ = keep.get(i).fill_(1.0);
        &weights * keep
    };
    c.weights = only(0);
    c.block.gradient = capped(GradientMode::Implicit, false);
    let adjoint = implicit_grads(&c);
    c.weights = only(1);
    c.block.gradient = capped(GradientMode::Phantom, false);
    let phantom = forward_grads(&c);
    let want: Vec<Tensor> = adjoint.iter().zip(&phantom).map(|(a, b)| a + b).collect();
    assert_grads_close("per-sample fallback", &c, &mixed, &want, 1e-9);
    // A fallback of the whole forward would have given the phantom gradient to both.
    c.weights = weights;
    let both = forward_grads(&c);
    assert!(
        mixed
            .iter()
            .zip(&both)
            .any(|(a, b)| max_rel_error(a, b, 1e-6) > 1e-3),
        "the settled sample fell back too"
    );
}

/// Fixed-point correction: a training forward keeps `k` states of its settle, at evenly
/// spaced steps of its cap, each through the phantom steps, weighted `γ^(k − i + 1)`; none in
/// evaluation; the final state where the settle stopped before a pick.
#[test]
fn fixed_point_correction_keeps_the_sampled_states_with_their_weights() {
    let mut c = case(et_config(), 7);
    let s = Structure::full();
    let mut cfg = tight(GradientMode::Phantom, Solver::Gmres);
    cfg.max_steps = 9;
    cfg.phantom_steps = 2;
    cfg.correction_states = 2;
    cfg.correction_decay = 0.5;
    c.block.gradient = cfg;
    let _ = c.block.forward(&c.x0, &s, false);
    assert!(
        c.block.take_corrections().is_empty(),
        "evaluation kept corrections"
    );
    let _ = c.block.forward(&c.x0, &s, true);
    let kept = c.block.take_corrections();
    assert!(
        c.block.take_corrections().is_empty(),
        "taking did not clear them"
    );
    assert_eq!(
        kept.iter().map(|(w, _)| *w).collect::<Vec<_>>(),
        [0.25, 0.5]
    );
    // By hand: the standardised start, the plain steps, the states after steps 3 and 6 of 9
    // (round(9 / 3), round(18 / 3)), then two phantom steps from each.
    let mut x = basin_core::implicit::standardise(&c.x0, None);
    let mut states = Vec::new();
    for t in 0..6 {
        x = tch::no_grad(|| c.block.settle_step(&x, &s, t, true));
        if t == 2 || t == 5 {
            states.push(x.shallow_clone());
        }
    }
    for ((_, got), state) in kept.iter().zip(&states) {
        let mut want = state.shallow_clone();
        for t in 0..2 {
            want = c.block.settle_step(&want, &s, t, true);
        }
        assert!(got.requires_grad(), "a correction state without its graph");
        assert!(max_rel_error(got, &want, 1e-12) < 1e-9);
    }
    // A settle that stops before a pick hands the final state there.
    c.block.gradient.max_steps = 3000;
    c.block.gradient.correction_states = 3;
    let y = tch::no_grad(|| c.block.forward(&c.x0, &s, false));
    let _ = c.block.forward(&c.x0, &s, true);
    let kept = c.block.take_corrections();
    assert_eq!(kept.len(), 3);
    let mut last = y.shallow_clone();
    for t in 0..2 {
        last = tch::no_grad(|| c.block.settle_step(&last, &s, t, true));
    }
    assert!(max_rel_error(&kept[2].1.detach(), &last, 1e-12) < 1e-8);
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
    // Noiseless Langevin is a gradient flow: accepted.
    let mut quiet = et_config();
    quiet.dynamics = DynamicsConfig::langevin(0.1, 0.0);
    quiet.gradient = GradientConfig::implicit();
    quiet.validate().unwrap();
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

fn driven_config() -> BlockConfig {
    let mut cfg = et_config();
    cfg.terms.push(basin_core::TermConfig::new(
        &basin_core::terms::input_field::InputFieldConfig {
            strength: 0.5,
            projection: true,
            ..Default::default()
        },
    ));
    cfg
}

/// `(parameter gradients, ∂L/∂x0)` of the implicit block and of a long unrolled descent of
/// the same settling map, both from the loss at the output.
fn grads_with_input(c: &Case, unrolled_steps: usize) -> [(Vec<Tensor>, Tensor); 2] {
    let ps = params(&c.vs);
    let mut refs: Vec<&Tensor> = ps.iter().map(|(_, t)| t).collect();
    let x0 = c.x0.detach().set_requires_grad(true);
    refs.push(&x0);
    let full = Structure::full();
    let y = c.block.forward(&x0, &full, true);
    let loss = basin_core::implicit::attach(&loss_of(c, &y), [&c.block]);
    let mut implicit = Tensor::run_backward(&[loss], &refs, false, false);
    let s = c.block.driven(&x0, &full).unwrap_or(Structure::full());
    let mut x = basin_core::implicit::standardise(&x0, None);
    for t in 0..unrolled_steps {
        x = c.block.settle_step(&x, &s, t, true);
    }
    let mut unrolled = Tensor::run_backward(&[loss_of(c, &x)], &refs, false, false);
    let (a, b) = (implicit.pop().unwrap(), unrolled.pop().unwrap());
    [(implicit, a), (unrolled, b)]
}

#[test]
fn an_input_field_makes_the_attractor_remember_its_input_and_passes_the_gradient_to_it() {
    // Without the field the fixed point forgets x0: no gradient reaches it.
    let c = case(et_config(), 13);
    let [(_, forgot), _] = grads_with_input(&c, 10);
    assert!(
        !forgot.defined() || forgot.abs().max().double_value(&[]) == 0.0,
        "{forgot}"
    );
    // With it, the implicit gradient to x0 and to every parameter (λ and W included) equals
    // a long unrolled descent's.
    let c = case(driven_config(), 13);
    let [(implicit, to_x0), (unrolled, want)] = grads_with_input(&c, 3000);
    let stats = c.block.take_settle_stats();
    assert_eq!(stats.unconverged, 0, "{stats:?}");
    assert!(to_x0.abs().max().double_value(&[]) > 1e-4, "{to_x0}");
    let err = max_rel_error(&to_x0, &want, 1e-6);
    assert!(err < 1e-6, "∂L/∂x0 differs by {err:e}");
    assert_grads_close("input field", &c, &implicit, &unrolled, 1e-6);
}

#[test]
fn stacked_blocks_with_an_input_field_chain_their_adjoints_last_first() {
    let (a, b) = (case(driven_config(), 17), case(driven_config(), 19));
    let full = Structure::full();
    // Implicit: both blocks settle, one attach for both.
    let y1 = a.block.forward(&a.x0, &full, true);
    let y2 = b.block.forward(&y1, &full, true);
    let loss = basin_core::implicit::attach(&loss_of(&b, &y2), [&a.block, &b.block]);
    let pa = params(&a.vs);
    let refs: Vec<&Tensor> = pa.iter().map(|(_, t)| t).collect();
    let implicit = Tensor::run_backward(&[loss], &refs, false, false);
    // Unrolled: each block's settling map stepped far past convergence, the second driven by
    // the first's end state.
    let unroll = |c: &Case, x0: &Tensor| {
        let s = c.block.driven(x0, &full).unwrap_or(Structure::full());
        let mut x = basin_core::implicit::standardise(x0, None);
        for t in 0..3000 {
            x = c.block.settle_step(&x, &s, t, true);
        }
        x
    };
    let x2 = unroll(&b, &unroll(&a, &a.x0));
    let unrolled = Tensor::run_backward(&[loss_of(&b, &x2)], &refs, false, false);
    assert!(
        implicit
            .iter()
            .all(|g| g.defined() && g.abs().max().double_value(&[]) > 0.0),
        "the first block learns"
    );
    assert_grads_close(
        "first of two stacked blocks",
        &a,
        &implicit,
        &unrolled,
        1e-5,
    );
}

#[test]
fn the_input_field_has_its_closed_form_gradient_and_no_field_without_an_input() {
    use basin_core::Energy;
    use basin_core::terms::input_field::{InputField, InputFieldConfig};
    let mut vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let term = InputField::new(
        &vs.root(),
        D,
        &InputFieldConfig {
            strength: 0.7,
            projection: true,
            ..Default::default()
        },
    );
    vs.double();
    let w = term.w.as_ref().unwrap();
    let _ = tch::no_grad(|| {
        w.shallow_clone()
            .g_add_(&(Tensor::randn([D, D], F64) * 0.1))
    });
    let g = Tensor::randn([2, 4, D], F64);
    let u = Tensor::randn([2, 4, D], F64);
    let pad = padding(2, 4, 1);
    let s = Structure::full().with_padding(pad).unwrap().with_input(u);
    let closed = term.grad(&g, &s);
    let auto = basin_core::energy::autograd_grad(&term, &g, &s);
    assert!(max_rel_error(&closed, &auto, 1e-6) < 1e-5);
    // Batch 0's last token is padding: it feels no field.
    let k = tch::Kind::Double;
    assert_eq!(closed.get(0).get(3).abs().sum(k).double_value(&[]), 0.0);
    let token = term
        .token_energy(&g, &s)
        .unwrap()
        .sum_dim_intlist(-1, false, k);
    assert!(max_rel_error(&token, &term.energy(&g, &s), 1e-6) < 1e-6);
    let bare = Structure::full();
    assert_eq!(term.energy(&g, &bare).abs().sum(k).double_value(&[]), 0.0);
    assert_eq!(term.grad(&g, &bare).abs().sum(k).double_value(&[]), 0.0);
}
