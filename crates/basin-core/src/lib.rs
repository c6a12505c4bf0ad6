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
//! - Terms: [`attention::EnergyAttention`] (eq. 3–4), [`memory::HopfieldEnergy`] (eq. 5).
//! - [`dynamics`]: gradient flow (eq. 6) and Langevin (eq. 27).
//! - [`block::EnergyBlock`]: norm + energy + dynamics for T steps, with a [`block::Trace`].
//! - [`checkpoint`]: safetensors with the config beside them, written atomically.
//! - [`device`]: CPU or CUDA at run time (`BASIN_DEVICE`).
//!
//! Adding an energy term: write a struct holding its parameters (created under an
//! `nn::Path`) and implement [`Energy::energy`]; override [`Energy::grad`] if it has a closed
//! form, and add a test that holds it equal to autograd (see `tests/gradients.rs`).

pub mod attention;
pub mod block;
pub mod checkpoint;
pub mod data;
pub mod device;
pub mod dynamics;
pub mod energy;
pub mod error;
pub mod hopfield;
pub mod hopfield_demos;
pub mod memory;
pub mod norm;
pub mod structure;
pub mod testing;

pub use attention::{AttentionConfig, EnergyAttention};
pub use block::{BlockConfig, EnergyBlock, TermConfig, Trace, TraceOptions};
pub use dynamics::{Dynamics, DynamicsConfig, GradientFlow, Langevin, StepContext};
pub use energy::{Energy, EnergySum};
pub use error::{CoreError, Result};
pub use memory::{Activation, HopfieldConfig, HopfieldEnergy};
pub use norm::{EnergyLayerNorm, NormConfig};
pub use structure::{Interaction, SparseEdges, Structure};
