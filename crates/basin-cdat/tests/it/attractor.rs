//! CDAT's controlled dynamics at the attractor and over its landscape: the implicit gradient
//! of a controlled block equals a long unrolled descent and finite differences (it settles in
//! x itself), the stochastic and non-decaying variants are refused naming the field, and its
//! descent leaves the gradient flow's path carrying its storage functional V (CDAT Figures 1
//! and 3). Float64 where gradients are compared.

use crate::common::*;
use basin_cdat::ControlledConfig;
use basin_core::landscape::landscape;
use basin_core::testing::implicit;
use basin_core::{
    AttentionConfig, BlockConfig, DynamicsConfig, EnergyBlock, FixedPoint, GradientConfig,
    HopfieldMemoryConfig, NormConfig, Structure, TermConfig, VmfAttentionConfig,
};

const D: i64 = 6;

fn cdat_config() -> BlockConfig {
    BlockConfig {
        dim: D,
        steps: 4,
        norm: NormConfig::default(),
        terms: vec![
            TermConfig::new(&VmfAttentionConfig {
                heads: 2,
                head_dim: 3,
                beta: Some(1.0),
                init_std: 1.0,
                ..Default::default()
            }),
            TermConfig::new(&HopfieldMemoryConfig {
                memories: 8,
                init_std: 1.0,
                ..HopfieldMemoryConfig::default()
            }),
        ],
        // Smaller weights leave x* so small that LN's 1/σ makes the step chatter (reported as
        // unconverged); at this scale the descent settles in a few hundred steps.
        dynamics: DynamicsConfig::new(&ControlledConfig {
            alpha: 0.1,
            ..ControlledConfig::default()
        }),
        gradient: GradientConfig::default(),
    }
}

#[test]
fn implicit_gradient_of_a_controlled_block_equals_unrolled_and_finite_differences() {
    implicit::equals_unrolled("cdat", cdat_config(), 3);
    implicit::equals_finite_differences("cdat", cdat_config(), 5);
}

#[test]
fn a_controlled_block_without_a_fixed_point_is_refused_naming_the_field() {
    let refused = |mut cfg: BlockConfig| {
        cfg.gradient = GradientConfig::implicit();
        cfg.validate().unwrap_err().to_string()
    };
    for (edit, field) in [
        (
            (|c: &mut ControlledConfig| c.drive_dropout = 0.1) as fn(&mut ControlledConfig),
            "dynamics.drive_dropout",
        ),
        (|c| c.inhibition = false, "dynamics.inhibition"),
        (|c| c.sigma = 0.1, "dynamics.sigma"),
    ] {
        let mut cfg = cdat_config();
        cfg.dynamics.edit(edit).unwrap();
        assert!(refused(cfg).contains(field), "{field}");
    }
    // A controlled block with a gain per feature settles in x: accepted.
    let mut cdat = cdat_config();
    cdat.norm.per_feature_gain = true;
    cdat.gradient = GradientConfig::implicit();
    cdat.validate().unwrap();
    assert_eq!(
        cdat.dynamics.fixed_point("dynamics").unwrap(),
        FixedPoint::Tokens
    );
}

fn et_block_with(vs: &tch::nn::VarStore, dynamics: DynamicsConfig) -> EnergyBlock {
    let mut cfg = basin_core::testing::et_block(8, 2, 4, 16, 12);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.3)
        .unwrap();
    cfg.edit_terms(|h: &mut HopfieldMemoryConfig| h.init_std = 0.3)
        .unwrap();
    cfg.dynamics = dynamics;
    EnergyBlock::new(&vs.root(), &cfg).unwrap()
}

#[test]
fn controlled_dynamics_leave_the_flow_and_carry_their_storage_functional() {
    tch::manual_seed(5);
    let vs = store();
    let b = et_block_with(&vs, DynamicsConfig::new(&ControlledConfig::default()));
    let x0 = tokens(1, 6, 8).to_kind(tch::Kind::Float);
    let land = landscape(&b, &x0, &Structure::full(), 0.1, 5);
    let [own, flow] = &land.paths[..] else {
        panic!("two paths")
    };
    assert_eq!(own.points[0], flow.points[0], "one start");
    let apart = own
        .points
        .iter()
        .zip(&flow.points)
        .map(|(p, q)| (p[0] - q[0]).hypot(p[1] - q[1]))
        .fold(0.0, f64::max);
    assert!(apart > 1e-6, "CDAT's path is the flow's");
    assert_eq!(own.storage.as_ref().map(Vec::len), Some(own.energy.len()));
}
