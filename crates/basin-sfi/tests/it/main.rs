//! The integration tests of `basin-sfi`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod attention;
mod encoders;
mod flow;
mod gated_gcn;
mod gps;
mod model;
