//! Masked image completion with one recurrent energy block (ET Section 3, Appendix B;
//! the public ET image code, `bhoov/energy-transformer-jax`).
//!
//! Patches are encoded by one affine map, masked patches are replaced by a learned MASK token,
//! a learned position bias is added to every token (after an optional learned CLS token), and
//! one block — ET: energy attention and Hopfield memory with shared weights, `basin_et::image`
//! — descends its energy for T steps. A decoder (LayerNorm + affine) maps the final tokens back
//! to pixels, and the loss is the MSE on the scored patches. [`ImageLearner`] trains it through
//! the protocols and draws its pictures.
//!
//! Switches against the paper's defaults: `self_attention` (the image reference code lets a
//! patch attend to itself; Table 14 shows both), `cls_token` (the reference prepends one),
//! `loss = "reference-rmse"` (the reference's square root of the mean over the *whole* patch
//! tensor with unscored values zeroed).

use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

use basin_core::init::DenseInit;
use basin_core::{BlockConfig, EnergyBlock, Structure, Trace, TraceOptions};
use basin_image::PatchBatch;

use crate::prefix_field;
use crate::transformer::{Transformer, TransformerConfig};
use crate::{Result, TaskError};

mod draw;
mod learner;
mod task;
pub use draw::{Drawn, draw, mask_of};
pub use learner::{Descent, ImageLearner, Reconstruction, summary};
pub use task::ImageRun;

/// The training loss on the scored patches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageLoss {
    /// Mean squared error over the scored patches' values (the paper).
    #[default]
    MaskedMse,
    /// The reference code's `sqrt(mean((pred − img)² · 1[scored]))` over the whole tensor.
    ReferenceRmse,
}

/// Configuration of an [`ImageCompletion`] model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageCompletionConfig {
    /// Image channels.
    pub channels: i64,
    /// Image height.
    pub height: i64,
    /// Image width.
    pub width: i64,
    /// Patch side.
    pub patch: i64,
    /// The ET block (token width, steps, terms, dynamics).
    pub block: BlockConfig,
    /// Whether a patch may attend to itself (Table 14: ET-Full does not, ET-Full+Self does).
    pub self_attention: bool,
    /// Prepend a learned CLS token (the reference code does).
    pub cls_token: bool,
    /// Standard deviation of the MASK, CLS and position initialisation (reference: 0.002).
    pub token_init_std: f64,
    /// Training loss.
    pub loss: ImageLoss,
    /// Train with recomputed activations ([`basin_core::EnergyBlock::run_recomputed`]): the
    /// backward pass recomputes each descent step instead of keeping all T steps' activations,
    /// so that memory holds one step's (T = 12 at the ImageNet size) for about one more
    /// forward pass of time. The gradients are the same. Default off.
    pub recompute: bool,
    /// How the patch encoder and decoder start: `tch` (the default, as every run recorded
    /// without this field) or `flax` as the ET reference code (JAX) starts its `nn.Dense`
    /// layers (`basin_core::init`).
    pub dense_init: DenseInit,
    /// ET Table 16's comparison: a ViT (`basin_tasks::transformer`: softmax attention with
    /// W_V, an MLP, LayerNorms; every patch attends to itself) in place of the energy block, in
    /// the same frame of patching, masking, tokens and decoder; `block` then only sets the
    /// token width, which `vit.dim` must equal. Default none (the energy block).
    pub vit: Option<TransformerConfig>,
}

impl Default for ImageCompletionConfig {
    /// 32² RGB in 4² patches with [`BlockConfig::default`] (ET presets: `basin_et::image`).
    fn default() -> Self {
        Self {
            channels: 3,
            height: 32,
            width: 32,
            patch: 4,
            block: BlockConfig::default(),
            self_attention: false,
            cls_token: true,
            token_init_std: 0.002,
            loss: ImageLoss::MaskedMse,
            recompute: false,
            dense_init: DenseInit::Tch,
            vit: None,
        }
    }
}

impl ImageCompletionConfig {
    /// Number of patches.
    pub fn tokens(&self) -> i64 {
        (self.height / self.patch.max(1)) * (self.width / self.patch.max(1))
    }

    /// Values per patch.
    pub fn patch_len(&self) -> i64 {
        self.channels * self.patch * self.patch
    }

    /// Checks the geometry and the block.
    pub fn validate(&self) -> Result<()> {
        if self.patch < 1 || self.height % self.patch != 0 || self.width % self.patch != 0 {
            return Err(TaskError::config(
                "patch",
                format!(
                    "a patch side dividing {}×{}, got {}",
                    self.height, self.width, self.patch
                ),
            ));
        }
        if !(self.channels == 1 || self.channels == 3) {
            return Err(TaskError::config(
                "channels",
                format!("1 or 3, got {}", self.channels),
            ));
        }
        if let Some(vit) = &self.vit {
            if vit.dim != self.block.dim {
                return Err(TaskError::config(
                    "vit.dim",
                    format!(
                        "the token width block.dim = {}, got {}",
                        self.block.dim, vit.dim
                    ),
                ));
            }
            if self.recompute {
                return Err(TaskError::config(
                    "recompute",
                    "recomputes the energy block's descent; a `vit` has none, so set it false",
                ));
            }
            vit.validate()?;
        }
        if self.recompute && self.block.gradient.mode != basin_core::GradientMode::Unrolled {
            return Err(TaskError::config(
                "recompute",
                "recomputes the unrolled descent; a block trained at its attractor (block.gradient) keeps one step already, so set it false",
            ));
        }
        self.block.validate().map_err(|e| prefix_field("block", e))
    }
}

/// What carries the tokens from the encoder to the decoder.
#[derive(Debug)]
enum Backbone {
    /// The energy block, descended (ET).
    Energy(Box<EnergyBlock>),
    /// A softmax Transformer (ET Table 16's ViT).
    Vit(Transformer),
}

/// The model. Parameter names: `encoder.{weight,bias}`, `mask_token`, `cls_token`, `pos`,
/// `block.…` (the block's checkpoint names; `vit.layer<l>.…` with a ViT),
/// `decoder_norm.{weight,bias}`, `decoder.{weight,bias}`.
#[derive(Debug)]
pub struct ImageCompletion {
    /// The configuration.
    pub cfg: ImageCompletionConfig,
    encoder: nn::Linear,
    mask_token: Tensor,
    cls_token: Option<Tensor>,
    pos: Tensor,
    backbone: Backbone,
    decoder_norm: nn::LayerNorm,
    decoder: nn::Linear,
    memories: Option<Tensor>,
    /// The first attention term's W_K and W_Q, `[H, Y, D]` each (Figure 6).
    kernels: Option<(Tensor, Tensor)>,
}

/// A batch on the device: patches `[B, N, P]`, masked and scored flags `[B, N]`.
#[derive(Debug)]
pub struct PatchBatchOnDevice {
    /// Normalised patch values.
    pub patches: Tensor,
    /// Replaced by MASK.
    pub masked: Tensor,
    /// Counted by the loss.
    pub scored: Tensor,
}

impl PatchBatchOnDevice {
    /// Moves a [`PatchBatch`] to `device`.
    pub fn new(b: &PatchBatch, device: Device) -> Self {
        let (bs, n, p) = (b.batch as i64, b.tokens as i64, b.patch_len as i64);
        Self {
            patches: Tensor::from_slice(&b.patches)
                .view([bs, n, p])
                .to_device(device),
            masked: Tensor::from_slice(&b.masked)
                .view([bs, n])
                .to_device(device),
            scored: Tensor::from_slice(&b.scored)
                .view([bs, n])
                .to_device(device),
        }
    }
}

impl ImageCompletion {
    /// Builds the model under `path` (the block's parameters under `block`).
    pub fn new(path: &nn::Path, cfg: &ImageCompletionConfig) -> Result<Self> {
        cfg.validate()?;
        let d = cfg.block.dim;
        let small = nn::Init::Randn {
            mean: 0.0,
            stdev: cfg.token_init_std,
        };
        let n = cfg.tokens() + i64::from(cfg.cls_token);
        let (backbone, memories, kernels) = match &cfg.vit {
            Some(vit) => (
                Backbone::Vit(Transformer::new(&(path / "vit"), vit)?),
                None,
                None,
            ),
            None => {
                let block = EnergyBlock::new(&(path / "block"), &cfg.block)
                    .map_err(|e| prefix_field("block", e))?;
                // The first term with memories ξ (ET's Hopfield term), for Figure 5's pictures.
                let memories = cfg
                    .block
                    .terms
                    .iter()
                    .find_map(|t| (path / "block" / t.name()).get("xi"));
                let kernels = cfg.block.terms.iter().find_map(|t| {
                    let p = path / "block" / t.name();
                    Some((p.get("w_k")?, p.get("w_q")?))
                });
                (Backbone::Energy(Box::new(block)), memories, kernels)
            }
        };
        Ok(Self {
            cfg: cfg.clone(),
            encoder: cfg
                .dense_init
                .linear(path / "encoder", cfg.patch_len(), d, true),
            mask_token: path.var("mask_token", &[d], small),
            cls_token: cfg.cls_token.then(|| path.var("cls_token", &[d], small)),
            pos: path.var("pos", &[n, d], small),
            backbone,
            memories,
            kernels,
            decoder_norm: nn::layer_norm(path / "decoder_norm", vec![d], Default::default()),
            decoder: cfg
                .dense_init
                .linear(path / "decoder", d, cfg.patch_len(), true),
        })
    }

    /// The energy block, unless a ViT stands in its place.
    pub fn block(&self) -> Option<&EnergyBlock> {
        match &self.backbone {
            Backbone::Energy(b) => Some(b),
            Backbone::Vit(_) => None,
        }
    }

    /// The attention pattern: every token, with or without itself.
    pub fn structure(&self) -> Structure {
        Structure::full().with_self_attention(self.cfg.self_attention)
    }

    /// Tokens `x_0` `[B, N(+1), D]` for patches `[B, N, P]` with `masked` `[B, N]` hidden.
    pub fn encode(&self, patches: &Tensor, masked: &Tensor) -> Tensor {
        let x = self.encoder.forward(patches);
        let x = self
            .mask_token
            .view([1, 1, -1])
            .expand_as(&x)
            .where_self(&masked.unsqueeze(-1), &x);
        let x = match &self.cls_token {
            Some(cls) => Tensor::cat(
                &[cls.view([1, 1, -1]).expand([x.size()[0], 1, -1], false), x],
                1,
            ),
            None => x,
        };
        x + &self.pos
    }

    /// The patch tokens `[B, N, D]` of tokens `[B, N(+1), D]` (the CLS token dropped).
    pub fn patch_tokens(&self, x: &Tensor) -> Tensor {
        if self.cls_token.is_some() {
            x.narrow(1, 1, x.size()[1] - 1)
        } else {
            x.shallow_clone()
        }
    }

    /// Pixels `[B, N, P]` from tokens `[B, N(+1), D]` (the CLS token dropped).
    pub fn decode(&self, x: &Tensor) -> Tensor {
        self.decoder
            .forward(&self.decoder_norm.forward(&self.patch_tokens(x)))
    }

    /// Decodes a direction in token space (a gradient) through the decoder's linear map only.
    pub fn decode_direction(&self, v: &Tensor) -> Tensor {
        self.patch_tokens(v).matmul(&self.decoder.ws.tr())
    }

    /// Predicted pixels for every patch, `[B, N, P]`, and the trace if asked (none with a ViT).
    pub fn forward(
        &self,
        batch: &PatchBatchOnDevice,
        train: bool,
        trace: Option<TraceOptions>,
    ) -> (Tensor, Option<Trace>) {
        let x0 = self.encode(&batch.patches, &batch.masked);
        let (x, tr) = match &self.backbone {
            Backbone::Energy(block) => block.run(&x0, &self.structure(), train, trace),
            Backbone::Vit(vit) => (vit.forward(&x0, None, None), None),
        };
        (self.decode(&x), tr)
    }

    /// The training loss of predictions on a batch.
    pub fn loss(&self, pred: &Tensor, batch: &PatchBatchOnDevice) -> Tensor {
        match self.cfg.loss {
            ImageLoss::MaskedMse => {
                basin_train::loss::masked_mse(pred, &batch.patches, &batch.scored)
            }
            ImageLoss::ReferenceRmse => {
                let m = batch.scored.unsqueeze(-1).to_kind(pred.kind());
                ((pred - &batch.patches) * m)
                    .square()
                    .mean(pred.kind())
                    .sqrt()
            }
        }
    }

    /// Per-image MSE over the scored patches, `[B]`.
    pub fn per_image_mse(pred: &Tensor, batch: &PatchBatchOnDevice) -> Tensor {
        let m = batch.scored.unsqueeze(-1).to_kind(Kind::Float);
        let p = pred.size()[2] as f64;
        ((pred - &batch.patches).square() * &m).sum_dim_intlist(&[1i64, 2][..], false, Kind::Float)
            / (m.sum_dim_intlist(&[1i64, 2][..], false, Kind::Float)
                .clamp_min(1.0)
                * p)
    }

    /// Vectors of token space `[M, D]` decoded to patches `[M, P]` (ET Section 3: any
    /// variable with a token index can be looked at through the decoder).
    pub fn decode_vectors(&self, v: &Tensor) -> Tensor {
        self.decoder.forward(&self.decoder_norm.forward(v))
    }

    /// The first attention term's W_K and W_Q decoded to patches, `[H, Y, P]` each (ET Figure
    /// 6), if the block has attention.
    pub fn decoded_kernels(&self) -> Option<(Tensor, Tensor)> {
        self.kernels.as_ref().map(|(k, q)| {
            let (h, y, d) = (k.size()[0], k.size()[1], k.size()[2]);
            let decode = |w: &Tensor| {
                self.decode_vectors(&w.reshape([h * y, d]))
                    .reshape([h, y, -1])
            };
            (decode(k), decode(q))
        })
    }

    /// The cosine similarity between the position biases of the patches, `[N, N]` (the CLS
    /// token's left out; ET Figure 7).
    pub fn position_similarity(&self) -> Tensor {
        let pos = if self.cls_token.is_some() {
            self.pos.narrow(0, 1, self.pos.size()[0] - 1)
        } else {
            self.pos.shallow_clone()
        };
        let unit = &pos
            / pos
                .norm_scalaropt_dim(2, [1i64].as_slice(), true)
                .clamp_min(1e-12);
        unit.matmul(&unit.tr())
    }

    /// The Hopfield memories ξ_μ decoded to patches, `[K, P]` (ET Figure 5: every weight with
    /// a token index can be looked at through the decoder), if the block has a memory.
    pub fn decoded_memories(&self) -> Option<Tensor> {
        self.memories.as_ref().map(|xi| self.decode_vectors(xi))
    }
}
