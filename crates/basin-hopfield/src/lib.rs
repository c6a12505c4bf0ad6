//! Modern Hopfield networks (Ramsauer et al., "Hopfield networks is all you need"; the
//! slides), the associative memories ET and CDAT build on:
//!
//! - [`memory`]: the classical binary network, dense associative memories (Krotov–Hopfield's
//!   polynomial and Demircigil's exponential interaction) and the continuous modern network,
//!   each with its energy, so the slides' convergence and capacity statements can be checked.
//! - [`layers`]: the trainable [`Hopfield`] association (state patterns attend stored patterns,
//!   `Z = softmax(β R W_Q W_Kᵀ Yᵀ) Y W_K W_V`), [`HopfieldPooling`] (learned queries over a
//!   set) and [`HopfieldLayer`] (learned stored patterns).
//! - [`bags`]: multiple-instance bag classification with `HopfieldPooling` (the paper's MIL
//!   benchmarks), as a learner for basin-train's protocols.
//!
//! The memory energy ET and CDAT descend (ET eq. 5) is basin-core's `hopfield-memory` term.
//!
//! ```
//! use basin_hopfield::{AssociationConfig, HopfieldPooling};
//! use tch::{Device, Kind, Tensor, nn::VarStore};
//!
//! // Pool sets of 7 patterns of width 16 into one 16-wide vector each, with one learned query.
//! let vs = VarStore::new(Device::Cpu);
//! let config = AssociationConfig { state_size: 16, stored_size: 16, ..AssociationConfig::default() };
//! let pooling = HopfieldPooling::new(&vs.root(), &config, 1)?;
//! let sets = Tensor::randn([4, 7, 16], (Kind::Float, Device::Cpu));
//! let pooled = pooling.forward(&sets, None);
//! assert_eq!(pooled.size(), [4, 16]);
//! # Ok::<(), basin_core::CoreError>(())
//! ```

pub mod bags;
pub mod layers;
pub mod memory;

pub use layers::{AssociationConfig, Hopfield, HopfieldLayer, HopfieldPooling};
pub use memory::{ClassicalHopfield, DamInteraction, DenseAssociativeMemory, ModernHopfield};
