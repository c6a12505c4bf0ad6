//! Multi-head energy attention (ET eq. 3–4), dense and sparse.
//!
//! `E = −Σ_h (1/β_h) Σ_C log Σ_{B ∈ keys(C)} exp(β_h A_hBC)`, with `A_hBC = K_hB · Q_hC`,
//! `Q = W_Q g`, `K = W_K g` and `W_Q, W_K: [H, Y, D]`. There is no value matrix. The gradient
//! (ET Section 2, the explicit update of eq. 17 in Appendix C) has two terms, one through the
//! queries and one through the keys, and β drops out of it:
//!
//! `∂E/∂g_C = −Σ_h [ Σ_B ω_hCB W_Qᵀ K_hB + Σ_{C'} ω_hC'C W_Kᵀ Q_hC' ]`, `ω = softmax_B(β A)`.
//!
//! Two switches reproduce the CDAT anomaly reference (`research/cdat-spec.md` A15): one shared
//! learned *divisor* b for every head (β_h = 1/b, from b = √Y; `beta_mode = "shared-divisor"`),
//! and logits clipped to `[−c, c]` (`logit_clip`) with the clip ignored by the gradient, as the
//! reference's hand-written update ignores it: the clip is straight-through, so the closed-form
//! gradient (ω from the clipped logits) is autograd's of that energy.
//!
//! The dense form materialises `[B, H, N, N]` logits; the sparse form works on an edge list:
//! its logits are `[E, H]` scalars and both gradient terms are sparse × dense products, so no
//! per-edge D-wide (or Y-wide) message tensor is ever held for the whole graph.

use serde::{Deserialize, Serialize};
use tch::{Device, Tensor, nn};

use crate::energy::Energy;
use crate::error::{CoreError, Result};
use crate::registry::{BuildContext, TermParams};
use crate::structure::{SparseEdges, Structure};

/// Logit given to pairs that may not interact (finite, so that rows with no key at all give
/// finite values whose contribution is then multiplied by zero, instead of NaN).
pub(crate) const BLOCKED_LOGIT: f64 = -1e30;

/// Configuration of an [`EnergyAttention`] term.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttentionConfig {
    /// Number of heads H.
    pub heads: i64,
    /// Width of each head Y.
    pub head_dim: i64,
    /// Inverse temperature β of every head; default `1/sqrt(Y)` (ET Table 4).
    pub beta: Option<f64>,
    /// Whether β (one per head) is learned (graph ET) or a constant (image ET, the default).
    pub learn_beta: bool,
    /// Standard deviation of the normal initialisation of W_Q and W_K (reference: 0.002).
    pub init_std: f64,
    /// The graph reference code's H × H head-mixing matrix `Hw` on the logits (init
    /// N(0, 0.002²); not in the papers). Its gradient comes from autograd.
    pub head_mixing: bool,
    /// How β is parameterised (per head, or one shared divisor as the CDAT anomaly code).
    pub beta_mode: BetaMode,
    /// Clip the logits `β_h A` to `[−c, c]`, straight-through (the CDAT anomaly code: 5).
    pub logit_clip: Option<f64>,
}

/// How the inverse temperatures are parameterised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BetaMode {
    /// One β per head (ET; learned when `learn_beta`).
    #[default]
    PerHead,
    /// One divisor b shared by every head, β_h = 1/b, b from `1/beta` (the CDAT anomaly
    /// reference's `√D`); learned when `learn_beta`.
    SharedDivisor,
}

impl Default for AttentionConfig {
    fn default() -> Self {
        Self {
            heads: 4,
            head_dim: 16,
            beta: None,
            learn_beta: false,
            init_std: 0.002,
            head_mixing: false,
            beta_mode: BetaMode::PerHead,
            logit_clip: None,
        }
    }
}

impl AttentionConfig {
    /// β of every head.
    pub fn beta(&self) -> f64 {
        self.beta
            .unwrap_or(1.0 / (self.head_dim.max(1) as f64).sqrt())
    }

    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<()> {
        if self.heads < 1 {
            return Err(CoreError::config(
                format!("{field}.heads"),
                format!("must be ≥ 1, got {}", self.heads),
            ));
        }
        if self.head_dim < 1 {
            return Err(CoreError::config(
                format!("{field}.head_dim"),
                format!("must be ≥ 1, got {}", self.head_dim),
            ));
        }
        let beta = self.beta();
        if !(beta.is_finite() && beta > 0.0) {
            return Err(CoreError::config(
                format!("{field}.beta"),
                format!("must be > 0, got {beta}"),
            ));
        }
        if !(self.init_std.is_finite() && self.init_std >= 0.0) {
            return Err(CoreError::config(
                format!("{field}.init_std"),
                "must be ≥ 0",
            ));
        }
        if let Some(c) = self.logit_clip
            && !(c.is_finite() && c > 0.0)
        {
            return Err(CoreError::config(
                format!("{field}.logit_clip"),
                format!("must be > 0, got {c}"),
            ));
        }
        Ok(())
    }
}

/// Multi-head energy attention. Parameters: `w_q`, `w_k` `[H, Y, D]`, `beta` `[H]` (or
/// `beta_divisor` `[]` with a shared divisor).
#[derive(Debug)]
pub struct EnergyAttention {
    /// Query projection `[H, Y, D]`.
    pub w_q: Tensor,
    /// Key projection `[H, Y, D]`.
    pub w_k: Tensor,
    /// Inverse temperature per head `[H]`, or the shared divisor `[]` (trainable only if
    /// configured); [`EnergyAttention::beta`] gives β per head either way.
    beta_param: Tensor,
    /// Whether `beta_param` is the shared divisor.
    divisor: bool,
    /// The straight-through logit clip.
    clip: Option<f64>,
    /// `Some(ε)`: queries and keys are unit vectors per head, `u / sqrt(‖u‖² + ε)` (the vMF
    /// attention of CDAT eq. 10–11).
    unit: Option<f64>,
    /// The reference's head mixing `Hw` `[H, H]`: mixed logits `s̃_h' = Σ_h s_h Hw[h, h']`.
    pub head_mix: Option<Tensor>,
    /// Bytes of logits per batch chunk of the dense form on the CPU ([`CPU_CHUNK_BYTES`]).
    chunk_bytes: i64,
    /// Which kernels the sparse form uses ([`SparseKernels`]).
    sparse_kernels: SparseKernels,
    name: String,
}

/// How the sparse form computes its per-edge scores and the gradient's two sums over edges.
/// Results do not depend on it, only speed and memory do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SparseKernels {
    /// [`SparseKernels::Bags`] when one `[E, H, Y]` tensor of the edges' gathered rows would
    /// exceed [`GATHER_BYTES`], [`SparseKernels::Gather`] otherwise.
    #[default]
    Auto,
    /// Queries and keys gathered at the edges, every head at once, in chunks of edges: the
    /// fastest on the batches of small graphs of the TU sets (a DD training epoch of the CPU
    /// model on two cores: 6.8–7.5 s against 15 with bags, whose `embedding_bag` backward
    /// libtorch computes by sorting and adding short rows one by one), but under autograd every
    /// gathered `[E, H, Y]` chunk is kept for the backward pass (four per descent step).
    Gather,
    /// Per head, a CSR sampled matmul for the scores and a weighted `embedding_bag` per sum:
    /// nothing per edge wider than `[E, H]` is kept under autograd, and no `[E, H, Y]` rows
    /// stream through memory. On one large graph (tolokers, 1.04 M edges, one head of 64) a
    /// training epoch took 0.87–0.90 s against 1.3–2.0 with gathers, at 0.62 GB of peak memory
    /// against 3.9; one inference step on 10⁵ nodes and 2·10⁶ edges (two heads of 32) 347 ms
    /// against 443.
    Bags,
}

/// Under [`SparseKernels::Auto`], the size of one `[E, H, Y]` tensor of gathered rows above
/// which the sparse form uses [`SparseKernels::Bags`]: 64 MiB, between DD's batches (about 8
/// MiB) and one tolokers graph (266 MiB).
pub const GATHER_BYTES: i64 = 64 << 20;

/// vMF attention's unit directions and norms of the raw queries and keys, for the
/// normalisation's Jacobian `(I − ĥĥᵀ)/n` in the gradient. `dim` is the head-width axis:
/// `[T, H, Y]` rows in the sparse form, `[B, H, Y, N]` columns in the dense form.
struct Unit {
    q_hat: Tensor,
    k_hat: Tensor,
    nq: Tensor,
    nk: Tensor,
    dim: i64,
}

impl Unit {
    /// `(u / n, n)` with the smooth norm `n = sqrt(‖u‖² + eps)` along `dim`.
    fn normalise(u: &Tensor, dim: i64, eps: f64) -> (Tensor, Tensor) {
        let n = (u.square().sum_dim_intlist(dim, true, u.kind()) + eps).sqrt();
        (u / &n, n)
    }

    /// `(x − ĥ (ĥ·x)) / n` per head, for `x` shaped like `hat` (the Jacobian of `u / n(u)`
    /// applied to a gradient with respect to the direction).
    fn back(&self, x: &Tensor, hat: &Tensor, n: &Tensor) -> Tensor {
        let along = (x * hat).sum_dim_intlist(self.dim, true, x.kind());
        (x - hat * along) / n
    }

    /// Both gradients taken back to the raw projections.
    fn back_both(&self, tq: &Tensor, tk: &Tensor) -> (Tensor, Tensor) {
        (
            self.back(tq, &self.q_hat, &self.nq),
            self.back(tk, &self.k_hat, &self.nk),
        )
    }
}

/// On the CPU the dense form's `[b, H, N, N]` core goes through the batch in chunks whose
/// logits take at most this many bytes (about one core's L2), so that the logits, the softmax
/// and the two weighted sums stay in cache between the batched matmuls (the attention
/// gradient at B = 32, N = 128, D = 128, H = 12 on two cores: 34.7 ms with two samples per
/// chunk, 35.6 ms with one, 42.7 ms with the whole batch). Without autograd the projections
/// and the back-projection go by the same chunks too (a descent step's gradient on a
/// 2-core AVX-512 machine: 23.7–27.2 ms against 28.7–42.8 with whole-batch projections, the
/// higher figure when glibc maps their 12–25 MiB buffers afresh on each call).
/// Accelerators take the whole batch.
pub const CPU_CHUNK_BYTES: i64 = 2 << 20;

/// The dense pattern of one batch chunk: the structure's layout and scale split to it.
struct DenseParts {
    /// Only the diagonal is blocked (filled in place).
    diagonal_only: bool,
    /// `[b|1, H|1, N, N]` bool, true for pairs that may not interact.
    blocked: Option<Tensor>,
    /// `[b|1, H|1, N, N]` additive bias.
    bias: Option<Tensor>,
    /// `[b|1, 1, N]` (as the tokens' kind): whether a query has any key.
    has: Option<Tensor>,
    /// `[b|1, H|1, N, N]` factor Â on the scores.
    scale: Option<Tensor>,
}

impl EnergyAttention {
    /// Creates the parameters under `path` for tokens of width `dim`.
    pub fn new(path: &nn::Path, dim: i64, cfg: &AttentionConfig) -> Self {
        let shape = [cfg.heads, cfg.head_dim, dim];
        let init = nn::Init::Randn {
            mean: 0.0,
            stdev: cfg.init_std,
        };
        let divisor = cfg.beta_mode == BetaMode::SharedDivisor;
        let (name, b_shape, value) = if divisor {
            ("beta_divisor", &[][..], 1.0 / cfg.beta())
        } else {
            ("beta", &[cfg.heads][..], cfg.beta())
        };
        let beta_param = if cfg.learn_beta {
            path.var(name, b_shape, nn::Init::Const(value))
        } else {
            let b = path.ones_no_train(name, b_shape);
            tch::no_grad(|| {
                let _ = b.shallow_clone().fill_(value);
            });
            b
        };
        let w_q = path.var("w_q", &shape, init);
        let w_k = path.var("w_k", &shape, init);
        let head_mix = cfg.head_mixing.then(|| {
            path.var(
                "head_mix",
                &[cfg.heads, cfg.heads],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.002,
                },
            )
        });
        Self {
            w_q,
            w_k,
            beta_param,
            divisor,
            clip: cfg.logit_clip,
            unit: None,
            head_mix,
            chunk_bytes: CPU_CHUNK_BYTES,
            sparse_kernels: SparseKernels::default(),
            name: "attention".into(),
        }
    }

    /// β per head, `[H]`.
    pub fn beta(&self) -> Tensor {
        if self.divisor {
            self.beta_param.reciprocal().expand([self.heads()], false)
        } else {
            self.beta_param.shallow_clone()
        }
    }

    /// The logits clipped to `[−c, c]` in value, unclipped in the gradient.
    fn clipped(&self, logits: Tensor) -> Tensor {
        match self.clip {
            Some(c) => {
                let delta = (logits.clamp(-c, c) - &logits).detach();
                logits + delta
            }
            None => logits,
        }
    }

    /// The same parameters as vMF attention: per-head unit queries and keys with the smooth
    /// norm `sqrt(‖u‖² + eps)` (CDAT eq. 10–11).
    pub fn unit_vectors(mut self, eps: f64) -> Self {
        self.unit = Some(eps);
        self
    }

    /// Sets the CPU chunk budget of the dense form: each chunk of the batch holds at most
    /// `bytes` of logits (at least one sample); results do not depend on it, only speed and
    /// peak memory do. [`CPU_CHUNK_BYTES`] by default; `i64::MAX` takes the whole batch at once.
    pub fn with_chunk_bytes(mut self, bytes: i64) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// Sets the sparse form's kernels ([`SparseKernels::Auto`] by default).
    pub fn with_sparse_kernels(mut self, kernels: SparseKernels) -> Self {
        self.sparse_kernels = kernels;
        self
    }

    /// Whether the sparse form uses [`SparseKernels::Bags`] for queries `q` `[T, H, Y]` over
    /// `edges`.
    fn bags(&self, q: &Tensor, edges: &SparseEdges) -> bool {
        match self.sparse_kernels {
            SparseKernels::Bags => true,
            SparseKernels::Gather => false,
            SparseKernels::Auto => {
                let row = q.size()[1] * q.size()[2] * q.kind().elt_size_in_bytes() as i64;
                edges.len() * row > GATHER_BYTES
            }
        }
    }

    /// Number of heads.
    pub fn heads(&self) -> i64 {
        self.w_q.size()[0]
    }

    /// The negated back-projections `−W_Q` and `−W_K / β`, `[H·Y, D]` each: `∂E/∂g =
    /// T^Q (−W_Q) + T^K (−W_K / β)` for the per-head aggregates `T^Q = Σ ω K` and
    /// `T^K = Σ ωᵀ (βQ)` (β drops out of the first, the second carries βQ).
    fn back_weights(&self) -> (Tensor, Tensor) {
        let s = self.w_q.size();
        let (h, y, d) = (s[0], s[1], s[2]);
        let wq = -self.w_q.view([h * y, d]);
        let wk = (-&self.w_k / self.beta().view([h, 1, 1])).view([h * y, d]);
        (wq, wk)
    }

    /// W_Q with β folded in, so that the logits need no extra pass; in unit mode W_Q itself
    /// (β then scales the unit queries, see [`Self::directions`]).
    fn query_weights(&self) -> Tensor {
        match self.unit {
            Some(_) => self.w_q.shallow_clone(),
            None => &self.w_q * self.beta().view([-1, 1, 1]),
        }
    }

    /// In unit mode, raw projections `q`, `k` (heads on axis 1, normalised along `dim`)
    /// become `βq̂` and `k̂` with the [`Unit`] parts; otherwise they pass as they are.
    fn directions(&self, q: Tensor, k: Tensor, dim: i64) -> (Tensor, Tensor, Option<Unit>) {
        let Some(eps) = self.unit else {
            return (q, k, None);
        };
        let (q_hat, nq) = Unit::normalise(&q, dim, eps);
        let (k_hat, nk) = Unit::normalise(&k, dim, eps);
        // β per head (axis 1), broadcast over the axes after it.
        let mut shape = vec![-1i64];
        shape.resize(q.dim() - 1, 1);
        let q = &q_hat * self.beta().view(shape.as_slice());
        let k = k_hat.shallow_clone();
        let unit = Unit {
            q_hat,
            k_hat,
            nq,
            nk,
            dim,
        };
        (q, k, Some(unit))
    }

    /// β-scaled queries `βQ` and keys `K`, `[T, H, Y]` each, of token rows `g: [T, D]`, in one
    /// matmul (β is folded into W_Q, so the logits need no extra pass). In unit mode they are
    /// `βQ̂` and `K̂`, with the [`Unit`] parts the gradient needs.
    fn project_rows(&self, g: &Tensor) -> (Tensor, Tensor, Option<Unit>) {
        let s = self.w_q.size();
        let (h, y, d) = (s[0], s[1], s[2]);
        let wq = self.query_weights();
        let w = Tensor::cat(&[&wq, &self.w_k], 0).view([2 * h * y, d]);
        let parts = g.matmul(&w.tr()).view([-1, 2 * h, y]).split(h, 1);
        let (q, k) = (parts[0].shallow_clone(), parts[1].shallow_clone());
        self.directions(q, k, -1)
    }

    /// `∂E/∂g` `[T, D]` from the per-head aggregates `T^Q`, `T^K` `[T, H, Y]` (in unit mode
    /// gradients with respect to the directions, taken back to the raw projections first).
    fn back_project_rows(&self, tq: &Tensor, tk: &Tensor, unit: Option<&Unit>) -> Tensor {
        let (tq, tk) = match unit {
            Some(u) => u.back_both(tq, tk),
            None => (tq.shallow_clone(), tk.shallow_clone()),
        };
        let t = tq.size()[0];
        let (wq, wk) = self.back_weights();
        tq.reshape([t, -1])
            .matmul(&wq)
            .addmm(&tk.reshape([t, -1]), &wk)
    }

    // ---------------------------------------------------------------- dense
    //
    // Head-major: the projections come out as `[B, H, Y, N]`, so that every batched matmul
    // reads its operands in place (as transposes where needed) and the gradient goes back to
    // `[B, N, D]` without a layout copy.

    /// The projection weights of [`Self::project_heads`]: per head its rows of βW_Q (W_Q in
    /// unit mode), then of W_K, `[H, 2Y, D]`. They require grad exactly when this call records
    /// an autograd graph for them (grad mode on, trainable weights).
    fn head_weights(&self) -> Tensor {
        Tensor::cat(&[&self.query_weights(), &self.w_k], 1)
    }

    /// Whether a dense call on tokens `g` records an autograd graph, given
    /// [`Self::head_weights`]: then the projections stay whole-batch matmuls (their weight
    /// gradients are one matmul each) and only the `[b, H, N, N]` core goes by chunks;
    /// otherwise (a descent step without training, `basin energy`, evaluation) every step of
    /// the term goes by chunks ([`Self::dense_tiled`]).
    fn records_graph(w: &Tensor, g: &Tensor) -> bool {
        w.requires_grad() || g.requires_grad()
    }

    /// `(βQᵀ, Kᵀ)` as `[B, H, Y, N]`, from `W g_bᵀ` with `w` = [`Self::head_weights`] (β
    /// folded into W_Q), and the unit parts (normalised along Y) in unit mode.
    fn project_heads(&self, w: &Tensor, g: &Tensor) -> (Tensor, Tensor, Option<Unit>) {
        let s = self.w_q.size();
        let (h, y, d) = (s[0], s[1], s[2]);
        let (b, n) = (g.size()[0], g.size()[1]);
        let gt = g.transpose(1, 2);
        // Without autograd one fused matmul is faster; under autograd two, since each view of
        // a fused one would make the backward pass fill a zero gradient of both (slice backward).
        let (q, k) = if Self::records_graph(w, g) {
            let project = |w: &Tensor| w.view([h * y, d]).matmul(&gt).view([b, h, y, n]);
            (project(&self.query_weights()), project(&self.w_k))
        } else {
            let p = w.view([h * 2 * y, d]).matmul(&gt).view([b, h, 2 * y, n]);
            (p.narrow(2, 0, y), p.narrow(2, y, y))
        };
        self.directions(q, k, 2)
    }

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
    fn dense_chunks<T>(
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
    fn dense_tiled<T>(
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
    fn lse(logits: &Tensor, softmax: &Tensor) -> Tensor {
        let (max, arg) = logits.max_dim(-1, true);
        (max - softmax.gather(-1, &arg, false).log()).squeeze_dim(-1)
    }

    /// Masked logits `[b, H, N, N]` (query × key) of head-major `βQᵀ`, `Kᵀ` `[b, H, Y, N]`.
    fn dense_logits(&self, q: &Tensor, k: &Tensor, p: &DenseParts) -> Tensor {
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
    fn energy_from_lse(&self, lse: &Tensor, has: Option<&Tensor>) -> Tensor {
        let h = self.heads();
        let per_query = match has {
            Some(has) => lse * has,
            None => lse.shallow_clone(),
        };
        -(per_query / self.beta().view([1, h, 1])).sum_dim_intlist(
            &[1i64, 2][..],
            false,
            lse.kind(),
        )
    }

    /// The per-head aggregates of a chunk, head-major `[b, H, Y, N]`: `T^Q = (ω K)ᵀ` and
    /// `T^K = (ωᵀ βQ)ᵀ`, from the attention weights ω `[b, H, N, N]` (times the structure's
    /// scale Â, which multiplies the scores and so both gradient terms).
    fn weighted_sums(
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
    fn dense_grad(&self, sums: Vec<(Tensor, Tensor)>, unit: Option<&Unit>) -> Tensor {
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
    fn dense_omega(softmax: &Tensor, has: Option<&Tensor>) -> Tensor {
        match has {
            Some(has) => softmax * has.unsqueeze(-1),
            None => softmax.shallow_clone(),
        }
    }

    // --------------------------------------------------------------- sparse

    /// Per-edge logits `[E, H]`, per-token queries and keys `[T, H, Y]` (T = B·N), and the
    /// unit parts in unit mode; `scale` `[E, H|1]` multiplies the scores (Â per edge).
    fn sparse_logits(
        &self,
        g: &Tensor,
        edges: &SparseEdges,
        scale: Option<&Tensor>,
    ) -> (Tensor, Tensor, Tensor, Option<Unit>) {
        let d = g.size()[2];
        let h = self.heads();
        let (q, k, unit) = self.project_rows(&g.reshape([-1, d])); // [T, H, Y]
        let e = edges.len();
        if e == 0 {
            return (
                self.clipped(Tensor::zeros([0, h], (g.kind(), g.device()))),
                q,
                k,
                unit,
            );
        }
        let s = if self.bags(&q, edges) {
            sampled_dots(&q, &k, edges)
        } else {
            edge_dots(&q, &k, edges.query(), edges.key())
        };
        let s = match &self.head_mix {
            Some(mix) => s.matmul(mix),
            None => s,
        };
        let s = match scale {
            Some(scale) => s * scale, // ET eq. 25 per edge, as the dense form
            None => s,
        };
        (self.clipped(s), q, k, unit)
    }

    /// Row-wise log-sum-exp over each query's edges: `(lse [T, H], exp(s − max) [E, H],
    /// Σ exp(s − max) [T, H])`; queries without edges get lse 0 (and a sum of 1).
    fn sparse_lse(&self, s: &Tensor, edges: &SparseEdges) -> (Tensor, Tensor, Tensor) {
        let t = edges.tokens();
        let h = self.heads();
        let max = Tensor::segment_reduce(
            &s.detach(),
            "max",
            None::<&Tensor>,
            None::<&Tensor>,
            Some(edges.row_ptr()),
            0,
            true,
            f64::NEG_INFINITY,
        );
        let has = edges.degree().gt(0).unsqueeze(1); // [T, 1]
        let max = max.masked_fill(&has.logical_not(), 0.0);
        let ex = (s - max.index_select(0, edges.query())).exp();
        let z = Tensor::zeros([t, h], (s.kind(), s.device())).index_add(0, edges.query(), &ex);
        let z_safe = z.where_scalarother(&has, 1.0);
        let lse = z_safe.log() + max;
        (lse, ex, z_safe)
    }

    fn sparse_energy_from(&self, lse: &Tensor, b: i64) -> Tensor {
        let h = self.heads();
        let per_token = (lse / self.beta().view([1, h])).sum_dim_intlist(-1, false, lse.kind());
        -per_token
            .view([b, -1])
            .sum_dim_intlist(-1, false, lse.kind())
    }

    fn sparse_energy_and_grad(
        &self,
        g: &Tensor,
        edges: &SparseEdges,
        scale: Option<&Tensor>,
    ) -> (Tensor, Tensor) {
        let size = g.size();
        let (b, d) = (size[0], size[2]);
        let (s, q, k, unit) = self.sparse_logits(g, edges, scale);
        let (lse, ex, z) = self.sparse_lse(&s, edges);
        drop(s); // [E, H]: not needed past the normaliser
        let energy = self.sparse_energy_from(&lse, b);
        let omega = ex / z.index_select(0, edges.query()); // [E, H]
        // The scale multiplies the scores, so it multiplies both gradient terms (as the dense
        // form's weighted sums).
        let omega = match scale {
            Some(scale) => omega * scale,
            None => omega,
        };
        // Query side: T^Q_q = Σ_{e ∈ row q} ω_e K_key(e); key side: T^K_k = Σ_{e: key(e) = k} ω_e Q_query(e).
        let (tq, tk) = if self.bags(&q, edges) {
            let (by_key, col_ptr) = edges.key_major();
            (
                head_bags(&omega, edges.key(), edges.row_ptr(), None, &k),
                head_bags(&omega, edges.query(), col_ptr, Some(by_key), &q),
            )
        } else {
            (
                head_spmm(&omega, edges.query(), edges.key(), &k),
                head_spmm(&omega, edges.key(), edges.query(), &q),
            )
        };
        let grad = self
            .back_project_rows(&tq, &tk, unit.as_ref())
            .view([b, -1, d]);
        (energy, grad)
    }
}

/// The chunks of a batch joined again (one chunk is the batch itself: no copy).
fn cat_batch(mut parts: Vec<Tensor>) -> Tensor {
    if parts.len() == 1 {
        parts.remove(0)
    } else {
        Tensor::cat(&parts, 0)
    }
}

/// Per-edge, per-head dot products `s[e, h] = q[query(e), h] · k[key(e), h]` (an SDDMM) for
/// `q, k: [T, H, Y]` → `[E, H]`: both gathered at the edges, multiplied and summed over the head
/// width, in chunks of [`SPMM_CHUNK_EDGES`] ([`SparseKernels::Gather`]; [`sampled_dots`] for
/// large graphs).
fn edge_dots(q: &Tensor, k: &Tensor, query: &Tensor, key: &Tensor) -> Tensor {
    let e = query.size()[0];
    let out = Tensor::zeros([e, q.size()[1]], (q.kind(), q.device()));
    let mut start = 0;
    while start < e {
        let len = SPMM_CHUNK_EDGES.min(e - start);
        let (qi, ki) = (query.narrow(0, start, len), key.narrow(0, start, len));
        let dots =
            (q.index_select(0, &qi) * k.index_select(0, &ki)).sum_dim_intlist(-1, false, q.kind());
        // In place into a fresh tensor's rows: autograd records it, nothing is concatenated.
        out.narrow(0, start, len).copy_(&dots);
        start += len;
    }
    out
}

/// [`edge_dots`] by one CSR sampled matmul (SDDMM) per head over the query-major pattern, for
/// [`SparseKernels::Bags`]: libtorch differentiates it with respect to Q and K by sparse ×
/// dense products, so training keeps no `[E, H, Y]` activations.
fn sampled_dots(q: &Tensor, k: &Tensor, edges: &SparseEdges) -> Tensor {
    let t = edges.tokens();
    let zeros = Tensor::zeros([edges.len()], (q.kind(), q.device()));
    let pattern = Tensor::sparse_csr_tensor_crow_col_value_size(
        edges.row_ptr(),
        edges.key(),
        &zeros,
        [t, t],
        (q.kind(), q.device()),
    );
    let heads: Vec<Tensor> = (0..q.size()[1])
        .map(|head| {
            pattern
                .sparse_sampled_addmm(
                    &q.select(1, head).contiguous(),
                    &k.select(1, head).tr().contiguous(),
                )
                .values()
        })
        .collect();
    Tensor::stack(&heads, 1)
}

/// [`head_spmm`] as one weighted `embedding_bag` per head (a sum over each row's bag of
/// columns), for [`SparseKernels::Bags`]: `cols` are the columns in the order whose CSR
/// offsets are `ptr`, `perm` the permutation from the query-major edge order to it (`None`:
/// the same order). libtorch differentiates it with respect to the weights and `x` without
/// keeping per-edge messages.
fn head_bags(w: &Tensor, cols: &Tensor, ptr: &Tensor, perm: Option<&Tensor>, x: &Tensor) -> Tensor {
    let sorted = |v: &Tensor| match perm {
        Some(p) => v.index_select(0, p),
        None => v.shallow_clone(),
    };
    let cols = sorted(cols);
    let heads: Vec<Tensor> = (0..w.size()[1])
        .map(|head| {
            let weights = sorted(&w.select(1, head)).contiguous();
            let (out, _, _, _) = Tensor::embedding_bag(
                &x.select(1, head).contiguous(),
                &cols,
                ptr,
                false,
                0, // sum
                false,
                Some(&weights),
                true,
            );
            out
        })
        .collect();
    Tensor::stack(&heads, 1)
}

/// Edges per chunk of [`edge_dots`] and [`head_spmm`]: their `[chunk, H, Y]` gathers (8 MiB at
/// H·Y = 32 in float32) stay near the caches instead of streaming through memory. Measured on one
/// CPU thread, 10⁴–10⁶ nodes × 16 edges: 2–4× faster than chunks of 2²⁰ edges, 2²⁰ being no
/// faster than 2¹⁸.
const SPMM_CHUNK_EDGES: i64 = 1 << 16;

/// Per-head sparse × dense product: `out[r, h] = Σ_{e: row(e) = r} w[e, h] · x[col(e), h]` for
/// `w: [E, H]`, `x: [T, H, Y]` → `[T, H, Y]`, by gathering `x` at the columns, weighting and
/// adding into the rows, every head at once.
///
/// Its backward is the same two index operations the other way round. The messages kept for
/// training are `[E, H, Y]` ([`SparseKernels::Gather`]; [`head_bags`] keeps none, for large
/// graphs).
fn head_spmm(w: &Tensor, row: &Tensor, col: &Tensor, x: &Tensor) -> Tensor {
    let e = w.size()[0];
    let out = x.zeros_like();
    let mut start = 0;
    while start < e {
        let len = SPMM_CHUNK_EDGES.min(e - start);
        let (w, row, col) = (
            w.narrow(0, start, len),
            row.narrow(0, start, len),
            col.narrow(0, start, len),
        );
        let messages = x.index_select(0, &col) * w.unsqueeze(-1);
        // In place on a fresh tensor: autograd records it (no chunk copies `out`).
        let _ = out.shallow_clone().index_add_(0, &row, &messages);
        start += len;
    }
    out
}

impl Energy for EnergyAttention {
    fn name(&self) -> &str {
        &self.name
    }

    fn energy(&self, g: &Tensor, s: &Structure) -> Tensor {
        match s.sparse_edges() {
            Some(edges) => {
                let (sl, _, _, _) = self.sparse_logits(g, edges, s.edge_scale());
                let (lse, _, _) = self.sparse_lse(&sl, edges);
                self.sparse_energy_from(&lse, g.size()[0])
            }
            None => {
                let (q, k, _) = self.project_heads(&self.head_weights(), g);
                let energies = self.dense_chunks(g, &[&q, &k], s, |c, p| {
                    let logits = self.dense_logits(&c[0], &c[1], p);
                    self.energy_from_lse(&logits.logsumexp(-1, false), p.has.as_ref())
                });
                cat_batch(energies)
            }
        }
    }

    fn grad(&self, g: &Tensor, s: &Structure) -> Tensor {
        if self.head_mix.is_some() {
            return crate::energy::autograd_grad(self, g, s);
        }
        if let Some(edges) = s.sparse_edges() {
            return self.sparse_energy_and_grad(g, edges, s.edge_scale()).1;
        }
        let w = self.head_weights();
        if !Self::records_graph(&w, g) {
            return self.dense_tiled(&w, g, s, |_, _, _| ()).1;
        }
        let (q, k, unit) = self.project_heads(&w, g);
        let sums = self.dense_chunks(g, &[&q, &k], s, |c, p| {
            let logits = self.dense_logits(&c[0], &c[1], p);
            let softmax = logits.softmax(-1, logits.kind());
            Self::weighted_sums(
                &Self::dense_omega(&softmax, p.has.as_ref()),
                (&c[0], &c[1]),
                p,
            )
        });
        self.dense_grad(sums, unit.as_ref())
    }

    fn energy_and_grad(&self, g: &Tensor, s: &Structure) -> (Tensor, Tensor) {
        if self.head_mix.is_some() {
            return crate::energy::autograd_energy_and_grad(self, g, s);
        }
        if let Some(edges) = s.sparse_edges() {
            return self.sparse_energy_and_grad(g, edges, s.edge_scale());
        }
        let w = self.head_weights();
        if !Self::records_graph(&w, g) {
            let (energies, grad) = self.dense_tiled(&w, g, s, |logits, softmax, p| {
                self.energy_from_lse(&Self::lse(logits, softmax), p.has.as_ref())
            });
            return (cat_batch(energies), grad);
        }
        let (q, k, unit) = self.project_heads(&w, g);
        let (energies, sums): (Vec<Tensor>, Vec<(Tensor, Tensor)>) = self
            .dense_chunks(g, &[&q, &k], s, |c, p| {
                let logits = self.dense_logits(&c[0], &c[1], p);
                let softmax = logits.softmax(-1, logits.kind());
                let omega = Self::dense_omega(&softmax, p.has.as_ref());
                (
                    self.energy_from_lse(&Self::lse(&logits, &softmax), p.has.as_ref()),
                    Self::weighted_sums(&omega, (&c[0], &c[1]), p),
                )
            })
            .into_iter()
            .unzip();
        (cat_batch(energies), self.dense_grad(sums, unit.as_ref()))
    }
}

impl EnergyAttention {
    /// The same term under another name (traces, plots).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl TermParams for AttentionConfig {
    const KIND: &'static str = "attention";
    const ABOUT: &'static str = "multi-head energy attention (ET eq. 3–4), dense or sparse";

    fn validate(&self, field: &str) -> Result<()> {
        AttentionConfig::validate(self, field)
    }

    fn build(&self, ctx: &BuildContext, name: &str) -> Result<Box<dyn Energy>> {
        Ok(Box::new(
            EnergyAttention::new(ctx.path, ctx.dim, self).with_name(name),
        ))
    }
}
crate::register_term!(AttentionConfig);

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
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(CoreError::config(
                format!("{field}.eps"),
                format!("must be > 0, got {}", self.eps),
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: &BuildContext, name: &str) -> Result<Box<dyn Energy>> {
        Ok(Box::new(
            EnergyAttention::new(ctx.path, ctx.dim, &self.attention())
                .unit_vectors(self.eps)
                .with_name(name),
        ))
    }
}
crate::register_term!(VmfAttentionConfig);
