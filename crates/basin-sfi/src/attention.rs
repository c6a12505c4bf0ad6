//! The global-attention branch of an SFi-GPS layer: multi-head sparse-flow attention enhanced by
//! the adjacency (SFi-Former §4.2, eq. 11),
//!
//! `a = (1+γ)⁻¹ · concat_h[(Ã + γ·Z^h) V^h] W_O + b_O`,
//!
//! with `Z^h` the sparse flow of [`crate::flow`] between resistances `R = softmax(−QKᵀ/√d_k)`
//! and frictions `F = softmax(Q̃K̃ᵀ/√d_k)` (a second attention), λ = λ*/N* (N* the
//! batch's largest graph, as the paper's Table 3 states), and Ã = D̂^{-1/2}(A+I)D̂^{-1/2}. Rows are
//! queries (the reviewers' reading of the printed orientation). DFi-Former is the same
//! layer with the `dense` solver (softmax, no friction branch used). The residual, dropout and
//! BatchNorm of the GPS layer wrap this branch outside.

use crate::flow::{FlowConfig, FlowSolver, masked_softmax, sparse_flow, sparse_flow_traced};
use basin_core::init::{self, DenseInit};
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

/// How the adjacency enters (the ablations of Table 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Adjacency {
    /// Eq. 11: `(Ã + γ Z) / (1+γ)` (default).
    Enhanced,
    /// "SP": the flow alone, no Ã and no γ.
    None,
    /// "Ã": the adjacency alone; no queries, keys or frictions.
    Only,
}

/// How λ is scaled from λ* (Table 3's caption: λ = λ*/N*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LambdaNorm {
    /// λ = λ*/N*, N* the batch's largest graph (the paper's Table 3; default). A graph's
    /// attention then depends on the other graphs of its batch.
    BatchMax,
    /// λ = λ*/n_b per graph: the same graph gives the same attention in any batch.
    PerGraph,
    /// λ = λ*.
    Absolute,
}

/// Settings of [`SfiAttention`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SfiAttentionConfig {
    /// Token width d.
    pub dim: i64,
    /// Heads H.
    pub heads: i64,
    /// Head width d_k (the paper's code: d, as its parameter counts imply).
    pub head_dim: i64,
    /// The flow solver (`dense` for DFi-Former).
    pub flow: FlowConfig,
    /// λ* of λ = λ*/N* (every preset of the paper: 1.0).
    pub lambda_star: f64,
    /// How λ follows from λ*.
    pub lambda_norm: LambdaNorm,
    /// How Ã enters.
    pub adjacency: Adjacency,
    /// Initial γ (one scalar per layer, unconstrained; the paper gives no value: 1.0).
    pub gamma_init: f64,
    /// Dropout on the flows `Z` (not on Ã) in training (the GPS presets: 0.5).
    pub attn_dropout: f64,
    /// Start the query, key, value and output maps as PyTorch's `nn.MultiheadAttention` does
    /// (`basin_core::init::multihead_attention`: the joint input projection Xavier-uniform,
    /// zero biases), as GraphGPS's Transformer branch starts; otherwise as `nn.Linear` each.
    /// Not with `adjacency = only`, which has no queries or keys.
    pub multihead_init: bool,
}

impl Default for SfiAttentionConfig {
    fn default() -> Self {
        Self {
            dim: 32,
            heads: 4,
            head_dim: 32,
            flow: FlowConfig::default(),
            lambda_star: 1.0,
            lambda_norm: LambdaNorm::BatchMax,
            adjacency: Adjacency::Enhanced,
            gamma_init: 1.0,
            attn_dropout: 0.0,
            multihead_init: false,
        }
    }
}

impl SfiAttentionConfig {
    /// GraphGPS's Transformer branch (`nn.MultiheadAttention`): softmax attention with head
    /// width d/H, no adjacency, started as PyTorch starts it; 4d² + 4d parameters.
    pub fn transformer(dim: i64, heads: i64, attn_dropout: f64) -> Self {
        Self {
            dim,
            heads,
            head_dim: dim / heads.max(1),
            flow: FlowConfig {
                solver: FlowSolver::Dense,
                ..FlowConfig::default()
            },
            adjacency: Adjacency::None,
            attn_dropout,
            multihead_init: true,
            ..Self::default()
        }
    }
}

/// Multi-head sparse-flow attention enhanced by adjacency (eq. 11).
#[derive(Debug)]
pub struct SfiAttention {
    cfg: SfiAttentionConfig,
    /// Queries and keys (absent for `adjacency = only`).
    qk: Option<(nn::Linear, nn::Linear)>,
    /// The friction branch (only for a flow solver other than `dense`).
    friction: Option<(nn::Linear, nn::Linear)>,
    v: nn::Linear,
    o: nn::Linear,
    /// γ (only for `adjacency = enhanced`).
    gamma: Option<Tensor>,
}

/// `D̂^{-1/2}(A + I)D̂^{-1/2}` of a dense padded adjacency `[B, N, N]` (0/1, rows = receivers),
/// self-loops on real nodes only; padded rows and columns stay zero.
pub fn gcn_normalize(adj: &Tensor, mask: &Tensor) -> Tensor {
    let kind = adj.kind();
    let m = mask.to_kind(kind);
    let n = adj.size()[1];
    let eye = Tensor::eye(n, (kind, adj.device())).unsqueeze(0) * m.unsqueeze(-1);
    let block = m.unsqueeze(-1) * m.unsqueeze(1);
    let a = (adj * &block) + eye;
    let deg = a.sum_dim_intlist(&[-1i64][..], false, kind);
    let inv = deg.clamp_min(1e-12).pow_tensor_scalar(-0.5) * &m;
    inv.unsqueeze(-1) * a * inv.unsqueeze(1)
}

impl SfiAttention {
    /// The layer's weights under `path`.
    pub fn new(path: &nn::Path, cfg: &SfiAttentionConfig) -> Self {
        let inner = cfg.heads * cfg.head_dim;
        let lin = |name: &str, i: i64, o: i64| DenseInit::Torch.linear(path / name, i, o, true);
        let uses_flow = cfg.adjacency != Adjacency::Only;
        let uses_friction = uses_flow && cfg.flow.solver != FlowSolver::Dense;
        let friction = || {
            uses_friction.then(|| {
                (
                    lin("friction_q", cfg.dim, inner),
                    lin("friction_k", cfg.dim, inner),
                )
            })
        };
        // Without `multihead_init`, built in the order from before it existed (q, k, frictions,
        // v, o): those starts draw what they drew.
        let (qk, friction, v, o) = if cfg.multihead_init && uses_flow {
            let (q, k, v, o) = init::multihead_attention(path, cfg.dim, inner);
            (Some((q, k)), friction(), v, o)
        } else {
            let qk = uses_flow.then(|| (lin("q", cfg.dim, inner), lin("k", cfg.dim, inner)));
            let friction = friction();
            (
                qk,
                friction,
                lin("v", cfg.dim, inner),
                lin("o", inner, cfg.dim),
            )
        };
        Self {
            cfg: cfg.clone(),
            qk,
            friction,
            v,
            o,
            gamma: (cfg.adjacency == Adjacency::Enhanced)
                .then(|| path.var("gamma", &[], nn::Init::Const(cfg.gamma_init))),
        }
    }

    /// Whether the branch computes flows at all (not for `adjacency = only`).
    pub fn has_flows(&self) -> bool {
        self.qk.is_some()
    }

    /// `[B, N, H·d_k]` → `[B, H, N, d_k]`.
    fn heads(&self, t: &Tensor) -> Tensor {
        let (b, n) = (t.size()[0], t.size()[1]);
        t.view([b, n, self.cfg.heads, self.cfg.head_dim])
            .permute([0, 2, 1, 3])
    }

    /// Scores `QKᵀ/√d_k` `[B, H, N, N]` of one pair of projections.
    fn scores(&self, x: &Tensor, q: &nn::Linear, k: &nn::Linear) -> Tensor {
        let qh = self.heads(&x.apply(q));
        let kh = self.heads(&x.apply(k));
        qh.matmul(&kh.transpose(-2, -1)) / (self.cfg.head_dim as f64).sqrt()
    }

    /// The flow problem of tokens `x` `[B, N, d]` with real-token `mask` `[B, N]`: scores `S`,
    /// frictions `F` `[B, H, N, N]` and λ `[B]`; `None` for `adjacency = only`. `largest` is
    /// N* of λ = λ*/N* when `x` is part of a larger batch (a size bucket); `None`: the largest
    /// graph of `mask`.
    fn problem(
        &self,
        x: &Tensor,
        mask: &Tensor,
        largest: Option<i64>,
    ) -> Option<(Tensor, Tensor, Tensor)> {
        let (q, k) = self.qk.as_ref()?;
        let s = self.scores(x, q, k);
        let f = match &self.friction {
            None => s.zeros_like(),
            // Over the real keys only: padding must not dilute the frictions.
            Some((fq, fk)) => masked_softmax(&self.scores(x, fq, fk), mask),
        };
        let sizes = mask
            .to_kind(s.kind())
            .sum_dim_intlist(&[1i64][..], false, s.kind())
            .clamp_min(1.0);
        let lambda = match self.cfg.lambda_norm {
            LambdaNorm::BatchMax => match largest {
                Some(n) => sizes.full_like(self.cfg.lambda_star / n.max(1) as f64),
                None => sizes.max().expand_as(&sizes).reciprocal() * self.cfg.lambda_star,
            },
            LambdaNorm::PerGraph => sizes.reciprocal() * self.cfg.lambda_star,
            LambdaNorm::Absolute => sizes.full_like(self.cfg.lambda_star),
        };
        Some((s, f, lambda))
    }

    /// The flows `Z` `[B, H, N, N]` of tokens `x` `[B, N, d]` with real-token `mask` `[B, N]`
    /// (with `adjacency = only`, which has no queries: zero).
    pub fn flows(&self, x: &Tensor, mask: &Tensor) -> Tensor {
        self.flows_part(x, mask, None)
    }

    /// [`Self::flows`] with the N* of λ given (see [`Self::forward_part`]).
    fn flows_part(&self, x: &Tensor, mask: &Tensor, largest: Option<i64>) -> Tensor {
        match self.problem(x, mask, largest) {
            Some((s, f, lambda)) => sparse_flow(&s, &f, mask, &lambda, &self.cfg.flow),
            None => {
                let (b, n) = (x.size()[0], x.size()[1]);
                Tensor::zeros([b, self.cfg.heads, n, n], (x.kind(), x.device()))
            }
        }
    }

    /// The solver's trace on tokens `x`: the energy of eq. 9 at each iterate and at the exact
    /// minimiser ([`crate::flow::sparse_flow_traced`]); `None` without flows.
    pub fn flow_trace(&self, x: &Tensor, mask: &Tensor) -> Option<(Vec<f64>, f64)> {
        let (s, f, lambda) = self.problem(x, mask, None)?;
        let (_, trace, optimum) = sparse_flow_traced(&s, &f, mask, &lambda, &self.cfg.flow);
        Some((trace, optimum))
    }

    /// The branch output `a` `[B, N, d]` (zero on padded tokens) from tokens `x`, `mask` and the
    /// normalised adjacency `adj` `[B, N, N]` (see [`gcn_normalize`]), in evaluation mode.
    pub fn forward(&self, x: &Tensor, mask: &Tensor, adj: &Tensor) -> Tensor {
        self.forward_t(x, mask, adj, false)
    }

    /// [`Self::forward`], with the attention dropout on the flows when `train`.
    pub fn forward_t(&self, x: &Tensor, mask: &Tensor, adj: &Tensor, train: bool) -> Tensor {
        self.forward_part(x, mask, adj, None, train)
    }

    /// [`Self::forward_t`] on a part of a batch whose largest graph has `largest` nodes (the N*
    /// of λ = λ*/N*), so that a batch run bucket by bucket gives what it gives whole.
    pub fn forward_part(
        &self,
        x: &Tensor,
        mask: &Tensor,
        adj: &Tensor,
        largest: Option<i64>,
        train: bool,
    ) -> Tensor {
        let v = self.heads(&x.apply_t(&self.v, false)); // [B, H, N, d_k]
        let adj = adj.unsqueeze(1);
        let flows = || {
            self.flows_part(x, mask, largest)
                .dropout(self.cfg.attn_dropout, train)
        };
        let mixed = match (&self.gamma, self.cfg.adjacency) {
            (_, Adjacency::Only) => adj.matmul(&v),
            (Some(gamma), Adjacency::Enhanced) => {
                (adj + gamma * flows()).matmul(&v) / (gamma + 1.0)
            }
            _ => flows().matmul(&v),
        };
        let (b, n) = (x.size()[0], x.size()[1]);
        let y = mixed
            .permute([0, 2, 1, 3])
            .reshape([b, n, self.cfg.heads * self.cfg.head_dim]);
        let out = y.matmul(&self.o.ws.tr());
        let out = match &self.o.bs {
            Some(bias) => out + bias,
            None => out,
        };
        out * mask.to_kind(x.kind()).unsqueeze(-1)
    }
}
