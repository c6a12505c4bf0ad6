//! The built-in energy terms, each registered under its `kind` (see [`crate::registry`]).
//!
//! - [`attention::EnergyAttention`] (`attention`): multi-head energy attention, ET eq. 3–4;
//!   with unit queries and keys (`vmf-attention`), CDAT's von Mises–Fisher attention, eq. 10–11.
//! - [`hopfield_memory::HopfieldEnergy`] (`hopfield`): the Hopfield memory of ET eq. 5 and the
//!   dense associative memories of the Hopfield slides; `activation = "rectified"` is CDAT eq. 15.
//! - [`input_field::InputField`] (`input-field`): the external field of the block's own input
//!   (input injection), so that a fixed point depends on where its descent started.

pub mod attention;
pub mod hopfield_memory;
pub mod input_field;
