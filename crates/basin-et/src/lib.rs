//! The Energy Transformer (Hoover et al., 2023): its block and its models, with the
//! hyperparameters of the paper's tables.
//!
//! An ET block is energy attention (eq. 3–4) plus a ReLU Hopfield memory (eq. 5) under a layer
//! norm with a scalar gain (eq. 1), descended by gradient flow (eq. 6) or Langevin dynamics
//! (eq. 27); the models put an encoder, a CLS token, the parameterised adjacency and a readout
//! around it, as basin-tasks' task front ends do:
//!
//! - [`block`](mod@block): the ET block and the ATT / HN ablations (Appendix F);
//! - [`image`]: masked image completion (Section 3; Tables 4 and 14), for
//!   [`basin_tasks::image_completion`];
//! - [`anomaly`]: node anomaly detection (Section 4; Table 6) and the Table 13 ablations, for
//!   [`basin_tasks::node_anomaly`];
//! - [`graph`]: graph classification (Section 5; Table 9), for
//!   [`basin_tasks::graph_classification`].
//!
//! ```
//! use basin_core::{AttentionConfig, DynamicsConfig, EnergyBlock, Structure};
//! use tch::{Device, Kind, Tensor, nn::VarStore};
//!
//! // An ET block of width 32: 4 heads of 8, 64 ReLU memories, 6 steps of gradient flow.
//! let attention = AttentionConfig { heads: 4, head_dim: 8, ..AttentionConfig::default() };
//! let config = basin_et::block(32, attention, 64, 6, DynamicsConfig::gradient_flow(0.1));
//! let vs = VarStore::new(Device::Cpu);
//! let block = EnergyBlock::new(&vs.root(), &config)?;
//! let tokens = Tensor::randn([2, 10, 32], (Kind::Float, Device::Cpu));
//! assert_eq!(block.forward(&tokens, &Structure::full(), false).size(), [2, 10, 32]);
//!
//! // The paper's ImageNet model (Table 4), as a config of basin-tasks' image completion.
//! let imagenet = basin_et::image::imagenet();
//! assert_eq!((imagenet.block.dim, imagenet.block.steps), (768, 12));
//! # Ok::<(), basin_core::CoreError>(())
//! ```
//!
//! The reproductions of the paper's tables live in basin-repro.

pub mod anomaly;
pub mod block;
pub mod graph;
pub mod image;

pub use block::{block, keep_modules};

/// The workspace README, whose Rust example runs as this crate's doctest (so the README's
/// three uses stay true as written).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
