//! The graph classifier's configuration in words, for reports.

use basin_core::init::DenseInit;
use basin_core::{Activation, AttentionConfig, HopfieldMemoryConfig, Langevin, VmfAttentionConfig};

use super::{AdjacencyMode, GraphClassifierConfig, Readout};

impl GraphClassifierConfig {
    /// A model's description for a report, read from its config.
    pub fn describe(&self) -> String {
        let model = self;
        let b = &model.block;
        let (attention, heads, head_dim) = b
            .term::<AttentionConfig>()
            .map(|a| ("energy attention", a.heads, a.head_dim))
            .or_else(|| {
                b.term::<VmfAttentionConfig>()
                    .map(|a| ("vMF attention", a.heads, a.head_dim))
            })
            .unwrap_or(("no attention", 0, 0));
        let hop = b.term::<HopfieldMemoryConfig>();
        let memory = match hop.as_ref().map(|h| h.activation) {
            Some(Activation::Relu) => "½relu² memories",
            Some(Activation::Rectified) => "rectified memories",
            Some(Activation::Power) => "relu-power memories",
            Some(Activation::Exp) => "exponential memories",
            Some(Activation::Softmax) => "softmax memories",
            None => "no memories",
        };
        let noise = b
            .dynamics
            .params::<Langevin>()
            .map(|l| format!(", Langevin σ = {}", l.sigma))
            .unwrap_or_default();
        let seen = match model.readout {
            Readout::Cls => "CLS",
            Readout::ClsMean => "CLS ‖ mean of the nodes",
            Readout::ClsMeanSize => "CLS ‖ mean ‖ ln(n + 1)·mean",
            Readout::ClsMoments => "CLS ‖ mean ‖ ln(n + 1)·mean ‖ std ‖ max",
            Readout::Nodes => "every node",
        };
        let seen = if model.readout_initial {
            format!("{seen}, of the final and the initial tokens,")
        } else {
            seen.to_string()
        };
        let seen = if model.readout_degrees {
            format!("{seen} ‖ ln(1 + ·) of n and the degrees' mean, std and max")
        } else {
            seen
        };
        let head = match model.readout_hidden {
            Some(h) => format!("an MLP (hidden {h})"),
            None => "a linear map".into(),
        };
        let init = match model.dense_init {
            DenseInit::Tch => "Kaiming",
            DenseInit::Torch => "PyTorch's",
            DenseInit::Flax => "lecun-normal",
        };
        let dense = match model.dense_init {
            DenseInit::Tch => String::new(),
            _ => format!(", dense layers started {init} (`dense_init`)"),
        };
        let start = match model.readout_init_gain {
            1.0 => dense,
            0.0 => format!("{dense}, last layer started at zero"),
            g => format!("{dense}, last layer started at {g} × {init}"),
        };
        let degree = model
            .degree_encoding
            .map(|m| format!(", degree encoding (degrees ≥ {m} share one)"))
            .unwrap_or_default();
        let edges =
            if model.batching.dense_edge_features && model.adjacency != AdjacencyMode::MaskOnly {
                ", Â's A′ from the edge features where the dataset has them"
            } else {
                ""
            };
        let over = if model.sparse_attention {
            " over the edges"
        } else {
            ""
        };
        format!(
            "D = {}, {attention} {heads} × {head_dim}{over}, K = {} {memory}, {} blocks × {} steps of `{}` dynamics (α = {}{noise}){degree}{edges}; readout of {seen} by {head}{start}",
            b.dim,
            hop.as_ref().map_or(0, |h| h.memories),
            model.blocks,
            b.steps,
            b.dynamics.kind,
            b.dynamics.alpha().unwrap_or(f64::NAN),
        )
    }
}
