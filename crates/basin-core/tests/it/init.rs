//! `init` starts dense layers and batch norms where PyTorch and flax start them (tch's
//! defaults do neither).

use basin_core::init::{self, DenseInit};
use basin_core::testing::{lock_generator, seeded};
use tch::{Kind, Tensor, nn};

/// The largest |entry| and the standard deviation of `t`.
fn spread(t: &Tensor) -> (f64, f64) {
    (
        t.abs().max().double_value(&[]),
        t.std(true).double_value(&[]),
    )
}

const FAN_IN: i64 = 256;
const FAN_OUT: i64 = 512;

/// Every test here that draws holds libtorch's generator (`seeded`, `lock_generator`): the
/// draw-for-draw test below fails whenever another test's draw lands between its seed and its
/// draws.
fn layer(how: DenseInit) -> nn::Linear {
    seeded(0, || {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        how.linear(vs.root() / "l", FAN_IN, FAN_OUT, true)
    })
}

#[test]
fn torch_weights_and_biases_are_uniform_within_one_over_root_fan_in() {
    let l = layer(DenseInit::Torch);
    assert_eq!(l.ws.size(), [FAN_OUT, FAN_IN]);
    let bound = 1.0 / (FAN_IN as f64).sqrt();
    let (max, std) = spread(&l.ws);
    assert!(max <= bound, "max |w| {max} > {bound}");
    // U(−b, b) has standard deviation b/√3.
    let expected = bound / 3f64.sqrt();
    assert!(
        (std / expected - 1.0).abs() < 0.02,
        "std {std}, U(−b, b) gives {expected}"
    );
    let (max, std) = spread(l.bs.as_ref().expect("a bias"));
    assert!(
        max <= bound && (std / expected - 1.0).abs() < 0.15,
        "bias max {max} std {std}"
    );
}

#[test]
fn flax_weights_are_truncated_lecun_normal_and_biases_zero() {
    let l = layer(DenseInit::Flax);
    let sigma = 1.0 / (FAN_IN as f64).sqrt();
    let (max, std) = spread(&l.ws);
    assert!((std / sigma - 1.0).abs() < 0.02, "std {std}, want {sigma}");
    // Truncated at two standard deviations of the untruncated normal (σ / 0.8796).
    assert!(max <= 2.0 * sigma / 0.879_625_66 + 1e-6, "max |w| {max}");
    assert!(max > 2.0 * sigma, "max |w| {max}: the tails look cut short");
    let mean = l.ws.mean(Kind::Double).double_value(&[]);
    assert!(mean.abs() < 0.02 * sigma, "mean {mean}");
    let bias = l.bs.as_ref().expect("a bias");
    assert!(bias.equal(&bias.zeros_like()));
}

#[test]
fn tch_keeps_its_kaiming_default_and_bias_is_optional() {
    let l = layer(DenseInit::Tch);
    let (max, std) = spread(&l.ws);
    let bound = (6.0 / FAN_IN as f64).sqrt();
    assert!(max <= bound && (std / (bound / 3f64.sqrt()) - 1.0).abs() < 0.02);
    let _generator = lock_generator();
    let vs = nn::VarStore::new(tch::Device::Cpu);
    for how in [DenseInit::Tch, DenseInit::Torch, DenseInit::Flax] {
        assert!(how.linear(vs.root() / "plain", 4, 3, false).bs.is_none());
    }
}

#[test]
fn batch_norm_starts_at_scale_one_and_shift_zero() {
    let _generator = lock_generator();
    tch::manual_seed(0);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let bn = init::batch_norm1d(vs.root() / "bn", 16);
    let ones = Tensor::ones([16], (Kind::Float, tch::Device::Cpu));
    assert!(bn.ws.as_ref().expect("a scale").equal(&ones));
    assert!(bn.bs.as_ref().expect("a shift").equal(&ones.zeros_like()));
}

#[test]
fn dense_init_reads_from_config_files() {
    let how: DenseInit = serde_json::from_str("\"flax\"").expect("flax");
    assert_eq!(how, DenseInit::Flax);
    assert!(serde_json::from_str::<DenseInit>("\"keras\"").is_err());
}

/// `tch` is tch's own default draw for draw, so models recorded before `DenseInit` existed
/// start from the same tensors (and so do the parameters created after them).
#[test]
fn tch_draws_what_tch_nn_linear_draws() {
    let _generator = lock_generator();
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let draws = |make: &dyn Fn() -> nn::Linear| {
        tch::manual_seed(7);
        let l = make();
        let next = Tensor::rand([3], (Kind::Float, tch::Device::Cpu));
        (l.ws, l.bs, next)
    };
    let same = |a: (Tensor, Option<Tensor>, Tensor), b: (Tensor, Option<Tensor>, Tensor)| {
        assert!(a.0.equal(&b.0) && a.2.equal(&b.2));
        assert_eq!(a.1.is_some(), b.1.is_some());
        if let (Some(x), Some(y)) = (a.1, b.1) {
            assert!(x.equal(&y));
        }
    };
    same(
        draws(&|| DenseInit::Tch.linear(vs.root() / "a", 5, 4, true)),
        draws(&|| nn::linear(vs.root() / "b", 5, 4, Default::default())),
    );
    let zero_bias = nn::LinearConfig {
        bs_init: Some(nn::Init::Const(0.0)),
        ..Default::default()
    };
    same(
        draws(&|| DenseInit::Tch.linear_zero_bias(vs.root() / "c", 5, 4)),
        draws(&|| nn::linear(vs.root() / "d", 5, 4, zero_bias)),
    );
    let bias = DenseInit::Torch.linear_zero_bias(vs.root() / "e", 5, 4).bs;
    assert!(bias.is_some_and(|b| b.equal(&b.zeros_like())));
}

/// `nn.MultiheadAttention(dim, heads)`'s start: q, k, v Xavier-uniform over the joint
/// `[3·inner, dim]` matrix, zero input biases; the output an `nn.Linear` with a zero bias.
#[test]
fn multihead_attention_starts_as_pytorchs() {
    let _generator = lock_generator();
    tch::manual_seed(0);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let (dim, inner) = (96, 96);
    let (q, k, v, o) = init::multihead_attention(&(vs.root() / "mha"), dim, inner);
    let xavier = (6.0 / (dim + 3 * inner) as f64).sqrt();
    for (name, l) in [("q", &q), ("k", &k), ("v", &v)] {
        assert_eq!(l.ws.size(), [inner, dim], "{name}");
        let (max, std) = spread(&l.ws);
        assert!(
            max <= xavier && max > 0.95 * xavier,
            "{name}: max {max}, bound {xavier}"
        );
        let want = xavier / 3f64.sqrt();
        assert!(
            (std / want - 1.0).abs() < 0.05,
            "{name}: std {std}, want {want}"
        );
        let bias = l.bs.as_ref().expect("an input bias");
        assert_eq!(bias.abs().max().double_value(&[]), 0.0, "{name}'s bias");
    }
    assert_eq!(o.ws.size(), [dim, inner]);
    let bound = 1.0 / (inner as f64).sqrt();
    let (max, _) = spread(&o.ws);
    assert!(
        max <= bound && max > 0.95 * bound,
        "o: max {max}, bound {bound}"
    );
    let bias = o.bs.as_ref().expect("an output bias");
    assert_eq!(bias.abs().max().double_value(&[]), 0.0);
    let names: Vec<String> = vs.variables().into_keys().collect();
    for want in ["mha.q.weight", "mha.k.bias", "mha.v.weight", "mha.o.bias"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    // The joint form (`nn.TransformerEncoderLayer`'s `in_proj`): the same bound.
    let (joint, out) =
        init::multihead_attention_joint(vs.root() / "in_proj", vs.root() / "out_proj", dim);
    assert_eq!(joint.ws.size(), [3 * dim, dim]);
    let (max, std) = spread(&joint.ws);
    assert!(max <= xavier && max > 0.95 * xavier, "in_proj: max {max}");
    assert!(
        (std / (xavier / 3f64.sqrt()) - 1.0).abs() < 0.05,
        "in_proj: std {std}"
    );
    for (name, b) in [("in_proj", &joint.bs), ("out_proj", &out.bs)] {
        let b = b.as_ref().expect("a bias");
        assert_eq!(b.abs().max().double_value(&[]), 0.0, "{name}'s bias");
    }
}
