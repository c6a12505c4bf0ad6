//! The open catalogue of energy terms and dynamics: what a `kind = "…"` in a config file means.
//!
//! A term is usable from TOML, and so from every task, once its parameter struct implements
//! [`TermParams`] and one line registers it — in the term's own file, in any crate:
//!
//! ```text
//! #[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
//! #[serde(default, deny_unknown_fields)]
//! pub struct ProjectionConfig { pub width: i64 }
//!
//! impl basin_core::registry::TermParams for ProjectionConfig {
//!     const KIND: &'static str = "projection";
//!     const ABOUT: &'static str = "−½‖P g‖² per token";
//!     fn build(&self, ctx: &BuildContext, name: &str) -> basin_core::Result<Box<dyn Energy>> { … }
//! }
//! basin_core::register_term!(ProjectionConfig);
//! ```
//!
//! Dynamics work the same way with [`DynamicsParams`] and [`register_dynamics!`](crate::register_dynamics).
//! Built-in terms and dynamics register exactly so, which is why `block.rs` names none of
//! them. (The registration is collected at link time by `inventory`; nothing needs calling.)
//!
//! In a config file a term is a table with `kind`, an optional `name` (default: the kind;
//! checkpoint prefix and trace label), an optional `weight` (default 1; CDAT eq. 9's λ) and the
//! kind's own parameters, which are checked by deserialising them into its struct, so errors name
//! the field (`terms[1].heads`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tch::nn;

use crate::dynamics::Dynamics;
use crate::energy::Energy;
use crate::error::{CoreError, Result};
use crate::gradient::FixedPoint;

/// Where a block's parameters are created.
#[derive(Debug)]
pub struct BuildContext<'a> {
    /// This term's (or dynamics') own path: per-block parameters go here.
    pub path: &'a nn::Path<'a>,
    /// A path shared by every block of one model, for parameters that all blocks share
    /// (CDAT's coupling W and damping ω). Reuse what is already there with `shared.get(name)`.
    pub shared: &'a nn::Path<'a>,
    /// Token width D.
    pub dim: i64,
}

/// The parameters of an energy term as written in a config file. Implement it for a
/// `Serialize + Deserialize` struct (with `#[serde(default, deny_unknown_fields)]`) and register
/// the struct with [`register_term!`](crate::register_term).
pub trait TermParams: Serialize + DeserializeOwned {
    /// The `kind` that names the term in config files, e.g. `"attention"`.
    const KIND: &'static str;
    /// One line on what the term is (listings, error messages).
    const ABOUT: &'static str;
    /// Kinds the term had before a rename: a config file that names one still reads as this
    /// term (and is written back under [`TermParams::KIND`]).
    const ALIASES: &'static [&'static str] = &[];
    /// The term's name in traces and checkpoints when its config gives none (default: its
    /// kind; a renamed term keeps its old name, so its checkpoints still load).
    const DEFAULT_NAME: &'static str = Self::KIND;
    /// Checks the values; `field` is the config path for errors, e.g. `terms[1]`.
    fn validate(&self, _field: &str) -> Result<()> {
        Ok(())
    }
    /// Creates the term's parameters under `ctx.path`; `name` is the term's name in traces.
    fn build(&self, ctx: &BuildContext, name: &str) -> Result<Box<dyn Energy>>;
    /// The number of attention heads H, for a term whose structure is per head (the `[B, H,
    /// N, N]` bias or scale a [`crate::Structure`] hands to the terms); `None` for the others.
    fn heads(&self) -> Option<i64> {
        None
    }
}

/// The parameters of a dynamics as written in a config file (see [`TermParams`]); register
/// with [`register_dynamics!`](crate::register_dynamics).
pub trait DynamicsParams: Serialize + DeserializeOwned {
    /// The `kind` in config files, e.g. `"langevin"`.
    const KIND: &'static str;
    /// One line on what it is.
    const ABOUT: &'static str;
    /// Checks the values; `field` is the config path for errors, e.g. `dynamics`.
    fn validate(&self, _field: &str) -> Result<()> {
        Ok(())
    }
    /// Builds the dynamics, creating any parameters under `ctx.path` (or `ctx.shared`).
    fn build(&self, ctx: &BuildContext) -> Result<Box<dyn Dynamics>>;
    /// The step size α, if the dynamics has one (reports print it).
    fn alpha(&self) -> Option<f64> {
        None
    }
    /// Where the deterministic descent settles, for an implicit gradient
    /// ([`crate::implicit`]); an error naming the field where it does not (noise, dropout, no
    /// fixed point). The default: the kind declares none.
    fn fixed_point(&self, field: &str) -> Result<FixedPoint> {
        Err(CoreError::config(
            format!("{field}.kind"),
            format!(
                "`{}` declares no fixed point, so it cannot be trained at one (gradient.mode = \"unrolled\")",
                Self::KIND
            ),
        ))
    }
}

type ValidateFn = fn(&toml::Table, &str) -> Result<()>;
type BuildTermFn = fn(&toml::Table, &BuildContext, &str, &str) -> Result<Box<dyn Energy>>;
type ValidateFixedFn = fn(&toml::Table, &str) -> Result<FixedPoint>;
type BuildDynamicsFn = fn(&toml::Table, &BuildContext, &str) -> Result<Box<dyn Dynamics>>;

/// A registered term kind (collected from every crate of the binary).
pub struct TermKind {
    /// The `kind` in config files.
    pub kind: &'static str,
    /// One line on what it is.
    pub about: &'static str,
    /// Older kinds that still name it ([`TermParams::ALIASES`]).
    pub aliases: &'static [&'static str],
    /// Its name in traces and checkpoints when the config gives none.
    pub default_name: &'static str,
    validate: ValidateFn,
    build: BuildTermFn,
    heads: fn(&toml::Table) -> Option<i64>,
}

/// A registered dynamics kind.
pub struct DynamicsKind {
    /// The `kind` in config files.
    pub kind: &'static str,
    /// One line on what it is.
    pub about: &'static str,
    validate: ValidateFn,
    build: BuildDynamicsFn,
    alpha: fn(&toml::Table) -> Option<f64>,
    fixed_point: ValidateFixedFn,
}

inventory::collect!(TermKind);
inventory::collect!(DynamicsKind);

/// The parameters of kind `T` from a config table; errors name `field`.
fn parse<T: DeserializeOwned>(params: &toml::Table, field: &str) -> Result<T> {
    T::deserialize(toml::Value::Table(params.clone()))
        .map_err(|e| CoreError::config(field, e.to_string().trim_end().replace('\n', " ")))
}

/// The parameters of kind `T` from a config table, checked by `validate`; errors name `field`.
fn parse_valid<T: DeserializeOwned>(
    params: &toml::Table,
    field: &str,
    validate: impl Fn(&T, &str) -> Result<()>,
) -> Result<T> {
    let p = parse::<T>(params, field)?;
    validate(&p, field)?;
    Ok(p)
}

fn validate_term<T: TermParams>(params: &toml::Table, field: &str) -> Result<()> {
    parse_valid::<T>(params, field, T::validate).map(drop)
}

fn build_term<T: TermParams>(
    params: &toml::Table,
    ctx: &BuildContext,
    name: &str,
    field: &str,
) -> Result<Box<dyn Energy>> {
    parse_valid::<T>(params, field, T::validate)?.build(ctx, name)
}

fn heads_of<T: TermParams>(params: &toml::Table) -> Option<i64> {
    parse::<T>(params, "").ok().and_then(|p| p.heads())
}

fn validate_dynamics<T: DynamicsParams>(params: &toml::Table, field: &str) -> Result<()> {
    parse_valid::<T>(params, field, T::validate).map(drop)
}

fn build_dynamics<T: DynamicsParams>(
    params: &toml::Table,
    ctx: &BuildContext,
    field: &str,
) -> Result<Box<dyn Dynamics>> {
    parse_valid::<T>(params, field, T::validate)?.build(ctx)
}

fn alpha_of<T: DynamicsParams>(params: &toml::Table) -> Option<f64> {
    parse::<T>(params, "").ok().and_then(|p| p.alpha())
}

fn fixed_point_of<T: DynamicsParams>(params: &toml::Table, field: &str) -> Result<FixedPoint> {
    parse::<T>(params, field)?.fixed_point(field)
}

impl TermKind {
    /// The registration of `T` (what [`register_term!`](crate::register_term) submits).
    pub const fn of<T: TermParams>() -> Self {
        Self {
            kind: T::KIND,
            about: T::ABOUT,
            aliases: T::ALIASES,
            default_name: T::DEFAULT_NAME,
            validate: validate_term::<T>,
            build: build_term::<T>,
            heads: heads_of::<T>,
        }
    }
}

impl DynamicsKind {
    /// The registration of `T` (what [`register_dynamics!`](crate::register_dynamics) submits).
    pub const fn of<T: DynamicsParams>() -> Self {
        Self {
            kind: T::KIND,
            about: T::ABOUT,
            validate: validate_dynamics::<T>,
            build: build_dynamics::<T>,
            alpha: alpha_of::<T>,
            fixed_point: fixed_point_of::<T>,
        }
    }
}

/// Registers an energy term's parameter struct (which implements [`TermParams`]) so that
/// `kind = "<its KIND>"` works in every config file. Write it next to the term.
#[macro_export]
macro_rules! register_term {
    ($params:ty) => {
        $crate::inventory::submit! { $crate::registry::TermKind::of::<$params>() }
    };
}

/// Registers a dynamics' parameter struct (which implements [`DynamicsParams`]).
#[macro_export]
macro_rules! register_dynamics {
    ($params:ty) => {
        $crate::inventory::submit! { $crate::registry::DynamicsKind::of::<$params>() }
    };
}

/// Every registered term kind, sorted by name.
pub fn term_kinds() -> Vec<&'static TermKind> {
    let mut v: Vec<&TermKind> = inventory::iter::<TermKind>.into_iter().collect();
    v.sort_by_key(|k| k.kind);
    v
}

/// Every registered dynamics kind, sorted by name.
pub fn dynamics_kinds() -> Vec<&'static DynamicsKind> {
    let mut v: Vec<&DynamicsKind> = inventory::iter::<DynamicsKind>.into_iter().collect();
    v.sort_by_key(|k| k.kind);
    v
}

impl TermKind {
    /// Whether `kind` names this term (its kind or an alias).
    pub fn is_named(&self, kind: &str) -> bool {
        self.kind == kind || self.aliases.contains(&kind)
    }
}

fn term_kind(kind: &str, field: &str) -> Result<&'static TermKind> {
    let kinds = term_kinds();
    kinds.iter().copied().find(|k| k.is_named(kind)).ok_or_else(|| {
        let known: Vec<&str> = kinds.iter().map(|k| k.kind).collect();
        CoreError::config(
            format!("{field}.kind"),
            format!(
                "unknown energy term `{kind}`; registered: {} (a new term registers itself with basin_core::register_term!)",
                known.join(", ")
            ),
        )
    })
}

fn dynamics_kind(kind: &str, field: &str) -> Result<&'static DynamicsKind> {
    let kinds = dynamics_kinds();
    kinds.iter().copied().find(|k| k.kind == kind).ok_or_else(|| {
        let known: Vec<&str> = kinds.iter().map(|k| k.kind).collect();
        CoreError::config(
            format!("{field}.kind"),
            format!(
                "unknown dynamics `{kind}`; registered: {} (register one with basin_core::register_dynamics!)",
                known.join(", ")
            ),
        )
    })
}

fn one() -> f64 {
    1.0
}

fn is_one(w: &f64) -> bool {
    *w == 1.0
}

fn table_of<T: Serialize>(params: &T) -> Result<toml::Table> {
    match toml::Value::try_from(params) {
        Ok(toml::Value::Table(t)) => Ok(t),
        Ok(_) => Err(CoreError::config("params", "must serialise to a table")),
        Err(e) => Err(CoreError::config("params", e.to_string())),
    }
}

/// `kind` as its registered term calls it now: an alias ([`TermParams::ALIASES`]) becomes the
/// kind; an unknown kind is kept as written, for validation to refuse by name.
fn canonical_kind<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    let kind = String::deserialize(d)?;
    Ok(term_kinds()
        .into_iter()
        .find(|k| k.aliases.contains(&kind.as_str()))
        .map_or(kind, |k| k.kind.to_owned()))
}

/// One energy term of a block as written in a config file: `kind`, optional `name` and
/// `weight`, and the kind's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TermConfig {
    /// A registered term kind (`attention`, `hopfield-memory`, or one registered by another
    /// crate); an older kind of a renamed term reads as the term's kind.
    #[serde(deserialize_with = "canonical_kind")]
    pub kind: String,
    /// Name in traces and checkpoints (default: the kind's [`TermParams::DEFAULT_NAME`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Factor of the term in the block's energy sum (CDAT eq. 9's λ; default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub weight: f64,
    /// The kind's own parameters.
    #[serde(flatten)]
    pub params: toml::Table,
    /// Why the parameters given to [`TermConfig::new`] could not be written as TOML (an integer
    /// above `i64::MAX`, say); [`TermConfig::validate`] refuses the term with it.
    #[serde(skip)]
    unrepresentable: Option<String>,
}

impl TermConfig {
    /// The term `params` (of a registered kind) with its default name and weight 1.
    pub fn new<T: TermParams>(params: &T) -> Self {
        let table = table_of(params);
        Self {
            kind: T::KIND.to_owned(),
            name: None,
            weight: 1.0,
            params: table.as_ref().cloned().unwrap_or_default(),
            unrepresentable: table.err().map(|e| e.to_string()),
        }
    }

    /// The same term under another name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The same term with another weight.
    pub fn weighted(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// The name in traces and checkpoints.
    pub fn name(&self) -> &str {
        match &self.name {
            Some(name) => name,
            None => term_kind(&self.kind, "").map_or(self.kind.as_str(), |k| k.default_name),
        }
    }

    /// Whether this term is of kind `T`.
    pub fn is<T: TermParams>(&self) -> bool {
        self.kind == T::KIND || T::ALIASES.contains(&self.kind.as_str())
    }

    /// The parameters as `T`, if the term is of that kind.
    pub fn params<T: TermParams>(&self) -> Result<T> {
        if !self.is::<T>() {
            return Err(CoreError::config(
                "kind",
                format!("the term is a `{}`, not a `{}`", self.kind, T::KIND),
            ));
        }
        parse(&self.params, self.name())
    }

    /// Changes the parameters of a term of kind `T` in place (no-op for other kinds).
    pub fn edit<T: TermParams>(&mut self, f: impl FnOnce(&mut T)) -> Result<()> {
        if self.is::<T>() {
            let mut p: T = self.params()?;
            f(&mut p);
            self.params = table_of(&p)?;
        }
        Ok(())
    }

    /// Checks the kind, the parameters and the weight; `field` is the config path.
    pub fn validate(&self, field: &str) -> Result<()> {
        if let Some(why) = &self.unrepresentable {
            return Err(CoreError::config(
                field,
                format!(
                    "the `{}` parameters cannot be written to a config: {why}",
                    self.kind
                ),
            ));
        }
        if !self.weight.is_finite() {
            return Err(CoreError::config(
                format!("{field}.weight"),
                "must be finite",
            ));
        }
        (term_kind(&self.kind, field)?.validate)(&self.params, field)
    }

    /// The term's number of attention heads, if its kind has per-head structure
    /// ([`TermParams::heads`]); `None` for other kinds and unknown ones.
    pub fn heads(&self) -> Option<i64> {
        term_kind(&self.kind, "")
            .ok()
            .and_then(|k| (k.heads)(&self.params))
    }

    /// Builds the term with its parameters under `ctx.path / name`.
    pub fn build(
        &self,
        path: &nn::Path,
        shared: &nn::Path,
        dim: i64,
        field: &str,
    ) -> Result<Box<dyn Energy>> {
        let kind = term_kind(&self.kind, field)?;
        let own = path / self.name();
        let ctx = BuildContext {
            path: &own,
            shared,
            dim,
        };
        (kind.build)(&self.params, &ctx, self.name(), field)
    }
}

/// The dynamics of a block as written in a config file: `kind` and its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicsConfig {
    /// A registered dynamics kind (`gradient-flow`, `langevin`, or one registered elsewhere).
    pub kind: String,
    /// The kind's own parameters.
    #[serde(flatten)]
    pub params: toml::Table,
    /// Why the parameters given to [`DynamicsConfig::new`] could not be written as TOML;
    /// [`DynamicsConfig::validate`] refuses the dynamics with it.
    #[serde(skip)]
    unrepresentable: Option<String>,
}

impl DynamicsConfig {
    /// The dynamics `params` of a registered kind.
    pub fn new<T: DynamicsParams>(params: &T) -> Self {
        let table = table_of(params);
        Self {
            kind: T::KIND.to_owned(),
            params: table.as_ref().cloned().unwrap_or_default(),
            unrepresentable: table.err().map(|e| e.to_string()),
        }
    }

    /// The parameters as `T`, if the dynamics is of that kind.
    pub fn params<T: DynamicsParams>(&self) -> Result<T> {
        if self.kind != T::KIND {
            return Err(CoreError::config(
                "dynamics.kind",
                format!("the dynamics is `{}`, not `{}`", self.kind, T::KIND),
            ));
        }
        parse(&self.params, "dynamics")
    }

    /// Changes the parameters of a dynamics of kind `T` in place (no-op for other kinds).
    pub fn edit<T: DynamicsParams>(&mut self, f: impl FnOnce(&mut T)) -> Result<()> {
        if self.kind == T::KIND {
            let mut p: T = self.params()?;
            f(&mut p);
            self.params = table_of(&p)?;
        }
        Ok(())
    }

    /// The step size α, if the kind has one.
    pub fn alpha(&self) -> Option<f64> {
        let kind = dynamics_kind(&self.kind, "dynamics").ok()?;
        (kind.alpha)(&self.params)
    }

    /// Where the kind's deterministic descent settles, or why it cannot be trained at a
    /// fixed point (an error naming the field).
    pub fn fixed_point(&self, field: &str) -> Result<FixedPoint> {
        (dynamics_kind(&self.kind, field)?.fixed_point)(&self.params, field)
    }

    /// Checks the kind and the parameters; `field` is the config path.
    pub fn validate(&self, field: &str) -> Result<()> {
        if let Some(why) = &self.unrepresentable {
            return Err(CoreError::config(
                field,
                format!(
                    "the `{}` parameters cannot be written to a config: {why}",
                    self.kind
                ),
            ));
        }
        (dynamics_kind(&self.kind, field)?.validate)(&self.params, field)
    }

    /// Builds the dynamics with any parameters under `path / "dynamics"` (or `shared`).
    pub fn build(
        &self,
        path: &nn::Path,
        shared: &nn::Path,
        dim: i64,
        field: &str,
    ) -> Result<Box<dyn Dynamics>> {
        let kind = dynamics_kind(&self.kind, field)?;
        let own = path / "dynamics";
        let ctx = BuildContext {
            path: &own,
            shared,
            dim,
        };
        (kind.build)(&self.params, &ctx, field)
    }
}
