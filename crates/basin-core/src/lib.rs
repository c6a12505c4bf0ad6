//! # basin-core
//!
//! Tensors and energies on libtorch (tch): the energy contract every basin model is built on.
//!
//! The forward pass of an energy-based attractor transformer is the descent of an engineered
//! energy: tokens `x` are normalised (`g = LN(x)`, ET eq. 1), the energy `E(g)` is
//! differentiated, and the tokens move down the gradient (eq. 6) for T steps with shared
//! weights until they settle in an attractor.
//!
//! - [`norm::EnergyLayerNorm`]: ET's layer norm with a scalar gain, and its Lagrangian (eq. 1–2).
//! - [`structure::Structure`]: which tokens interact (dense mask, per-head bias, sparse CSR edge
//!   list), padding, and whether a token attends to itself.
//! - [`energy::Energy`]: the trait every term implements; autograd gradient by default,
//!   closed forms where they exist; [`energy::EnergySum`] for weighted sums.
//! - Terms ([`terms`]): [`terms::attention::EnergyAttention`] (ET eq. 3–4; with unit queries
//!   and keys, CDAT's vMF attention, eq. 10–11), [`terms::hopfield_memory::HopfieldEnergy`]
//!   (ET eq. 5; CDAT eq. 15).
//! - [`dynamics`]: gradient flow (eq. 6) and Langevin (eq. 27); a family adds its own (CDAT's
//!   controlled excitation–inhibition dynamics live in `basin-cdat`).
//! - [`registry`]: the open catalogue behind `kind = "…"` in config files; a new term or
//!   dynamics registers itself in its own file, in any crate.
//! - [`block::EnergyBlock`]: norm + energy + dynamics for T steps, with a [`block::Trace`];
//!   [`landscape`] draws a descent over a plane of its energy (CDAT Figures 1 and 3).
//! - [`implicit`]: training at the attractor: the block settles and its parameters receive the
//!   implicit-function-theorem gradient of the fixed point (or a phantom gradient).
//! - [`init`]: dense layers started as PyTorch, flax or tch start them; PyTorch's batch norm.
//! - [`checkpoint`]: safetensors with the config beside them, written atomically.
//! - [`device`]: CPU or CUDA at run time (`BASIN_DEVICE`).
//! - [`testing`]: tolerances, finite differences, seeded sections, and the conformance suite
//!   every energy term passes ([`testing::conformance::energy_term`]).
//!
//! Adding an energy term: write a struct holding its parameters (created under an
//! `nn::Path`) and implement [`Energy::energy`]; override [`Energy::grad`] if it has a closed
//! form; check it with [`testing::conformance::energy_term`]; to use it from config files,
//! implement [`registry::TermParams`] for its config and call [`register_term!`].

pub mod block;
pub mod checkpoint;
pub mod device;
pub mod dynamics;
pub mod energy;
pub mod error;
pub mod fsio;
pub mod gradient;
pub mod implicit;
pub mod init;
pub mod landscape;
pub mod norm;
pub mod registry;
pub mod structure;
pub mod terms;
pub mod testing;

/// Re-exported for [`register_term!`] and [`register_dynamics!`].
#[doc(hidden)]
pub use inventory;

pub use block::{BlockConfig, EnergyBlock, Recompute, Trace, TraceOptions};
pub use dynamics::{Dynamics, GradientFlow, Langevin, StepContext};
pub use energy::{Energy, EnergySum};
pub use error::{CoreError, Result};
pub use gradient::{FixedPoint, ForwardSolver, GradientConfig, GradientMode, SettleStats, Solver};
pub use norm::{EnergyLayerNorm, NormConfig};
pub use registry::{BuildContext, DynamicsConfig, DynamicsParams, TermConfig, TermParams};
pub use structure::{Interaction, SparseEdges, Structure};
pub use terms::attention::{AttentionConfig, BetaMode, EnergyAttention, VmfAttentionConfig};
pub use terms::hopfield_memory::{Activation, HopfieldEnergy, HopfieldMemoryConfig};
