//! The integration tests of `basin-train`, one binary: each module is what used to be a file of
//! its own under `tests/` (one link instead of one per file).
#![allow(clippy::unwrap_used)]

mod gps_metrics;
mod image_metrics;
mod metrics;
mod optim;
mod protocol;
mod record_roundtrip;
mod runner;
