//! One SFi-GPS layer (`research/sfi-spec.md` §4.1; the GraphGPS layer with its global attention
//! replaced by eq. 11):
//!
//! ```text
//! h_M = BN_local(GatedGCN(h, e))                 (e updated by the GatedGCN)
//! h_A = BN_attn(h + Dropout(SfiAttention(dense(h), mask, Ã)[mask]))
//! h   = BN_2(h_M + h_A + FFN(h_M + h_A)),  FFN = d → 2d → d, ReLU, dropout
//! ```
//!
//! Nodes are the real nodes of a batch of graphs concatenated (`[M, d]`, graph by graph, in
//! order); the attention branch scatters them into a padded `[B, N*, d]` batch and gathers them
//! back, so padding exists only inside it. BatchNorm runs over real nodes.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn, nn::ModuleT};

use crate::attention::{SfiAttention, SfiAttentionConfig, gcn_normalize};
use crate::gated_gcn::{GatedGcn, GatedGcnConfig};

/// Settings of [`GpsLayer`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpsConfig {
    /// The global branch (its `dim` is the layer's width).
    pub attention: SfiAttentionConfig,
    /// Dropout of the attention output, the FFN and the GatedGCN.
    pub dropout: f64,
    /// EquivStable LapPE gates in the GatedGCN (PATTERN/CLUSTER presets).
    pub es_gate: bool,
    /// The global branch; off, the layer is the MPNN alone (the GatedGCN rows of the tables).
    pub global: bool,
}

impl Default for GpsConfig {
    fn default() -> Self {
        Self {
            attention: SfiAttentionConfig::default(),
            dropout: 0.0,
            es_gate: false,
            global: true,
        }
    }
}

/// A batch of graphs as GPS layers see it: concatenated nodes and an edge list, with the
/// real-token mask and Ã built once per batch (every layer reads them).
#[derive(Debug)]
pub struct GraphBatchTensors {
    /// Graph of every node `[M]` (int64, non-decreasing).
    pub batch: Tensor,
    /// Position of every node inside its graph `[M]` (int64).
    pub position: Tensor,
    /// Edge sources `[E]` (int64, global node ids).
    pub src: Tensor,
    /// Edge destinations.
    pub dst: Tensor,
    /// Graphs B.
    pub graphs: i64,
    /// Largest graph N*.
    pub max_nodes: i64,
    /// The real-token mask `[B, N*]`.
    pub mask: Tensor,
    /// Ã `[B, N*, N*]` of the edges (rows = receivers), see [`gcn_normalize`].
    pub adjacency: Tensor,
}

impl GraphBatchTensors {
    /// From the node count of each graph and the edges (global ids, `src → dst`); Ã in `kind`.
    pub fn new(sizes: &[i64], src: Tensor, dst: Tensor, kind: Kind) -> Self {
        let device = src.device();
        let mut batch = Vec::new();
        let mut position = Vec::new();
        for (g, &n) in sizes.iter().enumerate() {
            batch.extend(std::iter::repeat_n(g as i64, n.max(0) as usize));
            position.extend(0..n.max(0));
        }
        let batch = Tensor::from_slice(&batch).to_device(device);
        let position = Tensor::from_slice(&position).to_device(device);
        let (graphs, max_nodes) = (sizes.len() as i64, sizes.iter().copied().max().unwrap_or(0));
        let mask = Tensor::zeros([graphs, max_nodes], (Kind::Bool, device)).index_put(
            &[Some(&batch), Some(&position)],
            &Tensor::ones([], (Kind::Bool, device)),
            false,
        );
        let a = Tensor::zeros([graphs, max_nodes, max_nodes], (kind, device)).index_put(
            &[
                Some(&batch.index_select(0, &dst)),
                Some(&position.index_select(0, &dst)),
                Some(&position.index_select(0, &src)),
            ],
            &Tensor::ones([], (kind, device)),
            false,
        );
        let adjacency = gcn_normalize(&a, &mask);
        Self {
            batch,
            position,
            src,
            dst,
            graphs,
            max_nodes,
            mask,
            adjacency,
        }
    }

    /// `[M, d]` → padded `[B, N*, d]`.
    pub fn to_dense(&self, h: &Tensor) -> Tensor {
        let d = h.size()[1];
        let dense = Tensor::zeros([self.graphs, self.max_nodes, d], (h.kind(), h.device()));
        dense.index_put(&[Some(&self.batch), Some(&self.position)], h, false)
    }

    /// Padded `[B, N*, d]` → `[M, d]`.
    pub fn from_dense(&self, x: &Tensor) -> Tensor {
        x.index(&[Some(&self.batch), Some(&self.position)])
    }
}

/// One SFi-GPS layer.
#[derive(Debug)]
pub struct GpsLayer {
    cfg: GpsConfig,
    local: GatedGcn,
    /// The global branch and its BatchNorm.
    attention: Option<(SfiAttention, nn::BatchNorm)>,
    bn_local: nn::BatchNorm,
    ff1: nn::Linear,
    ff2: nn::Linear,
    bn_out: nn::BatchNorm,
}

impl GpsLayer {
    /// The flows `Z` `[B, H, N*, N*]` of the global branch for nodes `h` (None without a
    /// branch that computes them).
    pub fn flows(&self, h: &Tensor, graphs: &GraphBatchTensors) -> Option<Tensor> {
        self.attention
            .as_ref()
            .filter(|(a, _)| a.has_flows())
            .map(|(a, _)| a.flows(&graphs.to_dense(h), &graphs.mask))
    }

    /// The global branch's solver trace for nodes `h` (see [`SfiAttention::flow_trace`]).
    pub fn flow_trace(&self, h: &Tensor, graphs: &GraphBatchTensors) -> Option<(Vec<f64>, f64)> {
        let (a, _) = self.attention.as_ref()?;
        a.flow_trace(&graphs.to_dense(h), &graphs.mask)
    }

    /// The layer's weights under `path`.
    pub fn new(path: &nn::Path, cfg: &GpsConfig) -> Self {
        let d = cfg.attention.dim;
        let bn = |name: &str| nn::batch_norm1d(path / name, d, Default::default());
        Self {
            cfg: cfg.clone(),
            local: GatedGcn::new(
                &(path / "local"),
                &GatedGcnConfig {
                    dim: d,
                    dropout: cfg.dropout,
                    es_gate: cfg.es_gate,
                    ..GatedGcnConfig::default()
                },
            ),
            attention: cfg.global.then(|| {
                (
                    SfiAttention::new(&(path / "attention"), &cfg.attention),
                    bn("bn_attn"),
                )
            }),
            bn_local: bn("bn_local"),
            ff1: nn::linear(path / "ff1", d, 2 * d, Default::default()),
            ff2: nn::linear(path / "ff2", 2 * d, d, Default::default()),
            bn_out: bn("bn_out"),
        }
    }

    /// Updated nodes `[M, d]` and edges `[E, d]`; `pe` `[M, d_pe]` feeds the EquivStable gates
    /// when `es_gate` is on.
    pub fn forward(
        &self,
        h: &Tensor,
        e: &Tensor,
        graphs: &GraphBatchTensors,
        pe: Option<&Tensor>,
        train: bool,
    ) -> (Tensor, Tensor) {
        let p = self.cfg.dropout;
        let (h_local, e_new) = self
            .local
            .forward(h, e, &graphs.src, &graphs.dst, pe, train);
        let h_m = self.bn_local.forward_t(&h_local, train);
        let sum = match &self.attention {
            Some((attention, bn_attn)) => {
                let a = attention.forward_t(
                    &graphs.to_dense(h),
                    &graphs.mask,
                    &graphs.adjacency,
                    train,
                );
                let h_a = bn_attn.forward_t(&(h + graphs.from_dense(&a).dropout(p, train)), train);
                h_m + h_a
            }
            None => h_m,
        };
        let ff = sum
            .apply(&self.ff1)
            .relu()
            .dropout(p, train)
            .apply(&self.ff2)
            .dropout(p, train);
        (self.bn_out.forward_t(&(sum + ff), train), e_new)
    }
}
