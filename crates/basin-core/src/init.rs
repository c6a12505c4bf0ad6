//! How dense layers and batch norms start, as the framework of each reference code starts
//! them: PyTorch's `nn.Linear` for the PyTorch ports (GIN as PyG builds it, GraphGPS,
//! SFi-Former), flax's `nn.Dense` for the JAX ones (the ET code), or tch's own default.
//!
//! The three differ. tch's `nn::linear` draws weights Kaiming-uniform with the ReLU gain,
//! bound `√(6 / fan_in)` (standard deviation `√(2 / fan_in)`), and biases U(±1/√fan_in);
//! PyTorch draws both U(±1/√fan_in), a √6 narrower bound; flax draws `lecun_normal` weights
//! (a normal truncated at ±2σ, scaled to standard deviation `1/√fan_in`) and zero biases.
//! tch's `nn::batch_norm1d` draws its scale from U(0, 1) where PyTorch starts it at 1.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

/// Which framework's initialisation a dense layer starts from (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DenseInit {
    /// tch's `nn::linear` default: weights Kaiming-uniform (ReLU gain), biases U(±1/√fan_in).
    #[default]
    Tch,
    /// PyTorch's `nn.Linear`: weights and biases U(±1/√fan_in).
    Torch,
    /// flax's `nn.Dense`: `lecun_normal` weights, zero biases.
    Flax,
}

impl DenseInit {
    /// A `fan_in → fan_out` dense layer (weight `[fan_out, fan_in]`) started this way.
    pub fn linear(self, path: nn::Path, fan_in: i64, fan_out: i64, bias: bool) -> nn::Linear {
        let bias = bias.then(|| match self {
            // tch's own default bias draw, made explicit (the same draws).
            Self::Tch | Self::Torch => uniform(fan_in),
            Self::Flax => nn::Init::Const(0.0),
        });
        self.build(path, fan_in, fan_out, bias)
    }

    /// As [`Self::linear`] with a bias that starts at 0 whatever the framework (one that
    /// gates a mask, as ET's A′); no random draw is spent on it.
    pub fn linear_zero_bias(self, path: nn::Path, fan_in: i64, fan_out: i64) -> nn::Linear {
        self.build(path, fan_in, fan_out, Some(nn::Init::Const(0.0)))
    }

    fn build(
        self,
        path: nn::Path,
        fan_in: i64,
        fan_out: i64,
        bias: Option<nn::Init>,
    ) -> nn::Linear {
        let ws_init = match self {
            Self::Tch => nn::LinearConfig::default().ws_init,
            Self::Torch => uniform(fan_in),
            Self::Flax => nn::Init::Const(0.0),
        };
        let layer = nn::linear(
            &path,
            fan_in,
            fan_out,
            nn::LinearConfig {
                ws_init,
                bs_init: bias,
                bias: bias.is_some(),
            },
        );
        if self == Self::Flax {
            let w = lecun_normal(&[fan_out, fan_in], fan_in, layer.ws.device());
            tch::no_grad(|| layer.ws.shallow_clone().copy_(&w));
        }
        layer
    }
}

/// The four maps of PyTorch's `nn.MultiheadAttention(dim, heads)` as it starts them, named
/// `q`, `k`, `v` (each `dim → inner`) and `o` (`inner → dim`) under `path`: the joint input
/// projection `[3·inner, dim]` Xavier-uniform, bound `√(6 / (dim + 3·inner))` (its fans are those
/// of the joint matrix, so each of q, k, v is narrower than a Xavier start of its own), input
/// biases 0; the output projection an `nn.Linear`, U(±1/√inner), its bias 0 (GraphGPS's
/// Transformer branch; `inner = dim` there).
pub fn multihead_attention(
    path: &nn::Path,
    dim: i64,
    inner: i64,
) -> (nn::Linear, nn::Linear, nn::Linear, nn::Linear) {
    let input = |name: &str| multihead_input(path / name, dim, inner, 3 * inner);
    let (q, k, v) = (input("q"), input("k"), input("v"));
    (q, k, v, multihead_output(path / "o", inner, dim))
}

/// The same start for a joint input projection `dim → 3·dim` (`in_proj`, as
/// `nn.TransformerEncoderLayer` holds it) and its output projection `dim → dim` (`out_proj`).
pub fn multihead_attention_joint(
    in_proj: nn::Path,
    out_proj: nn::Path,
    dim: i64,
) -> (nn::Linear, nn::Linear) {
    (
        multihead_input(in_proj, dim, 3 * dim, 3 * dim),
        multihead_output(out_proj, dim, dim),
    )
}

/// A `dim → rows` slice of a `[joint_rows, dim]` input projection started Xavier-uniform over
/// the whole, with a zero bias.
fn multihead_input(path: nn::Path, dim: i64, rows: i64, joint_rows: i64) -> nn::Linear {
    let bound = (6.0 / (dim + joint_rows).max(1) as f64).sqrt();
    nn::linear(
        path,
        dim,
        rows,
        nn::LinearConfig {
            ws_init: nn::Init::Uniform {
                lo: -bound,
                up: bound,
            },
            bs_init: Some(nn::Init::Const(0.0)),
            bias: true,
        },
    )
}

/// `nn.MultiheadAttention`'s output projection: an `nn.Linear` whose bias starts at 0.
fn multihead_output(path: nn::Path, inner: i64, dim: i64) -> nn::Linear {
    DenseInit::Torch.build(path, inner, dim, Some(nn::Init::Const(0.0)))
}

/// U(−1/√fan_in, 1/√fan_in).
fn uniform(fan_in: i64) -> nn::Init {
    let bound = 1.0 / (fan_in.max(1) as f64).sqrt();
    nn::Init::Uniform {
        lo: -bound,
        up: bound,
    }
}

/// flax's `lecun_normal`: `variance_scaling(1, "fan_in", "truncated_normal")`, a standard
/// normal truncated to [−2, 2] (by its inverse CDF) and divided by that truncation's standard
/// deviation 0.87962566, times `1/√fan_in`.
fn lecun_normal(shape: &[i64], fan_in: i64, device: tch::Device) -> Tensor {
    // Φ(−2) and Φ(2).
    let (lo, hi) = (0.022_750_131_948_179_2, 0.977_249_868_051_820_8);
    let u = Tensor::rand(shape, (Kind::Float, device)) * (hi - lo) + lo;
    let z = (u * 2.0 - 1.0).erfinv() * std::f64::consts::SQRT_2;
    z * (1.0 / (0.879_625_661_034_239_8 * (fan_in.max(1) as f64).sqrt()))
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
