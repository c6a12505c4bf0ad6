//! Sparse-flow attention (SFi-Former §3.2–3.3): attention as the flow that minimises a circuit
//! energy with friction,
//!
//! `min_Z ½ Σ_ij R_ij Z_ij² + λ Σ_ij F_ij |Z_ij| + (α/2) ‖Z𝟏 − 𝟏‖²`   (eq. 9)
//!
//! per graph and head, with resistances `R = softmax(−S)` and frictions `F` (both row-wise
//! attentions of the tokens; rows are queries/sinks, columns keys/sources). With `λ = 0` and
//! the constraint `Z𝟏 = 𝟏` the minimiser is `softmax(S)` (eq. 5): ordinary attention.
//!
//! Solvers ([`FlowSolver`]):
//! - `prox-bb` (default): the paper's proximal iteration (eq. 10), unrolled for `iters` steps so
//!   gradients reach S and F, with three corrections of printing errors, each a documented
//!   default: the prox is the weighted soft-threshold `sign(Y)·max(|Y| − tλF, 0)` (the printed
//!   `|Y − tλF|` is not a prox), the Barzilai–Borwein step is BB2 `⟨A,B⟩/⟨B,B⟩` (the printed
//!   `⟨A,B⟩/‖B‖` stalls; [`StepRule::PaperUnsquared`] keeps it), and the first step is the true
//!   `1/L = 1/(max R + α n)` (the paper's `1/(1 + α√n)` diverges for n ≳ 32). BB steps are
//!   safeguarded by that bound (`safeguard`, Appendix A.1): where one would raise the energy
//!   the safe step is taken, so the energy never rises over the iterations.
//! - `exact-penalized` / `exact-constrained`: the closed-form minimiser of eq. 9 (or of eq. 8,
//!   α → ∞), found per row like sparsemax: `z_j = w_j·max(μ − τ_j, 0)` with `w = 1/R`,
//!   `τ = λF`; differentiable through μ on its support.
//! - `dense`: `softmax(S)` (DFi-Former, λ = 0).
//!
//! Padded tokens (by `mask`) neither send nor receive flow: their rows and columns are zero.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// How eq. 9 is solved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowSolver {
    /// Unrolled proximal gradient with Barzilai–Borwein steps (eq. 10, corrected).
    ProxBb,
    /// The exact minimiser of the penalised problem (eq. 9).
    ExactPenalized,
    /// The exact minimiser of the constrained problem (eq. 8).
    ExactConstrained,
    /// `softmax(S)`: DFi-Former's closed form (λ = 0, eq. 5).
    Dense,
}

/// The step size of the proximal iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepRule {
    /// `⟨A,B⟩/⟨B,B⟩` (default).
    Bb2,
    /// `⟨A,A⟩/⟨A,B⟩`.
    Bb1,
    /// `⟨A,B⟩/‖B‖_F`, as printed in eq. 10 (stalls; for comparison only).
    PaperUnsquared,
    /// The first step throughout.
    Fixed,
}

/// Settings of the sparse-flow solver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlowConfig {
    /// Solver.
    pub solver: FlowSolver,
    /// Unrolled iterations of `prox-bb` (the paper does not say; 10).
    pub iters: usize,
    /// Penalty α of the flow-conservation term (every preset of the paper: 0.1).
    pub alpha: f64,
    /// Step rule of `prox-bb`.
    pub step: StepRule,
    /// Safeguard the step (the bound of Appendix A.1): where a Barzilai–Borwein step would raise
    /// the energy of eq. 9, take the safe step `1/L` instead, so the energy never rises over
    /// the iterations (BB steps alone are not monotone; off reproduces them).
    pub safeguard: bool,
}

impl Default for FlowConfig {
    fn default() -> Self {
        Self {
            solver: FlowSolver::ProxBb,
            iters: 10,
            alpha: 0.1,
            step: StepRule::Bb2,
            safeguard: true,
        }
    }
}

impl FlowConfig {
    /// Refuses settings that cannot run, naming the field.
    pub fn validate(&self) -> basin_core::Result<()> {
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(basin_core::CoreError::config(
                "alpha",
                format!("must be a positive number, got {}", self.alpha),
            ));
        }
        Ok(())
    }
}

/// The masks of a batch: `mask` `[B, N]` (true = real token) as float `[B, 1, N, 1]` (rows)
/// and `[B, 1, 1, N]` (columns), and the real-token count `[B, 1, 1, 1]`.
fn masks(mask: &Tensor, kind: Kind) -> (Tensor, Tensor, Tensor) {
    let m = mask.to_kind(kind);
    let rows = m.unsqueeze(1).unsqueeze(-1);
    let cols = m.unsqueeze(1).unsqueeze(2);
    let n = m
        .sum_dim_intlist(&[1i64][..], false, kind)
        .view([-1, 1, 1, 1]);
    (rows, cols, n)
}

/// The keys a softmax runs over `[B, 1, 1, N]`: the real tokens, or every position for an
/// empty graph (whose row would otherwise be all −∞: NaN forward and, through any later mask,
/// NaN gradients); the result is zeroed outside the real block anyway.
fn softmax_keys(mask: &Tensor) -> Tensor {
    let empty = mask.any_dim(1, true).logical_not();
    mask.logical_or(&empty).unsqueeze(1).unsqueeze(2)
}

/// Row-wise softmax over the real keys of `mask` `[B, N]`; padded rows and columns zero.
pub fn masked_softmax(s: &Tensor, mask: &Tensor) -> Tensor {
    let (rows, cols, _) = masks(mask, s.kind());
    let keys = softmax_keys(mask);
    s.masked_fill(&keys.logical_not(), f64::NEG_INFINITY)
        .softmax(-1, s.kind())
        * &cols
        * &rows
}

/// The energy of eq. 9 per problem `[B, H]`: `½ Σ R Z² + λ Σ F|Z| + (α/2) ‖Z𝟏 − 𝟏‖²` over
/// the real block (`lambda` `[B]`).
pub fn flow_energy(
    z: &Tensor,
    r: &Tensor,
    f: &Tensor,
    mask: &Tensor,
    lambda: &Tensor,
    alpha: f64,
) -> Tensor {
    let (rows, cols, _) = masks(mask, z.kind());
    let block = &rows * &cols;
    let lam = lambda.to_kind(z.kind()).view([-1, 1]);
    let quad = (r * z * z * &block).sum_dim_intlist(&[2i64, 3][..], false, z.kind()) * 0.5;
    let l1 = (f * z.abs() * &block).sum_dim_intlist(&[2i64, 3][..], false, z.kind()) * &lam;
    let rowsum = (z * &block).sum_dim_intlist(&[3i64][..], false, z.kind());
    let rows2 = rows.squeeze_dim(-1);
    let pen = ((rowsum - 1.0) * &rows2)
        .square()
        .sum_dim_intlist(&[2i64][..], false, z.kind())
        * (alpha / 2.0);
    quad + l1 + pen
}

/// Sparse-flow attention `[B, H, N, N]` from scores `s` (R = softmax(−s)), frictions `f` ≥ 0,
/// the real-token `mask` `[B, N]` and `lambda` `[B]` (λ per graph; the paper: λ*/N*, N* the
/// batch's largest graph).
pub fn sparse_flow(
    s: &Tensor,
    f: &Tensor,
    mask: &Tensor,
    lambda: &Tensor,
    cfg: &FlowConfig,
) -> Tensor {
    match cfg.solver {
        FlowSolver::Dense => masked_softmax(s, mask),
        FlowSolver::ProxBb => prox_bb(s, f, mask, lambda, cfg, None),
        FlowSolver::ExactPenalized => exact(s, f, mask, lambda, Some(cfg.alpha)),
        FlowSolver::ExactConstrained => exact(s, f, mask, lambda, None),
    }
}

/// [`sparse_flow`] with its trace: the energy of eq. 9, averaged over the problems, at the
/// start and after every prox-BB iteration, and the same energy at the exact minimiser of the
/// penalised problem (the floor the unrolled solver approaches). Other solvers give their one
/// value as the trace.
pub fn sparse_flow_traced(
    s: &Tensor,
    f: &Tensor,
    mask: &Tensor,
    lambda: &Tensor,
    cfg: &FlowConfig,
) -> (Tensor, Vec<f64>, f64) {
    let r = resistances(s, mask);
    let energy = |z: &Tensor| {
        flow_energy(z, &r, f, mask, lambda, cfg.alpha)
            .mean(Kind::Double)
            .double_value(&[])
    };
    let mut trace = Vec::new();
    let z = match cfg.solver {
        FlowSolver::ProxBb => prox_bb(s, f, mask, lambda, cfg, Some(&mut trace)),
        _ => {
            let z = sparse_flow(s, f, mask, lambda, cfg);
            trace.push(energy(&z));
            z
        }
    };
    let optimum = energy(&exact(s, f, mask, lambda, Some(cfg.alpha)));
    (z, trace, optimum)
}

/// Resistances `R = softmax(−S)` over the real keys (zero elsewhere).
pub fn resistances(s: &Tensor, mask: &Tensor) -> Tensor {
    masked_softmax(&s.neg(), mask)
}

/// The unrolled prox-BB iteration of eq. 10; `trace` receives the mean energy of eq. 9 at the
/// start and after each iteration.
fn prox_bb(
    s: &Tensor,
    f: &Tensor,
    mask: &Tensor,
    lambda: &Tensor,
    cfg: &FlowConfig,
    mut trace: Option<&mut Vec<f64>>,
) -> Tensor {
    let kind = s.kind();
    let (rows, cols, n) = masks(mask, kind);
    let block = &rows * &cols;
    let r = resistances(s, mask);
    let thr = f * lambda.to_kind(kind).view([-1, 1, 1, 1]) * &block;
    let alpha = cfg.alpha;
    let grad = |z: &Tensor| -> Tensor {
        let rowsum = (z * &block).sum_dim_intlist(&[3i64][..], true, kind);
        (&r * z + (rowsum - 1.0) * alpha) * &block
    };
    let dot = |a: &Tensor, b: &Tensor| (a * b).sum_dim_intlist(&[2i64, 3][..], true, kind);
    let mut z = masked_softmax(s, mask);
    let mut record = |z: &Tensor| {
        if let Some(t) = trace.as_deref_mut() {
            t.push(
                flow_energy(z, &r, f, mask, lambda, alpha)
                    .mean(Kind::Double)
                    .double_value(&[]),
            );
        }
    };
    record(&z);
    let mut g = grad(&z);
    // The true 1/L = 1/(max R + α n) of H, per problem; an empty graph (n = 0) counts as one
    // token, so that its step stays finite.
    let rmax = r.amax(&[2i64, 3][..], true);
    let mut t = (rmax + n.clamp_min(1.0) * alpha).reciprocal();
    let t0 = t.shallow_clone();
    // The weighted soft-threshold sign(y)·max(|y| − τ, 0), written y − clamp(y, −τ, τ): the
    // same values and (sub)gradients in fewer passes over [B, H, N, N].
    let prox = |z: &Tensor, g: &Tensor, t: &Tensor| {
        let y = z - t * g;
        let tau = t * &thr;
        (&y - y.clamp_tensor(Some(&tau.neg()), Some(&tau))) * &block
    };
    // The safeguard only compares energies: no autograd graph for them.
    let energy = |z: &Tensor| {
        tch::no_grad(|| {
            flow_energy(z, &r, f, mask, lambda, alpha).view([z.size()[0], z.size()[1], 1, 1])
        })
    };
    let mut e_now = cfg.safeguard.then(|| energy(&z));
    for _ in 0..cfg.iters {
        let mut z_next = prox(&z, &g, &t);
        if let Some(e) = e_now.as_ref() {
            // The safe step 1/L never raises the energy (Appendix A.1); keep the BB step only
            // where it did not raise it either. The safe prox is computed only where needed.
            let e_next = energy(&z_next);
            let raised = e_next.gt_tensor(e);
            if raised.any().int64_value(&[]) != 0 {
                z_next = prox(&z, &g, &t0).where_self(&raised, &z_next);
                e_now = Some(energy(&z_next));
            } else {
                e_now = Some(e_next);
            }
        }
        let g_next = grad(&z_next);
        let a = &z_next - &z;
        let b = &g_next - &g;
        let (num, den) = match cfg.step {
            StepRule::Bb2 => (dot(&a, &b), dot(&b, &b)),
            StepRule::Bb1 => (dot(&a, &a), dot(&a, &b)),
            StepRule::PaperUnsquared => (dot(&a, &b), dot(&b, &b)),
            StepRule::Fixed => (t0.shallow_clone(), t0.ones_like()),
        };
        // A problem whose quotient is unusable takes the safe step 1/L: b = 0 (a converged or
        // degenerate problem, e.g. equal tokens), a denominator so small against the numerator
        // that the quotient would pass the step bound 10⁸ (float32 differences of converged
        // iterates), or a quotient that is not positive. Such denominators are replaced before
        // dividing: a masked quotient's derivative −num/den² would still send 0·∞ = NaN
        // through the backward pass (it did, in training). (Keeping the previous step instead
        // made a small GPS training test 15× slower than the safe step on a loaded machine;
        // the cause was not pinned down.)
        let floor = (num.abs() * 1e-8).clamp_min(1e-15);
        let positive = match cfg.step {
            StepRule::PaperUnsquared => den.gt_tensor(&floor.square()),
            _ => den.gt_tensor(&floor),
        };
        let den = den.where_self(&positive, &den.ones_like());
        let den = match cfg.step {
            StepRule::PaperUnsquared => den.sqrt(),
            _ => den,
        };
        let proposal = num / den;
        let usable = positive
            .logical_and(&proposal.isfinite())
            .logical_and(&proposal.gt(0.0));
        t = proposal.where_self(&usable, &t0).clamp(1e-8, 1e8);
        z = z_next;
        g = g_next;
        record(&z);
    }
    z
}

/// The exact minimiser, row by row: sort the thresholds τ = λF, take the longest prefix m that
/// is feasible, `z = w·max(μ − τ, 0)` with `w = 1/R` and μ = (1 + Σ_A wτ)/(Σ_A w + 1/α).
/// `alpha = None`: the constrained problem (eq. 8).
///
/// Where the softmax saturates, w spans many orders of magnitude and μ − τ, a difference of
/// nearly equal numbers, times a huge w is rounding error (float32 gave flows of 10¹⁹, or no
/// flow at all when the feasibility test rounded the other way). So neither μ nor μ − τ is
/// formed: with W_k = Σ_{i≤k} w_i, the feasibility margin g_k = 1 + Σ_{i≤k} w_i(τ_i − τ_k) − τ_k/α
/// (prefix k is feasible iff g_k > 0; g falls with k) is a running sum of terms of one sign,
/// g_k = 1 − Σ_{j≤k} W_{j−1}(τ_j − τ_{j−1}) − τ_k/α, and for an active key
/// μ − τ_j = g_m/(W_m + 1/α) + (τ_m − τ_j), a sum of non-negative terms. Float64 inside (w
/// reaches e⁸⁰).
fn exact(s: &Tensor, f: &Tensor, mask: &Tensor, lambda: &Tensor, alpha: Option<f64>) -> Tensor {
    let out = s.kind();
    let (s, f) = (s.to_kind(Kind::Double), f.to_kind(Kind::Double));
    let kind = Kind::Double;
    let (rows, cols, _) = masks(mask, kind);
    let keys = softmax_keys(mask);
    // w = 1/R = exp(−log softmax(−S)), from the log-softmax (R can underflow).
    let log_r = s
        .neg()
        .masked_fill(&keys.logical_not(), f64::NEG_INFINITY)
        .log_softmax(-1, kind);
    let w = (log_r.neg().clamp_max(80.0)).exp() * keys.to_kind(kind);
    let tau = (f * lambda.to_kind(kind).view([-1, 1, 1, 1]))
        .masked_fill(&keys.logical_not(), f64::INFINITY);
    let (tau_sorted, order) = tau.sort(-1, false);
    let w_sorted = w.gather(-1, &order, false);
    let finite = tau_sorted.isfinite();
    let tau_f = tau_sorted.masked_fill(&finite.logical_not(), 0.0);
    let cw = w_sorted.cumsum(-1, kind);
    let inv_alpha = alpha.map_or(0.0, |a| 1.0 / a);
    // W_{k−1}(τ_k − τ_{k−1}), zero for the first key (and past the real keys).
    let n = tau_f.size()[3];
    let steps = (tau_f.narrow(-1, 1, n - 1) - tau_f.narrow(-1, 0, n - 1)) * cw.narrow(-1, 0, n - 1);
    let steps =
        Tensor::cat(&[tau_f.narrow(-1, 0, 1).zeros_like(), steps], -1) * finite.to_kind(kind);
    let margin = (steps.cumsum(-1, kind) + &tau_f * inv_alpha).neg() + 1.0;
    let feasible = margin.gt(0.0).logical_and(&finite);
    let count = feasible
        .to_kind(Kind::Int64)
        .sum_dim_intlist(&[-1i64][..], true, Kind::Int64);
    let index = (&count - 1).clamp_min(0);
    let (g_m, w_m, tau_m) = (
        margin.gather(-1, &index, false),
        cw.gather(-1, &index, false),
        tau_f.gather(-1, &index, false),
    );
    let has = count.gt(0).to_kind(kind);
    let tau_real = tau.masked_fill(&keys.logical_not(), 0.0);
    let active = tau_real.le_tensor(&tau_m).to_kind(kind) * keys.to_kind(kind);
    let z =
        &w * (g_m / (w_m + inv_alpha) + (tau_m - &tau_real).relu()) * active * has * &rows * &cols;
    z.to_kind(out)
}
