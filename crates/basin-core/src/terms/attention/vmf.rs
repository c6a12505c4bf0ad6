//! Von Mises–Fisher attention (CDAT eq. 10–11): the energy attention of unit queries and keys.

use tch::Tensor;

use super::*;

/// vMF attention's unit directions and norms of the raw queries and keys, for the
/// normalisation's Jacobian `(I − ĥĥᵀ)/n` in the gradient. `dim` is the head-width axis:
/// `[T, H, Y]` rows in the sparse form, `[B, H, Y, N]` columns in the dense form.
pub(super) struct Unit {
    pub(super) q_hat: Tensor,
    pub(super) k_hat: Tensor,
    pub(super) nq: Tensor,
    pub(super) nk: Tensor,
    pub(super) dim: i64,
}

impl Unit {
    /// `(u / n, n)` with the smooth norm `n = sqrt(‖u‖² + eps)` along `dim`.
    pub(super) fn normalise(u: &Tensor, dim: i64, eps: f64) -> (Tensor, Tensor) {
        let n = (u.square().sum_dim_intlist(dim, true, u.kind()) + eps).sqrt();
        (u / &n, n)
    }

    /// `(x − ĥ (ĥ·x)) / n` per head, for `x` shaped like `hat` (the Jacobian of `u / n(u)`
    /// applied to a gradient with respect to the direction).
    pub(super) fn back(&self, x: &Tensor, hat: &Tensor, n: &Tensor) -> Tensor {
        let along = (x * hat).sum_dim_intlist(self.dim, true, x.kind());
        (x - hat * along) / n
    }

    /// Both gradients taken back to the raw projections.
    pub(super) fn back_both(&self, tq: &Tensor, tk: &Tensor) -> (Tensor, Tensor) {
        (
            self.back(tq, &self.q_hat, &self.nq),
            self.back(tk, &self.k_hat, &self.nk),
        )
    }
}

/// Configuration of the von Mises–Fisher attention term (CDAT eq. 10–11):
/// `E = −Σ_h (1/β_h) Σ_C log Σ_{B ≠ C} exp(β_h Q̂_hC · K̂_hB)` with per-head unit queries and keys
/// `Q̂ = W_Q g / ‖W_Q g‖` (smooth norm `sqrt(‖u‖² + eps)`). Every logit lies in `[−β, β]`; the
/// energy and its gradient do not change when W_Q or W_K is scaled. basin's orientation: the
/// log-sum-exp runs over each token's keys, so CDAT's key K_C is basin's query of token C.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VmfAttentionConfig {
    /// Number of heads H.
    pub heads: i64,
    /// Width of each head Y.
    pub head_dim: i64,
    /// Initial concentration β of every head; default `1/sqrt(Y)` (CDAT Table 10).
    pub beta: Option<f64>,
    /// Whether β (one per head) is learned (CDAT Table 10: yes).
    pub learn_beta: bool,
    /// Standard deviation of W_Q and W_K at initialisation (irrelevant to the forward pass).
    pub init_std: f64,
    /// ε of the smooth norm.
    pub eps: f64,
}

impl Default for VmfAttentionConfig {
    fn default() -> Self {
        Self {
            heads: 4,
            head_dim: 16,
            beta: None,
            learn_beta: true,
            init_std: 0.02,
            eps: 1e-12,
        }
    }
}

impl VmfAttentionConfig {
    fn attention(&self) -> AttentionConfig {
        AttentionConfig {
            heads: self.heads,
            head_dim: self.head_dim,
            beta: self.beta,
            learn_beta: self.learn_beta,
            init_std: self.init_std,
            head_mixing: false,
            ..AttentionConfig::default()
        }
    }
}

impl TermParams for VmfAttentionConfig {
    const KIND: &'static str = "vmf-attention";
    const ABOUT: &'static str =
        "von Mises–Fisher attention, per-head unit queries and keys (CDAT eq. 10–11)";

    fn validate(&self, field: &str) -> Result<()> {
        self.attention().validate(field)?;
        positive(field, "eps", self.eps)
    }

    fn build(&self, ctx: &BuildContext, name: &str) -> Result<Box<dyn Energy>> {
        Ok(Box::new(
            EnergyAttention::new(ctx.path, ctx.dim, &self.attention())
                .unit_vectors(self.eps)
                .with_name(name),
        ))
    }
    fn heads(&self) -> Option<i64> {
        Some(self.heads)
    }
}
crate::register_term!(VmfAttentionConfig);
