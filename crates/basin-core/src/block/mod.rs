//! The ET block: layer norm, energy and dynamics, run for a number of steps with shared weights.
//!
//! Each step normalises the tokens (`g = LN(x)`, eq. 1), evaluates `∂E/∂g` and lets the
//! dynamics move `x` (eq. 6 or 27). A [`Trace`] records the energy per step, in total and per
//! term, and optionally the states and per-term gradients, for plots and for checking that the
//! descent never raises the energy.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

use crate::dynamics::{Dynamics, StepContext};
use crate::energy::{Energy, EnergySum};
use crate::error::{CoreError, Result};
use crate::gradient::{FixedPoint, GradientConfig, GradientMode, ImplicitState};
use crate::norm::{EnergyLayerNorm, NormConfig};
use crate::registry::{DynamicsConfig, TermConfig, TermParams};
use crate::structure::Structure;

pub(crate) mod default;

/// Configuration of an [`EnergyBlock`] (TOML or JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BlockConfig {
    /// Token width D.
    pub dim: i64,
    /// Number of descent steps T.
    pub steps: usize,
    /// The layer norm.
    pub norm: NormConfig,
    /// The energy terms, summed with their weights.
    pub terms: Vec<TermConfig>,
    /// The dynamics.
    pub dynamics: DynamicsConfig,
    /// How the parameters receive their gradient: through the unrolled steps (the default,
    /// left out of files), or at the attractor (`gradient = "implicit"`, [`crate::gradient`]).
    #[serde(
        skip_serializing_if = "GradientConfig::is_default",
        deserialize_with = "GradientConfig::deserialize_either"
    )]
    pub gradient: GradientConfig,
}

impl BlockConfig {
    /// A block of width `dim` descending the weighted sum of `terms` (ET eq. 7, CDAT eq. 9) for
    /// `steps` steps of `dynamics`, under the default layer norm and unrolled gradients.
    pub fn new(dim: i64, steps: usize, terms: Vec<TermConfig>, dynamics: DynamicsConfig) -> Self {
        Self {
            dim,
            steps,
            norm: NormConfig::default(),
            terms,
            dynamics,
            gradient: GradientConfig::default(),
        }
    }

    /// Checks every value and that term names are unique.
    pub fn validate(&self) -> Result<()> {
        self.validate_with(&[])
    }

    /// As [`BlockConfig::validate`], for a block that also holds the hand-built terms named
    /// `extra` (then the config itself may name no term).
    pub fn validate_with(&self, extra: &[&str]) -> Result<()> {
        if self.dim < 1 {
            return Err(CoreError::config(
                "dim",
                format!("must be ≥ 1, got {}", self.dim),
            ));
        }
        if self.steps < 1 {
            return Err(CoreError::config(
                "steps",
                "must be ≥ 1 (a block of no steps leaves its tokens as they came)",
            ));
        }
        self.norm.validate("norm")?;
        self.dynamics.validate("dynamics")?;
        if self.gradient.mode != GradientMode::Unrolled {
            self.gradient.validate("gradient")?;
            let settles = self.dynamics.fixed_point("dynamics")?;
            if settles == FixedPoint::Normalised && self.norm.per_feature_gain {
                return Err(CoreError::config(
                    "norm.per_feature_gain",
                    "an implicit gradient of a gradient flow needs ET's scalar gain: with a gain per feature the fixed points of LN(x) are not those of the re-standardised descent",
                ));
            }
        }
        if self.terms.is_empty() && extra.is_empty() {
            return Err(CoreError::config(
                "terms",
                "at least one energy term is needed",
            ));
        }
        let mut names: HashSet<&str> = extra.iter().copied().collect();
        if names.len() < extra.len() || names.contains("norm") {
            return Err(CoreError::config(
                "terms",
                "two hand-built terms share a name (or one is `norm`); give each its own",
            ));
        }
        for (i, term) in self.terms.iter().enumerate() {
            let field = format!("terms[{i}]");
            term.validate(&field)?;
            if term.name() == "norm" || !names.insert(term.name()) {
                return Err(CoreError::config(
                    format!("{field}.name"),
                    format!(
                        "`{}` is used twice (or is `norm`); give each term its own name",
                        term.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Changes the parameters of every term of kind `T` (e.g. `AttentionConfig`) in place.
    pub fn edit_terms<T: TermParams>(&mut self, mut f: impl FnMut(&mut T)) -> Result<()> {
        for t in &mut self.terms {
            t.edit(&mut f)?;
        }
        Ok(())
    }

    /// The heads of the first term with per-head structure ([`TermParams::heads`]: the
    /// attention terms): the H of the `[B, H, N, N]` bias and scale a [`Structure`] hands to the
    /// terms. A term whose own parameters merely name a `heads` field does not count.
    pub fn heads(&self) -> Option<i64> {
        self.terms.iter().find_map(TermConfig::heads)
    }

    /// The parameters of the first term of kind `T`, if the block has one.
    pub fn term<T: TermParams>(&self) -> Option<T> {
        self.terms.iter().find_map(|t| t.params::<T>().ok())
    }

    /// Parses a TOML config and validates it; errors name the line or the field.
    pub fn from_toml(text: &str) -> Result<Self> {
        let cfg: Self =
            toml::from_str(text).map_err(|e| CoreError::config("<toml>", e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// What a traced run records besides the energies.
#[derive(Clone, Copy, Debug, Default)]
pub struct TraceOptions {
    /// Keep the token states `x_t` (T + 1 tensors `[B, N, D]`).
    pub states: bool,
    /// Keep each term's gradient `∂E_i/∂g` at every step (T tensors per term).
    pub term_grads: bool,
}

/// The record of a descent.
#[derive(Debug)]
pub struct Trace {
    /// Total energy per step, `[T + 1, B]` (entry t is the energy at `x_t`; the last is at `x_T`).
    pub total: Tensor,
    /// Energy per term and step, each `[T + 1, B]`, in the order of the terms.
    pub terms: Vec<(String, Tensor)>,
    /// `x_0 … x_T`, if requested.
    pub states: Vec<Tensor>,
    /// Per term, `∂E_i/∂g` at steps `0 … T−1`, if requested.
    pub term_grads: Vec<(String, Vec<Tensor>)>,
    /// The dynamics' storage functional per step `[T + 1, B]` (CDAT eq. 6, starting at the
    /// energy), for dynamics that are not a gradient flow of the energy; `None` otherwise.
    pub storage: Option<Tensor>,
}

impl Trace {
    /// Mean over the batch of the total energy at each step.
    pub fn mean_total(&self) -> Vec<f64> {
        mean_rows(&self.total)
    }

    /// Mean over the batch of the storage functional at each step, if the dynamics has one.
    pub fn mean_storage(&self) -> Option<Vec<f64>> {
        self.storage.as_ref().map(mean_rows)
    }

    /// Mean over the batch of each term's energy at each step.
    pub fn mean_terms(&self) -> Vec<(String, Vec<f64>)> {
        self.terms
            .iter()
            .map(|(n, t)| (n.clone(), mean_rows(t)))
            .collect()
    }
}

fn mean_rows(t: &Tensor) -> Vec<f64> {
    let m = t.to_kind(Kind::Double).mean_dim(1, false, Kind::Double);
    Vec::<f64>::try_from(&m).unwrap_or_default()
}

/// An energy block: `norm`, `energy` and `dynamics`, run for `steps` steps with shared weights.
pub struct EnergyBlock {
    /// The energy layer norm (eq. 1).
    pub norm: EnergyLayerNorm,
    /// The energy of the normalised tokens.
    pub energy: Box<dyn Energy>,
    /// How tokens move.
    pub dynamics: Box<dyn Dynamics>,
    /// Number of steps T (of the unrolled descent; a settling one stops at convergence).
    pub steps: usize,
    /// How the parameters receive their gradient.
    pub gradient: GradientConfig,
    /// Which fixed point the dynamics settles in (read by the settling map).
    pub(crate) fixed_point: FixedPoint,
    /// Pending implicit backward passes and settling statistics.
    pub(crate) implicit: ImplicitState,
}

impl std::fmt::Debug for EnergyBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnergyBlock")
            .field("energy", &self.energy.name())
            .field("dynamics", &self.dynamics.name())
            .field("steps", &self.steps)
            .finish()
    }
}

impl EnergyBlock {
    /// Builds a block from a config; parameters are created under `path` (`norm.gamma`,
    /// `norm.delta`, `<term>.<param>`, `dynamics.<param>`).
    pub fn new(path: &nn::Path, cfg: &BlockConfig) -> Result<Self> {
        Self::with_shared(path, path, cfg)
    }

    /// As [`EnergyBlock::new`], with `shared` the path where parameters shared by every block
    /// of a model live (a dynamics' coupling, say); each block built with the same `shared`
    /// uses the same tensors.
    pub fn with_shared(path: &nn::Path, shared: &nn::Path, cfg: &BlockConfig) -> Result<Self> {
        Self::with_terms(path, shared, cfg, Vec::new())
    }

    /// As [`EnergyBlock::with_shared`], with hand-built `(weight, term)`s summed after the
    /// config's: terms no registry builds (one written in Python, say), each under its own
    /// name. The config may then name no term.
    pub fn with_terms(
        path: &nn::Path,
        shared: &nn::Path,
        cfg: &BlockConfig,
        extra: Vec<(f64, Box<dyn Energy>)>,
    ) -> Result<Self> {
        let names: Vec<&str> = extra.iter().map(|(_, t)| t.name()).collect();
        cfg.validate_with(&names)?;
        let norm = EnergyLayerNorm::new(&(path / "norm"), cfg.dim, &cfg.norm);
        let mut sum = EnergySum::new();
        for (i, term) in cfg.terms.iter().enumerate() {
            let t = term.build(path, shared, cfg.dim, &format!("terms[{i}]"))?;
            sum.push(term.weight, t);
        }
        for (weight, term) in extra {
            sum.push(weight, term);
        }
        let mut block = Self::from_parts(
            norm,
            Box::new(sum),
            cfg.dynamics.build(path, shared, cfg.dim, "dynamics")?,
            cfg.steps,
        );
        if cfg.gradient.mode != GradientMode::Unrolled {
            block.fixed_point = cfg.dynamics.fixed_point("dynamics")?;
        }
        block.gradient = cfg.gradient.clone();
        Ok(block)
    }

    /// A block of hand-built parts, trained through its unrolled steps (set
    /// [`EnergyBlock::with_gradient`] for another mode).
    pub fn from_parts(
        norm: EnergyLayerNorm,
        energy: Box<dyn Energy>,
        dynamics: Box<dyn Dynamics>,
        steps: usize,
    ) -> Self {
        Self {
            norm,
            energy,
            dynamics,
            steps,
            gradient: GradientConfig::default(),
            fixed_point: FixedPoint::Normalised,
            implicit: ImplicitState::default(),
        }
    }

    /// The same block with another gradient mode; `fixed_point` says where its dynamics
    /// settles (the config path checks it from the dynamics' kind; here the caller says it).
    pub fn with_gradient(mut self, gradient: GradientConfig, fixed_point: FixedPoint) -> Self {
        self.gradient = gradient;
        self.fixed_point = fixed_point;
        self
    }

    /// Checks user-supplied tokens `x: [B, N, D]` and their structure against the block.
    pub fn check(&self, x: &Tensor, structure: &Structure) -> Result<()> {
        let d = self.norm.delta.size()[0];
        let s = x.size();
        if s.len() != 3 || s[2] != d || !x.is_floating_point() {
            return Err(CoreError::tensor(
                "x",
                format!("a float tensor of shape [B, N, {d}]"),
                format!("{:?} {s:?}", x.kind()),
            ));
        }
        structure.check(s[0], s[1], None)
    }

    /// While `on`, a block trained at its attractor descends its T unrolled steps instead (a
    /// curriculum's first epochs: basin-train's `TrainConfig::implicit_warmup` sets it); an
    /// unrolled block is unaffected.
    pub fn set_warm_up(&self, on: bool) {
        self.implicit.set_warm_up(on);
    }

    /// `x_T` from `x_0` (no trace).
    pub fn forward(&self, x: &Tensor, structure: &Structure, train: bool) -> Tensor {
        self.run(x, structure, train, None).0
    }

    /// Runs the descent; with `trace = Some(options)` also records a [`Trace`].
    ///
    /// Unrolled (the default): gradients with respect to the weights flow through every step
    /// when `x` or the weights require grad and grad mode is on. Implicit or phantom: the
    /// block settles ([`EnergyBlock::settle`]) and its trace has one entry per step taken.
    pub fn run(
        &self,
        x: &Tensor,
        structure: &Structure,
        train: bool,
        trace: Option<TraceOptions>,
    ) -> (Tensor, Option<Trace>) {
        let driven = self.driven(x, structure);
        let structure = driven.as_ref().unwrap_or(structure);
        if self.gradient.mode != GradientMode::Unrolled && !self.implicit.warming_up() {
            return self.run_settled(x, structure, train, trace);
        }
        let mut x = x.shallow_clone();
        let mut rec = trace.map(Recorder::new);
        let mut g = self.norm.forward(&x);
        for step in 0..self.steps {
            let grad = self.energy.grad(&g, structure);
            if let Some(r) = rec.as_mut() {
                r.record(&x, &g, structure, self.energy.as_ref(), true);
            }
            let ctx = StepContext {
                step,
                train,
                padding: structure.padding(),
                g: Some(&g),
            };
            let next = self.dynamics.step(&x, &grad, &ctx);
            // The last step's normalised tokens are needed only by a trace.
            if step + 1 < self.steps || rec.is_some() {
                let g_next = self.norm.forward(&next);
                if let Some(r) = rec.as_mut() {
                    r.storage_step(tch::no_grad(|| {
                        self.dynamics
                            .storage_increment(&x, &next, &g, &g_next, &ctx)
                            .map(|v| v.detach())
                    }));
                }
                g = g_next;
            }
            x = next;
        }
        let trace = rec.map(|mut r| {
            r.record(&x, &g, structure, self.energy.as_ref(), false);
            r.finish()
        });
        (x, trace)
    }

    fn run_settled(
        &self,
        x: &Tensor,
        structure: &Structure,
        train: bool,
        trace: Option<TraceOptions>,
    ) -> (Tensor, Option<Trace>) {
        let mut rec = trace.map(Recorder::new);
        let picks = self.correction_picks(train);
        let mut sampled = Vec::with_capacity(picks.len());
        let settled = self.settle(x, structure, train, |step, x, next| {
            if picks.binary_search(&step).is_ok() {
                sampled.push(next.shallow_clone());
            }
            if let Some(r) = rec.as_mut() {
                let (g, g_next) = (self.norm.forward(x), self.norm.forward(next));
                r.record(x, &g, structure, self.energy.as_ref(), true);
                let ctx = StepContext {
                    step,
                    train,
                    padding: structure.padding(),
                    g: Some(&g),
                };
                r.storage_step(self.dynamics.storage_increment(x, next, &g, &g_next, &ctx));
            }
        });
        let trace = rec.map(|mut r| {
            tch::no_grad(|| {
                let g = self.norm.forward(&settled.state);
                r.record(&settled.state, &g, structure, self.energy.as_ref(), false);
            });
            r.finish()
        });
        self.keep_corrections(sampled, &settled, structure, train);
        (self.settled_output(&settled, structure, train), trace)
    }

    /// `structure` carrying `LN(x)`, with its graph, as the descent's input when a term reads
    /// it ([`Energy::uses_input`], input injection); `None` when none does (the structure
    /// serves as it is). [`EnergyBlock::run`] calls it; a caller stepping the block itself
    /// ([`EnergyBlock::settle`]) passes the structure it returns.
    pub fn driven(&self, x: &Tensor, structure: &Structure) -> Option<Structure> {
        self.energy
            .uses_input()
            .then(|| structure.shallow_clone().with_input(self.norm.forward(x)))
    }

    /// Each token's share of the energy at `g = LN(x)`, `[B, N]` ([`Energy::token_energy`]);
    /// `None` when a term does not split over tokens.
    pub fn token_energy(&self, x: &Tensor, structure: &Structure) -> Option<Tensor> {
        self.energy.token_energy(&self.norm.forward(x), structure)
    }

    /// `∂E/∂g` at `g = LN(x)`, `[B, N, D]`.
    pub fn energy_grad(&self, x: &Tensor, structure: &Structure) -> Tensor {
        self.energy.grad(&self.norm.forward(x), structure)
    }

    /// One step `x_t → x_{t+1}` (normalise, gradient, dynamics).
    pub(crate) fn step(
        &self,
        x: &Tensor,
        structure: &Structure,
        step: usize,
        train: bool,
    ) -> Tensor {
        let g = self.norm.forward(x);
        let grad = self.energy.grad(&g, structure);
        let ctx = StepContext {
            step,
            train,
            padding: structure.padding(),
            g: Some(&g),
        };
        self.dynamics.step(x, &grad, &ctx)
    }

    /// The memory-saving training forward (activation checkpointing per step): runs the
    /// descent without an autograd graph, keeping only the states `x_0 … x_{T−1}`, and returns
    /// `x_T` as a leaf that requires grad with the [`Recompute`] record that finishes the
    /// backward pass. Activation memory is one step's instead of T steps', for about one more
    /// forward pass of time.
    ///
    /// Use: `let (y, rec) = block.run_recomputed(&x0, &s, true); loss(y).backward();
    /// rec.backward(&block, &s);` — the second call takes the gradient that reached `y`
    /// through the steps (recomputing each with its graph, last first) to the weights and on
    /// to `x0`'s own graph, accumulating into `.grad` as `backward` does. The gradients equal
    /// those of [`EnergyBlock::forward`]'s unrolled graph (tested): the dynamics' randomness
    /// is additive noise, independent of `x` and the weights, so a recomputed step has the
    /// same Jacobian though it draws new noise.
    pub fn run_recomputed(
        &self,
        x: &Tensor,
        structure: &Structure,
        train: bool,
    ) -> (Tensor, Recompute) {
        // A term reading the input gets `LN(x₀)` as a leaf; its gradient is sent into `x₀`'s
        // graph at the end of the backward pass.
        let drive = self.energy.uses_input().then(|| {
            let u = self.norm.forward(x);
            let leaf = u.detach().set_requires_grad(true);
            (u, leaf)
        });
        let driven = drive
            .as_ref()
            .map(|(_, leaf)| structure.shallow_clone().with_input(leaf.shallow_clone()));
        let structure = driven.as_ref().unwrap_or(structure);
        let mut states = Vec::with_capacity(self.steps);
        let out = tch::no_grad(|| {
            let mut x = x.detach();
            for step in 0..self.steps {
                let next = self.step(&x, structure, step, train);
                states.push(x);
                x = next;
            }
            x
        });
        let out = out.set_requires_grad(true);
        let rec = Recompute {
            input: x.shallow_clone(),
            drive,
            states,
            output: out.shallow_clone(),
            train,
        };
        (out, rec)
    }
}

/// What [`EnergyBlock::run_recomputed`] keeps for the backward pass: the states before each
/// step, the input (with its own autograd graph) and the output leaf.
#[derive(Debug)]
pub struct Recompute {
    input: Tensor,
    /// `LN(x₀)` with its graph and the leaf the steps read, for a term reading the input.
    drive: Option<(Tensor, Tensor)>,
    states: Vec<Tensor>,
    output: Tensor,
    train: bool,
}

impl Recompute {
    /// Finishes the backward pass once the output's gradient is in place (after the loss's
    /// `backward`): recomputes each step with its graph, last first, backpropagates the
    /// incoming gradient through it (accumulating the weights' gradients), and finally sends
    /// the gradient of `x_0` into the input's graph. Does nothing if no gradient reached the
    /// output. `block` and `structure` must be those of the forward pass.
    pub fn backward(self, block: &EnergyBlock, structure: &Structure) {
        let mut grad = self.output.grad();
        if !grad.defined() {
            return;
        }
        let driven = self
            .drive
            .as_ref()
            .map(|(_, leaf)| structure.shallow_clone().with_input(leaf.shallow_clone()));
        let structure = driven.as_ref().unwrap_or(structure);
        for (step, x) in self.states.iter().enumerate().rev() {
            let x = x.detach().set_requires_grad(true);
            let next = block.step(&x, structure, step, self.train);
            // A vector–Jacobian product through `backward`: d/dθ Σ(next ⊙ grad).
            (next * &grad).sum(x.kind()).backward();
            grad = x.grad().detach();
        }
        // Into `x₀`'s graph, once: the start's gradient and the drive's.
        let kind = self.input.kind();
        let mut to_input = self
            .input
            .requires_grad()
            .then(|| (&self.input * grad).sum(kind));
        if let Some((u, leaf)) = &self.drive {
            let g = leaf.grad();
            if u.requires_grad() && g.defined() {
                let d = (u * g).sum(kind);
                to_input = Some(match to_input {
                    Some(t) => t + d,
                    None => d,
                });
            }
        }
        if let Some(t) = to_input {
            t.backward();
        }
    }
}

struct Recorder {
    opts: TraceOptions,
    /// Storage increments per step; `None` once a step had none.
    increments: Option<Vec<Tensor>>,
    totals: Vec<Tensor>,
    terms: Vec<(String, Vec<Tensor>)>,
    states: Vec<Tensor>,
    grads: Vec<(String, Vec<Tensor>)>,
}

impl Recorder {
    fn new(opts: TraceOptions) -> Self {
        Self {
            opts,
            increments: Some(Vec::new()),
            totals: Vec::new(),
            terms: Vec::new(),
            states: Vec::new(),
            grads: Vec::new(),
        }
    }

    fn record(
        &mut self,
        x: &Tensor,
        g: &Tensor,
        s: &Structure,
        energy: &dyn Energy,
        with_grads: bool,
    ) {
        tch::no_grad(|| {
            let g = g.detach();
            let parts = energy.parts(&g, s);
            if self.terms.is_empty() {
                self.terms = parts.iter().map(|(n, _)| (n.clone(), Vec::new())).collect();
            }
            let mut total = Tensor::zeros([g.size()[0]], (g.kind(), g.device()));
            for ((_, store), (_, e)) in self.terms.iter_mut().zip(parts) {
                total = total + &e;
                store.push(e);
            }
            self.totals.push(total);
            if self.opts.states {
                self.states.push(x.detach().copy());
            }
            if self.opts.term_grads && with_grads {
                let grads = energy.part_grads(&g, s);
                if self.grads.is_empty() {
                    self.grads = grads.iter().map(|(n, _)| (n.clone(), Vec::new())).collect();
                }
                for ((_, store), (_, d)) in self.grads.iter_mut().zip(grads) {
                    store.push(d);
                }
            }
        });
    }

    fn storage_step(&mut self, increment: Option<Tensor>) {
        match (self.increments.as_mut(), increment) {
            (Some(v), Some(i)) => v.push(i),
            _ => self.increments = None,
        }
    }

    fn finish(self) -> Trace {
        // V_t = E_t + Σ_{s < t} increment_s; V_0 = E_0.
        let storage = self.increments.filter(|v| !v.is_empty()).map(|inc| {
            let mut v = Vec::with_capacity(self.totals.len());
            let mut extra = self.totals[0].zeros_like();
            v.push(self.totals[0].shallow_clone());
            for (t, i) in inc.iter().enumerate() {
                extra = extra + i;
                v.push(&self.totals[t + 1] + &extra);
            }
            Tensor::stack(&v, 0)
        });
        Trace {
            storage,
            total: Tensor::stack(&self.totals, 0),
            terms: self
                .terms
                .into_iter()
                .map(|(n, v)| (n, Tensor::stack(&v, 0)))
                .collect(),
            states: self.states,
            term_grads: self.grads,
        }
    }
}
