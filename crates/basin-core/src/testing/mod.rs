//! Helpers for tests in this and downstream crates: tolerances, finite differences, seeded
//! sections, and the [`conformance`] suite every energy term passes.
//!
//! Comparisons use burn's rule `|a − b| ≤ max(rel·|a + b|/2, abs)` element-wise.

pub mod conformance;
pub mod implicit;

use std::sync::{Mutex, MutexGuard};

use tch::{Kind, Tensor};

static GENERATOR: Mutex<()> = Mutex::new(());

/// Holds libtorch's global generator for the calling test until the guard drops: tests that
/// seed it and draw from it run one at a time, so they get the same numbers every time.
pub fn lock_generator() -> MutexGuard<'static, ()> {
    GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `f` after `tch::manual_seed(seed)`, holding [`lock_generator`] (not reentrant).
pub fn seeded<T>(seed: i64, f: impl FnOnce() -> T) -> T {
    let _guard = lock_generator();
    tch::manual_seed(seed);
    f()
}

/// Every variable of `vs` in name order. `VarStore::variables` is a `HashMap`, whose order
/// changes from process to process: a test that draws random numbers per variable must walk
/// this list, or each run (and CI) gets a different model.
pub fn variables_by_name(vs: &tch::nn::VarStore) -> Vec<(String, Tensor)> {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

/// A small ET block for tests: attention of `heads` heads of width `head_dim` and a ReLU
/// Hopfield memory of `memories` rows on `dim`-wide tokens, `steps` steps of gradient flow with
/// α = 0.1 (the shape of [`BlockConfig::default`](crate::BlockConfig)).
pub fn et_block(
    dim: i64,
    heads: i64,
    head_dim: i64,
    memories: i64,
    steps: usize,
) -> crate::BlockConfig {
    crate::block::default::et(dim, heads, head_dim, memories, steps)
}

/// A relative/absolute tolerance.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    /// Relative part.
    pub rel: f64,
    /// Absolute floor.
    pub abs: f64,
}

impl Tolerance {
    /// For float64 identities (closed form vs autograd).
    pub const STRICT: Self = Self {
        rel: 1e-8,
        abs: 1e-10,
    };
    /// For float64 finite differences.
    pub const FINITE_DIFF: Self = Self {
        rel: 1e-5,
        abs: 1e-7,
    };
    /// For float32 comparisons.
    pub const BALANCED: Self = Self {
        rel: 5e-3,
        abs: 1e-5,
    };

    /// The largest violation ratio `|a−b| / max(rel·|a+b|/2, abs)` (≤ 1 means within tolerance).
    pub fn worst(&self, a: &Tensor, b: &Tensor) -> f64 {
        let a = a.detach().to_kind(Kind::Double).to_device(tch::Device::Cpu);
        let b = b.detach().to_kind(Kind::Double).to_device(tch::Device::Cpu);
        assert_eq!(a.size(), b.size(), "Tolerance::worst: shapes differ");
        if a.numel() == 0 {
            return 0.0;
        }
        let diff = (&a - &b).abs();
        let scale = ((&a + &b).abs() * (self.rel / 2.0)).clamp_min(self.abs);
        (diff / scale).max().double_value(&[])
    }

    /// Whether every element is within tolerance.
    pub fn close(&self, a: &Tensor, b: &Tensor) -> bool {
        self.worst(a, b) <= 1.0
    }
}

/// Largest relative error `max|a − b| / max(max|b|, floor)` — one number for a whole tensor.
pub fn max_rel_error(a: &Tensor, b: &Tensor, floor: f64) -> f64 {
    let a = a.detach().to_kind(Kind::Double).to_device(tch::Device::Cpu);
    let b = b.detach().to_kind(Kind::Double).to_device(tch::Device::Cpu);
    assert_eq!(a.size(), b.size(), "max_rel_error: shapes differ");
    if a.numel() == 0 {
        return 0.0;
    }
    let num = (&a - &b).abs().max().double_value(&[]);
    let den = b.abs().max().double_value(&[]).max(floor);
    num / den
}

/// Central finite differences of a scalar function at `x` (every element; keep `x` small):
/// `(f(x + h e_i) − f(x − h e_i)) / 2h`, computed in float64.
pub fn finite_difference(f: impl Fn(&Tensor) -> f64, x: &Tensor, h: f64) -> Tensor {
    let x = x.detach().to_kind(Kind::Double);
    let flat = x.reshape([-1]);
    let n = flat.size()[0];
    let mut out = vec![0.0; n as usize];
    for (i, o) in out.iter_mut().enumerate() {
        let i = i as i64;
        let orig = flat.double_value(&[i]);
        let plus = flat.copy();
        let _ = plus.get(i).fill_(orig + h);
        let minus = flat.copy();
        let _ = minus.get(i).fill_(orig - h);
        *o = (f(&plus.view_as(&x)) - f(&minus.view_as(&x))) / (2.0 * h);
    }
    Tensor::from_slice(&out).view_as(&x)
}
