//! Multi-head energy attention (ET eq. 3–4), dense and sparse.
//!
//! `E = −Σ_h (1/β_h) Σ_C log Σ_{B ∈ keys(C)} exp(β_h A_hBC)`, with `A_hBC = K_hB · Q_hC`,
//! `Q = W_Q g`, `K = W_K g` and `W_Q, W_K: [H, Y, D]`. There is no value matrix. The gradient
//! (ET Section 2, the explicit update of eq. 17 in Appendix C) has two terms, one through the
//! queries and one through the keys, and β drops out of it:
//!
//! `∂E/∂g_C = −Σ_h [ Σ_B ω_hCB W_Qᵀ K_hB + Σ_{C'} ω_hC'C W_Kᵀ Q_hC' ]`, `ω = softmax_B(β A)`.
//!
//! Two switches reproduce the CDAT anomaly reference (`graph_transformer_layer.py`): one shared
//! learned *divisor* b for every head (β_h = 1/b, from b = √Y; `beta_mode = "shared-divisor"`),
//! and logits clipped to `[−c, c]` (`logit_clip`) with the clip ignored by the gradient, as the
//! reference's hand-written update ignores it: the clip is straight-through, so the closed-form
//! gradient (ω from the clipped logits) is autograd's of that energy.
//!
//! The dense form materialises `[B, H, N, N]` logits; the sparse form works on an edge list:
//! its logits are `[E, H]` scalars and both gradient terms are sparse × dense products, so no
//! per-edge D-wide (or Y-wide) message tensor is ever held for the whole graph.

//!
//! | file | what |
//! |---|---|
//! | `dense.rs` | the dense form: `[B, H, N, N]` logits in batch chunks, the masks and scales of a [`Structure`] |
//! | `fused.rs` | the dense form on libtorch's fused attention kernels, without autograd ([`AttentionKernel`]) |
//! | `sparse.rs` | the edge-list form: per-edge logits, segment log-sum-exp, the gradient's sums as gathers or bags ([`SparseKernels`]) |
//! | `vmf.rs` | CDAT's von Mises–Fisher attention: unit queries and keys and the normalisation's Jacobian ([`VmfAttentionConfig`]) |

mod dense;
mod fused;
mod sparse;
mod vmf;

pub use dense::CPU_CHUNK_BYTES;
pub use fused::AttentionKernel;
pub use sparse::{GATHER_BYTES, SparseKernels};
use vmf::Unit;
pub use vmf::VmfAttentionConfig;

use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

use crate::energy::Energy;
use crate::error::{CoreError, Result, positive};
use crate::registry::{BuildContext, TermParams};
use crate::structure::{SparseEdges, Structure};

/// Logit given to pairs that may not interact (finite, so that rows with no key at all give
/// finite values whose contribution is then multiplied by zero, instead of NaN).
pub const BLOCKED_LOGIT: f64 = -1e30;

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
    /// The dense form's kernels when no autograd graph is recorded (`"auto"`: by device).
    pub kernel: AttentionKernel,
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
            kernel: AttentionKernel::Auto,
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
        positive(field, "beta", self.beta())?;
        if !(self.init_std.is_finite() && self.init_std >= 0.0) {
            return Err(CoreError::config(
                format!("{field}.init_std"),
                "must be ≥ 0",
            ));
        }
        match self.logit_clip {
            Some(c) => positive(field, "logit_clip", c),
            None => Ok(()),
        }
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
    /// Which kernels the dense form uses without autograd ([`AttentionKernel`]).
    kernel: AttentionKernel,
    name: String,
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
            kernel: cfg.kernel,
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

    /// Sets the dense form's kernels for calls without autograd ([`AttentionKernel::Auto`] by
    /// default); energies and gradients agree to float rounding either way.
    pub fn with_kernel(mut self, kernel: AttentionKernel) -> Self {
        self.kernel = kernel;
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
}

impl EnergyAttention {
    /// The queries' log-sum-exps (unfused forms: over the edge list, or dense in chunks of
    /// the batch) reduced by `sparse(lse [B·N, H], B)` or `dense(lse [b, H, N], has)`, the
    /// dense chunks concatenated over the batch.
    fn reduce_query_lse(
        &self,
        g: &Tensor,
        s: &Structure,
        sparse: impl Fn(&Tensor, i64) -> Tensor,
        dense: impl Fn(&Tensor, Option<&Tensor>) -> Tensor,
    ) -> Tensor {
        match s.sparse_edges() {
            Some(edges) => {
                let (sl, _, _, _) = self.sparse_logits(g, edges, s.edge_scale());
                let (lse, _, _) = self.sparse_lse(&sl, edges);
                sparse(&lse, g.size()[0])
            }
            None => {
                let w = self.head_weights();
                let (q, k, _) = self.project_heads(&w, g);
                cat_batch(self.dense_chunks(g, &[&q, &k], s, |c, p| {
                    let logits = self.dense_logits(&c[0], &c[1], p);
                    dense(&logits.logsumexp(-1, false), p.has.as_ref())
                }))
            }
        }
    }
}

impl Energy for EnergyAttention {
    fn name(&self) -> &str {
        &self.name
    }

    fn energy(&self, g: &Tensor, s: &Structure) -> Tensor {
        if s.sparse_edges().is_none() {
            let w = self.head_weights();
            if !Self::records_graph(&w, g) && self.fused_applies(g, s) {
                return self.dense_fused(&w, g, s).0;
            }
        }
        self.reduce_query_lse(
            g,
            s,
            |lse, b| self.sparse_energy_from(lse, b),
            |lse, has| self.energy_from_lse(lse, has),
        )
    }

    fn token_energy(&self, g: &Tensor, s: &Structure) -> Option<Tensor> {
        // Every form, mixed heads included, is a sum over queries of their log-sum-exps.
        Some(self.reduce_query_lse(
            g,
            s,
            |lse, b| self.sparse_token_energy(lse, b),
            |lse, has| self.query_energy_from_lse(lse, has),
        ))
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
            if self.fused_applies(g, s) {
                return self.dense_fused(&w, g, s).1;
            }
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
            if self.fused_applies(g, s) {
                return self.dense_fused(&w, g, s);
            }
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
    fn heads(&self) -> Option<i64> {
        Some(self.heads)
    }
}
crate::register_term!(AttentionConfig);

/// The chunks of a batch joined again (one chunk is the batch itself: no copy).
fn cat_batch(mut parts: Vec<Tensor>) -> Tensor {
    if parts.len() == 1 {
        parts.remove(0)
    } else {
        Tensor::cat(&parts, 0)
    }
}
