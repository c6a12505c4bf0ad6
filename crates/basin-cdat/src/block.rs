//! The CDAT block (eq. 9): λ_v · vMF attention (eq. 10–11) + λ_h · the rectified Hopfield
//! memory (eq. 15) under ET's scalar-gain layer norm, moved by the controlled dynamics (eq. 4);
//! the paper's and the public code's dynamics, and the ablations of Table 12.

use crate::controlled::{
    ControlledConfig, CouplingConfig, CouplingCore, CouplingInit, CouplingSpace, Drive, OmegaMode,
};
use basin_core::{
    Activation, AttentionConfig, BlockConfig, DynamicsConfig, HopfieldMemoryConfig, TermConfig,
    VmfAttentionConfig,
};

/// The weights λ_v, λ_h of eq. 9 (λ_v + λ_h = 1; the paper gives no values).
pub const LAMBDA: (f64, f64) = (0.5, 0.5);

/// A CDAT block of width `dim`: λ_v · vMF attention (H heads of width Y, β from 1/√Y, learned)
/// plus λ_h · the rectified Hopfield memory with K memories, `steps` steps of `dynamics`.
pub fn block(
    dim: i64,
    heads: i64,
    head_dim: i64,
    memories: i64,
    steps: usize,
    dynamics: ControlledConfig,
) -> BlockConfig {
    let attention = VmfAttentionConfig {
        heads,
        head_dim,
        beta: None,
        learn_beta: true,
        init_std: 0.002,
        eps: 1e-12,
    };
    let memory = HopfieldMemoryConfig {
        memories,
        activation: Activation::Rectified,
        ..HopfieldMemoryConfig::default()
    };
    let terms = vec![
        TermConfig::new(&attention).weighted(LAMBDA.0),
        TermConfig::new(&memory).weighted(LAMBDA.1),
    ];
    BlockConfig::new(dim, steps, terms, DynamicsConfig::new(&dynamics))
}

/// The public code's energy terms for H heads of width Y and K memories:
/// ET's energy attention (queries and keys not normalised; β from 1/√Y, learned) in place of
/// vMF, ½relu² memories in place of the linear rectified ones, λ = 1/1; `head_mixing` adds the
/// classification code's H × H mixing of the logits.
pub fn code_terms(heads: i64, head_dim: i64, memories: i64, head_mixing: bool) -> Vec<TermConfig> {
    vec![
        TermConfig::new(&AttentionConfig {
            heads,
            head_dim,
            beta: None,
            learn_beta: true,
            init_std: 0.002,
            head_mixing,
            ..AttentionConfig::default()
        }),
        TermConfig::new(&HopfieldMemoryConfig {
            memories,
            activation: Activation::Relu,
            ..HopfieldMemoryConfig::default()
        }),
    ]
}

/// The paper's dynamics (Table 10): α = 0.1, σ = 0.02 in training, W of rank 4 over features
/// with a diagonal core (symmetric), ω₀ = 1 learned and positive.
pub fn paper_dynamics() -> ControlledConfig {
    ControlledConfig {
        alpha: 0.1,
        sigma: 0.02,
        noise_in_eval: false,
        coupling: CouplingConfig {
            space: CouplingSpace::Feature,
            rank: 4,
            core: CouplingCore::Diagonal,
            positions: 501,
            init: CouplingInit::Small,
            prior: Default::default(),
        },
        omega: 1.0,
        omega_mode: OmegaMode::Positive,
        inhibition: true,
        drive: Drive::Descend,
        drive_dropout: 0.0,
    }
}

/// The public classification code's dynamics: W over 501 token positions (500 nodes + CLS)
/// with a full 4 × 4 core and LeCun initialisation (not symmetric), ω = s·c with c learned
/// from 1, s = 1, noise in evaluation too.
pub fn reference_dynamics() -> ControlledConfig {
    ControlledConfig {
        noise_in_eval: true,
        coupling: CouplingConfig {
            space: CouplingSpace::TokenPosition,
            rank: 4,
            core: CouplingCore::Full,
            positions: 501,
            init: CouplingInit::Lecun,
            prior: Default::default(),
        },
        omega_mode: OmegaMode::Reference,
        ..paper_dynamics()
    }
}

/// The term-wise ablations of Tables 11 (graph classification) and 12 (anomaly detection):
/// `no-excitation` removes W (Table 12's "SUPP", suppression only), `no-inhibition` removes the
/// decay `−(1+ω)x` (Table 12's "Wx", excitation only; both parts go, as in the code's
/// commented-out variant), `full` is CDAT.
pub const ABLATIONS: [&str; 3] = ["no-excitation", "no-inhibition", "full"];

/// `block` under the ablation `name`, one of [`ABLATIONS`]: the same terms and sizes, with the
/// controlled dynamics' coupling or decay switched off.
pub fn ablate(block: &BlockConfig, name: &str) -> Result<BlockConfig, basin_tasks::TaskError> {
    let config = |e: String| basin_tasks::TaskError::config("ablation", e);
    if !ABLATIONS.contains(&name) {
        return Err(config(format!(
            "one of {}; got `{name}`",
            ABLATIONS.join(", ")
        )));
    }
    // A block without the controlled dynamics has nothing to ablate: refused, not ignored.
    let mut d: ControlledConfig = block
        .dynamics
        .params()
        .map_err(|e| config(format!("block.dynamics: {e}")))?;
    match name {
        "no-excitation" => d.coupling.rank = 0,
        "no-inhibition" => d.inhibition = false,
        _ => {}
    }
    Ok(BlockConfig {
        dynamics: DynamicsConfig::new(&d),
        ..block.clone()
    })
}

/// `block` with eq. 3's Gaussian locality prior `J₀ exp(−d(i,j)²/2a²)` added to its learned
/// coupling (the paper's presets leave it off: its code has none).
pub fn with_prior(
    block: &BlockConfig,
    prior: crate::controlled::PriorConfig,
) -> Result<BlockConfig, basin_tasks::TaskError> {
    let mut d: ControlledConfig = block.dynamics.params().map_err(|e| {
        basin_tasks::TaskError::config("coupling.prior", format!("block.dynamics: {e}"))
    })?;
    d.coupling.prior = prior;
    Ok(BlockConfig {
        dynamics: DynamicsConfig::new(&d),
        ..block.clone()
    })
}
