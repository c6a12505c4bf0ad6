//! `torch_init` starts layers where PyTorch starts them (tch's defaults do not).

use basin_core::torch_init;
use tch::{Kind, Tensor, nn};

/// The largest |entry| and the standard deviation of `t`.
fn spread(t: &Tensor) -> (f64, f64) {
    (
        t.abs().max().double_value(&[]),
        t.std(true).double_value(&[]),
    )
}

#[test]
fn linear_weights_and_biases_are_uniform_within_one_over_root_fan_in() {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let (fan_in, fan_out) = (256, 512);
    let layer = torch_init::linear(vs.root() / "l", fan_in, fan_out, true);
    let bound = 1.0 / (fan_in as f64).sqrt();
    let (max, std) = spread(&layer.ws);
    assert_eq!(layer.ws.size(), [fan_out, fan_in]);
    assert!(max <= bound, "max |w| {max} > {bound}");
    // U(−b, b) has standard deviation b/√3; tch's Kaiming default is √6 times wider.
    let expected = bound / 3f64.sqrt();
    assert!(
        (std / expected - 1.0).abs() < 0.02,
        "std {std}, U(−b, b) gives {expected}"
    );
    let bias = layer.bs.as_ref().expect("a bias");
    let (max, std) = spread(bias);
    assert!(
        max <= bound && (std / expected - 1.0).abs() < 0.15,
        "bias max {max} std {std}"
    );

    let plain = torch_init::linear(vs.root() / "plain", 4, 3, false);
    assert!(plain.bs.is_none());
}

#[test]
fn batch_norm_starts_at_scale_one_and_shift_zero() {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let bn = torch_init::batch_norm1d(vs.root() / "bn", 16);
    let ones = Tensor::ones([16], (Kind::Float, tch::Device::Cpu));
    assert!(bn.ws.as_ref().expect("a scale").equal(&ones));
    assert!(bn.bs.as_ref().expect("a shift").equal(&ones.zeros_like()));
}
