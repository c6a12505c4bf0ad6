//! Training at the attractor: on small blocks that converge, the implicit gradient equals the
//! gradient of a long unrolled descent and finite differences of the loss at the converged
//! state; the phantom gradient tends to it as its steps grow; the solvers' residuals are
//! reported; a descent that stops at its cap is counted; the combinations without a fixed
//! point are refused, naming the field. Float64 throughout.

use crate::common::*;
use basin_core::testing::implicit::{
    self, Case, assert_grads_close, case, implicit_grads, loss_of, params, tight,
};
use basin_core::testing::max_rel_error;
use basin_core::{
    AttentionConfig, BlockConfig, DynamicsConfig, GradientConfig, GradientMode,
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
