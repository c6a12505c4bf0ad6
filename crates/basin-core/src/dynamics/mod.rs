//! How tokens move given the energy gradient: one step `x_{t+1} = f(x_t, ∂E/∂g, t)`.
//!
//! ET's dynamics (eq. 6) are `τ dx/dt = −∂E/∂g`: the gradient is taken with respect to the
//! normalised tokens g and applied to x. Discretised with step `α = dt/τ` this is
//! [`GradientFlow`]; the graph-classification ET adds Gaussian noise (eq. 27), [`Langevin`].
//! CDAT's controlled excitation–inhibition dynamics are `basin_cdat::Controlled`.
//!
//! A dynamics may hold terms of `x` itself (a decay, a coupling between tokens, a prior): the
//! [`crate::energy::Energy`] contract is a function of the normalised tokens `g` only, so such
//! terms belong here, not in an energy term.

use tch::Tensor;

mod gradient_flow;
mod langevin;

pub use gradient_flow::GradientFlow;
pub use langevin::Langevin;

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

/// One step of token dynamics (`Send`, as [`crate::Energy`]).
pub trait Dynamics: Send {
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
