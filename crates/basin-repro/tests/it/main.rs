//! The integration tests of `basin-repro`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod converted_sets;
mod custom_term;
mod hopfield_claims;
mod presets;
mod recorded_starts;
