//! The Hopfield memory energy of ET (eq. 5): `E = −Σ_B Σ_μ G(ξ_μ · g_B)` with `G' = r`.
//!
//! The activation decides which associative memory this is:
//! - `relu`: `G(z) = ½ relu(z)²` — the classical continuous Hopfield network used by ET
//!   (reference code: `−½ Σ relu²`); it is `power` with n = 2.
//! - `rectified`: `G(z) = relu(z)` — CDAT's linear rectified memory (eq. 15), `r = 𝟙[z > 0]`.
//! - `power`: `G(z) = relu(z)ⁿ / n` — the rectified polynomial dense associative memory of
//!   Krotov & Hopfield.
//! - `exp`: `G(z) = exp(β z) / β` — the exponential interaction of Demircigil et al.
//! - `softmax`: `E = −(1/β) Σ_B log Σ_μ exp(β ξ_μ · g_B)` — the log-sum-exp energy of the
//!   modern continuous Hopfield network (not separable over μ, but of the same family).
//!
//! Every form has the closed-form gradient `∂E/∂g_B = −Σ_μ r_μ(g_B) ξ_μ`: a feed-forward
//! layer whose up- and down-projections are tied (ξ and ξᵀ).

use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

use crate::energy::Energy;
use crate::error::{CoreError, Result, positive};
use crate::registry::{BuildContext, TermParams};
use crate::structure::Structure;

/// Most activation values `[rows, K]` a chunk of tokens holds at once (64 MiB in float32).
const ACTIVATION_CHUNK: i64 = 1 << 24;

/// The activation `r = G'` of the memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// `G(z) = ½ relu(z)²` (ET's default).
    #[default]
    Relu,
    /// `G(z) = relu(z)`, `r = 𝟙[z > 0]` (CDAT eq. 15).
    Rectified,
    /// `G(z) = relu(z)ⁿ / n`; needs `power`.
    Power,
    /// `G(z) = exp(β z) / β`; needs `beta`.
    Exp,
    /// `−(1/β) lse(β ξ g)` per token; needs `beta`.
    Softmax,
}

/// Configuration of a [`HopfieldEnergy`] term.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HopfieldMemoryConfig {
    /// Number of memories K (rows of ξ).
    pub memories: i64,
    /// The activation.
    pub activation: Activation,
    /// Inverse temperature, for `softmax` and `exp`.
    pub beta: Option<f64>,
    /// Whether β is learned (the reference's `CHNSoftmax` learns it).
    pub learn_beta: bool,
    /// Exponent n > 1, for `power`.
    pub power: Option<f64>,
    /// Standard deviation of the normal initialisation of ξ (reference: 0.02).
    pub init_std: f64,
}

impl Default for HopfieldMemoryConfig {
    fn default() -> Self {
        Self {
            memories: 64,
            activation: Activation::Relu,
            beta: None,
            learn_beta: false,
            power: None,
            init_std: 0.02,
        }
    }
}

impl HopfieldMemoryConfig {
    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<()> {
        if self.memories < 1 {
            return Err(CoreError::config(
                format!("{field}.memories"),
                format!("must be ≥ 1, got {}", self.memories),
            ));
        }
        let needs_beta = matches!(self.activation, Activation::Exp | Activation::Softmax);
        match (needs_beta, self.beta) {
            (true, None) => {
                return Err(CoreError::config(
                    format!("{field}.beta"),
                    format!("required for activation = {:?}", self.activation).to_lowercase(),
                ));
            }
            (true, Some(b)) => positive(field, "beta", b)?,
            (false, Some(_)) => {
                return Err(CoreError::config(
                    format!("{field}.beta"),
                    "only used by activation = softmax or exp",
                ));
            }
            _ => {}
        }
        match (self.activation, self.power) {
            (Activation::Power, None) => {
                return Err(CoreError::config(
                    format!("{field}.power"),
                    "required for activation = power",
                ));
            }
            (Activation::Power, Some(n)) if !(n.is_finite() && n > 1.0) => {
                return Err(CoreError::config(
                    format!("{field}.power"),
                    format!("must be > 1, got {n}"),
                ));
            }
            (a, Some(_)) if a != Activation::Power => {
                return Err(CoreError::config(
                    format!("{field}.power"),
                    "only used by activation = power",
                ));
            }
            _ => {}
        }
        if self.learn_beta && !needs_beta {
            return Err(CoreError::config(
                format!("{field}.learn_beta"),
                "only used by activation = softmax or exp",
            ));
        }
        if !(self.init_std.is_finite() && self.init_std >= 0.0) {
            return Err(CoreError::config(
                format!("{field}.init_std"),
                "must be ≥ 0",
            ));
        }
        Ok(())
    }
}

/// The activation with its parameters, as used at run time.
#[derive(Debug)]
enum Form {
    /// `relu(z)ⁿ / n` (ReLU: n = 2).
    Power(f64),
    /// `relu(z)`.
    Rectified,
    /// `exp(β z) / β`.
    Exp(Tensor),
    /// `(1/β) lse(β z)` per token.
    Softmax(Tensor),
}

/// The Hopfield memory energy. Parameters: `xi` `[K, D]`; `beta` `[]` for softmax/exp.
#[derive(Debug)]
pub struct HopfieldEnergy {
    /// Memories ξ, one per row, `[K, D]`.
    pub xi: Tensor,
    form: Form,
    name: String,
}

impl HopfieldEnergy {
    /// Creates ξ (and β where used) under `path` for tokens of width `dim`.
    pub fn new(path: &nn::Path, dim: i64, cfg: &HopfieldMemoryConfig) -> Self {
        let xi = path.var(
            "xi",
            &[cfg.memories, dim],
            nn::Init::Randn {
                mean: 0.0,
                stdev: cfg.init_std,
            },
        );
        let beta = || {
            let b = cfg.beta.unwrap_or(1.0);
            if cfg.learn_beta {
                path.var("beta", &[], nn::Init::Const(b))
            } else {
                let t = path.ones_no_train("beta", &[]);
                tch::no_grad(|| {
                    let _ = t.shallow_clone().fill_(b);
                });
                t
            }
        };
        let form = match cfg.activation {
            Activation::Relu => Form::Power(2.0),
            Activation::Rectified => Form::Rectified,
            Activation::Power => Form::Power(cfg.power.unwrap_or(2.0)),
            Activation::Exp => Form::Exp(beta()),
            Activation::Softmax => Form::Softmax(beta()),
        };
        Self {
            xi,
            form,
            name: "hopfield".into(),
        }
    }

    /// β, for the softmax and exp forms.
    pub fn beta(&self) -> Option<&Tensor> {
        match &self.form {
            Form::Exp(b) | Form::Softmax(b) => Some(b),
            Form::Power(_) | Form::Rectified => None,
        }
    }

    /// Per-token energy `[M]` of tokens `g: [M, D]` (if `with_e`) and the activation
    /// `r = G'(ξ g)` `[M, K]` (if `with_r`).
    fn per_token(
        &self,
        g: &Tensor,
        with_e: bool,
        with_r: bool,
    ) -> (Option<Tensor>, Option<Tensor>) {
        let mut h = g.matmul(&self.xi.tr()); // [M, K]
        let kind = g.kind();
        match &self.form {
            Form::Power(n) => {
                let n = *n;
                // In place: the matmul's backward needs its inputs, not its output.
                let rh = h.relu_();
                let e = with_e.then(|| {
                    -(if n == 2.0 {
                        rh.square()
                    } else {
                        rh.pow_tensor_scalar(n)
                    })
                    .sum_dim_intlist(-1, false, kind)
                        / n
                });
                let r = with_r.then(|| {
                    if n == 2.0 {
                        rh.shallow_clone()
                    } else {
                        rh.pow_tensor_scalar(n - 1.0)
                    }
                });
                (e, r)
            }
            Form::Rectified => {
                let e = with_e.then(|| -h.relu().sum_dim_intlist(-1, false, kind));
                (e, with_r.then(|| h.gt(0.0).to_kind(kind)))
            }
            Form::Exp(beta) => {
                let ex = (&h * beta).exp();
                let e = with_e.then(|| -ex.sum_dim_intlist(-1, false, kind) / beta);
                (e, with_r.then_some(ex))
            }
            Form::Softmax(beta) => {
                let bh = &h * beta;
                let e = with_e.then(|| -bh.logsumexp(-1, false) / beta);
                (e, with_r.then(|| bh.softmax(-1, kind)))
            }
        }
    }

    /// Per-token energies `[B, N]` (if `with_e`) and `∂E/∂g` `[B, N, D]` (if `with_grad`) of
    /// `g: [B, N, D]`, unmasked. Tokens go through in chunks whose `[rows, K]` activations
    /// hold at most [`ACTIVATION_CHUNK`] values, so that a graph of millions of tokens never
    /// holds its whole `[B·N, K]` at once (one chunk for the usual batch).
    fn chunked(
        &self,
        g: &Tensor,
        with_e: bool,
        with_grad: bool,
    ) -> (Option<Tensor>, Option<Tensor>) {
        let size = g.size();
        let d = size[size.len() - 1];
        let flat = g.reshape([-1, d]);
        let m = flat.size()[0];
        let rows = (ACTIVATION_CHUNK / self.xi.size()[0].max(1)).max(1);
        let starts: Vec<i64> = if m == 0 {
            vec![0]
        } else {
            (0..m).step_by(rows as usize).collect()
        };
        let (mut es, mut gs) = (Vec::new(), Vec::new());
        for start in starts {
            let len = rows.min(m - start);
            let (e, r) = self.per_token(&flat.narrow(0, start, len), with_e, with_grad);
            es.extend(e);
            gs.extend(r.map(|r| -r.matmul(&self.xi)));
        }
        let join = |mut parts: Vec<Tensor>, shape: &[i64]| {
            let t = match parts.len() {
                0 => return None,
                1 => parts.swap_remove(0),
                _ => Tensor::cat(&parts, 0),
            };
            Some(t.reshape(shape))
        };
        (join(es, &size[..size.len() - 1]), join(gs, &size))
    }

    fn masked(t: Tensor, s: &Structure, per_token: bool) -> Tensor {
        match s.token_weights(t.kind()) {
            Some(w) if per_token => t * w,
            Some(w) => t * w.unsqueeze(-1),
            None => t,
        }
    }
}

impl Energy for HopfieldEnergy {
    fn name(&self) -> &str {
        &self.name
    }

    fn energy(&self, g: &Tensor, s: &Structure) -> Tensor {
        self.energies(g, s).sum_dim_intlist(-1, false, g.kind())
    }

    fn token_energy(&self, g: &Tensor, s: &Structure) -> Option<Tensor> {
        Some(self.energies(g, s))
    }

    fn grad(&self, g: &Tensor, s: &Structure) -> Tensor {
        let (_, grad) = self.chunked(g, false, true);
        Self::masked(grad.unwrap_or_else(|| g.zeros_like()), s, false)
    }

    fn energy_and_grad(&self, g: &Tensor, s: &Structure) -> (Tensor, Tensor) {
        let (e, grad) = self.chunked(g, true, true);
        let e = e.unwrap_or_else(|| g.sum_dim_intlist(-1, false, g.kind()).zeros_like());
        (
            Self::masked(e, s, true).sum_dim_intlist(-1, false, g.kind()),
            Self::masked(grad.unwrap_or_else(|| g.zeros_like()), s, false),
        )
    }
}

impl HopfieldEnergy {
    /// Each token's energy `[B, N]` (padding: 0).
    fn energies(&self, g: &Tensor, s: &Structure) -> Tensor {
        let (e, _) = self.chunked(g, true, false);
        let e = e.unwrap_or_else(|| g.sum_dim_intlist(-1, false, g.kind()).zeros_like());
        Self::masked(e, s, true)
    }

    /// The same term under another name (traces, plots).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl TermParams for HopfieldMemoryConfig {
    const KIND: &'static str = "hopfield-memory";
    const ABOUT: &'static str =
        "Hopfield memory energy −Σ G(ξ·g) (ET eq. 5; relu, power, exp, softmax)";
    /// Its kind before basin named the memory energy apart from the Hopfield layers.
    const ALIASES: &'static [&'static str] = &["hopfield"];
    /// Traces and checkpoints keep calling it `hopfield`.
    const DEFAULT_NAME: &'static str = "hopfield";

    fn validate(&self, field: &str) -> Result<()> {
        HopfieldMemoryConfig::validate(self, field)
    }

    fn build(&self, ctx: &BuildContext, name: &str) -> Result<Box<dyn Energy>> {
        Ok(Box::new(
            HopfieldEnergy::new(ctx.path, ctx.dim, self).with_name(name),
        ))
    }
}
crate::register_term!(HopfieldMemoryConfig);
