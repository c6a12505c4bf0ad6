//! The block a config gets when it names no terms: ET's (eq. 1–6), energy attention of 4 heads
//! of width 16 and a ReLU Hopfield memory of 256 rows on 64-wide tokens, 12 steps of gradient
//! flow with α = 0.1. The Energy Transformer's own constructors are in `basin-et`.

use super::BlockConfig;
use crate::registry::{DynamicsConfig, TermConfig};
use crate::terms::attention::AttentionConfig;
use crate::terms::hopfield_memory::HopfieldMemoryConfig;

impl Default for BlockConfig {
    fn default() -> Self {
        et(64, 4, 16, 256, 12)
    }
}

/// An ET block: attention (H heads of width Y) plus a ReLU Hopfield memory with K memories,
/// gradient flow with α = 0.1 for `steps` steps.
pub(crate) fn et(dim: i64, heads: i64, head_dim: i64, memories: i64, steps: usize) -> BlockConfig {
    let terms = vec![
        TermConfig::new(&AttentionConfig {
            heads,
            head_dim,
            ..AttentionConfig::default()
        }),
        TermConfig::new(&HopfieldMemoryConfig {
            memories,
            ..HopfieldMemoryConfig::default()
        }),
    ];
    BlockConfig::new(dim, steps, terms, DynamicsConfig::gradient_flow(0.1))
}
