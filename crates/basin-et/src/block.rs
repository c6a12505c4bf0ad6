//! The ET block (ET Section 2): energy attention (eq. 3–4) plus a ReLU Hopfield memory (eq. 5)
//! under the energy layer norm with a scalar gain (eq. 1), descended for T steps by gradient
//! flow (eq. 6) or Langevin dynamics (eq. 27); and the module ablations of Appendix F.

use basin_core::{AttentionConfig, BlockConfig, DynamicsConfig, HopfieldMemoryConfig, TermConfig};

/// An ET block of width `dim`: `attention` (H heads of width Y) and a ReLU Hopfield memory with
/// `memories` rows, run for `steps` steps of `dynamics`.
pub fn block(
    dim: i64,
    attention: AttentionConfig,
    memories: i64,
    steps: usize,
    dynamics: DynamicsConfig,
) -> BlockConfig {
    let memory = HopfieldMemoryConfig {
        memories,
        ..HopfieldMemoryConfig::default()
    };
    let terms = vec![TermConfig::new(&attention), TermConfig::new(&memory)];
    BlockConfig::new(dim, steps, terms, dynamics)
}

/// `block` with only the modules kept (ET Appendix F, Tables 13 and 14): the energy attention
/// (ATT) if `attention`, the Hopfield memory (HN) if `hopfield`; other terms stay.
pub fn keep_modules(block: &BlockConfig, attention: bool, hopfield: bool) -> BlockConfig {
    let mut b = block.clone();
    b.terms.retain(|t| {
        if t.is::<AttentionConfig>() {
            attention
        } else if t.is::<HopfieldMemoryConfig>() {
            hopfield
        } else {
            true
        }
    });
    b
}
