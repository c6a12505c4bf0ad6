//! Shared fixtures of basin-cdat's integration tests (float64 throughout).
#![allow(dead_code)]

use tch::{Device, Kind, Tensor, nn::VarStore};

/// A var store on the CPU; build modules under `vs.root()`, then call `vs.double()`.
pub fn store() -> VarStore {
    VarStore::new(Device::Cpu)
}

/// Random tokens `[b, n, d]`, float64.
pub fn tokens(b: i64, n: i64, d: i64) -> Tensor {
    Tensor::randn([b, n, d], (Kind::Double, Device::Cpu))
}

pub use basin_core::testing::conformance::padding;
