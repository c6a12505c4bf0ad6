//! The dense form on libtorch's fused scaled-dot-product attention (no `[B, H, N, N]` tensor).
//!
//! Both aggregates of the gradient (ET eq. 17) are attentions with the energy's own weights
//! `ω_qk = exp(βq·k + m_qk − lse_q)`, `m` the structure's additive mask:
//!
//! - the query side `T^Q_q = Σ_k ω_qk k` is `SDPA(βQ, K, V = K)`, whose log-sum-exp `lse_q`
//!   also gives the energy `E = −Σ_h (1/β_h) Σ_q lse_q` (eq. 3);
//! - the key side `T^K_k = Σ_q ω_qk βq` is an attention over the queries whose logits carry
//!   `−lse_q`: `SDPA([K, 1], [βQ, −lse], V = βQ)` with the transposed mask gives
//!   `Σ_q ω_qk βq / Σ_q ω_qk`, and its own log-sum-exp is `log Σ_q ω_qk`, the factor back.
//!
//! Libtorch's fused kernels return the log-sum-exp without a gradient and have no double
//! backward, so this form serves the calls that record no autograd graph (a descent in
//! evaluation, the forward of a recomputed or implicit descent, `basin energy`); under autograd
//! the explicit form runs. Structures with a score factor Â, a logit clip or head mixing have
//! no fused equivalent and run explicit too ([`EnergyAttention::fused_applies`]).

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use super::*;

/// Which kernels the dense form runs on when no autograd graph is recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionKernel {
    /// By device, the form measured fastest there: the explicit one on the CPU, and on
    /// accelerators until the fused one has been measured there.
    #[default]
    Auto,
    /// Logits, softmax and weighted sums as batched matmuls, in cache-sized batch chunks.
    Explicit,
    /// Libtorch's fused scaled-dot-product attention (its CPU flash attention), where it
    /// applies. On accelerators the explicit form runs: the fused path there (the
    /// memory-efficient kernel, which also returns the log-sum-exp) has not been run yet.
    Fused,
}

impl AttentionKernel {
    /// Whether the fused kernels run on `device`.
    pub fn fused_on(self, device: Device) -> bool {
        match self {
            Self::Auto => false,
            Self::Explicit => false,
            Self::Fused => device == Device::Cpu,
        }
    }
}

impl EnergyAttention {
    /// Whether a no-graph dense call on tokens `g` under `s` runs fused: the kernel choice
    /// allows it on `g`'s device and nothing the fused kernels cannot express is configured.
    pub(super) fn fused_applies(&self, g: &Tensor, s: &Structure) -> bool {
        self.kernel.fused_on(g.device())
            && s.scale().is_none()
            && self.clip.is_none()
            && self.head_mix.is_none()
            && matches!(
                g.kind(),
                Kind::Float | Kind::Double | Kind::BFloat16 | Kind::Half
            )
    }

    /// Energy `[B]` and gradient `[B, N, D]` of tokens `g` through two fused attentions (see
    /// the module docs), with `w` = [`Self::head_weights`].
    pub(super) fn dense_fused(&self, w: &Tensor, g: &Tensor, s: &Structure) -> (Tensor, Tensor) {
        let n = g.size()[1];
        let layout = s.dense_layout(n, g.device());
        let (q, k, unit) = self.project_heads(w, g);
        // `[B, H, N, Y]`, the layout the kernels take.
        let (q, k) = (
            q.transpose(-1, -2).contiguous(),
            k.transpose(-1, -2).contiguous(),
        );
        let mask = additive_mask(&layout, n, g);
        let (t_q, lse) = sdpa(&q, &k, &k, mask.as_ref());
        // Queries without keys: no energy, no weight (their lse is that of blocked logits).
        let has = layout.has_keys.as_ref().map(|h| h.to_kind(g.kind()));
        let energy = self.energy_from_lse(&lse, has.as_ref());
        let (t_q, lse) = match &layout.has_keys {
            Some(h) => (
                t_q * h.to_kind(g.kind()).unsqueeze(-1),
                lse.masked_fill(&h.logical_not(), -BLOCKED_LOGIT),
            ),
            None => (t_q, lse),
        };
        let size = k.size();
        let ones = Tensor::ones([size[0], size[1], size[2], 1], (k.kind(), k.device()));
        let keys_as_queries = Tensor::cat(&[&k, &ones], -1);
        let queries_as_keys = Tensor::cat(&[&q, &(-&lse).unsqueeze(-1)], -1);
        let mask_t = mask.map(|m| m.transpose(-1, -2));
        // Values as wide as the keys (the CPU kernel takes one head width): βQ and a zero.
        let values = Tensor::cat(&[&q, &ones.zeros_like()], -1);
        let (mean, lse_k) = sdpa(&keys_as_queries, &queries_as_keys, &values, mask_t.as_ref());
        let y = q.size()[3];
        let t_k = mean.narrow(-1, 0, y) * lse_k.exp().unsqueeze(-1);
        let sums = (t_q.transpose(-1, -2), t_k.transpose(-1, -2));
        (energy, self.dense_grad(vec![sums], unit.as_ref()))
    }
}

/// The structure's bias and blocked pairs as one additive mask `[B|1, H|1, N, N]` in the
/// tokens' kind (blocked pairs get [`BLOCKED_LOGIT`], finite, so no row turns to NaN); `None`
/// when every pair may interact unbiased.
fn additive_mask(layout: &crate::structure::DenseLayout, n: i64, g: &Tensor) -> Option<Tensor> {
    let opts = (g.kind(), g.device());
    let blocked = if layout.diagonal_only {
        Some(Tensor::eye(n, (Kind::Bool, g.device())).view([1, 1, n, n]))
    } else {
        layout.blocked.as_ref().map(Tensor::shallow_clone)
    };
    let blocked = blocked.map(|b| Tensor::zeros([1], opts).masked_fill(&b, BLOCKED_LOGIT));
    match (blocked, &layout.bias) {
        (None, None) => None,
        (Some(b), None) => Some(b),
        (None, Some(bias)) => Some(bias.to_kind(g.kind())),
        (Some(b), Some(bias)) => Some(b + bias.to_kind(g.kind())),
    }
}

/// `(Σ_k softmax_k(q·k + m) v, log Σ_k exp(q·k + m))` for `q: [B, H, L, E]`, `k: [B, H, S, E]`,
/// `v: [B, H, S, E]` (scale 1: β is in the queries), on libtorch's CPU flash attention.
fn sdpa(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> (Tensor, Tensor) {
    Tensor::internal_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, false, mask, 1.0)
}
