//! The landscape of a descent (CDAT Figures 1 and 3): its paths start together, a block whose
//! own dynamics is the gradient flow retraces the flow's path, the energy falls along it, and
//! the grid is the energy of the states on the plane.

use crate::common::*;
use basin_core::landscape::landscape;
use basin_core::{AttentionConfig, DynamicsConfig, EnergyBlock, HopfieldMemoryConfig, Structure};

fn block(vs: &tch::nn::VarStore, dynamics: DynamicsConfig) -> EnergyBlock {
    let mut cfg = basin_core::testing::et_block(8, 2, 4, 16, 12);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.3)
        .unwrap();
    cfg.edit_terms(|h: &mut HopfieldMemoryConfig| h.init_std = 0.3)
        .unwrap();
    cfg.dynamics = dynamics;
    EnergyBlock::new(&vs.root(), &cfg).unwrap()
}

#[test]
fn a_gradient_flow_block_retraces_the_flow_over_a_grid_of_its_energy() {
    tch::manual_seed(4);
    let vs = store();
    let b = block(&vs, DynamicsConfig::gradient_flow(0.1));
    let x0 = tokens(1, 6, 8).to_kind(tch::Kind::Float);
    let land = landscape(&b, &x0, &Structure::full(), 0.1, 9);
    assert_eq!((land.u.len(), land.v.len()), (9, 9));
    assert!(land.energy.iter().flatten().all(|e| e.is_finite()));
    assert!((0.0..=1.0 + 1e-12).contains(&land.explained));
    let [own, flow] = &land.paths[..] else {
        panic!("two paths")
    };
    assert_eq!((own.points.len(), flow.points.len()), (13, 13));
    for (p, q) in own.points.iter().zip(&flow.points) {
        assert!(
            (p[0] - q[0]).abs() < 1e-9 && (p[1] - q[1]).abs() < 1e-9,
            "{p:?} {q:?}"
        );
    }
    assert!(own.storage.is_none(), "a gradient flow has no V");
    for w in own.energy.windows(2) {
        assert!(w[1] <= w[0] + 1e-9, "the energy rose: {w:?}");
    }
    // Every path point lies inside the grid.
    for p in &own.points {
        assert!(land.u[0] <= p[0] && p[0] <= land.u[8] && land.v[0] <= p[1] && p[1] <= land.v[8]);
    }
}
