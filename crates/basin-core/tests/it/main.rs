//! The integration tests of `basin-core`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod checkpoint;
mod common;
mod custom_term;
mod descent;
mod device;
mod gradients;
mod implicit;
mod init;
mod landscape;
mod norm;
mod registry;
mod structure;
mod training;
