//! CDAT's controlled excitation–inhibition dynamics (CDAT §3.2–3.4, eq. 2–8; eq. 3 opt-in),
//! `kind = "controlled"`:
//!
//! `x⁺ = x + α [ W(x) − (1 + ω) x − ∂E/∂g ] (+ √α σ ε in training)`
//!
//! - the passive decay `−x` and the damping `−ω x` (self-inhibition; ω > 0 learned),
//! - the mutual excitation `W(x)`, `W = Pᵀ C P` of rank r (eq. 8): P `[r, n]` and a core C
//!   that is diagonal (so W is symmetric, the paper's default), symmetric, full (the reference
//!   code's random r × r), or an unconstrained dense n × n matrix (Table 3's "full rank"),
//! - coupling over **features** (`space = "feature"`, n = D: the paper's eq. 2–8) or over
//!   **token positions** (`space = "token-position"`, n = slots, CLS first: what the public code
//!   and the paper's own parameter counts use — W mixes tokens). Padded tokens are never
//!   coupled into real ones and do not move.
//! - optionally eq. 3's Gaussian locality prior, `W = J₀ exp(−d(i,j)²/2a²) + Wᵗʳᵃⁱⁿ`, with
//!   today's low-rank `Pᵀ C P` as Wᵗʳᵃⁱⁿ ([`PriorConfig`]; off by default, as in the public
//!   code, which has none).
//!
//! The parameters live under the model's shared path (`ctx.shared`), so every block of a model
//! uses one W and one ω, as the reference does. Along the descent the storage functional of
//! eq. 6, `V = E + ∫((1+ω)x − Wx)ᵀ ġ ds`, does not increase for any W and ω as long as the layer
//! norm's γ ≥ 0 (Theorem 3.3, Appendix E.2); E itself may rise. Each step
//! reports V's increment beyond E by the trapezoid rule (see [`Dynamics::storage_increment`]).
//!
//! The energy contract holds terms of g only: the decay, the damping and W are terms of x, so
//! they belong to the dynamics.
//!
//! `drive = "reference-ascent"` is the public anomaly code's step (CDAT's `cdat.py`):
//! its layer returns `o = g + dropout(−∂E/∂g)` and the update subtracts it,
//! `x⁺ = x + α [ W(x) − (1 + ω) x − g + dropout(∂E/∂g) ]`, which **ascends** E and adds a
//! `−α g` residual; no dissipation certificate holds for it (V is still recorded, without a
//! guarantee). `drive_dropout` is the dropout the anomaly model puts on the energy drive in
//! training (CDAT Appendix B.2; 0 elsewhere).

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

use basin_core::dynamics::{Dynamics, StepContext};
use basin_core::error::{CoreError, Result};
use basin_core::gradient::FixedPoint;
use basin_core::registry::{BuildContext, DynamicsParams};

/// What W couples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CouplingSpace {
    /// The D features of each token (CDAT eq. 2–8): `W x` per token.
    #[default]
    Feature,
    /// Token positions (CLS first): `W_tok X` mixes tokens (the reference code).
    TokenPosition,
}

/// The core C of `W = Pᵀ C P`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CouplingCore {
    /// r learned values on the diagonal: W symmetric (the paper).
    #[default]
    Diagonal,
    /// `(C + Cᵀ)/2` of a learned r × r matrix: W symmetric.
    Symmetric,
    /// A learned r × r matrix (the reference code): W not symmetric.
    Full,
    /// No factorisation: a learned dense n × n W (Table 3's full-rank row).
    Dense,
}

/// How P and C start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CouplingInit {
    /// P ~ N(0, 1/n), C = 0.1 (identity or diagonal): W starts small (the paper gives none).
    #[default]
    Small,
    /// LeCun normal for P and C (flax's default; the classification reference).
    Lecun,
}

/// The distance `d(i, j)` between two coupled indices (features or token slots) of eq. 3's
/// prior. The paper gives none: it reads the indices as "coordinates on a latent topological
/// manifold (e.g., a grid or a graph)" (Appendix E.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PriorDistance {
    /// No prior: `W = Wᵗʳᵃⁱⁿ` (the public code).
    #[default]
    None,
    /// `|i − j|`: the indices on a line.
    Index,
    /// `min(|i − j|, n − |i − j|)`: the indices on a ring of n.
    Ring,
}

/// CDAT eq. 3's Gaussian locality prior `J₀ exp(−d(i,j)²/2a²)`, added to the learned coupling
/// (Theorem 3.1 reads it as a heat-kernel convolution over the indices). The paper gives no J₀
/// or a; these defaults keep the prior's row sums (`≈ J₀ a √(2π)`) under the decay's 1 + ω.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PriorConfig {
    /// The distance; `none` turns the prior off.
    pub distance: PriorDistance,
    /// Strength J₀ (the initial value when learned).
    pub j0: f64,
    /// Bandwidth a > 0, the receptive range in index units (the initial value when learned).
    pub a: f64,
    /// Learn J₀ and a (a as `exp(θ)`, so it stays positive) with the model.
    pub learn: bool,
}

impl Default for PriorConfig {
    fn default() -> Self {
        Self {
            distance: PriorDistance::None,
            j0: 0.1,
            a: 1.0,
            learn: false,
        }
    }
}

/// The coupling W.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CouplingConfig {
    /// What W couples.
    pub space: CouplingSpace,
    /// Rank r (CDAT: 4); 0 removes W (Table 3's "without W", Table 11's "w/o mutual
    /// excitation").
    pub rank: i64,
    /// The core C.
    pub core: CouplingCore,
    /// Token slots of `token-position` coupling (the reference: 501 = 500 nodes + CLS); tokens
    /// past them are not coupled.
    pub positions: i64,
    /// How P and C start.
    pub init: CouplingInit,
    /// Eq. 3's Gaussian prior added to W (off by default).
    pub prior: PriorConfig,
}

impl Default for CouplingConfig {
    fn default() -> Self {
        Self {
            space: CouplingSpace::Feature,
            rank: 4,
            core: CouplingCore::Diagonal,
            positions: 501,
            init: CouplingInit::Small,
            prior: PriorConfig::default(),
        }
    }
}

/// How ω is parameterised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OmegaMode {
    /// `ω = ω₀ · exp(θ)`, θ learned from 0: ω > 0 always (eq. 2).
    #[default]
    Positive,
    /// `ω = ω₀ · c`, c learned from 1, unconstrained (the reference code's `s · c`).
    Reference,
}

/// The sign of the energy drive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Drive {
    /// `−∂E/∂g`: descend the energy (eq. 4).
    #[default]
    Descend,
    /// `−g + ∂E/∂g`: the anomaly reference's subtracted layer output (ascends E). The
    /// residual `−g` needs [`StepContext::g`], which the block passes (without it, none).
    ReferenceAscent,
}

/// Configuration of [`Controlled`] (`kind = "controlled"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlledConfig {
    /// Step size α = Δt/τ (CDAT Table 10: 0.1).
    pub alpha: f64,
    /// Noise σ, added as `√α σ ε` in training (Tables 8–10; eq. 4 has none); 0 disables.
    pub sigma: f64,
    /// Add the noise in evaluation too (the classification reference does).
    pub noise_in_eval: bool,
    /// The coupling W.
    pub coupling: CouplingConfig,
    /// ω₀: the initial damping (the anomaly tables' `suppression_coef`).
    pub omega: f64,
    /// How ω is parameterised.
    pub omega_mode: OmegaMode,
    /// Keep the decay `−(1 + ω) x`; `false` is Table 11's "w/o self-inhibition".
    pub inhibition: bool,
    /// The sign of the energy drive (paper: descend).
    pub drive: Drive,
    /// Dropout on the energy drive `∂E/∂g` in training (the anomaly model's 0.1; 0 disables).
    pub drive_dropout: f64,
}

impl Default for ControlledConfig {
    fn default() -> Self {
        Self {
            alpha: 0.1,
            sigma: 0.0,
            noise_in_eval: false,
            coupling: CouplingConfig::default(),
            omega: 1.0,
            omega_mode: OmegaMode::Positive,
            inhibition: true,
            drive: Drive::Descend,
            drive_dropout: 0.0,
        }
    }
}

/// The coupling's parameters.
#[derive(Debug)]
enum W {
    None,
    Factored {
        p: Tensor,
        c: Tensor,
        core: CouplingCore,
    },
    Dense(Tensor),
}

/// Eq. 3's prior: J₀ and a, fixed or learned (`a = exp(θ)`).
#[derive(Debug)]
struct Prior {
    distance: PriorDistance,
    j0: Tensor,
    log_a: Tensor,
}

impl Prior {
    fn new(path: &nn::Path, cfg: &PriorConfig) -> Option<Self> {
        if cfg.distance == PriorDistance::None {
            return None;
        }
        let (j0, log_a) = if cfg.learn {
            (
                var_or_get(path, "prior_j0", &[], nn::Init::Const(cfg.j0)),
                var_or_get(path, "prior_log_a", &[], nn::Init::Const(cfg.a.ln())),
            )
        } else {
            (Tensor::from(cfg.j0), Tensor::from(cfg.a.ln()))
        };
        Some(Self {
            distance: cfg.distance,
            j0,
            log_a,
        })
    }

    /// The n × n kernel `J₀ exp(−d(i,j)²/2a²)`, symmetric, of `x`'s kind and device.
    fn kernel(&self, n: i64, like: &Tensor) -> Tensor {
        let opts = (like.kind(), like.device());
        let i = Tensor::arange(n, opts);
        let mut d = (i.unsqueeze(1) - i.unsqueeze(0)).abs();
        if self.distance == PriorDistance::Ring {
            d = d.minimum(&(-&d + n as f64));
        }
        let a = self
            .log_a
            .to_device(like.device())
            .to_kind(like.kind())
            .exp();
        let j0 = self.j0.to_device(like.device()).to_kind(like.kind());
        (-(&d * &d) / (a.square() * 2.0)).exp() * j0
    }
}

/// The controlled dynamics (see the module docs).
#[derive(Debug)]
pub struct Controlled {
    cfg: ControlledConfig,
    w: W,
    prior: Option<Prior>,
    /// θ (positive mode) or c (reference mode).
    omega_param: Tensor,
}

fn var_or_get(path: &nn::Path, name: &str, shape: &[i64], init: nn::Init) -> Tensor {
    path.get(name)
        .unwrap_or_else(|| path.var(name, shape, init))
}

impl Controlled {
    /// Creates (or, for a later block of the same model, reuses) W and ω under `shared`, for
    /// tokens of width `dim`.
    pub fn new(shared: &nn::Path, dim: i64, cfg: &ControlledConfig) -> Self {
        let c = &cfg.coupling;
        let n = match c.space {
            CouplingSpace::Feature => dim,
            CouplingSpace::TokenPosition => c.positions,
        };
        let path = shared / "coupling";
        let lecun = |fan_in: i64| nn::Init::Randn {
            mean: 0.0,
            stdev: 1.0 / (fan_in.max(1) as f64).sqrt(),
        };
        let w = if c.rank == 0 {
            W::None
        } else if c.core == CouplingCore::Dense {
            let init = match c.init {
                CouplingInit::Small => nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.1 / (n as f64),
                },
                CouplingInit::Lecun => lecun(n),
            };
            W::Dense(var_or_get(&path, "w", &[n, n], init))
        } else {
            let p_init = match c.init {
                CouplingInit::Small => nn::Init::Randn {
                    mean: 0.0,
                    stdev: 1.0 / (n as f64).sqrt(),
                },
                CouplingInit::Lecun => lecun(n),
            };
            let p = var_or_get(&path, "p", &[c.rank, n], p_init);
            let core = match (c.core, c.init) {
                (CouplingCore::Diagonal, CouplingInit::Small) => {
                    var_or_get(&path, "c", &[c.rank], nn::Init::Const(0.1))
                }
                (CouplingCore::Diagonal, CouplingInit::Lecun) => {
                    var_or_get(&path, "c", &[c.rank], lecun(1))
                }
                (_, CouplingInit::Small) => match path.get("c") {
                    Some(t) => t,
                    None => {
                        let t = path.var("c", &[c.rank, c.rank], nn::Init::Const(0.0));
                        tch::no_grad(|| {
                            let eye = Tensor::eye(c.rank, (t.kind(), t.device())) * 0.1;
                            t.shallow_clone().copy_(&eye);
                        });
                        t
                    }
                },
                (_, CouplingInit::Lecun) => {
                    var_or_get(&path, "c", &[c.rank, c.rank], lecun(c.rank))
                }
            };
            W::Factored {
                p,
                c: core,
                core: c.core,
            }
        };
        let omega_param = match cfg.omega_mode {
            OmegaMode::Positive => {
                var_or_get(&(shared / "omega"), "theta", &[], nn::Init::Const(0.0))
            }
            OmegaMode::Reference => var_or_get(&(shared / "omega"), "c", &[], nn::Init::Const(1.0)),
        };
        Self {
            cfg: cfg.clone(),
            w,
            prior: Prior::new(&path, &c.prior),
            omega_param,
        }
    }

    /// The current damping ω (a scalar tensor).
    pub fn omega(&self) -> Tensor {
        match self.cfg.omega_mode {
            OmegaMode::Positive => self.omega_param.exp() * self.cfg.omega,
            OmegaMode::Reference => &self.omega_param * self.cfg.omega,
        }
    }

    /// `W(x)` for tokens `x: [B, N, D]` with real tokens `real: [B, N, 1]` (padded ones are
    /// neither read nor written).
    pub fn coupling(&self, x: &Tensor, real: Option<&Tensor>) -> Tensor {
        let x = match real {
            Some(r) => x * r,
            None => x.shallow_clone(),
        };
        let mut out = match (&self.w, self.cfg.coupling.space) {
            (W::None, _) => x.zeros_like(),
            (W::Factored { p, c, core }, CouplingSpace::Feature) => {
                let h = x.matmul(&p.tr()); // [B, N, r]
                let h = match core {
                    CouplingCore::Diagonal => h * c,
                    CouplingCore::Symmetric => h.matmul(&((c + c.tr()) * 0.5)),
                    _ => h.matmul(&c.tr()),
                };
                h.matmul(p)
            }
            (W::Dense(w), CouplingSpace::Feature) => x.matmul(&w.tr()),
            (W::Factored { p, c, core }, CouplingSpace::TokenPosition) => {
                let p = Self::slots(p, x.size()[1]); // [r, N]
                let h = p.matmul(&x); // [B, r, D]
                let h = match core {
                    CouplingCore::Diagonal => h * c.view([1, -1, 1]),
                    CouplingCore::Symmetric => ((c + c.tr()) * 0.5).matmul(&h),
                    _ => c.matmul(&h),
                };
                p.tr().matmul(&h)
            }
            (W::Dense(w), CouplingSpace::TokenPosition) => {
                let n = x.size()[1];
                let w = Self::slots(&Self::slots(w, n).tr(), n).tr(); // [N, N]
                w.matmul(&x)
            }
        };
        if let Some(prior) = &self.prior {
            out = match self.cfg.coupling.space {
                CouplingSpace::Feature => out + x.matmul(&prior.kernel(x.size()[2], &x)),
                CouplingSpace::TokenPosition => {
                    // The slots past `positions` are not coupled, as for Wᵗʳᵃⁱⁿ.
                    let n = x.size()[1];
                    let k = Self::slots(&prior.kernel(self.cfg.coupling.positions.min(n), &x), n);
                    out + Self::slots(&k.tr(), n).matmul(&x)
                }
            };
        }
        match real {
            Some(r) => out * r,
            None => out,
        }
    }

    /// The first `n` columns of `p` (zero columns for tokens past its slots).
    fn slots(p: &Tensor, n: i64) -> Tensor {
        let have = p.size()[1];
        if n <= have {
            p.narrow(1, 0, n)
        } else {
            let pad = Tensor::zeros([p.size()[0], n - have], (p.kind(), p.device()));
            Tensor::cat(&[p.shallow_clone(), pad], 1)
        }
    }

    /// The bracket of eq. 4: `W(x) − (1 + ω) x − grad` (with the reference-ascent drive,
    /// `W(x) − (1 + ω) x − g + grad`), the gradient under the drive dropout in training.
    fn drive(&self, x: &Tensor, grad: &Tensor, ctx: &StepContext, real: Option<&Tensor>) -> Tensor {
        let grad = if self.cfg.drive_dropout > 0.0 {
            grad.dropout(self.cfg.drive_dropout, ctx.train)
        } else {
            grad.shallow_clone()
        };
        let mut f = match self.cfg.drive {
            Drive::Descend => self.coupling(x, real) - grad,
            Drive::ReferenceAscent => {
                // The block always passes g; a caller of `step` without it gets no residual.
                let f = self.coupling(x, real) + grad;
                match ctx.g {
                    Some(g) => f - g,
                    None => f,
                }
            }
        };
        if self.cfg.inhibition {
            f = f - x * (self.omega() + 1.0);
        }
        match real {
            Some(r) => f * r,
            None => f,
        }
    }
}

fn real_of(ctx: &StepContext, kind: Kind) -> Option<Tensor> {
    ctx.padding.map(|p| p.to_kind(kind).unsqueeze(-1))
}

impl Dynamics for Controlled {
    fn name(&self) -> &str {
        "controlled"
    }

    fn step(&self, x: &Tensor, grad: &Tensor, ctx: &StepContext) -> Tensor {
        let real = real_of(ctx, x.kind());
        let next = x + self.drive(x, grad, ctx, real.as_ref()) * self.cfg.alpha;
        if self.cfg.sigma == 0.0 || !(ctx.train || self.cfg.noise_in_eval) {
            return next;
        }
        let mut noise = x.randn_like() * (self.cfg.alpha.sqrt() * self.cfg.sigma);
        if let Some(r) = &real {
            noise = noise * r;
        }
        next + noise
    }

    fn storage_increment(
        &self,
        x0: &Tensor,
        x1: &Tensor,
        g0: &Tensor,
        g1: &Tensor,
        ctx: &StepContext,
    ) -> Option<Tensor> {
        let real = real_of(ctx, x0.kind());
        let mid = (x0 + x1) * 0.5;
        let mut a = -self.coupling(&mid, real.as_ref());
        if self.cfg.inhibition {
            a = a + &mid * (self.omega() + 1.0);
        }
        let mut dg = g1 - g0;
        if let Some(r) = &real {
            dg = dg * r;
        }
        Some((a * dg).sum_dim_intlist(&[1i64, 2][..], false, x0.kind()))
    }
}

impl DynamicsParams for ControlledConfig {
    const KIND: &'static str = "controlled";
    const ABOUT: &'static str =
        "x ← x + α[W(x) − (1+ω)x − ∂E/∂g], W = PᵀCP, ω > 0 learned (CDAT eq. 4); records V";

    fn validate(&self, field: &str) -> Result<()> {
        let bad = |name: &str, msg: String| Err(CoreError::config(format!("{field}.{name}"), msg));
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return bad("alpha", format!("must be > 0, got {}", self.alpha));
        }
        if !(self.sigma.is_finite() && self.sigma >= 0.0) {
            return bad("sigma", format!("must be ≥ 0, got {}", self.sigma));
        }
        if !self.omega.is_finite() {
            return bad("omega", "must be finite".into());
        }
        if !(self.drive_dropout.is_finite() && (0.0..1.0).contains(&self.drive_dropout)) {
            return bad(
                "drive_dropout",
                format!("must be in [0, 1), got {}", self.drive_dropout),
            );
        }
        if self.omega_mode == OmegaMode::Positive && self.omega <= 0.0 {
            return bad(
                "omega",
                format!(
                    "must be > 0 with omega_mode = \"positive\", got {}",
                    self.omega
                ),
            );
        }
        let c = &self.coupling;
        if c.rank < 0 {
            return bad("coupling.rank", format!("must be ≥ 0, got {}", c.rank));
        }
        if c.prior.distance != PriorDistance::None {
            if !(c.prior.a.is_finite() && c.prior.a > 0.0) {
                return bad(
                    "coupling.prior.a",
                    format!("must be > 0, got {}", c.prior.a),
                );
            }
            if !c.prior.j0.is_finite() {
                return bad("coupling.prior.j0", "must be finite".into());
            }
        }
        if c.space == CouplingSpace::TokenPosition && c.positions < 1 {
            return bad(
                "coupling.positions",
                format!("must be ≥ 1, got {}", c.positions),
            );
        }
        Ok(())
    }

    fn build(&self, ctx: &BuildContext) -> Result<Box<dyn Dynamics>> {
        Ok(Box::new(Controlled::new(ctx.shared, ctx.dim, self)))
    }

    /// With the decay on and no noise or dropout the controlled descent settles in `x`
    /// itself: `W(x) − (1 + ω) x − ∂E/∂g = 0` (CDAT's fixed point of V's descent, Thm 3.3).
    fn fixed_point(&self, field: &str) -> Result<FixedPoint> {
        let refuse = |name: &str, why: &str| {
            Err(CoreError::config(format!("{field}.{name}"), why.to_owned()))
        };
        if self.sigma > 0.0 {
            return refuse(
                "sigma",
                "a noisy descent has no fixed point to train at: set sigma = 0 for an implicit or phantom gradient",
            );
        }
        if self.drive_dropout > 0.0 {
            return refuse(
                "drive_dropout",
                "dropout on the drive changes the map every step: set drive_dropout = 0 for an implicit or phantom gradient",
            );
        }
        if !self.inhibition {
            return refuse(
                "inhibition",
                "without the decay −(1 + ω)x the tokens need not settle: keep inhibition = true for an implicit or phantom gradient",
            );
        }
        Ok(FixedPoint::Tokens)
    }

    fn alpha(&self) -> Option<f64> {
        Some(self.alpha)
    }
}
basin_core::register_dynamics!(ControlledConfig);
