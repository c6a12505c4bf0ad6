//! The integration tests of `basin-cli`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod cli;
mod common;
mod data_cli;
mod data_parallel;
mod kill_resume;
mod reproduce;
mod train_cli;
