//! The descent lowers the energy: for a small enough step, the energy along 100 steps never
//! rises (beyond 1e-9 relative), for random weights and inputs, dense and sparse, with padding.

use crate::common::*;
use basin_core::{
    Activation, AttentionConfig, DynamicsConfig, EnergyBlock, HopfieldMemoryConfig, Structure,
    TraceOptions,
};
use tch::Kind;

fn block(vs: &tch::nn::VarStore, alpha: f64, softmax: bool) -> EnergyBlock {
    let mut cfg = basin_core::testing::et_block(8, 2, 4, 16, 100);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.3)
        .unwrap();
    cfg.edit_terms(|h: &mut HopfieldMemoryConfig| {
        h.init_std = 0.3;
        if softmax {
            h.activation = Activation::Softmax;
            h.beta = Some(2.0);
        }
    })
    .unwrap();
    cfg.dynamics = DynamicsConfig::gradient_flow(alpha);
    EnergyBlock::new(&vs.root(), &cfg).unwrap()
}

fn assert_monotone(label: &str, energies: &tch::Tensor) {
    let e: Vec<Vec<f64>> = Vec::try_from(&energies.tr().contiguous()).unwrap();
    for (b, row) in e.iter().enumerate() {
        for t in 1..row.len() {
            let allowed = 1e-9 * row[t - 1].abs().max(1e-12);
            assert!(
                row[t] <= row[t - 1] + allowed,
                "{label}: sample {b}, energy rose at step {t}: {} → {}",
                row[t - 1],
                row[t]
            );
        }
        assert!(
            row[row.len() - 1] < row[0] - 1e-6,
            "{label}: sample {b}: energy did not fall ({} → {})",
            row[0],
            row[row.len() - 1]
        );
    }
}

#[test]
fn energy_never_rises_along_the_descent() {
    tch::manual_seed(20);
    let (b, n) = (4, 10);
    let mask = random_mask(b, n, 0.4);
    let cases = [
        ("full", Structure::full()),
        (
            "mask+padding",
            Structure::mask(mask.shallow_clone())
                .unwrap()
                .with_padding(padding(b, n, 3))
                .unwrap(),
        ),
        ("sparse", Structure::sparse(edges_of(&mask))),
        (
            "sparse+self+padding",
            Structure::sparse(edges_of(&mask))
                .with_self_attention(true)
                .with_padding(padding(b, n, 3))
                .unwrap(),
        ),
    ];
    for softmax in [false, true] {
        let mut vs = store();
        let blk = block(&vs, 0.01, softmax);
        vs.double();
        for (name, s) in &cases {
            let x = tokens(b, n, 8) * 2.0;
            let (_, trace) = tch::no_grad(|| blk.run(&x, s, false, Some(TraceOptions::default())));
            let trace = trace.unwrap();
            assert_eq!(trace.total.size(), [101, b]);
            assert_monotone(&format!("{name} softmax={softmax}"), &trace.total);
        }
    }
}

#[test]
fn ascent_is_caught_by_the_check() {
    // The monotonicity check is not vacuous: the same block stepping up the gradient fails it.
    tch::manual_seed(21);
    let mut vs = store();
    let mut blk = block(&vs, 0.01, false);
    vs.double();
    blk.dynamics = Box::new(basin_core::GradientFlow { alpha: -0.01 });
    let x = tokens(4, 10, 8) * 2.0;
    let (_, trace) =
        tch::no_grad(|| blk.run(&x, &Structure::full(), false, Some(TraceOptions::default())));
    let e = trace.unwrap().total;
    let result = std::panic::catch_unwind(|| assert_monotone("ascent", &e));
    assert!(
        result.is_err(),
        "ascending dynamics passed the monotonicity check"
    );
}

#[test]
fn padded_tokens_do_not_move() {
    tch::manual_seed(22);
    let mut vs = store();
    let blk = block(&vs, 0.05, false);
    vs.double();
    let (b, n) = (2, 6);
    let pad = padding(b, n, 2);
    let s = Structure::full().with_padding(pad.shallow_clone()).unwrap();
    let x = tokens(b, n, 8);
    let y = tch::no_grad(|| blk.forward(&x, &s, false));
    let moved = (&y - &x).abs().sum_dim_intlist(-1, false, Kind::Double);
    let padded_moved = moved
        .masked_select(&pad.logical_not())
        .max()
        .double_value(&[]);
    assert_eq!(padded_moved, 0.0);
    assert!(moved.masked_select(&pad).min().double_value(&[]) > 0.0);
}

/// ET's block splits its energy over the tokens (attention per query, eq. 2; memory per token,
/// eq. 4), dense and sparse, and the split sums to the energy the descent lowers.
#[test]
fn the_energy_splits_over_tokens() {
    let _g = basin_core::testing::lock_generator();
    tch::manual_seed(3);
    let mut vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let b = block(&vs, 0.1, false);
    vs.double();
    let x = tch::Tensor::randn([2, 6, 8], (Kind::Double, tch::Device::Cpu));
    let mask = tch::Tensor::rand([2, 6, 6], (Kind::Double, tch::Device::Cpu)).lt(0.6);
    for s in [Structure::full(), Structure::mask(mask).unwrap()] {
        let tokens = b
            .token_energy(&x, &s)
            .expect("ET's terms split over tokens");
        assert_eq!(tokens.size(), [2, 6]);
        let (_, trace) = b.run(&x, &s, false, Some(TraceOptions::default()));
        let total = trace.unwrap().total.get(0);
        let err = basin_core::testing::max_rel_error(
            &tokens.sum_dim_intlist(-1, false, Kind::Double),
            &total,
            1e-12,
        );
        assert!(err < 1e-10, "{err:e}");
    }
}
