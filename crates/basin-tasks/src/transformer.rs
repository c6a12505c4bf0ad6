//! A standard pre-norm Transformer encoder (Vaswani et al. 2017; ViT, Dosovitskiy et al. 2021):
//! the feedforward architecture ET is measured against. Each layer is
//! `x ← x + W_O·MHA(LN(x))`, `x ← x + MLP(LN(x))` with softmax attention over `W_Q, W_K, W_V`
//! (one `qkv` map) and a two-layer GELU MLP. With `shared`, one layer's weights are applied at
//! every depth (ALBERT, Lan et al. 2020). The graph-transformer baseline and the ViT rows of
//! ET Table 15 are this module.

use serde::{Deserialize, Serialize};
use tch::Tensor;
use tch::nn::{self, Module};

use crate::{Result, TaskError};

/// The size of a [`Transformer`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransformerConfig {
    /// Token width D.
    pub dim: i64,
    /// Heads (D must be a multiple).
    pub heads: i64,
    /// Layers (applications of a layer when `shared`).
    pub layers: usize,
    /// MLP width as a multiple of D.
    pub ffn: i64,
    /// One layer's weights at every depth (ALBERT).
    pub shared: bool,
    /// Biases in the linear maps.
    pub bias: bool,
}

impl Default for TransformerConfig {
    /// ViT-Base: D = 768, 12 heads, 12 layers, MLP 4·D, with biases.
    fn default() -> Self {
        Self::vit_base()
    }
}

impl TransformerConfig {
    /// ViT-Base (Dosovitskiy et al. 2021, Table 1): D = 768, 12 heads, 12 layers, MLP 3072.
    pub fn vit_base() -> Self {
        Self {
            dim: 768,
            heads: 12,
            layers: 12,
            ffn: 4,
            shared: false,
            bias: true,
        }
    }

    /// Checks the sizes.
    pub fn validate(&self) -> Result<()> {
        if self.heads < 1 || self.dim < 1 || self.dim % self.heads != 0 {
            return Err(TaskError::config(
                "transformer.heads",
                format!(
                    "a positive divisor of dim = {}, got {}",
                    self.dim, self.heads
                ),
            ));
        }
        if self.ffn < 1 {
            return Err(TaskError::config(
                "transformer.ffn",
                format!("at least 1, got {}", self.ffn),
            ));
        }
        Ok(())
    }
}

/// One pre-norm layer. Parameter names: `ln1`, `qkv`, `out`, `ln2`, `ff1`, `ff2`.
#[derive(Debug)]
struct Layer {
    ln1: nn::LayerNorm,
    qkv: nn::Linear,
    out: nn::Linear,
    ln2: nn::LayerNorm,
    ff1: nn::Linear,
    ff2: nn::Linear,
}

impl Layer {
    fn new(p: &nn::Path, cfg: &TransformerConfig) -> Self {
        let d = cfg.dim;
        let lin = nn::LinearConfig {
            bias: cfg.bias,
            ..Default::default()
        };
        Self {
            ln1: nn::layer_norm(p / "ln1", vec![d], Default::default()),
            qkv: nn::linear(p / "qkv", d, 3 * d, lin),
            out: nn::linear(p / "out", d, d, lin),
            ln2: nn::layer_norm(p / "ln2", vec![d], Default::default()),
            ff1: nn::linear(p / "ff1", d, cfg.ffn * d, lin),
            ff2: nn::linear(p / "ff2", cfg.ffn * d, d, lin),
        }
    }
}

/// The encoder: layers `layer0, layer1, …` under its path (only `layer0` when shared).
#[derive(Debug)]
pub struct Transformer {
    layers: Vec<Layer>,
    cfg: TransformerConfig,
}

impl Transformer {
    /// Builds it under `path`.
    pub fn new(path: &nn::Path, cfg: &TransformerConfig) -> Result<Self> {
        cfg.validate()?;
        let distinct = if cfg.shared { 1 } else { cfg.layers };
        Ok(Self {
            layers: (0..distinct)
                .map(|l| Layer::new(&(path / format!("layer{l}")), cfg))
                .collect(),
            cfg: cfg.clone(),
        })
    }

    /// Tokens `[B, N, D]` after every layer. `blocked` `[B, 1, N, N]` (true: query i may not
    /// attend key j) masks the scores; `keep` `[B, N, 1]` multiplies the tokens after each
    /// residual update (zero on padding).
    pub fn forward(&self, x: &Tensor, blocked: Option<&Tensor>, keep: Option<&Tensor>) -> Tensor {
        let (bs, n) = (x.size()[0], x.size()[1]);
        let (h, d) = (self.cfg.heads, self.cfg.dim);
        let y = d / h;
        let keep_rows = |t: Tensor| match keep {
            Some(k) => t * k,
            None => t,
        };
        let mut x = x.shallow_clone();
        for depth in 0..self.cfg.layers {
            let layer = &self.layers[if self.cfg.shared { 0 } else { depth }];
            let qkv = layer
                .qkv
                .forward(&layer.ln1.forward(&x))
                .view([bs, n, 3, h, y])
                .permute([2, 0, 3, 1, 4]); // [3, B, H, N, Y]
            let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
            let mut scores = q.matmul(&k.transpose(-1, -2)) / (y as f64).sqrt();
            if let Some(b) = blocked {
                scores = scores.masked_fill(b, -1e9);
            }
            let att = scores.softmax(-1, scores.kind()).matmul(&v);
            let att = att.permute([0, 2, 1, 3]).reshape([bs, n, d]);
            x = keep_rows(&x + layer.out.forward(&att));
            let ff = layer
                .ff2
                .forward(&layer.ff1.forward(&layer.ln2.forward(&x)).gelu("none"));
            x = keep_rows(&x + ff);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    fn count(vs: &nn::VarStore) -> i64 {
        vs.trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum()
    }

    /// One ViT-Base layer without biases holds W_Q, W_K, W_V, W_O (4·D²), the MLP (2·4D·D)
    /// and two LayerNorms (4·D): 7,080,960; shared weights count one layer at any depth.
    #[test]
    fn layer_counts_follow_the_architecture_and_sharing() {
        let cfg = TransformerConfig {
            layers: 1,
            bias: false,
            ..TransformerConfig::vit_base()
        };
        let vs = nn::VarStore::new(Device::Cpu);
        Transformer::new(&vs.root(), &cfg).unwrap();
        assert_eq!(count(&vs), 4 * 768 * 768 + 2 * 3072 * 768 + 4 * 768);
        let vs12 = nn::VarStore::new(Device::Cpu);
        Transformer::new(
            &vs12.root(),
            &TransformerConfig {
                layers: 12,
                shared: true,
                ..cfg.clone()
            },
        )
        .unwrap();
        assert_eq!(count(&vs12), count(&vs));
        let err = Transformer::new(&vs.root(), &TransformerConfig { heads: 5, ..cfg })
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("transformer.heads"), "{err}");
    }

    /// Padding is invariant: a token masked out of every key changes no other token.
    #[test]
    fn blocked_keys_change_nothing_elsewhere() {
        tch::manual_seed(0);
        let cfg = TransformerConfig {
            dim: 8,
            heads: 2,
            layers: 2,
            ffn: 2,
            shared: false,
            bias: true,
        };
        let vs = nn::VarStore::new(Device::Cpu);
        let t = Transformer::new(&vs.root(), &cfg).unwrap();
        let x = Tensor::randn([1, 4, 8], (Kind::Float, Device::Cpu));
        let blocked = Tensor::zeros([1, 1, 4, 4], (Kind::Bool, Device::Cpu));
        let _ = blocked.narrow(3, 3, 1).fill_(1);
        let full = t.forward(&x, Some(&blocked), None).narrow(1, 0, 3);
        let other = x.copy();
        let _ = other.narrow(1, 3, 1).fill_(7.0);
        let changed = t.forward(&other, Some(&blocked), None).narrow(1, 0, 3);
        assert!(full.allclose(&changed, 1e-6, 1e-6, false));
        // Without the mask the last token is seen.
        let seen = t.forward(&other, None, None).narrow(1, 0, 3);
        assert!(!full.allclose(&seen, 1e-4, 1e-4, false));
    }
}
