//! The trainable layers of "Hopfield networks is all you need" (on `nn::Path`s): [`Hopfield`]
//! (state patterns R attend stored patterns Y through W_Q, W_K, W_V, with β, masks, optional
//! input LayerNorms and iterated retrieval), [`HopfieldPooling`] (learned queries over a set)
//! and [`HopfieldLayer`] (learned stored patterns). Patterns are rows (`[B, N, d]`).

use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use basin_core::error::{CoreError, Result};

/// Configuration of a [`Hopfield`] association (hopfield-layers' defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AssociationConfig {
    /// Width of the state patterns R (queries).
    pub state_size: i64,
    /// Width of the stored patterns Y (keys and values).
    pub stored_size: i64,
    /// Heads.
    pub heads: i64,
    /// Width of each head's association space (default `state_size / heads`).
    pub hidden_size: Option<i64>,
    /// Width of each head's values (default = hidden size).
    pub pattern_size: Option<i64>,
    /// Output width (default `state_size`); `None` with `output_projection = false` keeps the
    /// heads' values.
    pub output_size: Option<i64>,
    /// Apply the output projection W_O.
    pub output_projection: bool,
    /// β (default `1/sqrt(hidden size)`).
    pub beta: Option<f64>,
    /// LayerNorm the state and stored patterns before the projections (the package default).
    pub input_norms: bool,
    /// Retrieval iterations after the first (0: one step, standard attention).
    pub update_steps_max: usize,
    /// Stop iterating when the weights change by less than this (Frobenius norm).
    pub update_steps_eps: f64,
    /// Standard deviation of the projection initialisation.
    pub init_std: f64,
}

impl Default for AssociationConfig {
    fn default() -> Self {
        Self {
            state_size: 64,
            stored_size: 64,
            heads: 1,
            hidden_size: None,
            pattern_size: None,
            output_size: None,
            output_projection: true,
            beta: None,
            input_norms: true,
            update_steps_max: 0,
            update_steps_eps: 1e-4,
            init_std: 0.02,
        }
    }
}

impl AssociationConfig {
    fn hidden(&self) -> i64 {
        self.hidden_size
            .unwrap_or(self.state_size / self.heads.max(1))
    }
    fn values(&self) -> i64 {
        self.pattern_size.unwrap_or_else(|| self.hidden())
    }
    /// The output width of the layer.
    pub fn out_size(&self) -> i64 {
        if self.output_projection {
            self.output_size.unwrap_or(self.state_size)
        } else {
            self.heads * self.values()
        }
    }
    /// Checks the sizes.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("state_size", self.state_size),
            ("stored_size", self.stored_size),
            ("heads", self.heads),
            ("hidden_size", self.hidden()),
        ] {
            if v < 1 {
                return Err(CoreError::config(name, format!("must be ≥ 1, got {v}")));
            }
        }
        if let Some(b) = self.beta
            && !(b.is_finite() && b > 0.0)
        {
            return Err(CoreError::config("beta", format!("must be > 0, got {b}")));
        }
        Ok(())
    }
}

/// The Hopfield association: `Z = softmax(β R W_Q (Y W_K)ᵀ) Y W_V`, per head, then W_O;
/// iterated retrieval repeats the association with the new query `ξ K` in the projected key
/// space until the weights settle (gradients flow through every iteration).
#[derive(Debug)]
pub struct Hopfield {
    cfg: AssociationConfig,
    norm_state: Option<nn::LayerNorm>,
    norm_stored: Option<nn::LayerNorm>,
    w_q: Tensor,
    w_k: Tensor,
    w_v: Tensor,
    w_o: Option<nn::Linear>,
}

impl Hopfield {
    /// Creates the layer under `path`: `norm_state`, `norm_stored`, `w_q`, `w_k`, `w_v`, `out`.
    pub fn new(path: &nn::Path, cfg: &AssociationConfig) -> Result<Self> {
        cfg.validate()?;
        let (h, hid, val) = (cfg.heads, cfg.hidden(), cfg.values());
        let init = nn::Init::Randn {
            mean: 0.0,
            stdev: cfg.init_std,
        };
        let ln = |name: &str, d: i64| nn::layer_norm(path / name, vec![d], Default::default());
        Ok(Self {
            norm_state: cfg.input_norms.then(|| ln("norm_state", cfg.state_size)),
            norm_stored: cfg.input_norms.then(|| ln("norm_stored", cfg.stored_size)),
            w_q: path.var("w_q", &[h * hid, cfg.state_size], init),
            w_k: path.var("w_k", &[h * hid, cfg.stored_size], init),
            w_v: path.var("w_v", &[h * val, cfg.stored_size], init),
            w_o: cfg.output_projection.then(|| {
                nn::linear(
                    path / "out",
                    h * val,
                    cfg.out_size(),
                    nn::LinearConfig {
                        ws_init: init,
                        ..Default::default()
                    },
                )
            }),
            cfg: cfg.clone(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &AssociationConfig {
        &self.cfg
    }

    /// β.
    pub fn beta(&self) -> f64 {
        self.cfg
            .beta
            .unwrap_or(1.0 / (self.cfg.hidden() as f64).sqrt())
    }

    fn heads(&self, t: &Tensor, width: i64) -> Tensor {
        let s = t.size();
        t.view([s[0], s[1], self.cfg.heads, width]).transpose(1, 2) // [B, H, ·, width]
    }

    /// Output `[B, S, out]` and the final association weights `[B, H, S, N]` for state
    /// patterns `r: [B, S, state_size]` and stored patterns `y: [B, N, stored_size]`.
    /// `ignore: [B, N]` (true = stored pattern not used) gives those patterns exactly zero weight.
    pub fn forward_with_weights(
        &self,
        r: &Tensor,
        y: &Tensor,
        ignore: Option<&Tensor>,
    ) -> (Tensor, Tensor) {
        let r = self
            .norm_state
            .as_ref()
            .map_or_else(|| r.shallow_clone(), |n| n.forward(r));
        let y = self
            .norm_stored
            .as_ref()
            .map_or_else(|| y.shallow_clone(), |n| n.forward(y));
        let (hid, val) = (self.cfg.hidden(), self.cfg.values());
        let mut q = self.heads(&r.matmul(&self.w_q.tr()), hid);
        let k = self.heads(&y.matmul(&self.w_k.tr()), hid);
        let v = self.heads(&y.matmul(&self.w_v.tr()), val);
        let beta = self.beta();
        let blocked = ignore.map(|m| m.view([m.size()[0], 1, 1, m.size()[1]]));
        // Ignored patterns get a finite floor (exp underflows to exactly 0); a state with every
        // stored pattern ignored gets all-zero weights instead of NaN.
        let any = blocked
            .as_ref()
            .map(|b| b.logical_not().any_dim(-1, true).to_kind(r.kind()));
        let associate = |q: &Tensor| {
            let mut logits = (q * beta).matmul(&k.transpose(-1, -2));
            if let Some(b) = &blocked {
                logits = logits.masked_fill(b, basin_core::terms::attention::BLOCKED_LOGIT);
            }
            let w = logits.softmax(-1, q.kind());
            match &any {
                Some(a) => w * a,
                None => w,
            }
        };
        let mut xi = associate(&q);
        for _ in 0..self.cfg.update_steps_max {
            q = xi.matmul(&k);
            let next = associate(&q);
            let change = (&next - &xi)
                .square()
                .sum_dim_intlist(&[-1i64, -2][..], false, Kind::Double)
                .sqrt()
                .max()
                .double_value(&[]);
            xi = next;
            if change <= self.cfg.update_steps_eps {
                break;
            }
        }
        let z = xi.matmul(&v).transpose(1, 2); // [B, S, H, val]
        let s = z.size();
        let z = z.reshape([s[0], s[1], s[2] * s[3]]);
        let out = self
            .w_o
            .as_ref()
            .map_or_else(|| z.shallow_clone(), |o| o.forward(&z));
        (out, xi)
    }

    /// Output `[B, S, out]`.
    pub fn forward(&self, r: &Tensor, y: &Tensor, ignore: Option<&Tensor>) -> Tensor {
        self.forward_with_weights(r, y, ignore).0
    }
}

/// Pooling over a set with learned queries: the state patterns are `quantity` learned vectors
/// (passed through the state LayerNorm and W_Q like any query), the set is the stored patterns;
/// the output is `[B, quantity · out]`.
#[derive(Debug)]
pub struct HopfieldPooling {
    /// The learned queries `[1, quantity, state_size]`.
    pub queries: Tensor,
    /// The association.
    pub hopfield: Hopfield,
}

/// `quantity` learned patterns of width `width` `[1, quantity, width]`, drawn from N(0, std²),
/// the variable `name` under `path`.
fn learned_patterns(path: &nn::Path, name: &str, quantity: i64, width: i64, std: f64) -> Tensor {
    let init = nn::Init::Randn {
        mean: 0.0,
        stdev: std,
    };
    path.var(name, &[1, quantity, width], init)
}

impl HopfieldPooling {
    /// `quantity` learned queries of width `cfg.state_size` (`queries` under `path`).
    pub fn new(path: &nn::Path, cfg: &AssociationConfig, quantity: i64) -> Result<Self> {
        Ok(Self {
            queries: learned_patterns(path, "queries", quantity, cfg.state_size, cfg.init_std),
            hopfield: Hopfield::new(&(path / "hopfield"), cfg)?,
        })
    }

    /// Pools the set `y: [B, N, stored_size]` (with `ignore: [B, N]` padding) to `[B, quantity·out]`.
    pub fn forward(&self, y: &Tensor, ignore: Option<&Tensor>) -> Tensor {
        let b = y.size()[0];
        let r = self.queries.expand([b, -1, -1], false);
        self.hopfield.forward(&r, y, ignore).reshape([b, -1])
    }
}

/// Learned stored patterns (the prototype / kNN-like layer): the input is the state pattern,
/// `quantity` learned patterns are keys and values.
#[derive(Debug)]
pub struct HopfieldLayer {
    /// The learned stored patterns `[1, quantity, stored_size]`.
    pub lookup: Tensor,
    /// The association.
    pub hopfield: Hopfield,
}

impl HopfieldLayer {
    /// `quantity` learned stored patterns (`lookup` under `path`).
    pub fn new(path: &nn::Path, cfg: &AssociationConfig, quantity: i64) -> Result<Self> {
        Ok(Self {
            lookup: learned_patterns(path, "lookup", quantity, cfg.stored_size, cfg.init_std),
            hopfield: Hopfield::new(&(path / "hopfield"), cfg)?,
        })
    }

    /// `r: [B, S, state_size]` → `[B, S, out]`.
    pub fn forward(&self, r: &Tensor) -> Tensor {
        let y = self.lookup.expand([r.size()[0], -1, -1], false);
        self.hopfield.forward(r, &y, None)
    }
}
