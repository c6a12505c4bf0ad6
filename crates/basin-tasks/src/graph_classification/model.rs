//! The model: encoder, CLS token, projected encodings, S energy blocks, CLS readout.

use basin_core::{EnergyBlock, Structure, TraceOptions};
use basin_graph::GraphDataset;
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::*;
use crate::{Result, TaskError, prefix_field};

/// What a dataset gives the model of each graph: the width of its node features and, if it
/// has edge features, theirs. A bare `i64` converts to node features alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputWidths {
    /// Node features F.
    pub nodes: i64,
    /// Edge features P, where the dataset has them.
    pub edges: Option<i64>,
}

impl InputWidths {
    /// The widths of `data`'s features (its first graph's node features, at least 1; the edge
    /// features of the first graph that has them).
    pub fn of(data: &GraphDataset) -> Self {
        Self {
            nodes: data
                .graphs
                .first()
                .map_or(1, |g| g.node_features.ncols() as i64),
            edges: data
                .graphs
                .iter()
                .find_map(|g| g.edge_features.as_ref())
                .map(|e| e.ncols() as i64),
        }
    }
}

impl From<i64> for InputWidths {
    fn from(nodes: i64) -> Self {
        Self { nodes, edges: None }
    }
}

/// The model: encoder, CLS, projected encodings, Â, S blocks, linear readout of CLS.
#[derive(Debug)]
pub struct GraphClassifier {
    pub(super) cfg: GraphClassifierConfig,
    pub(super) encoder: nn::Linear,
    pub(super) cls: Tensor,
    pub(super) pe_proj: Option<nn::Linear>,
    pub(super) degree: Option<nn::Embedding>,
    pub(super) adjacency: Option<(nn::Conv2D, nn::Linear)>,
    /// The edge-feature channels A′ projects (`None`: the adjacency, one channel).
    pub(super) edge_channels: Option<i64>,
    pub(super) blocks: Vec<EnergyBlock>,
    pub(super) readout: nn::Sequential,
    /// Â's heads to the P edge-feature channels (ET Appendix D.3's edge reconstruction).
    pub(super) edge_decoder: Option<nn::Linear>,
}

impl GraphClassifier {
    /// Builds the model for inputs of `features` (node features, or [`InputWidths`] with the
    /// edge features) and `classes` classes (unless `cfg.readout_classes` says otherwise),
    /// with `cfg.blocks` blocks of `cfg.block` under `block0`, `block1`, …
    pub fn new(
        path: &nn::Path,
        cfg: &GraphClassifierConfig,
        features: impl Into<InputWidths>,
        classes: i64,
    ) -> Result<Self> {
        cfg.validate()?;
        let blocks = (0..cfg.blocks)
            .map(|s| {
                EnergyBlock::with_shared(
                    &(path / format!("block{s}")),
                    &(path / "shared"),
                    &cfg.block,
                )
            })
            .collect::<basin_core::Result<Vec<_>>>()
            .map_err(|e| prefix_field("block", e))?;
        Self::with_blocks(path, cfg, features, classes, blocks)
    }

    /// The front end of `cfg` around prebuilt `blocks` (a family's own, or a user's); the
    /// blocks' width must be `cfg.block.dim`.
    pub fn with_blocks(
        path: &nn::Path,
        cfg: &GraphClassifierConfig,
        features: impl Into<InputWidths>,
        classes: i64,
        blocks: Vec<EnergyBlock>,
    ) -> Result<Self> {
        cfg.validate()?;
        if blocks.is_empty() {
            return Err(TaskError::config("blocks", "at least one block"));
        }
        let inputs = features.into();
        // A′ (eq. 24) projects the edge features where there are some and the batches carry
        // them; else the adjacency, as one channel.
        let edge_channels = inputs
            .edges
            .filter(|&p| p > 0 && cfg.batching.dense_edge_features);
        let d = cfg.block.dim;
        let pad = cfg.conv_kernel / 2;
        let dense = cfg.dense_init;
        let mut model = Self {
            encoder: dense.linear(path / "encoder", inputs.nodes, d, true),
            cls: cls_token(path, d),
            pe_proj: cfg
                .batching
                .pe
                .as_ref()
                .map(|pe| dense.linear(path / "pe_proj", pe.k as i64, d, true)),
            // Graphormer's initialisation: N(0, 0.02²).
            degree: cfg.degree_encoding.map(|m| {
                nn::embedding(
                    path / "degree",
                    m + 1,
                    d,
                    nn::EmbeddingConfig {
                        ws_init: nn::Init::Randn {
                            mean: 0.0,
                            stdev: 0.02,
                        },
                        ..Default::default()
                    },
                )
            }),
            adjacency: cfg
                .heads()
                .filter(|_| cfg.adjacency != AdjacencyMode::MaskOnly)
                .map(|heads| {
                    (
                        nn::conv2d(
                            path / "conv",
                            1,
                            heads,
                            cfg.conv_kernel,
                            nn::ConvConfig {
                                padding: pad,
                                bias: false,
                                ..Default::default()
                            },
                        ),
                        dense.linear_zero_bias(
                            path / "adj_proj",
                            edge_channels.unwrap_or(1),
                            heads,
                        ),
                    )
                }),
            edge_channels,
            edge_decoder: None,
            blocks,
            readout: {
                let pooled = match cfg.readout {
                    Readout::Cls | Readout::Nodes => d,
                    Readout::ClsMean => 2 * d,
                    Readout::ClsMeanSize => 3 * d,
                    Readout::ClsMoments => 5 * d,
                };
                let seen = if cfg.readout_initial {
                    2 * pooled
                } else {
                    pooled
                } + if cfg.readout_degrees { 4 } else { 0 };
                let classes = cfg.readout_classes.unwrap_or(classes);
                let gain = cfg.readout_init_gain;
                let last = |vs: nn::Path, seen| {
                    let mut layer = dense.linear(vs, seen, classes, true);
                    tch::no_grad(|| {
                        let _ = layer.ws.g_mul_scalar_(gain);
                        if let Some(bs) = layer.bs.as_mut() {
                            let _ = bs.g_mul_scalar_(gain);
                        }
                    });
                    layer
                };
                match cfg.readout_hidden {
                    None => nn::seq().add(last(path / "readout", seen)),
                    Some(h) => nn::seq()
                        .add(dense.linear(path / "readout_hidden", seen, h, true))
                        .add_fn(|t| t.relu())
                        .add(last(path / "readout", h)),
                }
            },
            cfg: cfg.clone(),
        };
        // Made last, so that the other layers start alike with and without it.
        model.edge_decoder = match (cfg.edge_reconstruction > 0.0, edge_channels, cfg.heads()) {
            (false, _, _) => None,
            (true, Some(p), Some(heads)) => {
                Some(dense.linear(path / "edge_decoder", heads, p, true))
            }
            (true, _, _) => {
                return Err(TaskError::config(
                    "edge_reconstruction",
                    "the dataset has no edge features to reconstruct",
                ));
            }
        };
        Ok(model)
    }

    /// The stacked blocks, in order.
    pub fn blocks(&self) -> &[EnergyBlock] {
        &self.blocks
    }

    /// The configuration.
    pub fn config(&self) -> &GraphClassifierConfig {
        &self.cfg
    }

    /// Class logits `[B, C]` (`[M, C]` for every real node with [`Readout::Nodes`]; the `T`
    /// predicted values of each graph for real-valued targets).
    pub fn forward(&self, b: &GraphBatchOnDevice, train: bool) -> Result<Tensor> {
        Ok(self.forward_with_aux(b, train)?.0)
    }

    /// [`Self::forward`] and, with `edge_reconstruction` on, ET's auxiliary edge loss
    /// (Appendix D.3): Â `[B, H, N', N']` through a Linear to the P edge channels, its mean
    /// squared error to the dense edge features over the pairs of real nodes (CLS excluded).
    pub fn forward_with_aux(
        &self,
        b: &GraphBatchOnDevice,
        train: bool,
    ) -> Result<(Tensor, Option<Tensor>)> {
        let (x0, structure) = self.tokens_and_structure(b)?;
        let aux = match (&self.edge_decoder, structure.scale(), &b.edge_features) {
            (Some(decoder), Some(a_hat), Some(e)) => {
                let predicted = decoder.forward(&a_hat.permute([0, 2, 3, 1]));
                let n = b.padding.size()[1];
                let nodes = b.padding.to_kind(predicted.kind())
                    * Tensor::arange(n, (Kind::Int64, predicted.device()))
                        .gt(0)
                        .to_kind(predicted.kind());
                let pairs = (nodes.unsqueeze(2) * nodes.unsqueeze(1)).unsqueeze(-1);
                let channels = e.size()[3] as f64;
                let squared = (predicted - e.to_kind(pairs.kind())).square() * &pairs;
                Some(squared.sum(Kind::Float) / (pairs.sum(Kind::Float) * channels).clamp_min(1.0))
            }
            _ => None,
        };
        Ok((self.head(&x0, &structure, b, train), aux))
    }

    /// The blocks' descent from `x0` under `structure`, then the readout.
    fn head(
        &self,
        x0: &Tensor,
        structure: &Structure,
        b: &GraphBatchOnDevice,
        train: bool,
    ) -> Tensor {
        let mut x = x0.shallow_clone();
        for block in &self.blocks {
            x = block.forward(&x, structure, train);
        }
        let mut seen = pool(self.cfg.readout, &x, &b.padding);
        if self.cfg.readout_initial {
            seen = Tensor::cat(&[seen, pool(self.cfg.readout, x0, &b.padding)], -1);
        }
        if self.cfg.readout_degrees {
            let stats = structure_statistics(&b.mask, &b.padding).to_kind(seen.kind());
            seen = Tensor::cat(&[seen, stats], -1);
        }
        let seen = if self.cfg.readout_dropout > 0.0 {
            seen.dropout(self.cfg.readout_dropout, train)
        } else {
            seen
        };
        self.readout.forward(&seen)
    }

    /// Each block's energy at each of its steps (evaluation mode), averaged over the batch.
    pub fn energy_per_step(&self, b: &GraphBatchOnDevice) -> Result<Vec<Vec<f64>>> {
        Ok(self
            .traces(b)?
            .into_iter()
            .map(|t| t.mean_total())
            .collect())
    }

    /// Each block's trace of its descent (evaluation mode).
    pub fn traces(&self, b: &GraphBatchOnDevice) -> Result<Vec<basin_core::Trace>> {
        tch::no_grad(|| {
            let (mut x, structure) = self.tokens_and_structure(b)?;
            let mut traces = Vec::with_capacity(self.blocks.len());
            for block in &self.blocks {
                let (next, trace) = block.run(&x, &structure, false, Some(TraceOptions::default()));
                traces.extend(trace);
                x = next;
            }
            Ok(traces)
        })
    }

    /// The initial tokens (CLS in slot 0, projected encodings added) and the attention
    /// structure with the parameterised adjacency of eq. 24.
    pub fn tokens_and_structure(&self, b: &GraphBatchOnDevice) -> Result<(Tensor, Structure)> {
        let mut x = with_cls(&self.encoder.forward(&b.features), &self.cls);
        if let (Some(proj), Some(pe)) = (&self.pe_proj, &b.pe) {
            x = x + proj.forward(pe);
        }
        if let (Some(embedding), Some(max)) = (&self.degree, self.cfg.degree_encoding) {
            let (degree, nodes) = node_degrees(&b.mask, &b.padding);
            let degree = degree.clamp_max(max);
            let nodes = nodes.unsqueeze(-1).to_kind(x.kind());
            x = x + embedding.forward(&degree) * nodes;
        }
        let structure = if self.cfg.sparse_attention {
            self.sparse_structure(&x, b)?
        } else {
            self.dense_structure(&x, b)?
        };
        Ok((x, structure))
    }
}

/// Encoded tokens `[B, N, D]` with slot 0 (kept free by the batching) holding the CLS token.
pub(crate) fn with_cls(x: &Tensor, cls: &Tensor) -> Tensor {
    let n = x.size()[1];
    let is_cls = Tensor::arange(n, (Kind::Int64, x.device()))
        .eq(0)
        .view([1, n, 1]);
    cls.view([1, 1, -1]).expand_as(x).where_self(&is_cls, x)
}

/// The CLS token `[d]` joined to every graph, drawn from N(0, 0.02²) (the reference's start).
pub(crate) fn cls_token(path: &nn::Path, d: i64) -> Tensor {
    let init = nn::Init::Randn {
        mean: 0.0,
        stdev: 0.02,
    };
    path.var("cls", &[d], init)
}
