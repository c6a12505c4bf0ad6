//! `Linear` and `BatchNorm1d` initialised as PyTorch initialises them, for models ported from
//! PyTorch code (GIN as PyG builds it, GraphGPS, SFi-Former).
//!
//! tch's defaults differ from PyTorch's: its `nn::linear` draws weights Kaiming-uniform with
//! the ReLU gain, bound `√(6 / fan_in)`, √6 times PyTorch's `1/√fan_in`, and its
//! `nn::batch_norm1d` draws the scale from U(0, 1) where PyTorch starts it at 1. A port built
//! on tch's defaults therefore starts from larger logits and randomly damped norms.

use tch::nn;

/// PyTorch's `nn.Linear(fan_in, fan_out, bias)`: weight and bias both U(−1/√fan_in,
/// 1/√fan_in) (`kaiming_uniform_(a = √5)` reduces to that bound).
pub fn linear(path: nn::Path, fan_in: i64, fan_out: i64, bias: bool) -> nn::Linear {
    let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
    let uniform = nn::Init::Uniform {
        lo: -bound,
        up: bound,
    };
    nn::linear(
        path,
        fan_in,
        fan_out,
        nn::LinearConfig {
            ws_init: uniform,
            bs_init: Some(uniform),
            bias,
        },
    )
}

/// PyTorch's `nn.BatchNorm1d(width)`: scale 1, shift 0, momentum 0.1, ε = 1e-5.
pub fn batch_norm1d(path: nn::Path, width: i64) -> nn::BatchNorm {
    nn::batch_norm1d(
        path,
        width,
        nn::BatchNormConfig {
            ws_init: nn::Init::Const(1.0),
            ..Default::default()
        },
    )
}
