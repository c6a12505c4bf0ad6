//! Optimisation: AdamW with the papers' settings, gradient centralisation, global-norm clipping.
//!
//! Implemented here (not libtorch's optimiser) so that the state — first and second moments
//! and the step count — is plain tensors that go into checkpoints, which makes a resumed run
//! identical to an uninterrupted one.
//!
//! One [`AdamW::step`] does, in the order of the reference optax chains:
//! 1. gradient centralisation (`optax.centralize`, ET Tables 9–11): for tensors with two or
//!    more dimensions, subtract the mean over all axes but the first;
//! 2. global-norm clipping (`clip_by_global_norm`, ET Table 4), PyTorch's rule
//!    `g · min(1, c / (‖g‖ + 1e-6))`;
//! 3. AdamW with decoupled weight decay (`torch.optim.AdamW` = `optax.adamw`):
//!    `p ← p − lr·wd·p`, then the bias-corrected Adam step.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn::VarStore};

use crate::TrainError;

/// Which parameters weight decay applies to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DecayTargets {
    /// Every parameter, norms, biases and β included (the ET reference code: optax's default).
    #[default]
    All,
    /// Only tensors with two or more dimensions (the common PyTorch practice).
    Matrices,
}

/// Configuration of [`AdamW`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimConfig {
    /// Base learning rate (a schedule, if any, replaces it step by step).
    pub lr: f64,
    /// Adam β1.
    pub beta1: f64,
    /// Adam β2.
    pub beta2: f64,
    /// Adam ε (added to the root of the second moment).
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Which parameters decay.
    pub decay: DecayTargets,
    /// Gradient centralisation before the update.
    pub centralize: bool,
    /// Global-norm clipping threshold.
    pub clip_norm: Option<f64>,
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decay: DecayTargets::All,
            centralize: false,
            clip_norm: None,
        }
    }
}

impl OptimConfig {
    /// ET image completion (Table 4): AdamW β = (0.9, 0.99), wd 0.05, clip 1.0.
    pub fn et_image() -> Self {
        Self {
            lr: 5e-4,
            beta2: 0.99,
            weight_decay: 0.05,
            clip_norm: Some(1.0),
            ..Self::default()
        }
    }
    /// ET graph classification (Tables 9–11, reference notebooks): centralise + AdamW
    /// β = (0.9, 0.99), wd 0.05 on every parameter, no clipping.
    pub fn et_graph() -> Self {
        Self {
            lr: 1e-3,
            beta2: 0.99,
            weight_decay: 0.05,
            centralize: true,
            ..Self::default()
        }
    }
    /// ET anomaly detection (Appendix C.2): Adam, lr 1e-3, no weight decay.
    pub fn et_anomaly() -> Self {
        Self::default()
    }

    /// Checks the values; `field` is the config path used in errors.
    pub fn validate(&self, field: &str) -> Result<(), TrainError> {
        let bad = |name: &str, msg: String| Err(TrainError::config(format!("{field}.{name}"), msg));
        if !(self.lr.is_finite() && self.lr >= 0.0) {
            return bad("lr", format!("must be ≥ 0, got {}", self.lr));
        }
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return bad(name, format!("must be in [0, 1), got {b}"));
            }
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return bad("eps", format!("must be > 0, got {}", self.eps));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad(
                "weight_decay",
                format!("must be ≥ 0, got {}", self.weight_decay),
            );
        }
        if let Some(c) = self.clip_norm
            && !(c.is_finite() && c > 0.0)
        {
            return bad("clip_norm", format!("must be > 0, got {c}"));
        }
        Ok(())
    }
}

/// What one optimiser step saw.
#[derive(Clone, Copy, Debug)]
pub struct StepStats {
    /// Global gradient norm after centralisation, before clipping.
    pub grad_norm: f64,
    /// Whether clipping scaled the gradients.
    pub clipped: bool,
}

/// AdamW over the trainable variables of a `VarStore` (ordered by name, so the state layout is
/// deterministic).
///
/// The moments of all parameters live in two flat buffers and the Adam arithmetic runs once
/// over all of them (a multi-tensor step, as PyTorch's `foreach` AdamW), element for element the
/// same operations as a per-tensor loop, which launches ~15 small operations per parameter
/// tensor: a small model's optimiser step is then bound by launches, not arithmetic.
pub struct AdamW {
    cfg: OptimConfig,
    params: Vec<(String, Tensor)>,
    /// Each parameter's offset in the flat buffers.
    offsets: Vec<i64>,
    m: Tensor,
    v: Tensor,
    step: i64,
}

impl std::fmt::Debug for AdamW {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdamW")
            .field("cfg", &self.cfg)
            .field("params", &self.params.len())
            .field("step", &self.step)
            .finish()
    }
}

impl AdamW {
    /// An optimiser for every trainable variable of `vs`.
    pub fn new(vs: &VarStore, cfg: OptimConfig) -> Result<Self, TrainError> {
        cfg.validate("optim")?;
        let mut params: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let mut offsets = Vec::with_capacity(params.len());
        let mut total = 0;
        for (_, p) in &params {
            offsets.push(total);
            total += p.numel() as i64;
        }
        let (kind, device) = params
            .first()
            .map_or((Kind::Float, tch::Device::Cpu), |(_, p)| {
                (p.kind(), p.device())
            });
        let zeros = || Tensor::zeros([total], (kind, device));
        Ok(Self {
            cfg,
            params,
            offsets,
            m: zeros(),
            v: zeros(),
            step: 0,
        })
    }

    /// Parameter `i`'s part of the flat buffer `flat`, in the parameter's shape (a view).
    fn part(&self, flat: &Tensor, i: usize) -> Tensor {
        let p = &self.params[i].1;
        flat.narrow(0, self.offsets[i], p.numel() as i64)
            .view(p.size().as_slice())
    }

    /// The configuration.
    pub fn config(&self) -> &OptimConfig {
        &self.cfg
    }

    /// Steps taken so far.
    pub fn steps(&self) -> i64 {
        self.step
    }

    /// The optimised parameters, ordered by name (the same order in every process).
    pub fn parameters(&self) -> Vec<Tensor> {
        self.params.iter().map(|(_, p)| p.shallow_clone()).collect()
    }

    /// Clears the gradients of every parameter.
    pub fn zero_grad(&mut self) {
        for (_, p) in self.params.iter_mut() {
            p.zero_grad();
        }
    }

    /// One update with learning rate `lr`, from the gradients accumulated by `backward`.
    /// Parameters that received no gradient are left untouched (as PyTorch does). A NaN or
    /// infinite gradient is an error and nothing is updated.
    pub fn step(&mut self, lr: f64) -> Result<StepStats, TrainError> {
        let cfg = self.cfg.clone();
        let grads: Vec<Option<Tensor>> = self
            .params
            .iter()
            .map(|(_, p)| {
                let g = p.grad();
                g.defined().then(|| {
                    if cfg.centralize && g.dim() > 1 {
                        let dims: Vec<i64> = (1..g.dim() as i64).collect();
                        &g - g.mean_dim(dims.as_slice(), true, g.kind())
                    } else {
                        g
                    }
                })
            })
            .collect();
        let sq: f64 = tch::no_grad(|| {
            grads
                .iter()
                .flatten()
                // In float64: a float32 square overflows for entries above ~1.8e19.
                .map(|g| {
                    g.to_kind(Kind::Double)
                        .square()
                        .sum(Kind::Double)
                        .double_value(&[])
                })
                .sum()
        });
        let grad_norm = sq.sqrt();
        if !grad_norm.is_finite() {
            let bad: Vec<&str> = self
                .params
                .iter()
                .zip(&grads)
                .filter(|(_, g)| {
                    g.as_ref()
                        .is_some_and(|g| g.isfinite().all().int64_value(&[]) == 0)
                })
                .map(|((n, _), _)| n.as_str())
                .collect();
            let what = if bad.is_empty() {
                "gradient norm (every entry is finite, their squares overflow)".to_owned()
            } else {
                format!("gradient of {}", bad.join(", "))
            };
            return Err(TrainError::NonFinite {
                what,
                epoch: None,
                step: Some(self.step),
            });
        }
        let scale = match cfg.clip_norm {
            Some(c) => (c / (grad_norm + 1e-6)).min(1.0),
            None => 1.0,
        };
        self.step += 1;
        let t = self.step as f64;
        let (b1, b2) = (cfg.beta1, cfg.beta2);
        let (c1, c2) = (1.0 - b1.powf(t), 1.0 - b2.powf(t));
        if self.params.is_empty() {
            return Ok(StepStats {
                grad_norm,
                clipped: false,
            });
        }
        tch::no_grad(|| {
            // One flat gradient (zeros where a parameter got none: its moments are restored
            // below and the parameter is not touched).
            let flat: Vec<Tensor> = self
                .params
                .iter()
                .zip(&grads)
                .map(|((_, p), g)| match g {
                    Some(g) => g.reshape([-1]),
                    None => Tensor::zeros([p.numel() as i64], (self.m.kind(), self.m.device())),
                })
                .collect();
            let g = Tensor::cat(&flat, 0);
            let g = if scale < 1.0 { g * scale } else { g };
            let kept: Vec<(usize, Tensor, Tensor)> = (0..self.params.len())
                .filter(|&i| grads[i].is_none())
                .map(|i| {
                    (
                        i,
                        self.part(&self.m, i).copy(),
                        self.part(&self.v, i).copy(),
                    )
                })
                .collect();
            self.m = &self.m * b1 + &g * (1.0 - b1);
            self.v = &self.v * b2 + g.square() * (1.0 - b2);
            let denom = (&self.v / c2).sqrt() + cfg.eps;
            let update = (&self.m / c1) / denom * lr;
            for (i, m, v) in kept {
                self.part(&self.m, i).copy_(&m);
                self.part(&self.v, i).copy_(&v);
            }
            for (i, ((_, p), g)) in self.params.iter().zip(&grads).enumerate() {
                if g.is_none() {
                    continue;
                }
                let decays = match cfg.decay {
                    DecayTargets::All => true,
                    DecayTargets::Matrices => p.dim() > 1,
                };
                let mut p = p.shallow_clone();
                if decays && cfg.weight_decay > 0.0 {
                    let _ = p.g_mul_scalar_(1.0 - lr * cfg.weight_decay);
                }
                let _ = p.g_sub_(&self.part(&update, i));
            }
        });
        Ok(StepStats {
            grad_norm,
            clipped: scale < 1.0,
        })
    }

    /// The optimiser state as named tensors (`adamw.m.<param>`, `adamw.v.<param>`,
    /// `adamw.step`), for checkpoints.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(2 * self.params.len() + 1);
        for (i, (name, _)) in self.params.iter().enumerate() {
            out.push((format!("adamw.m.{name}"), self.part(&self.m, i)));
            out.push((format!("adamw.v.{name}"), self.part(&self.v, i)));
        }
        out.push(("adamw.step".into(), Tensor::from(self.step)));
        out
    }

    /// Restores a state written by [`AdamW::state`]; every moment must be present with the
    /// parameter's shape.
    pub fn load_state(&mut self, tensors: &HashMap<String, Tensor>) -> Result<(), TrainError> {
        let mut problems = Vec::new();
        let get = |key: String, like: &Tensor, problems: &mut Vec<String>| match tensors.get(&key) {
            Some(t) if t.size() == like.size() => {
                Some(t.to_kind(like.kind()).to_device(like.device()))
            }
            Some(t) => {
                problems.push(format!(
                    "`{key}`: expected shape {:?}, found {:?}",
                    like.size(),
                    t.size()
                ));
                None
            }
            None => {
                problems.push(format!("`{key}` is missing"));
                None
            }
        };
        let mut m = Vec::new();
        let mut v = Vec::new();
        for (name, p) in &self.params {
            m.push(get(format!("adamw.m.{name}"), p, &mut problems));
            v.push(get(format!("adamw.v.{name}"), p, &mut problems));
        }
        let step = tensors.get("adamw.step").map(|t| t.int64_value(&[]));
        if step.is_none() {
            problems.push("`adamw.step` is missing".into());
        }
        if !problems.is_empty() {
            return Err(TrainError::State(format!(
                "optimiser state: {}",
                problems.join("; ")
            )));
        }
        tch::no_grad(|| {
            for (i, (m, v)) in m.into_iter().zip(v).enumerate() {
                if let (Some(m), Some(v)) = (m, v) {
                    self.part(&self.m, i).copy_(&m);
                    self.part(&self.v, i).copy_(&v);
                }
            }
        });
        self.step = step.unwrap_or(0);
        Ok(())
    }
}
