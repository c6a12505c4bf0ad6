//! How a block's parameters receive their gradient, as configured: through the unrolled steps,
//! at the attractor by the implicit function theorem, or by a phantom gradient ([`GradientConfig`],
//! the `gradient` section of a block); where a dynamics settles ([`FixedPoint`]); and what the
//! settling forwards and adjoint solves did ([`SettleStats`]). The settling itself and the
//! adjoint are in [`crate::implicit`].

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::error::{CoreError, Result, positive};
use crate::structure::Structure;

/// How a block's parameters receive their gradient.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GradientMode {
    /// Backpropagation through the T unrolled steps (the papers and every reference code).
    #[default]
    Unrolled,
    /// The implicit function theorem at the converged state (see the module docs).
    Implicit,
    /// Backpropagation through `phantom_steps` steps from the detached fixed point.
    Phantom,
}

/// The linear solver of the adjoint system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Solver {
    /// `v ← ∂L/∂x* + (∂f/∂x)ᵀ v`: converges when the step's Jacobian contracts.
    FixedPoint,
    /// Restarted GMRES (`restart` vectors): the operator is not symmetric, so not CG.
    #[default]
    Gmres,
}

/// How a settling forward looks for the fixed point `x = f(x)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardSolver {
    /// `x ← f(x)`: the block's own descent, run until the batch's largest relative step is
    /// below the tolerance.
    #[default]
    Iterate,
    /// Anderson acceleration (Walker & Ni 2011; the solver of deep equilibrium models): each
    /// new iterate mixes the last `anderson_history` iterates and their images by the weights
    /// that minimise the mixed residual. Each sample keeps its lowest-residual `f(x)` and
    /// counts as converged on its own once that is below the tolerance; a rising residual
    /// restarts the history. It can settle in another attractor than the plain descent from
    /// the same start (it jumps further per step).
    Anderson,
}

/// Which fixed point a dynamics settles in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixedPoint {
    /// Of `g = LN(x)` only (a gradient flow of the energy): the settling map re-standardises.
    Normalised,
    /// Of `x` itself (a dynamics with a decay, CDAT's controlled dynamics).
    Tokens,
}

/// The `gradient` section of a block: `gradient = "implicit"`, or a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GradientConfig {
    /// Unrolled, implicit or phantom.
    pub mode: GradientMode,
    /// The forward stops once the relative step falls below this.
    pub tol: f64,
    /// The forward's step cap (a forward that reaches it is counted as not converged).
    pub max_steps: usize,
    /// A training forward's tolerance where it differs from `tol` (deep-equilibrium practice
    /// settles looser in training than in evaluation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_tol: Option<f64>,
    /// A training forward's step cap where it differs from `max_steps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_max_steps: Option<usize>,
    /// How the forward settles: the block's own iteration, or Anderson acceleration.
    pub forward_solver: ForwardSolver,
    /// Anderson's history m: how many past iterates each new one mixes.
    pub anderson_history: usize,
    /// Anderson's mixing β in (0, 1]: `x ← β Σ αᵢ f(xᵢ) + (1 − β) Σ αᵢ xᵢ` (1: undamped).
    pub anderson_mixing: f64,
    /// The adjoint solver.
    pub solver: Solver,
    /// The adjoint stops once `‖(I − Jᵀ) v − ∂L/∂x*‖ / ‖∂L/∂x*‖` falls below this.
    pub solver_tol: f64,
    /// The adjoint's cap on vector–Jacobian products.
    pub solver_iters: usize,
    /// GMRES's restart length.
    pub restart: usize,
    /// Steps backpropagated by the phantom gradient.
    pub phantom_steps: usize,
    /// The phantom steps' damping τ in (0, 1]: `x ← τ f(x) + (1 − τ) x` (Geng et al. 2021's
    /// damped unrolling; 1: the plain steps).
    pub phantom_damping: f64,
    /// In implicit mode, a sample whose settle or adjoint did not converge takes the phantom
    /// gradient instead (counted as `phantom_fallback_samples`, and its forward among
    /// `phantom_fallbacks`, in the record): the adjoint of an unconverged state is not the
    /// gradient it claims to be. The adjoint is solved for the settled samples only.
    pub phantom_fallback: bool,
    /// Power iterations on the step's Jacobian at `x*` at the first implicit backward of each
    /// epoch, for its spectral radius ρ(J) in the epoch record (below 1: the map contracts
    /// there); 0: not measured.
    pub spectral_iters: usize,
    /// Jacobian regularisation (Bai et al. 2021): the weight γ of `γ ‖J‖²_F / d` added to the
    /// loss at `x*`, `‖J‖²_F` by one Hutchinson probe (`ε ~ N(0, I)` from libtorch's generator);
    /// 0: none.
    pub jacobian_weight: f64,
    /// The regulariser is added at every `jacobian_every`-th implicit backward of an epoch.
    pub jacobian_every: usize,
    /// Fixed-point correction (Bai et al. 2022): a training forward also hands its task this
    /// many states of the settle, taken at evenly spaced steps of its cap (the final state
    /// where the settle stopped before), each through the phantom steps, for the task to add
    /// their losses ([`crate::EnergyBlock::take_corrections`]); 0: none.
    pub correction_states: usize,
    /// The corrections' weights: the `i`-th of `k` states (`i = 1` the earliest) weighs
    /// `correction_decay^(k − i + 1)` against the final state's 1.
    pub correction_decay: f64,
}

impl Default for GradientConfig {
    fn default() -> Self {
        Self {
            mode: GradientMode::Unrolled,
            tol: 1e-4,
            max_steps: 200,
            train_tol: None,
            train_max_steps: None,
            forward_solver: ForwardSolver::Iterate,
            anderson_history: 5,
            anderson_mixing: 1.0,
            solver: Solver::Gmres,
            solver_tol: 1e-4,
            solver_iters: 100,
            restart: 20,
            phantom_steps: 5,
            phantom_damping: 1.0,
            phantom_fallback: false,
            spectral_iters: 8,
            jacobian_weight: 0.0,
            jacobian_every: 1,
            correction_states: 0,
            correction_decay: 0.8,
        }
    }
}

impl GradientConfig {
    /// Reads `gradient = "implicit"` (a mode, the other fields at their defaults) as well as
    /// the table form; errors name the field as the table's do.
    pub fn deserialize_either<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = GradientConfig;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"unrolled\", \"implicit\", \"phantom\" or a table with `mode`")
            }
            fn visit_str<E: serde::de::Error>(
                self,
                v: &str,
            ) -> std::result::Result<Self::Value, E> {
                let mode =
                    GradientMode::deserialize(serde::de::value::StrDeserializer::<E>::new(v))?;
                Ok(GradientConfig {
                    mode,
                    ..GradientConfig::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                GradientConfig::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_any(Either)
    }

    /// The implicit gradient with the default tolerances.
    pub fn implicit() -> Self {
        Self {
            mode: GradientMode::Implicit,
            ..Self::default()
        }
    }

    /// Whether this is the default (unrolled, default tolerances): left out of config files.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The forward's tolerance and step cap: a training forward's, or an evaluation one's.
    pub fn stopping(&self, train: bool) -> (f64, usize) {
        if train {
            (
                self.train_tol.unwrap_or(self.tol),
                self.train_max_steps.unwrap_or(self.max_steps),
            )
        } else {
            (self.tol, self.max_steps)
        }
    }

    /// Checks the values; `field` is the config path.
    pub fn validate(&self, field: &str) -> Result<()> {
        positive(field, "tol", self.tol)?;
        positive(field, "solver_tol", self.solver_tol)?;
        if let Some(t) = self.train_tol {
            positive(field, "train_tol", t)?;
        }
        if !(self.jacobian_weight.is_finite() && self.jacobian_weight >= 0.0) {
            return Err(CoreError::config(
                format!("{field}.jacobian_weight"),
                format!("must be ≥ 0, got {}", self.jacobian_weight),
            ));
        }
        for (name, v) in [
            ("anderson_mixing", self.anderson_mixing),
            ("phantom_damping", self.phantom_damping),
            ("correction_decay", self.correction_decay),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(CoreError::config(
                    format!("{field}.{name}"),
                    format!("must be in (0, 1], got {v}"),
                ));
            }
        }
        for (name, v) in [
            ("max_steps", self.max_steps),
            ("train_max_steps", self.train_max_steps.unwrap_or(1)),
            ("anderson_history", self.anderson_history),
            ("solver_iters", self.solver_iters),
            ("restart", self.restart),
            ("phantom_steps", self.phantom_steps),
            ("jacobian_every", self.jacobian_every),
        ] {
            if v == 0 {
                return Err(CoreError::config(format!("{field}.{name}"), "must be ≥ 1"));
            }
        }
        Ok(())
    }
}

/// What the settling descents and adjoint solves of a block did since it was last asked
/// ([`crate::EnergyBlock::take_settle_stats`]): reported per epoch, so a forward that did not
/// converge is never silent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SettleStats {
    /// Settling forwards (in an epoch record, its validation forwards too).
    pub forwards: usize,
    /// Of them, those that stopped at `max_steps`.
    pub unconverged: usize,
    /// Of the forwards, the training ones (the block in training mode).
    pub train_forwards: usize,
    /// Of those, the ones that stopped at their cap.
    pub train_unconverged: usize,
    /// Steps summed over the forwards.
    pub steps: usize,
    /// The largest final relative step.
    pub max_residual: f64,
    /// Adjoint solves.
    pub solves: usize,
    /// Of them, those that stopped at `solver_iters`.
    pub solves_unconverged: usize,
    /// Vector–Jacobian products summed over the solves.
    pub solver_iterations: usize,
    /// The largest final relative residual of a solve.
    pub max_solver_residual: f64,
    /// Implicit backwards (adjoint terms built), solved or fallen back.
    pub terms: usize,
    /// Implicit backwards at which ρ(J) was estimated.
    pub radius_estimates: usize,
    /// The largest estimated spectral radius of the step's Jacobian at `x*`.
    pub max_spectral_radius: f64,
    /// Implicit backwards at which the Jacobian regulariser was added.
    pub jacobian_estimates: usize,
    /// `‖J‖²_F / d` summed over them (one Hutchinson probe each).
    pub jacobian_frobenius: f64,
    /// Implicit forwards of which a sample took the phantom gradient because its settle or
    /// adjoint did not converge ([`GradientConfig::phantom_fallback`]).
    pub fallbacks: usize,
    /// The samples that did, over those forwards.
    pub fallback_samples: usize,
}

impl SettleStats {
    /// Adds `other` in.
    pub fn merge(&mut self, other: &SettleStats) {
        self.forwards += other.forwards;
        self.unconverged += other.unconverged;
        self.train_forwards += other.train_forwards;
        self.train_unconverged += other.train_unconverged;
        self.steps += other.steps;
        self.max_residual = self.max_residual.max(other.max_residual);
        self.solves += other.solves;
        self.solves_unconverged += other.solves_unconverged;
        self.solver_iterations += other.solver_iterations;
        self.max_solver_residual = self.max_solver_residual.max(other.max_solver_residual);
        self.terms += other.terms;
        self.radius_estimates += other.radius_estimates;
        self.max_spectral_radius = self.max_spectral_radius.max(other.max_spectral_radius);
        self.jacobian_estimates += other.jacobian_estimates;
        self.jacobian_frobenius += other.jacobian_frobenius;
        self.fallbacks += other.fallbacks;
        self.fallback_samples += other.fallback_samples;
    }

    /// Epoch-record metrics (`settle_steps`, `settle_unconverged` of `settle_forwards`, the
    /// training ones' `settle_train_unconverged` of `settle_train_forwards`,
    /// `adjoint_unconverged` of `adjoint_solves`, …, so a record gives its convergence rates);
    /// none without forwards.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        if self.forwards == 0 {
            return Vec::new();
        }
        let mut m = vec![
            (
                "settle_steps".into(),
                self.steps as f64 / self.forwards as f64,
            ),
            ("settle_forwards".into(), self.forwards as f64),
            ("settle_unconverged".into(), self.unconverged as f64),
            ("settle_train_forwards".into(), self.train_forwards as f64),
            (
                "settle_train_unconverged".into(),
                self.train_unconverged as f64,
            ),
            ("settle_residual".into(), self.max_residual),
        ];
        if self.solves > 0 {
            m.push((
                "adjoint_iterations".into(),
                self.solver_iterations as f64 / self.solves as f64,
            ));
            m.push(("adjoint_solves".into(), self.solves as f64));
            m.push(("adjoint_unconverged".into(), self.solves_unconverged as f64));
            m.push(("adjoint_residual".into(), self.max_solver_residual));
        }
        if self.fallbacks > 0 {
            m.push(("phantom_fallbacks".into(), self.fallbacks as f64));
            m.push((
                "phantom_fallback_samples".into(),
                self.fallback_samples as f64,
            ));
        }
        if self.radius_estimates > 0 {
            m.push(("spectral_radius".into(), self.max_spectral_radius));
        }
        if self.jacobian_estimates > 0 {
            m.push((
                "jacobian_frobenius".into(),
                self.jacobian_frobenius / self.jacobian_estimates as f64,
            ));
        }
        m
    }
}

/// The backward pass a training forward in implicit mode still owes.
#[derive(Debug)]
pub(crate) struct Pending {
    /// `x*` detached.
    pub(crate) state: Tensor,
    /// The output leaf the loss was computed from.
    pub(crate) output: Tensor,
    /// The structure of the forward.
    pub(crate) structure: Structure,
    /// Whether the forward was a training one.
    pub(crate) train: bool,
    /// Which of its samples settled (`[B]` bool).
    pub(crate) converged: Tensor,
    /// When it ran, in the process's order of settling forwards (stacked blocks' adjoints are
    /// solved last forward first).
    pub(crate) order: u64,
}

/// The order of the next settling forward ([`Pending::order`]).
pub(crate) fn next_order() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Per block: the pending records and the statistics.
#[derive(Debug, Default)]
pub(crate) struct ImplicitState {
    pending: Mutex<Vec<Pending>>,
    stats: Mutex<SettleStats>,
    /// Fixed-point correction's states of the last training forwards, with their weights.
    corrections: Mutex<Vec<(f64, Tensor)>>,
    /// A curriculum's first epochs: descend unrolled for now.
    warm_up: std::sync::atomic::AtomicBool,
}

impl ImplicitState {
    pub(crate) fn warming_up(&self) -> bool {
        self.warm_up.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn set_warm_up(&self, on: bool) {
        self.warm_up.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> std::sync::MutexGuard<'_, SettleStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn pending(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn corrections(&self) -> std::sync::MutexGuard<'_, Vec<(f64, Tensor)>> {
        self.corrections.lock().unwrap_or_else(|e| e.into_inner())
    }
}
