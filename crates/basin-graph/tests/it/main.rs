//! The integration tests of `basin-graph`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod batch;
mod cache;
mod generators;
mod laplacian;
mod loaders;
mod mil;
mod posenc;
mod tu;
