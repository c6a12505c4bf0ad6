//! Shared fixtures for basin-core's integration tests (float64 throughout).
#![allow(dead_code, clippy::unwrap_used)]

use basin_core::{
    Activation, AttentionConfig, Energy, EnergyAttention, HopfieldConfig, HopfieldEnergy,
    SparseEdges, Structure,
};
use tch::{Device, Kind, Tensor, nn::VarStore};

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
        ..Default::default()
    };
    EnergyAttention::new(&(vs.root() / "attention"), dim, &cfg)
}

pub fn hopfield(vs: &VarStore, dim: i64, memories: i64, activation: Activation) -> HopfieldEnergy {
    let (beta, power) = match activation {
        Activation::Exp => (Some(0.8), None),
        Activation::Softmax => (Some(1.5), None),
        Activation::Power => (None, Some(3.0)),
        Activation::Relu => (None, None),
    };
    let cfg = HopfieldConfig {
        memories,
        activation,
        beta,
        power,
        init_std: 0.4,
        ..Default::default()
    };
    HopfieldEnergy::new(&(vs.root() / "hopfield"), dim, &cfg)
}

/// Random tokens `[b, n, d]`, float64.
pub fn tokens(b: i64, n: i64, d: i64) -> Tensor {
    Tensor::randn([b, n, d], F64)
}

/// A random boolean mask `[b, n, n]` with density `p`; row 1 of batch 0 is entirely blocked so
/// that the "query with no key" path is exercised.
pub fn random_mask(b: i64, n: i64, p: f64) -> Tensor {
    let m = Tensor::rand([b, n, n], F64).lt(p);
    let _ = m.get(0).get(1).fill_(0);
    m
}

/// The sparse edge list equivalent to a dense mask `[B, N, N]`.
pub fn edges_of(mask: &Tensor) -> SparseEdges {
    let s = mask.size();
    let (b, n) = (s[0], s[1]);
    let nz = mask.nonzero(); // [E, 3] (batch, query, key)
    let query = nz.select(1, 0) * n + nz.select(1, 1);
    let key = nz.select(1, 0) * n + nz.select(1, 2);
    SparseEdges::new(&query, &key, b * n).unwrap()
}

/// A random padding mask `[b, n]`: the last `pad` tokens of every other sample are padding.
pub fn padding(b: i64, n: i64, pad: i64) -> Tensor {
    let p = Tensor::ones([b, n], (Kind::Bool, Device::Cpu));
    for i in (0..b).step_by(2) {
        let _ = p.get(i).narrow(0, n - pad, pad).fill_(0);
    }
    p
}

/// The structures every term is checked under: dense (full, with and without the diagonal;
/// mask; bias with blocked pairs; padding) and sparse (with and without the diagonal; padding).
pub fn structures(b: i64, n: i64, heads: i64) -> Vec<(&'static str, Structure)> {
    let mask = random_mask(b, n, 0.5);
    let bias = Tensor::randn([b, heads, n, n], F64);
    let blocked = Tensor::rand([b, heads, n, n], F64).lt(0.3);
    let bias = bias.masked_fill(&blocked, f64::NEG_INFINITY);
    vec![
        ("full", Structure::full()),
        ("full+self", Structure::full().with_self_attention(true)),
        (
            "full+padding",
            Structure::full().with_padding(padding(b, n, 2)).unwrap(),
        ),
        ("mask", Structure::mask(mask.shallow_clone()).unwrap()),
        (
            "mask+self+padding",
            Structure::mask(mask.shallow_clone())
                .unwrap()
                .with_self_attention(true)
                .with_padding(padding(b, n, 1))
                .unwrap(),
        ),
        ("bias", Structure::bias(bias).unwrap()),
        (
            "mask+scale",
            Structure::mask(mask.shallow_clone())
                .unwrap()
                .with_scale(Tensor::randn([b, heads, n, n], F64))
                .unwrap(),
        ),
        ("sparse", Structure::sparse(edges_of(&mask))),
        (
            "sparse+self",
            Structure::sparse(edges_of(&mask)).with_self_attention(true),
        ),
        (
            "sparse+padding",
            Structure::sparse(edges_of(&mask))
                .with_padding(padding(b, n, 2))
                .unwrap(),
        ),
    ]
}

/// The energy summed over the batch, as a plain number.
pub fn total(energy: &dyn Energy, g: &Tensor, s: &Structure) -> f64 {
    energy.energy(g, s).sum(Kind::Double).double_value(&[])
}
