//! One SFi-GPS layer (SFi-Former §4.2; the GraphGPS layer with its global attention
//! replaced by eq. 11):
//!
//! ```text
//! h_M = BN_local(GatedGCN(h, e))                 (e updated by the GatedGCN)
//! h_A = BN_attn(h + Dropout(SfiAttention(dense(h), mask, Ã)[mask]))
//! h   = BN_2(h_M + h_A + FFN(h_M + h_A)),  FFN = d → 2d → d, ReLU, dropout
//! ```
//!
//! Nodes are the real nodes of a batch of graphs concatenated (`[M, d]`, graph by graph, in
//! order); the attention branch scatters them into padded `[b, n, d]` buckets of graphs of
//! similar size ([`basin_graph::batch::size_buckets`]) and gathers them back, so padding exists
//! only inside it. BatchNorm runs over real nodes of the whole batch, which is why the buckets
//! live inside the branch rather than splitting the batch as the graph classifier does.

use basin_core::init::DenseInit;
use basin_core::norm::BatchNorm1d;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor, nn};

use basin_graph::batch::{BUCKET_OVERHEAD, size_buckets};

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

/// Graphs of similar size padded to their own largest graph (see [`size_buckets`]).
#[derive(Debug)]
struct SizeBucket {
    /// Rows of the bucket's nodes in the batch `[M_b]`, graph by graph in bucket order.
    nodes: Tensor,
    /// Graph (within the bucket) of each of those nodes.
    batch: Tensor,
    /// Position of each of those nodes in its graph.
    position: Tensor,
    /// Its real-token mask `[b, n]` and Ã `[b, n, n]`.
    mask: Tensor,
    adjacency: Tensor,
}

/// A batch of graphs as GPS layers see it: concatenated nodes and an edge list, with the
/// real-token mask built once per batch and, for the attention branch, size buckets holding
/// their own mask and Ã (every layer reads them).
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
    /// Node count of every graph and the kind of Ã (to lay the batch out again).
    sizes: Vec<i64>,
    kind: Kind,
    buckets: Vec<SizeBucket>,
    /// For each node, its row in the bucket outputs concatenated `[M]`.
    unbucket: Tensor,
}

impl GraphBatchTensors {
    /// From the node count of each graph and the edges (global ids, `src → dst`); Ã in `kind`;
    /// the attention branch runs over [`size_buckets`] with [`BUCKET_OVERHEAD`].
    pub fn new(sizes: &[i64], src: Tensor, dst: Tensor, kind: Kind) -> Self {
        Self::with_bucket_overhead(sizes, src, dst, kind, BUCKET_OVERHEAD)
    }

    /// [`Self::new`] with another fixed cost per bucket (`i64::MAX`: the whole batch as one
    /// bucket; 0: a bucket per distinct size).
    pub fn with_bucket_overhead(
        sizes: &[i64],
        src: Tensor,
        dst: Tensor,
        kind: Kind,
        overhead: i64,
    ) -> Self {
        let device = src.device();
        let sizes: Vec<i64> = sizes.iter().map(|&n| n.max(0)).collect();
        let mut batch = Vec::new();
        let mut position = Vec::new();
        let mut first = Vec::with_capacity(sizes.len());
        for (g, &n) in sizes.iter().enumerate() {
            first.push(batch.len() as i64);
            batch.extend(std::iter::repeat_n(g as i64, n as usize));
            position.extend(0..n);
        }
        let (graphs, max_nodes) = (sizes.len() as i64, sizes.iter().copied().max().unwrap_or(0));
        let batch_t = Tensor::from_slice(&batch).to_device(device);
        let position_t = Tensor::from_slice(&position).to_device(device);
        let mask = occupied([graphs, max_nodes], &batch_t, &position_t);
        // Each node's bucket and its graph within the bucket; edges go to their receiver's.
        let mut node_bucket = vec![0i64; batch.len()];
        let mut node_graph = vec![0i64; batch.len()];
        let mut unbucket = vec![0i64; batch.len()];
        let mut buckets = Vec::new();
        let mut row = 0i64;
        let parts = size_buckets(&sizes, overhead);
        let parts: Vec<_> = parts
            .into_iter()
            .filter(|p| p.iter().any(|&g| sizes[g] > 0))
            .collect();
        for (k, part) in parts.iter().enumerate() {
            let (mut nodes, mut local, mut pos) = (Vec::new(), Vec::new(), Vec::new());
            for (i, &g) in part.iter().enumerate() {
                for p in 0..sizes[g] {
                    let r = (first[g] + p) as usize;
                    node_bucket[r] = k as i64;
                    node_graph[r] = i as i64;
                    unbucket[r] = row;
                    row += 1;
                    nodes.push(r as i64);
                    local.push(i as i64);
                    pos.push(p);
                }
            }
            let n = part.iter().map(|&g| sizes[g]).max().unwrap_or(0);
            let b = part.len() as i64;
            let local = Tensor::from_slice(&local).to_device(device);
            let pos = Tensor::from_slice(&pos).to_device(device);
            let mask = occupied([b, n], &local, &pos);
            buckets.push(SizeBucket {
                nodes: Tensor::from_slice(&nodes).to_device(device),
                batch: local,
                position: pos,
                mask,
                adjacency: Tensor::zeros([b, n, n], (kind, device)),
            });
        }
        let node_bucket = Tensor::from_slice(&node_bucket).to_device(device);
        let node_graph = Tensor::from_slice(&node_graph).to_device(device);
        let edge_bucket = node_bucket.index_select(0, &dst);
        for (k, bucket) in buckets.iter_mut().enumerate() {
            let sel = edge_bucket.eq(k as i64).nonzero().squeeze_dim(1);
            let (d, s) = (dst.index_select(0, &sel), src.index_select(0, &sel));
            let a = bucket.adjacency.index_put(
                &[
                    Some(&node_graph.index_select(0, &d)),
                    Some(&position_t.index_select(0, &d)),
                    Some(&position_t.index_select(0, &s)),
                ],
                &Tensor::ones([], (kind, device)),
                false,
            );
            bucket.adjacency = gcn_normalize(&a, &bucket.mask);
        }
        Self {
            batch: batch_t,
            position: position_t,
            src,
            dst,
            graphs,
            max_nodes,
            mask,
            sizes,
            kind,
            buckets,
            unbucket: Tensor::from_slice(&unbucket).to_device(device),
        }
    }

    /// The same batch with another fixed cost per bucket (see [`Self::with_bucket_overhead`]).
    pub fn rebucketed(&self, overhead: i64) -> Self {
        Self::with_bucket_overhead(
            &self.sizes,
            self.src.shallow_clone(),
            self.dst.shallow_clone(),
            self.kind,
            overhead,
        )
    }

    /// The number of size buckets the attention branch runs over.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// `[M, d]` → padded `[B, N*, d]`.
    pub fn to_dense(&self, h: &Tensor) -> Tensor {
        let d = h.size()[1];
        let dense = Tensor::zeros([self.graphs, self.max_nodes, d], (h.kind(), h.device()));
        dense.index_put(&[Some(&self.batch), Some(&self.position)], h, false)
    }

    /// `f(x, mask, Ã)` of every size bucket (`x` its nodes `h` `[M, d]` padded to `[b, n, d]`),
    /// back as `[M, d]` rows of the batch's nodes.
    pub fn per_bucket(
        &self,
        h: &Tensor,
        f: impl Fn(&Tensor, &Tensor, &Tensor) -> Tensor,
    ) -> Tensor {
        if self.buckets.is_empty() {
            return h.zeros_like();
        }
        let d = h.size()[1];
        let outs: Vec<Tensor> = self
            .buckets
            .iter()
            .map(|b| {
                let (graphs, n) = (b.mask.size()[0], b.mask.size()[1]);
                let x = Tensor::zeros([graphs, n, d], (h.kind(), h.device())).index_put(
                    &[Some(&b.batch), Some(&b.position)],
                    &h.index_select(0, &b.nodes),
                    false,
                );
                f(&x, &b.mask, &b.adjacency).index(&[Some(&b.batch), Some(&b.position)])
            })
            .collect();
        Tensor::cat(&outs, 0).index_select(0, &self.unbucket)
    }
}

/// One SFi-GPS layer.
#[derive(Debug)]
pub struct GpsLayer {
    cfg: GpsConfig,
    local: GatedGcn,
    /// The global branch and its BatchNorm.
    attention: Option<(SfiAttention, BatchNorm1d)>,
    bn_local: BatchNorm1d,
    ff1: nn::Linear,
    ff2: nn::Linear,
    bn_out: BatchNorm1d,
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
        let bn = |name: &str| BatchNorm1d::new(path / name, d);
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
            ff1: DenseInit::Torch.linear(path / "ff1", d, 2 * d, true),
            ff2: DenseInit::Torch.linear(path / "ff2", 2 * d, d, true),
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
    ) -> basin_core::Result<(Tensor, Tensor)> {
        let p = self.cfg.dropout;
        let (h_local, e_new) = self
            .local
            .forward(h, e, &graphs.src, &graphs.dst, pe, train)?;
        let h_m = self.bn_local.forward_t(&h_local, train)?;
        let sum = match &self.attention {
            Some((attention, bn_attn)) => {
                let largest = Some(graphs.max_nodes);
                let a = graphs.per_bucket(h, |x, mask, adj| {
                    attention.forward_part(x, mask, adj, largest, train)
                });
                let h_a = bn_attn.forward_t(&(h + a.dropout(p, train)), train)?;
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
        Ok((self.bn_out.forward_t(&(sum + ff), train)?, e_new))
    }
}

/// A `[rows, cols]` boolean mask, true at each `(row[i], col[i])` (the slots that hold a node),
/// on the indices' device.
fn occupied(shape: [i64; 2], row: &Tensor, col: &Tensor) -> Tensor {
    let device = row.device();
    Tensor::zeros(shape, (Kind::Bool, device)).index_put(
        &[Some(row), Some(col)],
        &Tensor::ones([], (Kind::Bool, device)),
        false,
    )
}
