//! Training at the attractor: the gradient of a block's fixed point by the implicit function
//! theorem, instead of backpropagation through the T unrolled steps.
//!
//! With `gradient.mode = "implicit"` the block descends without an autograd graph until the
//! relative step `‖x_{t+1} − x_t‖ / ‖x_t‖` (largest over the batch) falls below `tol`, or for
//! `max_steps` (a training forward may have its own, `train_tol` and `train_max_steps`); the
//! state it reaches, `x* = f(x*)`, is the block's output. `forward_solver = "anderson"` finds it
//! by Anderson acceleration instead of the plain iteration ([`anderson`]). Its gradient comes
//! from the adjoint system at `x*`: `(I − ∂f/∂x)ᵀ v = ∂L/∂x*`, solved by fixed-point iteration
//! or GMRES on vector–Jacobian products of one descent step, and the parameters receive
//! `vᵀ ∂f/∂θ`. Memory is one step's activations (and GMRES's Krylov vectors), whatever the
//! number of steps. `mode = "phantom"` backpropagates through `phantom_steps` steps taken from
//! the detached fixed point instead (the truncated Neumann series of the same inverse).
//!
//! Two facts of the energy models shape the map `f`:
//!
//! - ET's layer norm removes each token's mean and scale, so a gradient flow of `E(LN(x))`
//!   settles in `g = LN(x)` while `x` keeps drifting along those two directions (the gradient
//!   `∂E/∂g` has components there that no step removes). The attractor is a point of the
//!   normalised tokens; for such dynamics ([`FixedPoint::Normalised`]) `f` re-standardises each
//!   token after the step (zero mean, unit variance over its features), which leaves the fixed
//!   points of `g` as they are, gives `x*` one representative, and makes `I − ∂f/∂x`
//!   invertible. CDAT's controlled dynamics decay towards a fixed point of `x` itself
//!   ([`FixedPoint::Tokens`]) and are used as they are.
//! - The attractor does not depend on where the descent started, inside its basin: `∂x*/∂x_0 =
//!   0`, so layers before an implicit block (an encoder, a mask token, an earlier block) receive
//!   no gradient through it, unless a term reads the block's input (the input field,
//!   [`crate::terms::input_field`]), whose adjoint carries the gradient on to `x_0`.
//!
//! Use: in implicit mode a training forward (`train = true`, grad mode on) leaves a pending
//! record in the block; the loss is passed through [`attach`] before its `backward`.
//!
//! Beside torchdeq (Geng & Kolter's PyTorch library of deep equilibrium models, 0.1.0), feature
//! by feature (`gradient.…` names basin's field):
//!
//! | | basin | torchdeq |
//! |---|---|---|
//! | forward solvers | plain iteration; Anderson (`forward_solver`) | fixed-point iteration, Anderson, Broyden |
//! | stopping | relative step; training's own tolerance and cap (`train_tol`, `train_max_steps`) | absolute or relative residual; an evaluation factor on the iterations |
//! | backward | implicit (GMRES or fixed-point iteration on the adjoint); phantom, damped (`phantom_damping`); unrolled | implicit (fixed-point or Broyden on the adjoint); phantom, damped |
//! | when a solve fails | phantom fallback per sample (`phantom_fallback`), counted | none |
//! | regularisers | Jacobian, Hutchinson (`jacobian_weight`, `jacobian_every`); fixed-point correction (`correction_states`, `correction_decay`; read by image completion) | Jacobian, Hutchinson; fixed-point correction (several states supervised) |
//! | monitors | steps, residuals, capped forwards and solves, ρ(J) at each epoch's first implicit backward (`spectral_iters`) | residuals and steps; ρ(J) by power iteration in evaluation (`sradius_mode`) |
//! | input injection | as energy: the `input-field` term, adjoint through `x₀`, stacked blocks chained | the user's `f(z, x)` |
//! | normalisation | the layer norm inside the energy; re-standardised fixed points | weight and spectral normalisation of `f`'s layers |
//! | dropout | refused in implicit mode (naming the field) | variational dropout, one mask for every iteration |
//! | curriculum | unrolled warm-up epochs (basin-train's `implicit_warmup`) | the user's loop |
//!
//! basin lacks Broyden's method, weight or spectral normalisation and variational dropout;
//! torchdeq has no energy view (its `f` is any map, so that descent lowers an energy is the
//! user's concern) and no fallback when a solve fails.

use tch::{Kind, Tensor};

use crate::block::EnergyBlock;
use crate::gradient::{FixedPoint, ForwardSolver, GradientMode, Pending, SettleStats, Solver};
use crate::structure::Structure;

/// A converged (or capped) descent.
#[derive(Debug)]
pub struct Settled {
    /// The final state (no graph).
    pub state: Tensor,
    /// Steps taken.
    pub steps: usize,
    /// The final relative step.
    pub residual: f64,
    /// Whether the residual fell below `tol`.
    pub converged: bool,
    /// Each sample's final relative step `[B]` (float64): per sample, what `residual` is for
    /// the batch.
    pub sample_residuals: Tensor,
}

/// The result of an adjoint solve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Solve {
    /// Operator applications.
    pub iterations: usize,
    /// `‖A v − b‖ / ‖b‖` of the returned `v`.
    pub residual: f64,
    /// Whether it fell below the tolerance.
    pub converged: bool,
}

fn dot(a: &Tensor, b: &Tensor) -> f64 {
    (a * b).sum(Kind::Double).double_value(&[])
}

fn norm(a: &Tensor) -> f64 {
    dot(a, a).sqrt()
}

/// Solves `(I − Jᵀ) v = b` by `v ← b + Jᵀ v`, from `v = b`; `jt` applies `Jᵀ`.
pub fn fixed_point_solve(
    jt: &dyn Fn(&Tensor) -> Tensor,
    b: &Tensor,
    tol: f64,
    max_iters: usize,
) -> (Tensor, Solve) {
    let bn = norm(b);
    if bn == 0.0 {
        return (b.zeros_like(), solved(0, 0.0, true));
    }
    let mut v = b.shallow_clone();
    let mut residual = f64::INFINITY;
    for k in 0..max_iters {
        let next = b + jt(&v);
        // ‖(I − Jᵀ) v − b‖ = ‖v − next‖: the residual of the current iterate.
        residual = norm(&(&next - &v)) / bn;
        if residual <= tol || !residual.is_finite() {
            return (v, solved(k + 1, residual, residual <= tol));
        }
        v = next;
    }
    (v, solved(max_iters, residual, false))
}

fn solved(iterations: usize, residual: f64, converged: bool) -> Solve {
    Solve {
        iterations,
        residual,
        converged,
    }
}

/// Restarted GMRES for `A v = b`, `apply` computing `A v`; starts from `v = b`.
pub fn gmres(
    apply: &dyn Fn(&Tensor) -> Tensor,
    b: &Tensor,
    tol: f64,
    max_iters: usize,
    restart: usize,
) -> (Tensor, Solve) {
    let bn = norm(b);
    if bn == 0.0 {
        return (b.zeros_like(), solved(0, 0.0, true));
    }
    let mut x = b.shallow_clone();
    let mut used = 0;
    loop {
        let r = b - apply(&x);
        used += 1;
        let beta = norm(&r);
        let residual = beta / bn;
        if residual <= tol || used >= max_iters || !residual.is_finite() {
            return (x, solved(used, residual, residual <= tol));
        }
        let m = restart.min(max_iters - used).max(1);
        let mut basis = vec![r / beta];
        // Columns of the Hessenberg matrix, rotated to upper-triangular as they come.
        let mut cols: Vec<Vec<f64>> = Vec::with_capacity(m);
        let (mut cs, mut sn): (Vec<f64>, Vec<f64>) = (Vec::with_capacity(m), Vec::with_capacity(m));
        let mut g = vec![0.0; m + 1];
        g[0] = beta;
        for j in 0..m {
            let mut w = apply(&basis[j]);
            used += 1;
            let mut h = vec![0.0; j + 2];
            for (i, v) in basis.iter().enumerate() {
                h[i] = dot(&w, v);
                w -= v * h[i];
            }
            let hn = norm(&w);
            h[j + 1] = hn;
            for i in 0..j {
                let t = cs[i] * h[i] + sn[i] * h[i + 1];
                h[i + 1] = -sn[i] * h[i] + cs[i] * h[i + 1];
                h[i] = t;
            }
            let r = h[j].hypot(h[j + 1]);
            let (c, s) = if r == 0.0 {
                (1.0, 0.0)
            } else {
                (h[j] / r, h[j + 1] / r)
            };
            h[j] = r;
            h[j + 1] = 0.0;
            g[j + 1] = -s * g[j];
            g[j] *= c;
            cs.push(c);
            sn.push(s);
            cols.push(h);
            if g[j + 1].abs() / bn <= tol || hn == 0.0 || used >= max_iters {
                break;
            }
            basis.push(w / hn);
        }
        // Back-substitution of the upper-triangular system, then the update.
        let k = cols.len();
        let mut y = vec![0.0; k];
        for i in (0..k).rev() {
            let mut s = g[i];
            for (l, yl) in y.iter().enumerate().skip(i + 1) {
                s -= cols[l][i] * yl;
            }
            y[i] = if cols[i][i] == 0.0 {
                0.0
            } else {
                s / cols[i][i]
            };
        }
        for (v, yi) in basis.iter().zip(&y) {
            x = x + v * *yi;
        }
    }
}

/// Each real token standardised over its features (zero mean, unit variance, no ε); padded
/// tokens (`padding` `[B, N]`, true for real ones) unchanged.
pub fn standardise(x: &Tensor, padding: Option<&Tensor>) -> Tensor {
    let xm = x - x.mean_dim(-1, true, x.kind());
    let sd = xm
        .square()
        .mean_dim(-1, true, x.kind())
        .sqrt()
        .clamp_min(1e-12);
    let s = xm / sd;
    match padding {
        Some(p) => s.where_self(&p.unsqueeze(-1), x),
        None => s,
    }
}

/// `‖next − x‖ / ‖x‖` of each sample, `[B]` float64.
fn relative_steps(next: &Tensor, x: &Tensor) -> Tensor {
    let b = x.size()[0];
    let d = (next - x)
        .reshape([b, -1])
        .square()
        .sum_dim_intlist(&[1i64][..], false, Kind::Double);
    let n = x
        .reshape([b, -1])
        .square()
        .sum_dim_intlist(&[1i64][..], false, Kind::Double)
        .clamp_min(1e-30);
    (d / n).sqrt()
}

/// Anderson's next iterate from the history `xs`, `fs` `[B, L, n]` (float64, oldest first,
/// L ≥ 2) and the mixing `beta`, in the difference form of Walker & Ni (2011): with residuals
/// `gᵢ = f(xᵢ) − xᵢ`, `γ = argmin ‖g_L − ΔG γ‖` by least squares on the differences (better
/// conditioned than the normal equations of the mixing weights), then `x ← x_L + β g_L − (ΔX + β ΔG) γ`. `None` where the solve fails.
fn anderson_step(xs: &Tensor, fs: &Tensor, beta: f64) -> Option<Tensor> {
    let l = xs.size()[1];
    let g = fs - xs;
    let diff = |t: &Tensor| (t.narrow(1, 1, l - 1) - t.narrow(1, 0, l - 1)).transpose(1, 2);
    let (dx, dg) = (diff(xs), diff(&g));
    let (x_last, g_last) = (xs.select(1, l - 1), g.select(1, l - 1));
    // The SVD driver tolerates a rank-deficient history; CUDA has only QR (`gels`).
    let driver = if xs.device().is_cuda() {
        "gels"
    } else {
        "gelsd"
    };
    let (gamma, _, _, _) = dg
        .f_linalg_lstsq(&g_last.unsqueeze(-1), None::<f64>, driver)
        .ok()?;
    let next = x_last + &g_last * beta - (dx + dg * beta).bmm(&gamma).squeeze_dim(-1);
    (next.isfinite().all().int64_value(&[]) != 0).then_some(next)
}

/// `x ← f(t, x)` until the batch's largest relative step is below `tol`, or for `max_steps`;
/// `visit(t, x_t, f(x_t))` sees each step.
pub fn iterate(
    mut x: Tensor,
    mut f: impl FnMut(usize, &Tensor) -> Tensor,
    (tol, max_steps): (f64, usize),
    mut visit: impl FnMut(usize, &Tensor, &Tensor),
) -> Settled {
    let mut residual = f64::INFINITY;
    let mut samples = Tensor::full([x.size()[0]], f64::INFINITY, (Kind::Double, x.device()));
    for step in 0..max_steps {
        let next = f(step, &x);
        visit(step, &x, &next);
        samples = relative_steps(&next, &x);
        residual = samples.max().double_value(&[]);
        x = next;
        if residual <= tol || !residual.is_finite() {
            return Settled {
                state: x,
                steps: step + 1,
                residual,
                converged: residual <= tol,
                sample_residuals: samples,
            };
        }
    }
    Settled {
        state: x,
        steps: max_steps,
        residual,
        converged: false,
        sample_residuals: samples,
    }
}

/// Anderson acceleration of `x ← f(t, x)` with history `m` and mixing `beta`
/// ([`ForwardSolver::Anderson`]): each sample keeps its
/// lowest-residual `f(x)`, and the descent stops once every sample's residual is below `tol`,
/// or after `max_steps` evaluations of `f`; `visit(t, x_t, f(x_t))` sees each. Whenever the
/// batch's largest residual rises, the history is dropped and the next step is a plain one:
/// without that safeguard an ET block's descent, far from its attractor, stalls (the secant
/// model of an energy landscape's early, curved stretch extrapolates badly).
pub fn anderson(
    mut x: Tensor,
    mut f: impl FnMut(usize, &Tensor) -> Tensor,
    (tol, max_steps): (f64, usize),
    (m, beta): (usize, f64),
    mut visit: impl FnMut(usize, &Tensor, &Tensor),
) -> Settled {
    let m = m.max(1);
    let shape = x.size();
    let b = shape[0];
    let flat = |t: &Tensor| t.reshape([b, -1]).to_kind(Kind::Double);
    let (mut xs, mut fs): (Vec<Tensor>, Vec<Tensor>) = (Vec::new(), Vec::new());
    let mut best = x.shallow_clone();
    let mut best_residual = Tensor::full([b], f64::INFINITY, (Kind::Double, x.device()));
    let mut worst = f64::INFINITY;
    let mut last = f64::INFINITY;
    for step in 0..max_steps {
        let fx = f(step, &x);
        visit(step, &x, &fx);
        let r = relative_steps(&fx, &x);
        let better = r.lt_tensor(&best_residual);
        let mut keep = better.shallow_clone();
        for _ in 1..shape.len() {
            keep = keep.unsqueeze(-1);
        }
        best = fx.where_self(&keep, &best);
        best_residual = r.where_self(&better, &best_residual);
        worst = best_residual.max().double_value(&[]);
        if worst <= tol || !worst.is_finite() {
            return Settled {
                state: best,
                steps: step + 1,
                residual: worst,
                converged: worst <= tol,
                sample_residuals: best_residual,
            };
        }
        // Far from the attractor the map is too nonlinear for the secant model: a residual
        // that rises restarts the history (the next step is a plain one).
        let now = r.max().double_value(&[]);
        if now > last {
            xs.clear();
            fs.clear();
        }
        last = now;
        xs.push(flat(&x));
        fs.push(flat(&fx));
        if xs.len() > m {
            let _ = (xs.remove(0), fs.remove(0));
        }
        let (xk, fk) = (Tensor::stack(&xs, 1), Tensor::stack(&fs, 1));
        x = match anderson_step(&xk, &fk, beta).filter(|_| xs.len() > 1) {
            Some(next) => next.reshape(shape.as_slice()).to_kind(fx.kind()),
            None => fx,
        };
    }
    Settled {
        state: best,
        steps: max_steps,
        residual: worst,
        converged: false,
        sample_residuals: best_residual,
    }
}

fn grad_mode() -> bool {
    Tensor::zeros([1], (Kind::Float, tch::Device::Cpu))
        .set_requires_grad(true)
        .g_mul_scalar(1.0)
        .requires_grad()
}

impl EnergyBlock {
    /// One step of the settling map `f`: the block's step, then (for a [`FixedPoint::Normalised`]
    /// dynamics) each token re-standardised.
    pub fn settle_step(
        &self,
        x: &Tensor,
        structure: &Structure,
        step: usize,
        train: bool,
    ) -> Tensor {
        let next = self.step(x, structure, step, train);
        match self.fixed_point {
            FixedPoint::Normalised => standardise(&next, structure.padding()),
            FixedPoint::Tokens => next,
        }
    }

    /// Descends by [`EnergyBlock::settle_step`] from `x` (standardised first where the map
    /// standardises) without a graph, by the configured forward solver, until the relative
    /// step falls below the tolerance or for the step cap (a training forward's where they
    /// differ, [`GradientConfig::stopping`](crate::GradientConfig::stopping)); `visit(t, x_t,
    /// f(x_t))` sees each step (a trace).
    pub fn settle(
        &self,
        x: &Tensor,
        structure: &Structure,
        train: bool,
        visit: impl FnMut(usize, &Tensor, &Tensor),
    ) -> Settled {
        tch::no_grad(|| {
            let x = match self.fixed_point {
                FixedPoint::Normalised => standardise(&x.detach(), structure.padding()),
                FixedPoint::Tokens => x.detach(),
            };
            let (tol, max_steps) = self.gradient.stopping(train);
            let f = |step: usize, x: &Tensor| self.settle_step(x, structure, step, train);
            match self.gradient.forward_solver {
                ForwardSolver::Iterate => iterate(x, f, (tol, max_steps), visit),
                ForwardSolver::Anderson => {
                    let g = &self.gradient;
                    let mixing = (g.anderson_history, g.anderson_mixing);
                    anderson(x, f, (tol, max_steps), mixing, visit)
                }
            }
        })
    }

    /// The output of a settling forward: `x*` itself outside training; in training a leaf
    /// owing its [`attach`] (implicit) or the phantom steps' graph (phantom).
    pub(crate) fn settled_output(&self, s: &Settled, structure: &Structure, train: bool) -> Tensor {
        {
            let mut stats = self.implicit.stats();
            stats.forwards += 1;
            stats.unconverged += usize::from(!s.converged);
            if train {
                stats.train_forwards += 1;
                stats.train_unconverged += usize::from(!s.converged);
            }
            stats.steps += s.steps;
            stats.max_residual = stats.max_residual.max(s.residual);
        }
        if !train || !grad_mode() {
            return s.state.shallow_clone();
        }
        match self.gradient.mode {
            GradientMode::Phantom => self.phantom(&s.state, structure, train),
            _ => {
                let output = s.state.detach().set_requires_grad(true);
                let (tol, _) = self.gradient.stopping(train);
                self.implicit.pending().push(Pending {
                    state: s.state.detach(),
                    output: output.shallow_clone(),
                    structure: structure.shallow_clone(),
                    train,
                    converged: s.sample_residuals.le(tol),
                    order: crate::gradient::next_order(),
                });
                output
            }
        }
    }

    /// `phantom_steps` damped steps `x ← τ f(x) + (1 − τ) x` from the detached `state`, with
    /// their graph: the phantom gradient's output.
    fn phantom(&self, state: &Tensor, structure: &Structure, train: bool) -> Tensor {
        let tau = self.gradient.phantom_damping;
        let mut x = state.detach();
        for step in 0..self.gradient.phantom_steps {
            let f = self.settle_step(&x, structure, step, train);
            x = if tau == 1.0 {
                f
            } else {
                f * tau + x * (1.0 - tau)
            };
        }
        x
    }

    /// The steps (0-based) at which a training forward samples its fixed-point correction
    /// states: `round(i · cap / (k + 1))` of the `cap` steps it may take, `i = 1 … k`, as
    /// torchdeq spaces them; none outside training or without correction.
    pub(crate) fn correction_picks(&self, train: bool) -> Vec<usize> {
        let k = self.gradient.correction_states;
        if k == 0 || !train || !grad_mode() {
            return Vec::new();
        }
        let (_, cap) = self.gradient.stopping(train);
        let mut picks: Vec<usize> = (1..=k)
            .map(|i| ((i * cap) as f64 / (k + 1) as f64).round().max(1.0) as usize - 1)
            .collect();
        picks.dedup();
        picks
    }

    /// Keeps a training forward's fixed-point correction states (`sampled` at
    /// [`Self::correction_picks`]; the final state for those the settle stopped before), each
    /// through the phantom steps, with their weights.
    pub(crate) fn keep_corrections(
        &self,
        mut sampled: Vec<Tensor>,
        settled: &Settled,
        structure: &Structure,
        train: bool,
    ) {
        let k = self.correction_picks(train).len();
        if k == 0 {
            return;
        }
        sampled.resize_with(k, || settled.state.shallow_clone());
        let decay = self.gradient.correction_decay;
        let kept: Vec<(f64, Tensor)> = sampled
            .iter()
            .enumerate()
            .map(|(i, state)| {
                let weight = decay.powi((k - i) as i32);
                (weight, self.phantom(state, structure, train))
            })
            .collect();
        self.implicit.corrections().extend(kept);
    }

    /// The fixed-point correction states of this block's training forwards since the last call
    /// (then cleared), each `(weight, state)` with the phantom steps' graph
    /// ([`crate::GradientConfig::correction_states`]): the task adds `weight · loss(state)` to
    /// the loss of the final state, decoding each state as it decodes the block's output.
    pub fn take_corrections(&self) -> Vec<(f64, Tensor)> {
        std::mem::take(&mut *self.implicit.corrections())
    }

    /// What the settling forwards and adjoint solves did since the last call (then reset).
    pub fn take_settle_stats(&self) -> SettleStats {
        std::mem::take(&mut *self.implicit.stats())
    }
}

/// `loss` with the implicit gradients of every pending training forward of `blocks` attached:
/// the same value, and its `backward` also sends `vᵀ ∂f/∂θ` to the blocks' parameters (and to
/// whatever their structures were computed from). Blocks without pending forwards (unrolled
/// or phantom ones, or evaluation) add nothing; the loss comes back unchanged.
///
/// For each pending forward, `∂L/∂x*` is taken from `loss` (its graph kept), the adjoint
/// system solved at `x*`, and `Σ v · f(x*)` (with `f` built once, with its graph) added as
/// `s − s.detach()`.
pub fn attach<'a>(loss: &Tensor, blocks: impl IntoIterator<Item = &'a EnergyBlock>) -> Tensor {
    let mut work: Vec<(&EnergyBlock, Pending)> = Vec::new();
    for block in blocks {
        work.extend(block.implicit.pending().drain(..).map(|p| (block, p)));
    }
    if work.is_empty() || !loss.requires_grad() {
        return loss.shallow_clone();
    }
    if work.iter().any(|(_, p)| p.structure.input().is_some()) {
        return attach_chained(loss, work);
    }
    let outputs: Vec<&Tensor> = work.iter().map(|(_, p)| &p.output).collect();
    let grads = Tensor::run_backward(&[loss], &outputs, true, false);
    let mut extra: Option<Tensor> = None;
    for ((block, p), u) in work.iter().zip(grads) {
        if !u.defined() {
            continue;
        }
        let term = adjoint_term(block, p, &u, loss.kind());
        extra = Some(match extra {
            Some(e) => e + term,
            None => term,
        });
    }
    match extra {
        Some(e) => loss + e,
        None => loss.shallow_clone(),
    }
}

/// [`attach`] where a fixed point depends on its input (input injection): a forward's
/// `∂L/∂x*` then also flows through the adjoint terms of the forwards that read its output, so
/// they are solved last forward first, each from the loss with the later terms already added.
fn attach_chained(loss: &Tensor, mut work: Vec<(&EnergyBlock, Pending)>) -> Tensor {
    work.sort_by_key(|(_, p)| std::cmp::Reverse(p.order));
    let mut total = loss.shallow_clone();
    for (block, p) in &work {
        let u = Tensor::run_backward(&[&total], &[&p.output], true, false)
            .pop()
            .filter(Tensor::defined);
        if let Some(u) = u {
            total = &total + adjoint_term(block, p, &u, loss.kind());
        }
    }
    total
}

/// The implicit gradient of one settling forward of `block`, for PyTorch's own backward (the
/// Python block hooks its output): `grad` = `∂L/∂x*` arrives for `output`, the pending record
/// of that output is taken, its adjoint solved, and `vᵀ ∂f/∂θ` sent to the parameters (and
/// whatever the structure came from) at once. Returns false when no forward of `block` owes
/// this output (already attached, or not a training forward).
pub fn backward_settled(block: &EnergyBlock, output: &Tensor, grad: &Tensor) -> bool {
    let record = {
        let mut pending = block.implicit.pending();
        let at = pending
            .iter()
            .position(|p| p.output.data_ptr() == output.data_ptr());
        at.map(|i| pending.remove(i))
    };
    let Some(p) = record else {
        return false;
    };
    let term = adjoint_term(block, &p, grad, grad.kind());
    if term.requires_grad() {
        term.backward();
    }
    true
}

/// `s − s.detach()` with `s = Σ v · f(x*)`, `v` solving the adjoint system
/// `(I − ∂f/∂x)ᵀ v = u` at the pending forward `p`'s `x*` (statistics recorded on `block`):
/// zero in value, `vᵀ ∂f/∂θ` in gradient. With the fallback on, each sample whose settle or
/// adjoint did not converge gives `Σ u · x_k` through the phantom steps instead: the adjoint
/// is solved for the settled samples only (a zero right-hand side for the others: the system
/// is block-diagonal over samples; none at all if no sample settled), and a sample whose own
/// adjoint residual stays above the solver's tolerance falls back too. With a Jacobian weight,
/// the regulariser is added (its value too).
fn adjoint_term(block: &EnergyBlock, p: &Pending, u: &Tensor, kind: tch::Kind) -> Tensor {
    let x = p.state.detach().set_requires_grad(true);
    let y = tch::with_grad(|| block.settle_step(&x, &p.structure, 0, p.train));
    let jt = |w: &Tensor| -> Tensor {
        let s = tch::with_grad(|| (&y * w).sum(y.kind()));
        if !s.requires_grad() {
            return w.zeros_like();
        }
        let g = Tensor::run_backward(&[&s], &[&x], true, false);
        g.into_iter()
            .next()
            .filter(Tensor::defined)
            .unwrap_or_else(|| w.zeros_like())
    };
    let cfg = &block.gradient;
    // The adjoint term's index since the statistics were last taken (each epoch's): ρ(J) is
    // estimated at the first, the regulariser added at every `jacobian_every`-th.
    let index = {
        let mut stats = block.implicit.stats();
        stats.terms += 1;
        stats.terms - 1
    };
    let radius = (cfg.spectral_iters > 0 && index == 0)
        .then(|| tch::no_grad(|| spectral_radius(&jt, u, cfg.spectral_iters)));
    let regularise = cfg.jacobian_weight > 0.0 && index.is_multiple_of(cfg.jacobian_every);
    // The samples that keep the adjoint's gradient (all of them without the fallback).
    let settled = cfg.phantom_fallback.then(|| p.converged.shallow_clone());
    let rhs = match &settled {
        Some(ok) => u * per_sample(ok, u),
        None => u.shallow_clone(),
    };
    let any = settled
        .as_ref()
        .is_none_or(|ok| ok.any().int64_value(&[]) != 0);
    let solve = any.then(|| {
        tch::no_grad(|| match cfg.solver {
            Solver::FixedPoint => fixed_point_solve(&jt, &rhs, cfg.solver_tol, cfg.solver_iters),
            Solver::Gmres => gmres(
                &|w| w - jt(w),
                &rhs,
                cfg.solver_tol,
                cfg.solver_iters,
                cfg.restart,
            ),
        })
    });
    let kept = settled.map(|ok| match &solve {
        Some((v, _)) => {
            let residual = tch::no_grad(|| relative_steps(&(v - jt(v)), &rhs));
            ok.logical_and(&residual.le(cfg.solver_tol))
        }
        None => ok,
    });
    let fallen = kept.as_ref().map_or(0, |ok| {
        ok.logical_not().sum(Kind::Int64).int64_value(&[]) as usize
    });
    {
        let mut stats = block.implicit.stats();
        if let Some((_, solve)) = &solve {
            stats.solves += 1;
            stats.solves_unconverged += usize::from(!solve.converged);
            stats.solver_iterations += solve.iterations;
            stats.max_solver_residual = stats.max_solver_residual.max(solve.residual);
        }
        if let Some(r) = radius {
            stats.radius_estimates += 1;
            stats.max_spectral_radius = stats.max_spectral_radius.max(r);
        }
        stats.fallbacks += usize::from(fallen > 0);
        stats.fallback_samples += fallen;
    }
    let term = tch::with_grad(|| {
        let mut s = match (&solve, &kept) {
            (Some((v, _)), Some(ok)) => (&y * (v.detach() * per_sample(ok, v))).sum(kind),
            (Some((v, _)), None) => (&y * v.detach()).sum(kind),
            (None, _) => (&y * y.zeros_like()).sum(kind),
        };
        if let (true, Some(ok)) = (fallen > 0, &kept) {
            let rest = u.detach() * per_sample(&ok.logical_not(), u);
            s = s + (block.phantom(&p.state, &p.structure, p.train) * rest).sum(kind);
        }
        &s - s.detach()
    });
    if !regularise {
        return term;
    }
    let frobenius = jacobian_frobenius(&x, &y);
    {
        let mut stats = block.implicit.stats();
        stats.jacobian_estimates += 1;
        stats.jacobian_frobenius += frobenius.double_value(&[]);
    }
    term + frobenius.to_kind(kind) * cfg.jacobian_weight
}

/// A per-sample flag `[B]` as a factor broadcasting over `like` `[B, …]`, in its kind.
fn per_sample(flag: &Tensor, like: &Tensor) -> Tensor {
    let mut shape = vec![-1i64];
    shape.resize(like.dim(), 1);
    flag.to_kind(like.kind()).view(shape.as_slice())
}

/// ρ(J) estimated by `iters` power iterations on `Jᵀ` (same spectrum), `jt` applying it, from
/// `start` (the loss's gradient at `x*`: no random draw): the geometric mean of the growth
/// `‖Jᵀ v‖ / ‖v‖` over the second half of the iterations (Gelfand's `‖Jᵏ‖^{1/k}`, past the
/// first half's transient, which for a non-normal `J` can exceed ρ). The batch's largest,
/// since `J` is block-diagonal over samples.
fn spectral_radius(jt: &dyn Fn(&Tensor) -> Tensor, start: &Tensor, iters: usize) -> f64 {
    let n = norm(start);
    if n == 0.0 {
        return 0.0;
    }
    let mut v = start / n;
    let mut logs = Vec::with_capacity(iters);
    for _ in 0..iters {
        let w = jt(&v);
        let growth = norm(&w);
        if growth == 0.0 || !growth.is_finite() {
            return growth;
        }
        logs.push(growth.ln());
        v = w / growth;
    }
    let tail = &logs[logs.len() / 2..];
    (tail.iter().sum::<f64>() / tail.len().max(1) as f64).exp()
}

/// `‖J‖²_F / d` of the step `y = f(x)` at `x*`, by one Hutchinson probe `‖εᵀ J‖²` with
/// `ε ~ N(0, I)` (averaged over the batch; `d` the size of one sample's state), with its graph
/// to the parameters (Bai et al. 2021, eq. 5).
fn jacobian_frobenius(x: &Tensor, y: &Tensor) -> Tensor {
    tch::with_grad(|| {
        let eps = y.randn_like();
        let s = (y * &eps).sum(y.kind());
        let Some(vjp) = Tensor::run_backward(&[&s], &[x], true, true)
            .into_iter()
            .next()
            .filter(Tensor::defined)
        else {
            return Tensor::zeros([], (Kind::Double, x.device()));
        };
        let samples = x.size()[0].max(1) as f64;
        let d = (x.numel() as f64 / samples).max(1.0);
        vjp.square().sum(Kind::Double) / (samples * d)
    })
}

/// The settling statistics of `blocks` since they were last taken, merged (then reset).
pub fn take_stats<'a>(blocks: impl IntoIterator<Item = &'a EnergyBlock>) -> SettleStats {
    let mut all = SettleStats::default();
    for b in blocks {
        all.merge(&b.take_settle_stats());
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a linear contraction `x ← A x + c` with spectral radius 0.99, Anderson reaches the
    /// fixed point in a fraction of the plain iteration's steps.
    #[test]
    fn anderson_accelerates_a_slow_linear_contraction() {
        tch::manual_seed(0);
        let opts = (Kind::Double, tch::Device::Cpu);
        let n = 24;
        let q = Tensor::linalg_qr(&Tensor::randn([n, n], opts), "reduced").0;
        let lambdas = Tensor::linspace(0.5, 0.99, n, opts);
        let a = q.matmul(&lambdas.diag(0)).matmul(&q.tr());
        let c = Tensor::randn([2, 1, n], opts);
        let f = |_: usize, x: &Tensor| x.matmul(&a) + &c;
        let x0 = Tensor::randn([2, 1, n], opts);
        let plain = iterate(x0.shallow_clone(), f, (1e-10, 20_000), |_, _, _| {});
        let fast = anderson(x0, f, (1e-10, 20_000), (5, 1.0), |_, _, _| {});
        assert!(plain.converged && fast.converged);
        assert!(
            fast.steps * 10 < plain.steps,
            "{} against {}",
            fast.steps,
            plain.steps
        );
        let err = (&fast.state - &plain.state).abs().max().double_value(&[]);
        assert!(err < 1e-6, "{err}");
    }
}
