//! The Hopfield slides' claims, with thresholds that fail when the implementation is wrong.

use basin_core::testing::lock_generator;
use basin_hopfield::*;
use basin_repro::hopfield::claims::*;

#[test]
fn retrieval_after_one_update_with_error_exponential_in_the_separation() {
    let _g = lock_generator();
    tch::manual_seed(1);
    let curve = one_update_error(20, 64, &[1.0, 2.0, 3.0, 4.0], 0.1, 1.0);
    assert!(
        curve.windows(2).all(|w| w[1].0 > w[0].0 && w[1].1 < w[0].1),
        "error does not fall with Δ: {curve:?}"
    );
    let (last_delta, last_err) = curve[3];
    assert!(
        last_err < 0.01,
        "not retrieved in one update at Δ = {last_delta}: error {last_err}"
    );
    // ln(error) against Δ over the last three radii: slope ≈ −β (exponential decay).
    let slope = (curve[3].1.ln() - curve[1].1.ln()) / (curve[3].0 - curve[1].0);
    assert!(
        slope < -0.5,
        "error does not decay exponentially: slope {slope}, {curve:?}"
    );
}

#[test]
fn metastable_states_and_the_global_fixed_point() {
    let _g = lock_generator();
    tch::manual_seed(2);
    let (to_mean, to_member) = metastable(32, 3, 5, 0.05, 1.0);
    assert!(
        to_mean < 0.25 * to_member,
        "similar patterns should give a metastable state at their mean: {to_mean} vs {to_member}"
    );
    let (far, mean_norm) = global_fixed_point(20, 16, 0.01);
    assert!(
        far < 0.05 * mean_norm,
        "small β should give one fixed point near the mean: {far} vs |mean| {mean_norm}"
    );
}

#[test]
fn storage_capacity_classical_fails_near_0_14_d_and_modern_stores_far_more() {
    let _g = lock_generator();
    tch::manual_seed(3);
    let d = 64;
    let classical = capacity(Memory::Classical, d, &[4, 16], 0.1);
    assert!(
        classical[0].1 <= 0.1,
        "classical should store 0.06·d patterns: {classical:?}"
    );
    assert!(
        classical[1].1 >= 0.5,
        "classical should fail at 0.25·d patterns: {classical:?}"
    );
    let poly = capacity(Memory::Polynomial(3), d, &[64], 0.1);
    assert!(poly[0].1 <= 0.1, "F = z³ should store d patterns: {poly:?}");
    let exp = capacity(Memory::Exponential, d, &[128], 0.1);
    assert_eq!(exp[0].1, 0.0, "F = exp should store 2·d patterns: {exp:?}");
    let modern = capacity(Memory::Modern(32.0), d, &[1024], 0.2);
    assert!(
        modern[0].1 <= 0.01,
        "the continuous modern network should store 16·d patterns: {modern:?}"
    );
}

#[test]
fn the_energy_never_rises_along_the_updates() {
    let _g = lock_generator();
    tch::manual_seed(4);
    let curves = energy_along_updates(32, 20, 8, 2.0);
    assert_eq!(curves.len(), 4);
    for (name, e) in &curves {
        assert!(
            e.windows(2)
                .all(|w| w[1] <= w[0] + 1e-9 * w[0].abs().max(1.0)),
            "{name}: energy rose: {e:?}"
        );
        assert!(e[e.len() - 1] < e[0], "{name}: energy did not fall: {e:?}");
    }
    // Each stored pattern is a fixed point of the classical and exponential memories when few.
    let x = binary(3, 64);
    assert!(ClassicalHopfield::store(&x).retrieve(&x, 5).0.equal(&x));
    let dam = DenseAssociativeMemory {
        patterns: x.shallow_clone(),
        interaction: DamInteraction::Exponential,
    };
    assert!(dam.retrieve(&x, 5).0.equal(&x));
}

/// The capacity theorem's c at the slides' two settings is the printed one, and the measured
/// stored fraction at the guaranteed count is whole.
#[test]
fn the_capacity_theorem_gives_the_slides_numbers() {
    let _g = lock_generator();
    tch::manual_seed(5);
    let first = capacity_theorem(1.0, 3.0, 20, 0.001);
    assert!((first.c - 3.1546).abs() < 1e-4, "{first:?}");
    assert!(first.a + first.b.ln() > 1.27 && first.holds(), "{first:?}");
    let second = capacity_theorem(1.0, 1.0, 75, 0.001);
    assert!((second.c - 1.3718).abs() < 1e-3, "{second:?}");
    assert!(
        second.a + second.b.ln() < -0.94 && second.holds(),
        "{second:?}"
    );
    // N ≥ √p c^{(d−1)/4}.
    assert!((second.patterns - 0.001f64.sqrt() * second.c.powf(74.0 / 4.0)).abs() < 1e-9);
    let n = second.patterns.ceil() as i64;
    assert_eq!(stored_fraction(1.0, 1.0, 75, &[n]), [(n, 1.0)]);
    // Too small a β for the sphere: every start runs to the global fixed point near the mean.
    let hot = stored_fraction(0.01, 1.0, 75, &[64])[0].1;
    assert!(hot < 0.5, "{hot}");
}

/// Below capacity the classical network settles on stored patterns, their negations, and also
/// spurious mixtures; the fractions cover every start.
#[test]
fn the_classical_network_has_spurious_states() {
    let _g = lock_generator();
    tch::manual_seed(6);
    let s = spurious_states(100, 5, 400);
    let total = s.stored + s.reversed + s.mixtures + s.other;
    assert!((total - 1.0).abs() < 1e-12, "{s:?}");
    assert!(s.stored > 0.1 && s.reversed > 0.1, "{s:?}");
    assert!(s.mixtures > 0.02, "no three-pattern mixtures: {s:?}");
}

/// Masked retrieval: large β returns the pattern itself from half of it, small β a metastable
/// average; the classical network retrieves random patterns from the same half but not
/// correlated ones.
#[test]
fn masked_queries_are_retrieved_at_large_beta_and_averaged_at_small() {
    let _g = lock_generator();
    tch::manual_seed(7);
    let x = binary(50, 128);
    let (sharp, out) = masked_retrieval(&x, 64, 8.0);
    assert_eq!(sharp.retrieved, 1.0, "{sharp:?}");
    assert!(
        sharp.max_weight > 0.99 && sharp.metastable == 0.0,
        "{sharp:?}"
    );
    assert!((out - &x).abs().max().double_value(&[]) < 1e-6);
    let (soft, _) = masked_retrieval(&x, 64, 0.01);
    assert!(soft.averaged > 10.0 && soft.metastable == 1.0, "{soft:?}");
    // Six random patterns of an image's length, as in the report's control.
    let (exact, overlap, _) = classical_masked(&binary(6, 784), 392);
    assert_eq!((exact, overlap), (1.0, 1.0));
    // Four patterns that share 90 % of their bits: correlated, and not retrieved apart.
    let base = binary(1, 128);
    let flips = tch::Tensor::rand([4, 128], (tch::Kind::Double, tch::Device::Cpu))
        .lt(0.1)
        .to_kind(tch::Kind::Double)
        * -2.0
        + 1.0;
    let (exact, _, _) = classical_masked(&(base * flips), 64);
    assert!(exact < 1.0, "correlated patterns all retrieved");
}
