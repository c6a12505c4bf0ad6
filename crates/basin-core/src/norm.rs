//! The energy layer norm of ET (eq. 1–2): a scalar gain γ, a bias vector δ and ε.
//!
//! Unlike torch's LayerNorm (per-feature gain), the gain is one scalar, which is what makes
//! `g = ∂L/∂x` for the Lagrangian `L` of eq. 2 and keeps the Jacobian `∂g/∂x` symmetric
//! positive semi-definite (for γ ≥ 0), the condition under which the descent of eq. 6 lowers
//! the energy (eq. 7–8).
//!
//! `per_feature_gain = true` gives torch's `LayerNorm` instead (a gain per feature), as the
//! CDAT anomaly reference code uses (`graph_transformer_layer.py`): it is not the gradient of any
//! Lagrangian, so the descent then has no energy guarantee.
//!
//! [`BatchNorm1d`] is PyTorch's batch norm over rows, for the message-passing ports (GIN,
//! GatedGCN, the GPS layer); it is not an energy term.

use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

use crate::error::{CoreError, Result, positive};

/// Configuration of an [`EnergyLayerNorm`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NormConfig {
    /// ε under the square root (reference code: 1e-5).
    pub eps: f64,
    /// Initial value of the gain γ.
    pub gamma_init: f64,
    /// One gain per feature (torch's `LayerNorm`; the CDAT anomaly reference) instead of ET's
    /// scalar.
    pub per_feature_gain: bool,
}

impl Default for NormConfig {
    fn default() -> Self {
        Self {
            eps: 1e-5,
            gamma_init: 1.0,
            per_feature_gain: false,
        }
    }
}

impl NormConfig {
    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<()> {
        positive(field, "eps", self.eps)?;
        if !self.gamma_init.is_finite() {
            return Err(CoreError::config(
                format!("{field}.gamma_init"),
                "must be finite",
            ));
        }
        Ok(())
    }
}

/// `g_i = γ (x_i − x̄) / sqrt(mean_j (x_j − x̄)² + ε) + δ_i` (ET eq. 1), per token.
///
/// Parameters (checkpoint names under the module's path): `gamma` `[]` (`[D]` with a gain per
/// feature), `delta` `[D]`.
#[derive(Debug)]
pub struct EnergyLayerNorm {
    /// Gain γ, shape `[]` (`[D]` with a gain per feature).
    pub gamma: Tensor,
    /// Bias δ, shape `[D]`.
    pub delta: Tensor,
    /// ε.
    pub eps: f64,
}

impl EnergyLayerNorm {
    /// Creates γ (= `cfg.gamma_init`) and δ (= 0) under `path` for tokens of width `dim`.
    pub fn new(path: &nn::Path, dim: i64, cfg: &NormConfig) -> Self {
        Self {
            gamma: if cfg.per_feature_gain {
                path.var("gamma", &[dim], nn::Init::Const(cfg.gamma_init))
            } else {
                path.var("gamma", &[], nn::Init::Const(cfg.gamma_init))
            },
            delta: path.var("delta", &[dim], nn::Init::Const(0.0)),
            eps: cfg.eps,
        }
    }

    fn centred(&self, x: &Tensor) -> (Tensor, Tensor) {
        let xm = x - x.mean_dim(-1, true, x.kind());
        let sd = (xm.square().mean_dim(-1, true, x.kind()) + self.eps).sqrt();
        (xm, sd)
    }

    /// The activation `g` (eq. 1); same shape as `x`.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let (xm, sd) = self.centred(x);
        &self.gamma * xm / sd + &self.delta
    }

    /// The Lagrangian of eq. 2 per token, `L = D γ sqrt(var + ε) + Σ_j δ_j x_j`; shape `x[..-1]`.
    /// Its gradient with respect to `x` is [`EnergyLayerNorm::forward`]. A gain per feature has
    /// none (its Jacobian is not symmetric): an error.
    pub fn lagrangian(&self, x: &Tensor) -> Result<Tensor> {
        if self.gamma.dim() > 0 {
            return Err(CoreError::config(
                "norm.per_feature_gain",
                "a gain per feature is not the gradient of a Lagrangian",
            ));
        }
        let d = x.size().last().copied().unwrap_or(1) as f64;
        let (_, sd) = self.centred(x);
        Ok(&self.gamma * sd.squeeze_dim(-1) * d
            + (x * &self.delta).sum_dim_intlist(-1, false, x.kind()))
    }

    /// The neuron energy of the layer (Legendre transform, `Σ_i g_i x_i − L`) per token. It does
    /// not enter ET's dynamics; it is exposed for the dissipation argument and for tests.
    pub fn legendre_energy(&self, x: &Tensor) -> Result<Tensor> {
        Ok((self.forward(x) * x).sum_dim_intlist(-1, false, x.kind()) - self.lagrangian(x)?)
    }

    /// The Jacobian `∂g/∂x` of one token (`x: [D]`), `[D, D]`: `γ_i (δ_ij − 1/D − x̂_i x̂_j/D)/σ`;
    /// symmetric PSD when the gain is one scalar γ ≥ 0 (eq. 8), row-scaled (not symmetric) with
    /// a gain per feature.
    pub fn jacobian(&self, x: &Tensor) -> Tensor {
        let d = x.size()[0];
        let (xm, sd) = self.centred(x);
        let xhat = &xm / &sd;
        let eye = Tensor::eye(d, (x.kind(), x.device()));
        let centre = eye - 1.0 / d as f64;
        let outer = xhat.outer(&xhat) / d as f64;
        let gamma = if self.gamma.dim() > 0 {
            self.gamma.view([-1, 1])
        } else {
            self.gamma.shallow_clone()
        };
        gamma * (centre - outer) / sd
    }
}

/// PyTorch's `nn.BatchNorm1d(width)` on the rows of `[rows, width]`, started as PyTorch starts
/// it ([`crate::init::batch_norm1d`]: scale 1, shift 0, momentum 0.1, ε = 1e-5).
///
/// Its forward is fallible where tch's `forward_t` panics: a training batch of one row (one
/// node, or one edge) has variance 0 and an unbiased running update that divides by 0, which
/// would leave NaN in the running statistics that evaluation uses; PyTorch raises on it, and so
/// does this, with an error that says how many rows came. An empty batch (no edges in any graph
/// of it) passes through unchanged and leaves the running statistics alone.
#[derive(Debug)]
pub struct BatchNorm1d {
    bn: nn::BatchNorm,
}

impl BatchNorm1d {
    /// A batch norm of `width` features under `path` (`weight`, `bias`, `running_mean`,
    /// `running_var`, as PyTorch names them).
    pub fn new(path: nn::Path, width: i64) -> Self {
        Self {
            bn: crate::init::batch_norm1d(path, width),
        }
    }

    /// Normalised rows: batch statistics in training (updating the running ones), the running
    /// statistics in evaluation.
    pub fn forward_t(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let rows = x.size().first().copied().unwrap_or(0);
        if rows == 0 {
            return Ok(x.shallow_clone());
        }
        if train && rows < 2 {
            return Err(CoreError::config(
                "batch",
                format!("batch norm on a training batch of {rows} row(s): it needs two or more"),
            ));
        }
        let bn = &self.bn;
        Tensor::f_batch_norm(
            x,
            bn.ws.as_ref(),
            bn.bs.as_ref(),
            Some(&bn.running_mean),
            Some(&bn.running_var),
            train,
            0.1,
            1e-5,
            true,
        )
        .map_err(|e| {
            let e = e.to_string();
            CoreError::config(
                "batch",
                format!(
                    "batch norm on {rows} rows: {}",
                    e.lines().next().unwrap_or_default()
                ),
            )
        })
    }

    /// The underlying tch module (its scale `ws`, shift `bs` and running statistics).
    pub fn inner(&self) -> &nn::BatchNorm {
        &self.bn
    }
}
