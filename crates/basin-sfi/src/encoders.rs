//! Input encoders of the GPS family (the GraphGPS code's `graphgps/encoder/`).
//!
//! [`ColumnEmbedding`] with [`ATOM_VOCAB`] / [`BOND_VOCAB`]: OGB's atom and bond encoders (a sum
//! of one embedding per integer column; Peptides-func).
//!
//! [`LapPe`]: the GraphGPS Laplacian positional encoder. Each node's `k` frequencies are pairs
//! (eigenvector entry, eigenvalue); a DeepSet (`Linear(2, 2p) → ReLU → Linear(2p, p) → ReLU`, 624
//! parameters at p = 16) embeds each pair, frequencies missing for small graphs (NaN) are zeroed,
//! and the pairs are summed, so the encoding does not depend on the order of the frequencies. In
//! training, each eigenvector index gets one random sign shared by every node of the batch (the GPS
//! code's augmentation, `laplace_pos_encoder.py`); [`LapSignFlip::PerGraph`] draws the signs for
//! each graph apart. [`PeModel::Transformer`] replaces the DeepSet with GraphGPS's other choice:
//! `Linear(2, p)`, then PyTorch `TransformerEncoderLayer`s over each node's frequencies (post-norm,
//! feed-forward width 2048, dropout 0.1, the missing frequencies masked out as keys), then the same
//! masked sum.

use basin_core::init::{self, DenseInit};
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

/// How the LapPE encoder mixes a node's frequencies (GraphGPS `posenc_LapPE.model`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum PeModel {
    /// Each (entry, eigenvalue) pair embedded alone, then summed (every published GPS config).
    #[default]
    DeepSet,
    /// Self-attention across the frequencies before the sum.
    Transformer {
        /// Encoder layers.
        layers: usize,
        /// Attention heads (dividing the width).
        heads: i64,
    },
}

/// Who shares a training sign flip of the eigenvectors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LapSignFlip {
    /// One sign per eigenvector index for the whole batch (the GPS code).
    #[default]
    PerBatch,
    /// One sign per eigenvector index and graph (each graph's eigenvectors are defined up to
    /// their own signs).
    PerGraph,
}

/// PyTorch's default `dim_feedforward` of `TransformerEncoderLayer`, which GraphGPS keeps.
const PE_FEEDFORWARD: i64 = 2048;
/// PyTorch's default dropout of `TransformerEncoderLayer`.
const PE_DROPOUT: f64 = 0.1;

/// One post-norm `TransformerEncoderLayer` (batch first) over `[M, k, p]` frequency tokens.
#[derive(Debug)]
struct PeLayer {
    heads: i64,
    in_proj: nn::Linear,
    out_proj: nn::Linear,
    ff1: nn::Linear,
    ff2: nn::Linear,
    norm1: nn::LayerNorm,
    norm2: nn::LayerNorm,
}

impl PeLayer {
    fn new(path: &nn::Path, p: i64, heads: i64) -> Self {
        let lin = |name: &str, i, o| DenseInit::Torch.linear(path / name, i, o, true);
        let ln = |name: &str| nn::layer_norm(path / name, vec![p], Default::default());
        // Its self-attention is an `nn.MultiheadAttention`, started as PyTorch starts one.
        let (in_proj, out_proj) =
            init::multihead_attention_joint(path / "in_proj", path / "out_proj", p);
        Self {
            heads,
            in_proj,
            out_proj,
            ff1: lin("linear1", p, PE_FEEDFORWARD),
            ff2: lin("linear2", PE_FEEDFORWARD, p),
            norm1: ln("norm1"),
            norm2: ln("norm2"),
        }
    }

    /// `x` `[M, k, p]`, `missing` `[M, k]` (true = not a key).
    fn forward(&self, x: &Tensor, missing: &Tensor, train: bool) -> Tensor {
        let (m, k, p) = x.size3().unwrap_or((0, 0, 0));
        let hd = p / self.heads;
        let split = |t: Tensor| t.view([m, k, self.heads, hd]).transpose(1, 2); // [M, H, k, hd]
        let qkv = x.apply(&self.in_proj).chunk(3, -1);
        let (q, key, v) = (
            split(qkv[0].shallow_clone()),
            split(qkv[1].shallow_clone()),
            split(qkv[2].shallow_clone()),
        );
        // A large finite fill keeps a node whose frequencies are all missing finite (its tokens
        // are zeroed by the caller); any present key takes all the weight.
        let scores = q
            .matmul(&key.transpose(-2, -1))
            .divide_scalar((hd as f64).sqrt())
            .masked_fill(&missing.view([m, 1, 1, k]), -1e9);
        let att = scores.softmax(-1, scores.kind()).dropout(PE_DROPOUT, train);
        let mixed = att
            .matmul(&v)
            .transpose(1, 2)
            .reshape([m, k, p])
            .apply(&self.out_proj);
        let x = (x + mixed.dropout(PE_DROPOUT, train)).apply(&self.norm1);
        let ff = x
            .apply(&self.ff1)
            .relu()
            .dropout(PE_DROPOUT, train)
            .apply(&self.ff2)
            .dropout(PE_DROPOUT, train);
        (x + ff).apply(&self.norm2)
    }
}

/// The Laplacian positional encoder.
#[derive(Debug)]
pub struct LapPe {
    l1: nn::Linear,
    l2: Option<nn::Linear>,
    layers: Vec<PeLayer>,
}

impl LapPe {
    /// An encoder to `dim_pe` features under `path`, mixing frequencies as `model` says.
    pub fn new(path: &nn::Path, dim_pe: i64, model: PeModel) -> Self {
        match model {
            PeModel::DeepSet => Self {
                l1: DenseInit::Torch.linear(path / "deepset1", 2, 2 * dim_pe, true),
                l2: Some(DenseInit::Torch.linear(path / "deepset2", 2 * dim_pe, dim_pe, true)),
                layers: Vec::new(),
            },
            PeModel::Transformer { layers, heads } => Self {
                l1: DenseInit::Torch.linear(path / "linear_a", 2, dim_pe, true),
                l2: None,
                layers: (0..layers)
                    .map(|l| PeLayer::new(&(path / format!("encoder{l}")), dim_pe, heads))
                    .collect(),
            },
        }
    }

    /// `[M, dim_pe]` from eigenvector entries `vecs` `[M, k]` and eigenvalues `vals` `[M, k]`
    /// (NaN where a graph has fewer than k frequencies). In training the eigenvector signs are
    /// flipped at random: per batch, or per graph when `graph_of` (`[M]`, the graph of each
    /// node, `0..B`) is given.
    pub fn forward(
        &self,
        vecs: &Tensor,
        vals: &Tensor,
        train: bool,
        graph_of: Option<&Tensor>,
    ) -> Tensor {
        let missing = vecs.isnan().logical_or(&vals.isnan());
        let mut vecs = vecs.nan_to_num(0.0, None, None);
        if train {
            let k = vecs.size()[1];
            let draw = |rows: i64| {
                Tensor::randint(2, [rows, k], (Kind::Int64, vecs.device())).to_kind(vecs.kind())
                    * 2.0
                    - 1.0
            };
            let signs = match graph_of {
                Some(g) => {
                    let graphs = if g.numel() > 0 {
                        g.max().int64_value(&[]) + 1
                    } else {
                        0
                    };
                    draw(graphs).index_select(0, g)
                }
                None => draw(1),
            };
            vecs = vecs * signs;
        }
        let vals = vals.nan_to_num(0.0, None, None);
        let pairs = Tensor::stack(&[vecs, vals], -1); // [M, k, 2]
        let embedded = match &self.l2 {
            Some(l2) => pairs.apply(&self.l1).relu().apply(l2).relu(),
            None => {
                let mut t = pairs.apply(&self.l1);
                for layer in &self.layers {
                    t = layer.forward(&t, &missing, train);
                }
                t
            }
        };
        let kind = embedded.kind();
        let keep = missing.logical_not().unsqueeze(-1).to_kind(kind);
        (embedded * keep).sum_dim_intlist(&[1i64][..], false, kind)
    }
}

/// OGB's atom features (Peptides-func's 9 integer columns): vocabulary of each column, as the
/// exact parameter counts of the GPS models imply.
pub const ATOM_VOCAB: [i64; 9] = [119, 5, 12, 12, 10, 6, 6, 2, 2];
/// OGB's bond features (3 integer columns).
pub const BOND_VOCAB: [i64; 3] = [5, 6, 2];

/// A sum of one embedding per integer column (OGB's `AtomEncoder` / `BondEncoder`).
#[derive(Debug)]
pub struct ColumnEmbedding {
    tables: Vec<nn::Embedding>,
}

impl ColumnEmbedding {
    /// One `vocab[c] × dim` table per column under `path`.
    pub fn new(path: &nn::Path, vocab: &[i64], dim: i64) -> Self {
        Self {
            tables: vocab
                .iter()
                .enumerate()
                .map(|(c, &v)| {
                    nn::embedding(path / format!("column{c}"), v, dim, Default::default())
                })
                .collect(),
        }
    }

    /// `[M, dim]` from integer features `[M, columns]`; a value outside its column's vocabulary
    /// is an error naming the column (libtorch would abort on it).
    pub fn forward(&self, x: &Tensor) -> basin_core::Result<Tensor> {
        if x.dim() != 2 || x.size()[1] != self.tables.len() as i64 {
            return Err(basin_core::CoreError::config(
                "features",
                format!(
                    "expected [nodes, {}] integers, got {:?}",
                    self.tables.len(),
                    x.size()
                ),
            ));
        }
        let mut sum: Option<Tensor> = None;
        for (c, t) in self.tables.iter().enumerate() {
            let col = x.select(1, c as i64);
            let vocab = t.ws.size()[0];
            if col.numel() > 0 {
                let (lo, hi) = (col.min().int64_value(&[]), col.max().int64_value(&[]));
                if lo < 0 || hi >= vocab {
                    return Err(basin_core::CoreError::config(
                        format!("features column {c}"),
                        format!("values must lie in 0..{vocab}, found {lo}..={hi}"),
                    ));
                }
            }
            let e = col.apply(t);
            sum = Some(match sum {
                Some(s) => s + e,
                None => e,
            });
        }
        Ok(sum.unwrap_or_else(|| Tensor::zeros([x.size()[0], 0], (Kind::Float, x.device()))))
    }
}

/// EquivStable LapPE (`equivstable_laplace_pos_encoder.py`): `p = Linear(k, d)` of the
/// eigenvector entries (NaN → 0), used only inside the GatedGCN gates; no sign flips (only a
/// global flip of every column leaves the gates' distances unchanged).
#[derive(Debug)]
pub struct EsLapPe {
    linear: nn::Linear,
}

impl EsLapPe {
    /// `k` frequencies to width `dim` under `path`.
    pub fn new(path: &nn::Path, k: i64, dim: i64) -> Self {
        Self {
            linear: DenseInit::Torch.linear(path / "linear", k, dim, true),
        }
    }

    /// `[M, dim]` from eigenvector entries `[M, k]`.
    pub fn forward(&self, vecs: &Tensor) -> Tensor {
        vecs.nan_to_num(0.0, None, None).apply(&self.linear)
    }
}

/// The RWSE encoder (`kernel_pos_encoder.py`, `model: Linear`): `Linear(steps, dim_pe)` of the
/// random-walk return probabilities.
#[derive(Debug)]
pub struct Rwse {
    linear: nn::Linear,
}

impl Rwse {
    /// `steps` probabilities to `dim_pe` features under `path`.
    pub fn new(path: &nn::Path, steps: i64, dim_pe: i64) -> Self {
        Self {
            linear: DenseInit::Torch.linear(path / "linear", steps, dim_pe, true),
        }
    }

    /// `[M, dim_pe]` from `[M, steps]`.
    pub fn forward(&self, probs: &Tensor) -> Tensor {
        probs.apply(&self.linear)
    }
}
