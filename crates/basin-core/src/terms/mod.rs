//! The built-in energy terms, each registered under its `kind` (see [`crate::registry`]).
//!
//! - [`attention::EnergyAttention`] (`attention`): multi-head energy attention, ET eq. 3–4.
//! - [`hopfield_memory::HopfieldEnergy`] (`hopfield`): the Hopfield memory of ET eq. 5 and the
//!   dense associative memories of the Hopfield slides.

pub mod attention;
pub mod hopfield_memory;
