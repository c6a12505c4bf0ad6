//! The integration tests of `basin-hopfield`, one binary.
#![allow(clippy::unwrap_used)]

mod bags;
mod hopfield;
