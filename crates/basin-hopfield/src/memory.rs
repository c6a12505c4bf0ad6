//! Associative memories of "Hopfield networks is all you need" (Ramsauer et al.; the slides),
//! each with its energy so that the convergence statements can be checked:
//! - [`ClassicalHopfield`]: binary patterns, `W = Σ x xᵀ` (zero diagonal), sign updates,
//!   `E = −½ ξᵀ W ξ`; capacity about 0.14·d.
//! - [`DenseAssociativeMemory`]: binary patterns with `E = −Σ_μ F(x_μᵀ ξ)`, polynomial
//!   `F(z) = zᵃ` (Krotov & Hopfield; a = 2 is the classical network) or exponential
//!   `F(z) = exp(z)` (Demircigil et al.), asynchronous updates that never raise the energy.
//! - [`ModernHopfield`]: continuous patterns,
//!   `E = −lse(β, Xᵀξ) + ½ ξᵀξ + β⁻¹ log N + ½ M²` and the update `ξ ← X softmax(β Xᵀ ξ)`.
//!
//! Patterns are rows here (`X: [N, d]`), the slides' columns.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// The Euclidean distance between corresponding rows (last dimension) of `a` and `b`, in
/// float64: the measure the memories' retrieval and the claims' checks use.
pub fn distances(a: &Tensor, b: &Tensor) -> Tensor {
    (a - b)
        .square()
        .sum_dim_intlist(-1, false, Kind::Double)
        .sqrt()
}

fn sign(t: &Tensor) -> Tensor {
    // sign(0) = +1, so states stay binary.
    t.ge(0.0).to_kind(t.kind()) * 2.0 - 1.0
}

/// Asynchronous sweeps over the `bits` bits in index order until a sweep changes nothing or
/// `max_sweeps` were taken: the state and the sweeps taken (the binary memories' retrieval).
fn until_stable(
    xi: &Tensor,
    bits: i64,
    max_sweeps: usize,
    sweep: impl Fn(&Tensor, &[i64]) -> Tensor,
) -> (Tensor, usize) {
    let order: Vec<i64> = (0..bits).collect();
    let mut xi = xi.shallow_clone();
    for s in 0..max_sweeps {
        let next = sweep(&xi, &order);
        if next.equal(&xi) {
            return (next, s);
        }
        xi = next;
    }
    (xi, max_sweeps)
}

/// The classical binary Hopfield network.
#[derive(Debug)]
pub struct ClassicalHopfield {
    /// Weights `W = Σ_μ x_μ x_μᵀ` with a zero diagonal, `[d, d]`.
    pub w: Tensor,
}

impl ClassicalHopfield {
    /// Stores ±1 patterns `[N, d]`.
    pub fn store(patterns: &Tensor) -> Self {
        let w = patterns.tr().matmul(patterns);
        let d = w.size()[0];
        Self {
            w: w.masked_fill(&Tensor::eye(d, (Kind::Bool, patterns.device())), 0.0),
        }
    }

    /// `E = −½ ξᵀ W ξ` for states `[B, d]`, `[B]`.
    pub fn energy(&self, xi: &Tensor) -> Tensor {
        -(xi.matmul(&self.w) * xi).sum_dim_intlist(-1, false, xi.kind()) * 0.5
    }

    /// One asynchronous sweep: `ξ_i ← sgn(W_i ξ)` bit by bit in `order` (each bit is one tensor
    /// op over the batch); the energy never rises.
    pub fn sweep(&self, xi: &Tensor, order: &[i64]) -> Tensor {
        let xi = xi.copy();
        for &i in order {
            let field = xi.matmul(&self.w.get(i));
            xi.select(1, i).copy_(&sign(&field));
        }
        xi
    }

    /// Sweeps (in index order) until nothing changes or `max_sweeps`; returns the state and the
    /// sweeps taken.
    pub fn retrieve(&self, xi: &Tensor, max_sweeps: usize) -> (Tensor, usize) {
        until_stable(xi, self.w.size()[0], max_sweeps, |xi, order| {
            self.sweep(xi, order)
        })
    }
}

// ----------------------------------------------------------------------- dense associative

/// The interaction function F of a dense associative memory.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DamInteraction {
    /// `F(z) = zᵃ` (Krotov & Hopfield 2016; a = 2: the classical network).
    Polynomial(u32),
    /// `F(z) = exp(z)` (Demircigil et al. 2017).
    Exponential,
}

/// A dense associative memory over ±1 patterns.
#[derive(Debug)]
pub struct DenseAssociativeMemory {
    /// Stored ±1 patterns `[N, d]`.
    pub patterns: Tensor,
    /// F.
    pub interaction: DamInteraction,
}

impl DenseAssociativeMemory {
    /// `−Σ_μ F(x_μᵀ ξ)` per state `[B]`; for the exponential memory the log of the (positive)
    /// sum is returned negated as `−log Σ exp(z)`, which orders states identically and does
    /// not overflow.
    pub fn energy(&self, xi: &Tensor) -> Tensor {
        let z = xi.matmul(&self.patterns.tr()); // [B, N]
        match self.interaction {
            DamInteraction::Polynomial(a) => {
                -z.pow_tensor_scalar(f64::from(a))
                    .sum_dim_intlist(-1, false, z.kind())
            }
            DamInteraction::Exponential => -z.logsumexp(-1, false),
        }
    }

    /// One asynchronous sweep: each bit in `order` takes the sign that gives the lower energy
    /// (Krotov & Hopfield's update, `sgn(Σ_μ F(z⁺) − F(z⁻))`); the energy never rises.
    pub fn sweep(&self, xi: &Tensor, order: &[i64]) -> Tensor {
        let xi = xi.copy();
        for &i in order {
            let z = xi.matmul(&self.patterns.tr()); // [B, N]
            let xmu = self.patterns.select(1, i); // [N]
            let rest = &z - xi.select(1, i).unsqueeze(1) * &xmu;
            let (plus, minus) = (&rest + &xmu, &rest - &xmu);
            let score = match self.interaction {
                DamInteraction::Polynomial(a) => {
                    let a = f64::from(a);
                    (plus.pow_tensor_scalar(a) - minus.pow_tensor_scalar(a)).sum_dim_intlist(
                        -1,
                        false,
                        z.kind(),
                    )
                }
                DamInteraction::Exponential => {
                    plus.logsumexp(-1, false) - minus.logsumexp(-1, false)
                }
            };
            xi.select(1, i).copy_(&sign(&score));
        }
        xi
    }

    /// Sweeps (in index order) until nothing changes or `max_sweeps`; returns the state and the
    /// sweeps taken.
    pub fn retrieve(&self, xi: &Tensor, max_sweeps: usize) -> (Tensor, usize) {
        until_stable(xi, self.patterns.size()[1], max_sweeps, |xi, order| {
            self.sweep(xi, order)
        })
    }
}

// --------------------------------------------------------------------------------- modern

/// The continuous modern Hopfield network.
#[derive(Debug)]
pub struct ModernHopfield {
    /// Stored patterns `[N, d]` (the slides' columns of X).
    pub patterns: Tensor,
    /// Inverse temperature β.
    pub beta: f64,
}

impl ModernHopfield {
    /// `E = −lse(β, Xᵀξ) + ½ ξᵀξ + β⁻¹ log N + ½ M²`, M the largest pattern norm; `[B]`.
    pub fn energy(&self, xi: &Tensor) -> Tensor {
        let n = self.patterns.size()[0] as f64;
        let m = self
            .patterns
            .square()
            .sum_dim_intlist(-1, false, xi.kind())
            .max()
            .sqrt();
        let lse = (xi.matmul(&self.patterns.tr()) * self.beta).logsumexp(-1, false) / self.beta;
        -lse + xi.square().sum_dim_intlist(-1, false, xi.kind()) * 0.5
            + n.ln() / self.beta
            + m.square() * 0.5
    }

    /// The attention weights `softmax(β Xᵀ ξ)`, `[B, N]`.
    pub fn weights(&self, xi: &Tensor) -> Tensor {
        (xi.matmul(&self.patterns.tr()) * self.beta).softmax(-1, xi.kind())
    }

    /// One update `ξ ← X softmax(β Xᵀ ξ)`.
    pub fn update(&self, xi: &Tensor) -> Tensor {
        self.weights(xi).matmul(&self.patterns)
    }

    /// Updates until `max‖Δξ‖ < eps` or `max_steps`; returns the state and the steps taken.
    pub fn retrieve(&self, xi: &Tensor, eps: f64, max_steps: usize) -> (Tensor, usize) {
        let mut xi = xi.shallow_clone();
        for s in 0..max_steps {
            let next = self.update(&xi);
            let delta = distances(&next, &xi).max().double_value(&[]);
            xi = next;
            if delta < eps {
                return (xi, s + 1);
            }
        }
        (xi, max_steps)
    }
}
