//! Langevin dynamics: the gradient flow with Gaussian noise (ET eq. 27).

use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::{Dynamics, StepContext};
use crate::error::{CoreError, Result, positive};
use crate::gradient::FixedPoint;
use crate::registry::{BuildContext, DynamicsConfig, DynamicsParams};

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

impl DynamicsConfig {
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
