//! Shared fixtures for basin-core's integration tests (float64 throughout).
#![allow(dead_code, clippy::unwrap_used)]

use basin_core::{
    Activation, AttentionConfig, Energy, EnergyAttention, HopfieldEnergy, HopfieldMemoryConfig,
    Structure,
};
use tch::{Device, Kind, Tensor, nn, nn::VarStore};

pub const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

/// A float64 var store; build modules under `vs.root()`, then call `vs.double()`.
pub fn store() -> VarStore {
    VarStore::new(Device::Cpu)
}

pub fn attention(
    vs: &VarStore,
    dim: i64,
    heads: i64,
    head_dim: i64,
    learn_beta: bool,
) -> EnergyAttention {
    let cfg = AttentionConfig {
        heads,
        head_dim,
        init_std: 0.4,
        learn_beta,
        beta: Some(0.7),
        head_mixing: false,
        ..Default::default()
    };
    EnergyAttention::new(&(vs.root() / "attention"), dim, &cfg)
}

pub fn hopfield(vs: &VarStore, dim: i64, memories: i64, activation: Activation) -> HopfieldEnergy {
    hopfield_at(&(vs.root() / "hopfield"), dim, memories, activation)
}

pub fn hopfield_at(
    path: &nn::Path,
    dim: i64,
    memories: i64,
    activation: Activation,
) -> HopfieldEnergy {
    let (beta, power) = match activation {
        Activation::Exp => (Some(0.8), None),
        Activation::Softmax => (Some(1.5), None),
        Activation::Power => (None, Some(3.0)),
        Activation::Relu | Activation::Rectified => (None, None),
    };
    let cfg = HopfieldMemoryConfig {
        memories,
        activation,
        beta,
        power,
        init_std: 0.4,
        ..Default::default()
    };
    HopfieldEnergy::new(path, dim, &cfg)
}

/// Random tokens `[b, n, d]`, float64.
pub fn tokens(b: i64, n: i64, d: i64) -> Tensor {
    Tensor::randn([b, n, d], F64)
}

#[allow(unused_imports)]
pub use basin_core::testing::conformance::{edges_of, padding, random_mask, structures};

/// The energy summed over the batch, as a plain number.
pub fn total(energy: &dyn Energy, g: &Tensor, s: &Structure) -> f64 {
    energy.energy(g, s).sum(Kind::Double).double_value(&[])
}
