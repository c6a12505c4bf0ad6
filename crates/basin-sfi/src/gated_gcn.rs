//! GatedGCN (Bresson & Laurent 2017), the local message-passing branch of the GPS layers that
//! SFi-Former uses (the GraphGPS code's `GatedGCNLayer`, `gatedgcn_layer.py`). For an
//! edge j → i:
//!
//! - `ê_ij = D h_i + E h_j + C e_ij`,  `σ_ij = sigmoid(ê_ij)`;
//! - `h̃_i = A h_i + Σ_{j→i} σ_ij ⊙ B h_j / (Σ_{j→i} σ_ij + 10⁻⁶)` (a node without in-edges
//!   gets `A h_i`);
//! - `h_i' = h_i + Dropout(ReLU(BN(h̃_i)))`,  `e_ij' = e_ij + Dropout(ReLU(BN(ê_ij)))`.
//!
//! Nodes are the real nodes of the batch concatenated (`[M, d]`) and edges an edge list, so no
//! padding exists here; BatchNorm runs over real nodes (and real edges) only, as the GPS code's.

use basin_core::init::DenseInit;
use basin_core::norm::BatchNorm1d;
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

/// Settings of [`GatedGcn`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatedGcnConfig {
    /// Node and edge width d.
    pub dim: i64,
    /// Dropout after the ReLU (training only).
    pub dropout: f64,
    /// BatchNorm of h̃ and ê (the GPS code: on).
    pub batch_norm: bool,
    /// The residual `h + …`, `e + …` (the GPS code: on).
    pub residual: bool,
    /// EquivStable LapPE gates (PATTERN/CLUSTER presets): each edge's gate is scaled by
    /// `r_ij = sigmoid(Linear(d,1)(ReLU(Linear(1,d)(‖p_i − p_j‖²))))` of the nodes' positional
    /// embeddings `p` (3d + 1 parameters).
    pub es_gate: bool,
}

impl Default for GatedGcnConfig {
    fn default() -> Self {
        Self {
            dim: 32,
            dropout: 0.0,
            batch_norm: true,
            residual: true,
            es_gate: false,
        }
    }
}

/// One GatedGCN layer.
#[derive(Debug)]
pub struct GatedGcn {
    cfg: GatedGcnConfig,
    a: nn::Linear,
    b: nn::Linear,
    c: nn::Linear,
    d: nn::Linear,
    e: nn::Linear,
    bn_h: Option<BatchNorm1d>,
    bn_e: Option<BatchNorm1d>,
    es: Option<(nn::Linear, nn::Linear)>,
}

impl GatedGcn {
    /// The layer's weights under `path`.
    pub fn new(path: &nn::Path, cfg: &GatedGcnConfig) -> Self {
        let lin = |name: &str| DenseInit::Torch.linear(path / name, cfg.dim, cfg.dim, true);
        let bn = |name: &str| {
            cfg.batch_norm
                .then(|| BatchNorm1d::new(path / name, cfg.dim))
        };
        Self {
            cfg: cfg.clone(),
            a: lin("a"),
            b: lin("b"),
            c: lin("c"),
            d: lin("d"),
            e: lin("e"),
            bn_h: bn("bn_h"),
            bn_e: bn("bn_e"),
            es: cfg.es_gate.then(|| {
                (
                    DenseInit::Torch.linear(path / "es1", 1, cfg.dim, true),
                    DenseInit::Torch.linear(path / "es2", cfg.dim, 1, true),
                )
            }),
        }
    }

    /// Updated nodes `[M, d]` and edges `[E, d]` from nodes `h`, edge features `e`, the edge
    /// list `src → dst` (`[E]` int64 each) and, with `es_gate`, the positional embeddings `pe`
    /// `[M, d_pe]` (ignored otherwise; without them the gate is off).
    pub fn forward(
        &self,
        h: &Tensor,
        e: &Tensor,
        src: &Tensor,
        dst: &Tensor,
        pe: Option<&Tensor>,
        train: bool,
    ) -> basin_core::Result<(Tensor, Tensor)> {
        let dh = h.apply(&self.d).index_select(0, dst);
        let eh = h.apply(&self.e).index_select(0, src);
        let e_hat = dh + eh + e.apply(&self.c);
        let sigma = e_hat.sigmoid();
        let sigma = match (&self.es, pe) {
            (Some((l1, l2)), Some(p)) => {
                let dist = (p.index_select(0, dst) - p.index_select(0, src))
                    .square()
                    .sum_dim_intlist(&[1i64][..], true, p.kind());
                sigma * dist.apply(l1).relu().apply(l2).sigmoid()
            }
            _ => sigma,
        };
        let bh = h.apply(&self.b).index_select(0, src);
        let num = h.zeros_like().index_add(0, dst, &(&sigma * bh));
        let den = h.zeros_like().index_add(0, dst, &sigma);
        let h_tilde = h.apply(&self.a) + num / (den + 1e-6);
        let post = |x: Tensor, bn: &Option<BatchNorm1d>| -> basin_core::Result<Tensor> {
            let x = match bn {
                Some(bn) => bn.forward_t(&x, train)?,
                None => x,
            };
            Ok(x.relu().dropout(self.cfg.dropout, train))
        };
        let h_new = post(h_tilde, &self.bn_h)?;
        let e_new = post(e_hat, &self.bn_e)?;
        Ok(if self.cfg.residual {
            (h + h_new, e + e_new)
        } else {
            (h_new, e_new)
        })
    }
}
