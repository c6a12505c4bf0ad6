//! CDAT, the Controlled Dynamics Attractor Transformer (Zhang et al., 2026): its blocks and the
//! hyperparameters of the paper's tables, as configs of the tasks in basin-tasks.
//!
//! A CDAT block is `E = λ_v E^{ATT-vMF} + λ_h E^{HN}` (eq. 9) — von Mises–Fisher attention with
//! per-head unit queries and keys (eq. 10–11, basin-core's `vmf-attention`) and the linear
//! rectified Hopfield memory `−Σ relu(ξ·g)` (eq. 15, `activation = "rectified"`) — under ET's
//! scalar-gain layer norm, moved by the controlled excitation–inhibition dynamics
//! `x⁺ = x + α[W(x) − (1+ω)x − ∇_g E]` (eq. 4, [`controlled`]), whose storage
//! functional V (eq. 6) every trace records.
//!
//! Paper math is the default; `graph::tu_reference` turns on what the public code does instead (the
//! CDAT code, `Angelov1vil/CDAT`): token-position coupling over 501 slots with a full 4 × 4 core,
//! the unconstrained `s·c` damping, plain (not vMF) attention with the H × H head mixing and the
//! multiplicative adjacency, ½relu² memories, λ = 1/1, noise in evaluation, sink padding, per-entry
//! sign flips, raw attributes and 10 outputs — whose parameter counts are the paper's (Tables 10
//! and 14); `anomaly::reference` does the same for the anomaly code (ascending drive, per-feature
//! layer norm, clipped attention with one divisor, node-position W, output layer, linear readout;
//! Table 13's count with the parameters it never uses).
//!
//! - [`controlled`]: the controlled dynamics (eq. 2–4), its coupling W = PᵀQP, damping ω and
//!   Gaussian prior (eq. 3), registered as `kind = "controlled"`;
//! - [`block`](mod@block): the CDAT block (eq. 9), its dynamics, the excitation/inhibition ablations;
//! - [`graph`]: graph classification (TU, Tables 1, 3, 11); [`anomaly`]: node anomaly detection
//!   (Tables 2, 8, 12).
//!
//! ```
//! use basin_core::{EnergyBlock, Structure};
//! use tch::{Device, Kind, Tensor, nn::VarStore};
//!
//! // A CDAT block of width 16: vMF attention of 2 heads of 8, 32 rectified memories, 4 steps
//! // of the controlled dynamics, whose storage functional V the trace records (Theorem 3.3).
//! let config = basin_cdat::block(16, 2, 8, 32, 4, basin_cdat::paper_dynamics());
//! let vs = VarStore::new(Device::Cpu);
//! let block = EnergyBlock::new(&vs.root(), &config)?;
//! let tokens = Tensor::randn([3, 5, 16], (Kind::Float, Device::Cpu));
//! let (settled, trace) = block.run(&tokens, &Structure::full(), false, Some(Default::default()));
//! assert_eq!(settled.size(), [3, 5, 16]);
//! assert!(trace.expect("traced").storage.is_some(), "V is recorded beside E");
//! # Ok::<(), basin_core::CoreError>(())
//! ```
//!
//! The reproductions of the paper's tables live in basin-repro.

pub mod anomaly;
pub mod block;
pub mod controlled;
pub mod graph;

pub use block::{
    ABLATIONS, LAMBDA, ablate, block, code_terms, paper_dynamics, reference_dynamics, with_prior,
};
pub use controlled::{Controlled, ControlledConfig};
