//! How tokens move given the energy gradient: one step `x_{t+1} = f(x_t, ∂E/∂g, t)`.
//!
//! ET's dynamics (eq. 6) are `τ dx/dt = −∂E/∂g`: the gradient is taken with respect to the
//! normalised tokens g and applied to x. Discretised with step `α = dt/τ` this is
//! [`GradientFlow`]; the graph-classification ET adds Gaussian noise (eq. 27), [`Langevin`].
//! CDAT's controlled excitation–inhibition dynamics will be another implementation.

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::error::{CoreError, Result};

/// What a dynamics step may depend on besides the state and the gradient.
#[derive(Clone, Copy, Debug)]
pub struct StepContext<'a> {
    /// Step index t within the block, from 0.
    pub step: usize,
    /// Whether the model is training (noise is on in training, off in evaluation by default).
    pub train: bool,
    /// `[B, N]` bool, `true` for real tokens; padded tokens never move.
    pub padding: Option<&'a Tensor>,
}

/// One step of token dynamics.
pub trait Dynamics {
    /// Short name for traces and reports.
    fn name(&self) -> &str;
    /// `x_{t+1}` from `x_t: [B, N, D]` and `grad = ∂E/∂g: [B, N, D]`.
    fn step(&self, x: &Tensor, grad: &Tensor, ctx: &StepContext) -> Tensor;
}

/// `x ← x − α ∂E/∂g` (ET eq. 6, explicit Euler step).
#[derive(Clone, Debug)]
pub struct GradientFlow {
    /// Step size α = dt/τ.
    pub alpha: f64,
}

impl Dynamics for GradientFlow {
    fn name(&self) -> &str {
        "gradient-flow"
    }

    fn step(&self, x: &Tensor, grad: &Tensor, _ctx: &StepContext) -> Tensor {
        x - grad * self.alpha
    }
}

/// `x ← x − α ∂E/∂g + √α σ_t ε`, `ε ~ N(0, 1)` (ET eq. 27).
///
/// `σ_t = σ` or, with `decay = Some(p)`, `σ_t = σ / (1 + t)^p` (the graph reference code's
/// `vary_noise` uses σ = 0.55, p = 0.55). Noise is drawn from libtorch's global generator
/// (seed it with `tch::manual_seed`) and never added to padded tokens.
#[derive(Clone, Debug)]
pub struct Langevin {
    /// Step size α.
    pub alpha: f64,
    /// Noise scale σ.
    pub sigma: f64,
    /// Optional decay exponent p of σ over the steps.
    pub decay: Option<f64>,
    /// Whether noise is also added in evaluation (the graph reference code does; default no).
    pub in_eval: bool,
}

impl Langevin {
    /// σ at step t.
    pub fn sigma_at(&self, step: usize) -> f64 {
        match self.decay {
            Some(p) => self.sigma / (1.0 + step as f64).powf(p),
            None => self.sigma,
        }
    }
}

impl Dynamics for Langevin {
    fn name(&self) -> &str {
        "langevin"
    }

    fn step(&self, x: &Tensor, grad: &Tensor, ctx: &StepContext) -> Tensor {
        let next = x - grad * self.alpha;
        if !(ctx.train || self.in_eval) {
            return next;
        }
        let mut noise = x.randn_like() * (self.alpha.sqrt() * self.sigma_at(ctx.step));
        if let Some(p) = ctx.padding {
            noise = noise * p.to_kind(x.kind()).unsqueeze(-1);
        }
        next + noise
    }
}

/// Serialisable choice of dynamics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DynamicsConfig {
    /// [`GradientFlow`].
    GradientFlow {
        /// Step size α (ET: 0.1).
        alpha: f64,
    },
    /// [`Langevin`].
    Langevin {
        /// Step size α.
        alpha: f64,
        /// Noise scale σ (graph ET: 0.02).
        sigma: f64,
        /// Optional decay exponent of σ over the steps.
        #[serde(default)]
        decay: Option<f64>,
        /// Whether noise is also added in evaluation.
        #[serde(default)]
        in_eval: bool,
    },
}

impl Default for DynamicsConfig {
    fn default() -> Self {
        Self::GradientFlow { alpha: 0.1 }
    }
}

impl DynamicsConfig {
    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<()> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(CoreError::config(
                    format!("{field}.{name}"),
                    format!("must be > 0, got {v}"),
                ))
            }
        };
        match self {
            Self::GradientFlow { alpha } => positive("alpha", *alpha),
            Self::Langevin {
                alpha,
                sigma,
                decay,
                ..
            } => {
                positive("alpha", *alpha)?;
                if !(sigma.is_finite() && *sigma >= 0.0) {
                    return Err(CoreError::config(
                        format!("{field}.sigma"),
                        format!("must be ≥ 0, got {sigma}"),
                    ));
                }
                match decay {
                    Some(p) if !p.is_finite() => Err(CoreError::config(
                        format!("{field}.decay"),
                        "must be finite",
                    )),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Step size α.
    pub fn alpha(&self) -> f64 {
        match self {
            Self::GradientFlow { alpha } | Self::Langevin { alpha, .. } => *alpha,
        }
    }

    /// Builds the dynamics.
    pub fn build(&self) -> Box<dyn Dynamics> {
        match self {
            Self::GradientFlow { alpha } => Box::new(GradientFlow { alpha: *alpha }),
            Self::Langevin {
                alpha,
                sigma,
                decay,
                in_eval,
            } => Box::new(Langevin {
                alpha: *alpha,
                sigma: *sigma,
                decay: *decay,
                in_eval: *in_eval,
            }),
        }
    }
}
