//! The integration tests of `basin-data`, one binary.
#![allow(clippy::unwrap_used)]

mod fetch;
mod split;
