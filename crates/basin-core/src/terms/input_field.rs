//! Input injection as energy: the external field of the block's own input,
//! `E_in = −λ Σ_A ⟨g_A, u_A W⟩` with `u = LN(x₀)` the normalised tokens the descent started
//! from (`W` the identity unless `projection`), so that the attractor remembers its input.
//!
//! ET's and CDAT's energies depend on the state only, so a descent run to its fixed point
//! forgets `x₀` (`∂x*/∂x₀ = 0`): whatever computed `x₀` (an encoder, a mask token, the block
//! before) receives no gradient through an implicit block. Deep-equilibrium models solve
//! `z = f(z, x)` with the input inside `f`; Hopfield networks add an input current. On the
//! layer-norm sphere (`‖g_A‖` fixed) the field is the anchor `λ/2 ‖g_A − u_A W‖²` up to a
//! constant. `λ = exp(log_strength) > 0`, learned unless `learn_strength = false`. Padding
//! tokens feel no field. Outside a block's descent (no input given) the term is zero. The
//! papers' blocks have no such term; it is for training at the attractor.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

use crate::energy::Energy;
use crate::error::{Result, positive};
use crate::registry::{BuildContext, TermParams};
use crate::structure::Structure;

/// Configuration of an [`InputField`] term.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InputFieldConfig {
    /// The field's strength λ at initialisation (> 0).
    pub strength: f64,
    /// Whether λ is learned (as `log λ`, so it stays positive).
    pub learn_strength: bool,
    /// A learned `W` `[D, D]` (initialised to the identity) between the input and the field.
    pub projection: bool,
}

impl Default for InputFieldConfig {
    fn default() -> Self {
        Self {
            strength: 1.0,
            learn_strength: true,
            projection: false,
        }
    }
}

/// The external field of the descent's input. Parameters: `log_strength` `[]`, `w` `[D, D]`
/// with `projection`.
#[derive(Debug)]
pub struct InputField {
    /// `log λ`.
    pub log_strength: Tensor,
    /// `W`, where the field is projected.
    pub w: Option<Tensor>,
    name: String,
}

impl InputField {
    /// Creates `log λ` (and `W`) under `path` for tokens of width `dim`.
    pub fn new(path: &nn::Path, dim: i64, cfg: &InputFieldConfig) -> Self {
        let log_strength = if cfg.learn_strength {
            path.var("log_strength", &[], nn::Init::Const(cfg.strength.ln()))
        } else {
            let t = path.zeros_no_train("log_strength", &[]);
            tch::no_grad(|| {
                let _ = t.shallow_clone().fill_(cfg.strength.ln());
            });
            t
        };
        let w = cfg.projection.then(|| {
            let w = path.var("w", &[dim, dim], nn::Init::Const(0.0));
            tch::no_grad(|| {
                w.shallow_clone()
                    .copy_(&Tensor::eye(dim, (w.kind(), w.device())));
            });
            w
        });
        Self {
            log_strength,
            w,
            name: "input".into(),
        }
    }

    /// The term under another name (traces, checkpoints).
    pub fn with_name(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    /// `λ u W` with padding tokens zeroed, `[B, N, D]`; `None` without an input.
    fn field(&self, structure: &Structure, kind: Kind) -> Option<Tensor> {
        let u = structure.input()?;
        let u = match &self.w {
            Some(w) => u.matmul(w),
            None => u.shallow_clone(),
        };
        let mut f = u * self.log_strength.exp();
        if let Some(weights) = structure.token_weights(kind) {
            f = f * weights.unsqueeze(-1);
        }
        Some(f)
    }
}

impl Energy for InputField {
    fn name(&self) -> &str {
        &self.name
    }

    fn energy(&self, g: &Tensor, structure: &Structure) -> Tensor {
        match self.token_energy(g, structure) {
            Some(e) => e.sum_dim_intlist(-1, false, g.kind()),
            None => Tensor::zeros([g.size()[0]], (g.kind(), g.device())),
        }
    }

    fn grad(&self, g: &Tensor, structure: &Structure) -> Tensor {
        match self.field(structure, g.kind()) {
            Some(f) => -f,
            None => g.zeros_like(),
        }
    }

    fn energy_and_grad(&self, g: &Tensor, structure: &Structure) -> (Tensor, Tensor) {
        (self.energy(g, structure), self.grad(g, structure))
    }

    fn token_energy(&self, g: &Tensor, structure: &Structure) -> Option<Tensor> {
        let f = self.field(structure, g.kind())?;
        Some(-(g * f).sum_dim_intlist(-1, false, g.kind()))
    }

    fn uses_input(&self) -> bool {
        true
    }
}

impl TermParams for InputFieldConfig {
    const KIND: &'static str = "input-field";
    const ABOUT: &'static str = "external field of the block's input −λ Σ ⟨g, LN(x₀) W⟩ (input injection for training at the attractor)";

    fn validate(&self, field: &str) -> Result<()> {
        positive(field, "strength", self.strength)
    }

    fn build(&self, ctx: &BuildContext, name: &str) -> Result<Box<dyn Energy>> {
        Ok(Box::new(
            InputField::new(ctx.path, ctx.dim, self).with_name(name),
        ))
    }
}
crate::register_term!(InputFieldConfig);
