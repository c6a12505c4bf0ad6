//! The dense form of energy attention: logits `[B, H, N, N]` computed in batch chunks.

use tch::{Device, Tensor};

use super::*;

/// On the CPU the dense form's `[b, H, N, N]` core goes through the batch in chunks whose
/// logits take at most this many bytes (about one core's L2), so that the logits, the softmax
/// and the two weighted sums stay in cache between the batched matmuls; without autograd the
/// projections go by the same chunks. Accelerators take the whole batch.
pub const CPU_CHUNK_BYTES: i64 = 2 << 20;

/// The dense pattern of one batch chunk: the structure's layout and scale split to it.
pub(super) struct DenseParts {
    /// Only the diagonal is blocked (filled in place).
    pub(super) diagonal_only: bool,
    /// `[b|1, H|1, N, N]` bool, true for pairs that may not interact.
    pub(super) blocked: Option<Tensor>,
    /// `[b|1, H|1, N, N]` additive bias.
    pub(super) bias: Option<Tensor>,
    /// `[b|1, 1, N]` (as the tokens' kind): whether a query has any key.
    pub(super) has: Option<Tensor>,
    /// `[b|1, H|1, N, N]` factor Â on the scores.
    pub(super) scale: Option<Tensor>,
}

impl EnergyAttention {
    /// How many samples of tokens `g: [B, N, D]` one chunk of the dense form's `[b, H, N, N]`
    /// core holds: all `B` off the CPU, else as many as fit [`Self::with_chunk_bytes`] (at
    /// least one).
    pub fn dense_chunk_len(&self, g: &Tensor) -> i64 {
        let size = g.size();
        let (b, n) = (size[0], size[1]);
        if g.device() != Device::Cpu {
            return b;
        }
        let bytes = self.heads() * n * n * g.kind().elt_size_in_bytes() as i64;
        (self.chunk_bytes / bytes.max(1)).clamp(1, b.max(1))
    }

    /// Runs `f(chunks, pattern)` on each batch chunk, in batch order: `chunks` holds the
    /// chunk of each of `inputs` (tensors whose first axis is the batch of tokens `g`; others
    /// pass whole), `pattern` the structure's parts for those samples. With the projections
    /// done whole-batch the inputs are the head-major queries and keys and only the
    /// `[b, H, N, N]` core goes by chunks; without autograd the input is `g` itself and the whole
    /// term does ([`Self::dense_tiled`]). See [`CPU_CHUNK_BYTES`].
    pub(super) fn dense_chunks<T>(
        &self,
        g: &Tensor,
        inputs: &[&Tensor],
        s: &Structure,
        mut f: impl FnMut(&[Tensor], &DenseParts) -> T,
    ) -> Vec<T> {
        let size = g.size();
        let (b, n) = (size[0], size[1]);
        let chunk = self.dense_chunk_len(g);
        let layout = s.dense_layout(n, g.device());
        let count = if b <= chunk {
            1
        } else {
            (b + chunk - 1) / chunk
        };
        // `split`, not `narrow`: its backward joins the chunks' gradients once, where each
        // narrow's would fill a zero tensor of the whole batch.
        let pieces = |t: &Tensor| -> Vec<Tensor> {
            if count > 1 && t.size()[0] == b {
                t.split(chunk, 0)
            } else {
                (0..count).map(|_| t.shallow_clone()).collect()
            }
        };
        let opt = |t: Option<&Tensor>| -> Vec<Option<Tensor>> {
            match t {
                Some(t) => pieces(t).into_iter().map(Some).collect(),
                None => (0..count).map(|_| None).collect(),
            }
        };
        let has = layout.has_keys.as_ref().map(|t| t.to_kind(g.kind()));
        let mut inputs: Vec<std::vec::IntoIter<Tensor>> =
            inputs.iter().map(|t| pieces(t).into_iter()).collect();
        let mut blocked = opt(layout.blocked.as_ref()).into_iter();
        let mut bias = opt(layout.bias.as_ref()).into_iter();
        let mut has = opt(has.as_ref()).into_iter();
        let mut scale = opt(s.scale()).into_iter();
        (0..count)
            .map(|_| {
                let parts = DenseParts {
                    diagonal_only: layout.diagonal_only,
                    blocked: blocked.next().flatten(),
                    bias: bias.next().flatten(),
                    has: has.next().flatten(),
                    scale: scale.next().flatten(),
                };
                let chunks: Vec<Tensor> = inputs.iter_mut().filter_map(Iterator::next).collect();
                f(&chunks, &parts)
            })
            .collect()
    }

    /// The dense gradient `[B, N, D]` of tokens `g` with each batch chunk computed whole
    /// inside its chunk (projections, logits, softmax, weighted sums, back-projection), and
    /// `f(logits, softmax, pattern)` of each chunk. Without autograd nothing needs the whole
    /// batch's queries, keys or aggregates, so each chunk's stay in cache and every allocation
    /// is small: at B = 32, N = 128, D = 128, H = 12 the whole-batch projections and aggregates
    /// are 12–25 MiB each, which glibc often maps and faults in afresh on every call.
    pub(super) fn dense_tiled<T>(
        &self,
        w: &Tensor,
        g: &Tensor,
        s: &Structure,
        mut f: impl FnMut(&Tensor, &Tensor, &DenseParts) -> T,
    ) -> (Vec<T>, Tensor) {
        let (out, grads): (Vec<T>, Vec<Tensor>) = self
            .dense_chunks(g, &[g], s, |c, p| {
                let (q, k, unit) = self.project_heads(w, &c[0]);
                let logits = self.dense_logits(&q, &k, p);
                let softmax = logits.softmax(-1, logits.kind());
                let out = f(&logits, &softmax, p);
                let omega = Self::dense_omega(&softmax, p.has.as_ref());
                let sums = Self::weighted_sums(&omega, (&q, &k), p);
                (out, self.dense_grad(vec![sums], unit.as_ref()))
            })
            .into_iter()
            .unzip();
        (out, cat_batch(grads))
    }

    /// Per-query log-sum-exp `[b, H, N]` from the logits and their softmax: lse = max − log
    /// softmax(max); the softmax already holds the normaliser, and its largest entry is ≥ 1/N,
    /// so the log is safe (rows with no key are uniform).
    pub(super) fn lse(logits: &Tensor, softmax: &Tensor) -> Tensor {
        let (max, arg) = logits.max_dim(-1, true);
        (max - softmax.gather(-1, &arg, false).log()).squeeze_dim(-1)
    }

    /// Masked logits `[b, H, N, N]` (query × key) of head-major `βQᵀ`, `Kᵀ` `[b, H, Y, N]`.
    pub(super) fn dense_logits(&self, q: &Tensor, k: &Tensor, p: &DenseParts) -> Tensor {
        let mut logits = q.transpose(-1, -2).matmul(k);
        if let Some(mix) = &self.head_mix {
            logits = logits
                .permute([0, 2, 3, 1])
                .matmul(mix)
                .permute([0, 3, 1, 2]);
        }
        if let Some(scale) = &p.scale {
            logits = logits * scale; // ET eq. 25: (K·Q) ⊙ Â, then β (folded into Q)
        }
        let mut logits = self.clipped(logits);
        if let Some(bias) = &p.bias {
            logits = logits + bias;
        }
        // In place: the matmul's backward does not need its output.
        if p.diagonal_only {
            let _ = logits.diagonal(0, -2, -1).fill_(BLOCKED_LOGIT);
        } else if let Some(blocked) = &p.blocked {
            logits = logits.masked_fill_(blocked, BLOCKED_LOGIT);
        }
        logits
    }

    /// `E = −Σ_h (1/β_h) Σ_q lse_q` from per-query log-sum-exps `[B, H, N]`.
    pub(super) fn energy_from_lse(&self, lse: &Tensor, has: Option<&Tensor>) -> Tensor {
        self.query_energy_from_lse(lse, has)
            .sum_dim_intlist(-1, false, lse.kind())
    }

    /// Each query's share `−Σ_h (1/β_h) lse_q`, `[B, N]` (a query without keys: 0).
    pub(super) fn query_energy_from_lse(&self, lse: &Tensor, has: Option<&Tensor>) -> Tensor {
        let h = self.heads();
        let per_query = match has {
            Some(has) => lse * has,
            None => lse.shallow_clone(),
        };
        -(per_query / self.beta().view([1, h, 1])).sum_dim_intlist(1, false, lse.kind())
    }

    /// The per-head aggregates of a chunk, head-major `[b, H, Y, N]`: `T^Q = (ω K)ᵀ` and
    /// `T^K = (ωᵀ βQ)ᵀ`, from the attention weights ω `[b, H, N, N]` (times the structure's
    /// scale Â, which multiplies the scores and so both gradient terms).
    pub(super) fn weighted_sums(
        omega: &Tensor,
        (q, k): (&Tensor, &Tensor),
        p: &DenseParts,
    ) -> (Tensor, Tensor) {
        let scaled;
        let omega = match &p.scale {
            Some(scale) => {
                scaled = omega * scale;
                &scaled
            }
            None => omega,
        };
        (k.matmul(&omega.transpose(-1, -2)), q.matmul(omega))
    }

    /// The dense gradient `[B, N, D]` from the chunks' aggregates (see
    /// [`Self::weighted_sums`]), taken back through the unit normalisation in unit mode.
    pub(super) fn dense_grad(&self, sums: Vec<(Tensor, Tensor)>, unit: Option<&Unit>) -> Tensor {
        let (tq, tk): (Vec<Tensor>, Vec<Tensor>) = sums.into_iter().unzip();
        let (tq, tk) = (cat_batch(tq), cat_batch(tk));
        let (tq, tk) = match unit {
            Some(u) => u.back_both(&tq, &tk),
            None => (tq, tk),
        };
        let size = tq.size();
        let (b, hy, n) = (size[0], size[1] * size[2], size[3]);
        let (wq, wk) = self.back_weights();
        let cols = |t: Tensor| t.reshape([b, hy, n]).transpose(1, 2); // [B, N, H·Y]
        cols(tq)
            .matmul(&wq)
            .baddbmm(&cols(tk), &wk.expand([b, hy, -1], false), 1, 1)
    }

    /// Attention weights from the softmax over keys: zero for queries without keys.
    pub(super) fn dense_omega(softmax: &Tensor, has: Option<&Tensor>) -> Tensor {
        match has {
            Some(has) => softmax * has.unsqueeze(-1),
            None => softmax.shallow_clone(),
        }
    }
}
