//! How tokens move given the energy gradient: one step `x_{t+1} = f(x_t, ∂E/∂g, t)`.
//!
//! ET's dynamics (eq. 6) are `τ dx/dt = −∂E/∂g`: the gradient is taken with respect to the
//! normalised tokens g and applied to x. Discretised with step `α = dt/τ` this is
//! [`GradientFlow`]; the graph-classification ET adds Gaussian noise (eq. 27), [`Langevin`].
//! CDAT's controlled excitation–inhibition dynamics are [`crate::controlled::Controlled`].
//!
//! A dynamics may hold terms of `x` itself (a decay, a coupling between tokens, a prior): the
//! [`crate::energy::Energy`] contract is a function of the normalised tokens `g` only, so such
//! terms belong here, not in an energy term.

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::error::{CoreError, Result};
use crate::implicit::FixedPoint;
use crate::registry::{BuildContext, DynamicsConfig, DynamicsParams};

/// What a dynamics step may depend on besides the state and the gradient.
#[derive(Clone, Copy, Debug)]
pub struct StepContext<'a> {
    /// Step index t within the block, from 0.
    pub step: usize,
    /// Whether the model is training (noise is on in training, off in evaluation by default).
    pub train: bool,
    /// `[B, N]` bool, `true` for real tokens; padded tokens never move.
    pub padding: Option<&'a Tensor>,
    /// The normalised tokens `g = LN(x)` the gradient was taken at (for dynamics whose step
    /// reads them, as the CDAT anomaly reference's residual does).
    pub g: Option<&'a Tensor>,
}

/// One step of token dynamics.
pub trait Dynamics {
    /// Short name for traces and reports.
    fn name(&self) -> &str;
    /// `x_{t+1}` from `x_t: [B, N, D]` and `grad = ∂E/∂g: [B, N, D]`.
    fn step(&self, x: &Tensor, grad: &Tensor, ctx: &StepContext) -> Tensor;
    /// For dynamics that are not a gradient flow of the energy: the change of their storage
    /// functional beyond the energy's over one step from `(x0, g0)` to `(x1, g1)`, per sample
    /// `[B]` — CDAT eq. 6's `∫((1+ω)x − Wx)ᵀ ġ ds`. A [`crate::block::Trace`] then records
    /// `V_t = E_t + Σ increments` beside the energy. `None` (the default): V is the energy.
    fn storage_increment(
        &self,
        _x0: &Tensor,
        _x1: &Tensor,
        _g0: &Tensor,
        _g1: &Tensor,
        _ctx: &StepContext,
    ) -> Option<Tensor> {
        None
    }
}

/// `x ← x − α ∂E/∂g` (ET eq. 6, explicit Euler step). `kind = "gradient-flow"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradientFlow {
    /// Step size α = dt/τ (ET: 0.1).
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

/// `Ok` when `v` is finite and > 0, else an error naming `field.name`.
pub(crate) fn positive(field: &str, name: &str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(CoreError::config(
            format!("{field}.{name}"),
            format!("must be > 0, got {v}"),
        ))
    }
}

impl DynamicsParams for GradientFlow {
    const KIND: &'static str = "gradient-flow";
    const ABOUT: &'static str = "x ← x − α ∂E/∂g (ET eq. 6)";

    fn validate(&self, field: &str) -> Result<()> {
        positive(field, "alpha", self.alpha)
    }

    fn build(&self, _ctx: &BuildContext) -> Result<Box<dyn Dynamics>> {
        Ok(Box::new(self.clone()))
    }

    fn alpha(&self) -> Option<f64> {
        Some(self.alpha)
    }

    fn fixed_point(&self, _field: &str) -> Result<FixedPoint> {
        Ok(FixedPoint::Normalised)
    }
}
crate::register_dynamics!(GradientFlow);

/// `x ← x − α ∂E/∂g + √α σ_t ε`, `ε ~ N(0, 1)` (ET eq. 27). `kind = "langevin"`.
///
/// `σ_t = σ` or, with `decay = Some(p)`, `σ_t = σ / (1 + t)^p` (the graph reference code's
/// `vary_noise` uses σ = 0.55, p = 0.55). Noise is drawn from libtorch's global generator
/// (seed it with `tch::manual_seed`) and never added to padded tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Langevin {
    /// Step size α.
    pub alpha: f64,
    /// Noise scale σ (graph ET: 0.02).
    pub sigma: f64,
    /// Optional decay exponent p of σ over the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decay: Option<f64>,
    /// Whether noise is also added in evaluation (the graph reference code does; default no).
    #[serde(default)]
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

impl DynamicsParams for Langevin {
    const KIND: &'static str = "langevin";
    const ABOUT: &'static str = "x ← x − α ∂E/∂g + √α σ_t ε (ET eq. 27), noise in training";

    fn validate(&self, field: &str) -> Result<()> {
        positive(field, "alpha", self.alpha)?;
        if !(self.sigma.is_finite() && self.sigma >= 0.0) {
            return Err(CoreError::config(
                format!("{field}.sigma"),
                format!("must be ≥ 0, got {}", self.sigma),
            ));
        }
        match self.decay {
            Some(p) if !p.is_finite() => Err(CoreError::config(
                format!("{field}.decay"),
                "must be finite",
            )),
            _ => Ok(()),
        }
    }

    fn build(&self, _ctx: &BuildContext) -> Result<Box<dyn Dynamics>> {
        Ok(Box::new(self.clone()))
    }

    fn alpha(&self) -> Option<f64> {
        Some(self.alpha)
    }

    /// Noiseless Langevin is the gradient flow; with noise the descent has no fixed point.
    fn fixed_point(&self, field: &str) -> Result<FixedPoint> {
        if self.sigma > 0.0 {
            return Err(CoreError::config(
                format!("{field}.sigma"),
                "a noisy descent has no fixed point to train at: set sigma = 0 (or use gradient-flow) for an implicit or phantom gradient",
            ));
        }
        Ok(FixedPoint::Normalised)
    }
}
crate::register_dynamics!(Langevin);

impl Default for DynamicsConfig {
    fn default() -> Self {
        Self::gradient_flow(0.1)
    }
}

impl DynamicsConfig {
    /// [`GradientFlow`] with step α.
    pub fn gradient_flow(alpha: f64) -> Self {
        Self::new(&GradientFlow { alpha })
    }

    /// [`Langevin`] with step α and noise σ in training only.
    pub fn langevin(alpha: f64, sigma: f64) -> Self {
        Self::new(&Langevin {
            alpha,
            sigma,
            decay: None,
            in_eval: false,
        })
    }
}
