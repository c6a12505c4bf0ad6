//! The integration tests of `basin-cdat`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod attractor;
mod cdat;
mod common;
mod controlled;
