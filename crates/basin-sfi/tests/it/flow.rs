//! The sparse-flow solver (SFi-Former eq. 8–10) against its closed forms, in float64: softmax as
//! the λ = 0 special case, the exact minimiser as the oracle the unrolled iteration approaches,
//! sparsity growing with λ, padding that carries no flow, and gradients against finite
//! differences.

use basin_core::testing::{finite_difference, max_rel_error, seeded};
use basin_sfi::flow::{
    FlowConfig, FlowSolver, StepRule, flow_energy, resistances, sparse_flow, sparse_flow_traced,
};
use tch::{Kind, Tensor};

const OPTS: (Kind, tch::Device) = (Kind::Double, tch::Device::Cpu);

/// Scores and frictions of `b` graphs × `h` heads on `n` tokens; `scale` sets how peaked.
fn problem(b: i64, h: i64, n: i64, scale: f64) -> (Tensor, Tensor) {
    let s = Tensor::randn([b, h, n, n], OPTS) * scale;
    let f = (Tensor::randn([b, h, n, n], OPTS) * scale).softmax(-1, Kind::Double);
    (s, f)
}

fn cfg(solver: FlowSolver, iters: usize) -> FlowConfig {
    FlowConfig {
        solver,
        iters,
        ..FlowConfig::default()
    }
}

fn full(b: i64, n: i64) -> Tensor {
    Tensor::ones([b, n], (Kind::Bool, tch::Device::Cpu))
}

#[test]
fn without_friction_the_constrained_flow_is_softmax_attention() {
    seeded(1, || {
        let (s, f) = problem(2, 3, 7, 1.0);
        let mask = full(2, 7);
        let lam = Tensor::zeros([2], OPTS);
        let soft = s.softmax(-1, Kind::Double);
        let dense = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::Dense, 0));
        let exact = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactConstrained, 0));
        assert!(max_rel_error(&dense, &soft, 1e-12) < 1e-12);
        assert!(max_rel_error(&exact, &soft, 1e-12) < 1e-10);
        // Penalised, λ = 0: softmax scaled by W/(W + 1/α), W = Σ 1/R.
        let alpha = 0.1;
        let w = resistances(&s, &mask).reciprocal();
        let total = w.sum_dim_intlist(&[-1i64][..], true, Kind::Double);
        let expected = &soft * &total / (&total + 1.0 / alpha);
        let pen = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactPenalized, 0));
        assert!(max_rel_error(&pen, &expected, 1e-12) < 1e-10);
    });
}

#[test]
fn the_exact_solution_minimises_eq_9_and_the_iteration_approaches_it() {
    seeded(2, || {
        let (s, f) = problem(2, 2, 12, 0.5);
        let mask = full(2, 12);
        let lam = Tensor::from_slice(&[1.0 / 12.0, 3.0 / 12.0]);
        let r = resistances(&s, &mask);
        let energy = |z: &Tensor| flow_energy(z, &r, &f, &mask, &lam, 0.1);
        let exact = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactPenalized, 0));
        let e_star = energy(&exact);
        // No random perturbation does better.
        for k in 0..20 {
            let z = &exact + Tensor::randn_like(&exact) * 1e-3 * (1 + k) as f64;
            let worse = energy(&z) - &e_star;
            assert!(
                worse.min().double_value(&[]) > 0.0,
                "perturbation {k} lowered the energy"
            );
        }
        // The unrolled iteration closes the gap as K grows, monotone in K here.
        let mut gaps = Vec::new();
        for iters in [0, 10, 100, 1000] {
            let z = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ProxBb, iters));
            let gap = ((energy(&z) - &e_star) / e_star.abs())
                .max()
                .double_value(&[]);
            gaps.push(gap);
        }
        eprintln!("relative gap at K = 0, 10, 100, 1000: {gaps:?}");
        assert!(gaps.windows(2).all(|w| w[1] <= w[0] + 1e-12), "{gaps:?}");
        assert!(gaps[3] < 1e-8, "K = 1000 is {gaps:?} from the optimum");
        // The printed step rule stalls where BB2 converges.
        let paper = FlowConfig {
            step: StepRule::PaperUnsquared,
            ..cfg(FlowSolver::ProxBb, 100)
        };
        let z = sparse_flow(&s, &f, &mask, &lam, &paper);
        let stalled = ((energy(&z) - &e_star) / e_star.abs())
            .max()
            .double_value(&[]);
        eprintln!("printed step rule, K = 100: {stalled:.2e}");
        assert!(
            stalled > 10.0 * gaps[2],
            "paper step {stalled} vs BB2 {}",
            gaps[2]
        );
    });
}

#[test]
fn the_trace_follows_the_iteration_down_towards_the_exact_optimum() {
    seeded(5, || {
        let (s, f) = problem(2, 2, 9, 1.0);
        let mask = full(2, 9);
        let lam = Tensor::from_slice(&[0.3, 0.6]).to_kind(Kind::Double);
        let c = cfg(FlowSolver::ProxBb, 12);
        let (z, trace, optimum) = sparse_flow_traced(&s, &f, &mask, &lam, &c);
        // The same flows as the untraced solver, one energy per iterate (the start included).
        assert!(max_rel_error(&z, &sparse_flow(&s, &f, &mask, &lam, &c), 1e-12) < 1e-12);
        assert_eq!(trace.len(), 13);
        let r = resistances(&s, &mask);
        let last = flow_energy(&z, &r, &f, &mask, &lam, c.alpha)
            .mean(Kind::Double)
            .double_value(&[]);
        assert!((trace[12] - last).abs() < 1e-12);
        // Never below the exact minimiser, and much closer to it at the end than at the start.
        assert!(
            trace.iter().all(|&e| e >= optimum - 1e-12),
            "{trace:?} vs {optimum}"
        );
        assert!(
            trace[12] - optimum < 0.1 * (trace[0] - optimum),
            "{trace:?} vs {optimum}"
        );
    });
}

#[test]
fn the_safeguarded_energy_never_rises_where_plain_bb_steps_raise_it() {
    seeded(6, || {
        let mask = full(1, 24);
        let rises = |t: &[f64]| t.windows(2).any(|w| w[1] > w[0] + 1e-12);
        let mut plain_rose = 0;
        for trial in 0..40 {
            let scale = [0.5, 1.0, 2.0, 4.0][trial % 4];
            let lam =
                Tensor::from_slice(&[[0.01, 0.1, 0.5, 2.0][trial / 10]]).to_kind(Kind::Double);
            let (s, f) = problem(1, 1, 24, scale);
            let safe = cfg(FlowSolver::ProxBb, 20);
            let (_, trace, _) = sparse_flow_traced(&s, &f, &mask, &lam, &safe);
            assert!(!rises(&trace), "trial {trial}: {trace:?}");
            let plain = FlowConfig {
                safeguard: false,
                ..safe
            };
            plain_rose += usize::from(rises(&sparse_flow_traced(&s, &f, &mask, &lam, &plain).1));
        }
        // The guard matters: some plain BB iterations go up.
        assert!(plain_rose > 0, "no problem here raises the plain BB energy");
        eprintln!("plain BB rose on {plain_rose} of 40 problems");
    });
}

#[test]
fn sparsity_grows_with_the_friction_weight() {
    seeded(3, || {
        let (s, f) = problem(1, 2, 12, 1.0);
        let mask = full(1, 12);
        let mut zeros = Vec::new();
        for lam_star in [0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0] {
            let lam = Tensor::from_slice(&[lam_star / 12.0]);
            let z = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactPenalized, 0));
            assert!(z.min().double_value(&[]) >= 0.0, "a negative flow");
            zeros.push(
                z.eq(0.0)
                    .to_kind(Kind::Double)
                    .mean(Kind::Double)
                    .double_value(&[]),
            );
        }
        eprintln!("zero fraction at λ* = 0, .1, .3, 1, 3, 10, 30: {zeros:?}");
        assert!(zeros.windows(2).all(|w| w[1] >= w[0]), "{zeros:?}");
        assert_eq!(zeros[0], 0.0);
        assert!(zeros[zeros.len() - 1] > 0.5, "{zeros:?}");
    });
}

#[test]
fn padded_tokens_carry_no_flow_and_change_nothing() {
    seeded(4, || {
        let (n, pad) = (6, 3);
        let (s, f) = problem(1, 2, n + pad, 1.0);
        let mut mask = vec![true; (n + pad) as usize];
        mask[n as usize..].iter_mut().for_each(|m| *m = false);
        let mask = Tensor::from_slice(&mask).view([1, -1]);
        let lam = Tensor::from_slice(&[1.0 / n as f64]);
        let real = |t: &Tensor| t.narrow(2, 0, n).narrow(3, 0, n);
        for solver in [
            FlowSolver::Dense,
            FlowSolver::ProxBb,
            FlowSolver::ExactPenalized,
            FlowSolver::ExactConstrained,
        ] {
            let padded = sparse_flow(&s, &f, &mask, &lam, &cfg(solver, 10));
            let alone = sparse_flow(&real(&s), &real(&f), &full(1, n), &lam, &cfg(solver, 10));
            assert!(
                max_rel_error(&real(&padded), &alone, 1e-12) < 1e-10,
                "{solver:?}: the padding changed the real block"
            );
            let rows_out = padded
                .narrow(2, n, pad)
                .abs()
                .sum(Kind::Double)
                .double_value(&[]);
            let cols_out = padded
                .narrow(3, n, pad)
                .abs()
                .sum(Kind::Double)
                .double_value(&[]);
            assert_eq!(
                (rows_out, cols_out),
                (0.0, 0.0),
                "{solver:?}: flow through padding"
            );
        }
    });
}

#[test]
fn gradients_through_the_solvers_match_finite_differences() {
    seeded(5, || {
        let (s, f) = problem(1, 1, 5, 1.0);
        let mask = full(1, 5);
        let lam = Tensor::from_slice(&[0.3]);
        let weights = Tensor::randn([1, 1, 5, 5], OPTS);
        for solver in [FlowSolver::ProxBb, FlowSolver::ExactPenalized] {
            let c = cfg(solver, 10);
            let loss = |s: &Tensor, f: &Tensor| {
                (sparse_flow(s, f, &mask, &lam, &c) * &weights).sum(Kind::Double)
            };
            let sv = s.detach().set_requires_grad(true);
            let fv = f.detach().set_requires_grad(true);
            let grads = Tensor::run_backward(&[loss(&sv, &fv)], &[&sv, &fv], false, false);
            let fd_s = finite_difference(|x| loss(x, &f).double_value(&[]), &s, 1e-6);
            let fd_f = finite_difference(|x| loss(&s, x).double_value(&[]), &f, 1e-6);
            let es = max_rel_error(&grads[0], &fd_s, 1e-8);
            let ef = max_rel_error(&grads[1], &fd_f, 1e-8);
            eprintln!("{solver:?}: ∂/∂S {es:.1e}, ∂/∂F {ef:.1e} against finite differences");
            assert!(
                es < 1e-5 && ef < 1e-5,
                "{solver:?}: ∂/∂S {es:.1e}, ∂/∂F {ef:.1e}"
            );
        }
    });
}

#[test]
fn a_problem_that_stops_moving_keeps_finite_gradients() {
    // Equal tokens give equal scores and frictions: the first prox step lands on the optimum,
    // the gradient stops changing (b = 0) and every Barzilai–Borwein quotient is 0/0. The
    // step must be kept without sending NaN through the backward pass (it did: the masked
    // quotient's derivative is NaN, and 0 · NaN = NaN), for every step rule and with padding.
    let mask = Tensor::from_slice(&[true, true, true, true, true, true, true, false]).view([2, 4]);
    let lam = Tensor::from_slice(&[0.3, 0.3]);
    for step in [
        StepRule::Bb2,
        StepRule::Bb1,
        StepRule::PaperUnsquared,
        StepRule::Fixed,
    ] {
        let c = FlowConfig {
            step,
            ..cfg(FlowSolver::ProxBb, 5)
        };
        let s = Tensor::full([2, 1, 4, 4], 0.7, OPTS).set_requires_grad(true);
        let f = Tensor::full([2, 1, 4, 4], 0.25, OPTS).set_requires_grad(true);
        let z = sparse_flow(&s, &f, &mask, &lam, &c);
        let weights = Tensor::arange(32, OPTS).view([2, 1, 4, 4]);
        let grads =
            Tensor::run_backward(&[(&z * weights).sum(Kind::Double)], &[&s, &f], false, false);
        for (name, g) in ["∂/∂S", "∂/∂F"].iter().zip(&grads) {
            let finite = g.isfinite().all().int64_value(&[]) == 1;
            assert!(finite, "{step:?}: {name} is not finite");
        }
        assert_eq!(z.isfinite().all().int64_value(&[]), 1, "{step:?}: flows");
    }
}

#[test]
fn peaked_scores_keep_finite_gradients_in_float32() {
    // Peaked scores (a trained model's) make some resistances R = softmax(−S) and flows tiny:
    // a Barzilai–Borwein denominator can then be tiny but positive, and the masked or clamped
    // quotient's derivative −num/den² overflowed to ∞, sending 0·∞ = NaN to the weights (seen
    // in SFi-Former+ training, started from a trained DFi-Former; with these draws the
    // previous rule gave NaN for several seeds).
    let kind = (Kind::Float, tch::Device::Cpu);
    let (b, n) = (8, 6);
    let mask = Tensor::ones([b, n], (Kind::Bool, tch::Device::Cpu));
    let lam = Tensor::full([b], 1.0 / n as f64, kind);
    let mut failed = Vec::new();
    for seed in 0..100 {
        seeded(seed, || {
            let s = (Tensor::randn([b, 2, n, n], kind) * 30.0).set_requires_grad(true);
            let f = (Tensor::randn([b, 2, n, n], kind) * 30.0)
                .softmax(-1, Kind::Float)
                .set_requires_grad(true);
            let z = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ProxBb, 5));
            let w = Tensor::randn([b, 2, n, n], kind);
            let grads = Tensor::run_backward(&[(&z * w).sum(Kind::Float)], &[&s, &f], false, false);
            if grads
                .iter()
                .any(|g| g.isfinite().all().int64_value(&[]) == 0)
            {
                failed.push(seed);
            }
        });
    }
    assert!(
        failed.is_empty(),
        "non-finite gradients for seeds {failed:?}"
    );
}

#[test]
fn an_empty_graph_in_the_batch_gets_no_flow_and_sends_no_nan() {
    // A graph without nodes has no key at all: a softmax over none is NaN (forward, or only in
    // the backward pass once masked), and the prox-BB step 1/(max R + α n) is 1/0.
    seeded(6, || {
        let (s, f) = problem(2, 2, 4, 1.0);
        let mask =
            Tensor::from_slice(&[true, true, true, false, false, false, false, false]).view([2, 4]);
        let lam = Tensor::from_slice(&[0.3, 0.3]);
        for solver in [
            FlowSolver::ProxBb,
            FlowSolver::ExactPenalized,
            FlowSolver::ExactConstrained,
            FlowSolver::Dense,
        ] {
            let s = s.detach().set_requires_grad(true);
            let f = f.detach().set_requires_grad(true);
            let z = sparse_flow(&s, &f, &mask, &lam, &cfg(solver, 5));
            assert_eq!(z.get(1).abs().max().double_value(&[]), 0.0, "{solver:?}");
            let weights = Tensor::randn([2, 2, 4, 4], OPTS);
            let grads =
                Tensor::run_backward(&[(&z * weights).sum(Kind::Double)], &[&s, &f], false, false);
            // (`dense` does not read F: no gradient reaches it.)
            for (name, g) in ["∂/∂S", "∂/∂F"]
                .iter()
                .zip(&grads)
                .filter(|(_, g)| g.defined())
            {
                let finite = g.isfinite().all().int64_value(&[]) == 1;
                assert!(finite, "{solver:?}: {name} is not finite");
            }
        }
    });
}

#[test]
fn bad_settings_are_refused() {
    for alpha in [0.0, -1.0, f64::NAN] {
        let c = FlowConfig {
            alpha,
            ..FlowConfig::default()
        };
        assert!(c.validate().is_err(), "alpha {alpha}");
    }
    assert!(FlowConfig::default().validate().is_ok());
}

/// The minimiser of eq. 9 for one row, by bisection on the potential μ: the test's own solver,
/// independent of the library's sorted closed form. Stationarity gives z_j = w_j·max(μ − τ_j, 0)
/// with w = 1/R, τ = λF and μ = α(1 − Σz); g(μ) = Σ_j w_j max(μ − τ_j, 0) − (1 − μ/α) rises
/// from −1 at μ = 0 to ≥ 0 at μ = α.
fn bisect_row(r: &[f64], tau: &[f64], alpha: f64) -> Vec<f64> {
    let z = |mu: f64| -> Vec<f64> {
        r.iter()
            .zip(tau)
            .map(|(&rj, &tj)| (mu - tj).max(0.0) / rj)
            .collect()
    };
    let g = |mu: f64| z(mu).iter().sum::<f64>() - (1.0 - mu / alpha);
    let (mut lo, mut hi) = (0.0, alpha);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    z(0.5 * (lo + hi))
}

#[test]
fn the_solvers_meet_the_kkt_conditions_of_an_independent_bisection() {
    seeded(5, || {
        let (b, h, n, alpha) = (3, 2, 9, 0.1);
        let (s, f) = problem(b, h, n, 1.0);
        let mask = full(b, n);
        let lam = Tensor::from_slice(&[0.2 / 9.0, 1.0 / 9.0, 3.0 / 9.0]);
        let r = resistances(&s, &mask);
        let exact = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactPenalized, 0));
        let unrolled = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ProxBb, 2000));
        let row = |t: &Tensor, g: i64, hh: i64, i: i64| -> Vec<f64> {
            Vec::try_from(t.get(g).get(hh).get(i)).expect("row")
        };
        let (mut zeros, mut worst_kkt, mut worst_gap) = (0, 0.0f64, 0.0f64);
        for g in 0..b {
            let lam_g = lam.double_value(&[g]);
            for hh in 0..h {
                for i in 0..n {
                    let rr = row(&r, g, hh, i);
                    let tau: Vec<f64> = row(&f, g, hh, i).iter().map(|v| v * lam_g).collect();
                    let oracle = bisect_row(&rr, &tau, alpha);
                    let z = row(&exact, g, hh, i);
                    let sum: f64 = z.iter().sum();
                    let mu = alpha * (1.0 - sum);
                    for j in 0..n as usize {
                        worst_gap = worst_gap.max((z[j] - oracle[j]).abs());
                        // KKT of eq. 9 (eq. 6–7 with the penalty): on the support the
                        // gradient vanishes, R z = μ − λF; off it the potential is below the
                        // friction, μ ≤ λF; and no flow runs backwards.
                        assert!(z[j] >= -1e-12, "negative flow {}", z[j]);
                        if z[j] > 1e-12 {
                            worst_kkt = worst_kkt.max((rr[j] * z[j] - (mu - tau[j])).abs());
                        } else {
                            zeros += 1;
                            worst_kkt = worst_kkt.max((mu - tau[j]).max(0.0));
                        }
                    }
                    let u = row(&unrolled, g, hh, i);
                    let d: f64 = u
                        .iter()
                        .zip(&oracle)
                        .map(|(a, o)| (a - o).abs())
                        .fold(0.0, f64::max);
                    assert!(
                        d < 1e-6,
                        "unrolled row ({g},{hh},{i}) is {d} from the bisection"
                    );
                }
            }
        }
        eprintln!(
            "exact vs bisection {worst_gap:.1e}, KKT residual {worst_kkt:.1e}, {zeros} zeros"
        );
        assert!(worst_gap < 1e-10, "{worst_gap}");
        assert!(worst_kkt < 1e-10, "{worst_kkt}");
        // The frictions matter here: some links carry no flow, most do.
        assert!(
            zeros > 0 && zeros < (b * h * n * n) as usize / 2,
            "{zeros} zeros"
        );
    });
}

#[test]
fn rows_sum_to_one_as_the_penalty_grows() {
    seeded(6, || {
        let (s, f) = problem(2, 2, 10, 1.0);
        let mask = full(2, 10);
        let lam = Tensor::from_slice(&[0.1, 0.3]);
        let constrained = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactConstrained, 0));
        let mut deficits = Vec::new();
        for alpha in [0.1, 1.0, 10.0, 100.0, 1e4] {
            let c = FlowConfig {
                alpha,
                ..cfg(FlowSolver::ExactPenalized, 0)
            };
            let z = sparse_flow(&s, &f, &mask, &lam, &c);
            let deficit = (z.sum_dim_intlist(&[-1i64][..], false, Kind::Double) - 1.0)
                .abs()
                .max()
                .double_value(&[]);
            deficits.push(deficit);
            if alpha == 1e4 {
                assert!(max_rel_error(&z, &constrained, 1e-8) < 1e-3);
            }
        }
        eprintln!("max |Z1 − 1| at α = 0.1, 1, 10, 100, 1e4: {deficits:?}");
        assert!(deficits.windows(2).all(|w| w[1] < w[0]), "{deficits:?}");
        assert!(deficits[4] < 1e-3, "{deficits:?}");
    });
}

/// Peaked scores in float32 (resistances over many orders of magnitude, as in a trained model
/// whose softmax saturates): the exact minimiser is still a minimiser, never above the iterate
/// the unrolled solver reaches, and its flows stay in [0, 1].
#[test]
fn the_exact_minimiser_survives_saturated_resistances_in_float32() {
    seeded(9, || {
        let n = 40;
        let (s, f) = problem(4, 2, n, 12.0);
        let (s, f) = (s.to_kind(Kind::Float), f.to_kind(Kind::Float));
        let mask = full(4, n);
        let lam = Tensor::from_slice(&[1.0f32 / 40.0, 2.0 / 40.0, 5.0 / 40.0, 0.5 / 40.0]);
        let c = cfg(FlowSolver::ProxBb, 20);
        let (z, trace, optimum) = sparse_flow_traced(&s, &f, &mask, &lam, &c);
        let last = *trace.last().unwrap();
        let exact = sparse_flow(&s, &f, &mask, &lam, &cfg(FlowSolver::ExactPenalized, 0));
        let (lo, hi) = (exact.min().double_value(&[]), exact.max().double_value(&[]));
        assert!(z.isfinite().all().int64_value(&[]) == 1);
        assert!(lo >= 0.0 && hi <= 1.0 + 1e-5, "exact flows in [{lo}, {hi}]");
        assert!(
            optimum <= last + 1e-6,
            "optimum {optimum} above the iterate's {last}"
        );
    });
}

/// A key of almost no resistance (R ≈ 10⁻²⁰) beside equal frictions τ = λF = 0.025: it takes
/// the whole budget, Σ z = 1 − τ/α = 0.75 penalised (α = 0.1) and 1 constrained, the others
/// almost nothing. The feasibility test on μ − τ rounded this to no flow at all, in float64 too.
#[test]
fn a_key_without_resistance_takes_the_whole_budget() {
    let n = 4;
    let s = Tensor::from_slice(&[46.0f64, 0.0, 0.5, 1.0])
        .view([1, 1, 1, n])
        .repeat([1, 1, n, 1]);
    let f = Tensor::full([1, 1, n, n], 0.25, OPTS);
    let mask = full(1, n);
    let lam = Tensor::from_slice(&[0.1f64]);
    for kind in [Kind::Double, Kind::Float] {
        let (s, f, lam) = (s.to_kind(kind), f.to_kind(kind), lam.to_kind(kind));
        for (solver, budget) in [
            (FlowSolver::ExactPenalized, 0.75),
            (FlowSolver::ExactConstrained, 1.0),
        ] {
            let z = sparse_flow(&s, &f, &mask, &lam, &cfg(solver, 0)).to_kind(Kind::Double);
            let first = z.select(-1, 0);
            let rest = z.narrow(-1, 1, n - 1).max().double_value(&[]);
            let gap = (first - budget).abs().max().double_value(&[]);
            assert!(gap < 1e-6 && rest < 1e-15, "{kind:?} {solver:?}: {z}");
        }
    }
}
