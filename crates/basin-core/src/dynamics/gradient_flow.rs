//! ET's gradient flow, discretised (eq. 6).

use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::{Dynamics, StepContext};
use crate::error::{Result, positive};
use crate::gradient::FixedPoint;
use crate::registry::{BuildContext, DynamicsConfig, DynamicsParams};

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
}
