//! Input encoders of the GPS family (`research/sfi-spec.md` §3.3).
//!
//! [`LapPe`]: the GraphGPS Laplacian positional encoder. Each node's `k` frequencies are pairs
//! (eigenvector entry, eigenvalue); a DeepSet (`Linear(2, 2p) → ReLU → Linear(2p, p) → ReLU`,
//! 624 parameters at p = 16) embeds each pair, frequencies missing for small graphs (NaN) are
//! zeroed, and the pairs are summed, so the encoding does not depend on the order of the
//! frequencies. In training, each eigenvector index gets one random sign shared by every node
//! of the batch (the GPS code's augmentation, spec S30).

use tch::{Kind, Tensor, nn};

/// The Laplacian positional encoder.
#[derive(Debug)]
pub struct LapPe {
    l1: nn::Linear,
    l2: nn::Linear,
}

impl LapPe {
    /// An encoder to `dim_pe` features under `path`.
    pub fn new(path: &nn::Path, dim_pe: i64) -> Self {
        Self {
            l1: nn::linear(path / "deepset1", 2, 2 * dim_pe, Default::default()),
            l2: nn::linear(path / "deepset2", 2 * dim_pe, dim_pe, Default::default()),
        }
    }

    /// `[M, dim_pe]` from eigenvector entries `vecs` `[M, k]` and eigenvalues `vals` `[M, k]`
    /// (NaN where a graph has fewer than k frequencies).
    pub fn forward(&self, vecs: &Tensor, vals: &Tensor, train: bool) -> Tensor {
        let missing = vecs.isnan().logical_or(&vals.isnan());
        let mut vecs = vecs.nan_to_num(0.0, None, None);
        if train {
            let k = vecs.size()[1];
            let signs =
                Tensor::randint(2, [1, k], (Kind::Int64, vecs.device())).to_kind(vecs.kind()) * 2.0
                    - 1.0;
            vecs = vecs * signs;
        }
        let vals = vals.nan_to_num(0.0, None, None);
        let pairs = Tensor::stack(&[vecs, vals], -1); // [M, k, 2]
        let embedded = pairs.apply(&self.l1).relu().apply(&self.l2).relu();
        let kind = embedded.kind();
        let keep = missing.logical_not().unsqueeze(-1).to_kind(kind);
        (embedded * keep).sum_dim_intlist(&[1i64][..], false, kind)
    }
}
