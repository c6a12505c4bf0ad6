//! Batching graphs into padded dense arrays for graph-level models (ET Appendix D, the public
//! ET graph code's `batchify`/`get_adjs` in `tools.py`).
//!
//! Layout of one batch of `B` graphs padded to `N` real-node slots (`N` = the batch's largest
//! graph, capped at [`BatchConfig::max_nodes`]): `N' = N + 1` tokens with CLS in slot 0, real
//! nodes in slots `1..=n`, padding after. Without CLS, `N' = N` and nodes start at slot 0.
//!
//! - **Cap and truncation.** A graph above the cap is cut to its first `max_nodes` nodes and
//!   the edges among them ([`Truncation::KeepFirst`], what the reference does; the batch
//!   records how many nodes each graph lost), or refused ([`Truncation::Error`]).
//! - **Mask** `[B, N', N']`: `mask[b, q, k]` = token `q` may attend token `k`: the adjacency
//!   entries, CLS ↔ every real node and CLS ↔ itself (`Ã` is "padded in the upper left corner
//!   with ones", ET eq. 23), real self loops only if [`BatchConfig::self_loops`].
//! - **Padding.** [`PaddingMode::Masked`] (default): padded tokens attend nothing and nothing
//!   attends them; the positional encoding of a graph is computed on the graph alone (so it is
//!   cacheable). [`PaddingMode::Sink`] (the reference, ET Appendix D): padded tokens become sink
//!   nodes that attend CLS and every real node while no real node attends them (CLS's row is
//!   all ones, as in the reference), and the encoding is computed on that padded, asymmetric
//!   adjacency ([`crate::laplacian::reference_sink_pe`]), so it depends on the batch.
//!   Either way `padding[b, t]` is true only for CLS and real nodes.

use ndarray::{Array2, Array3, Array4, s};
use rand::Rng;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::laplacian::{LaplacianPe, PeConfig, SignFlip, laplacian_pe, reference_sink_pe};
use crate::{Csr, Graph, GraphDataset};

/// What happens to a graph above the node cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Truncation {
    /// Keep the first `max_nodes` nodes and the edges among them (the reference).
    #[default]
    KeepFirst,
    /// Refuse the batch.
    Error,
}

/// What padded tokens are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PaddingMode {
    /// Masked out of attention; encodings per graph.
    #[default]
    Masked,
    /// Sink nodes as in the graph ET reference (needs CLS).
    Sink,
}

/// Batch settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchConfig {
    /// Prepend a CLS token (slot 0).
    pub cls: bool,
    /// Cap on real nodes per graph (the papers use 500).
    pub max_nodes: usize,
    /// Policy for graphs above the cap.
    pub truncation: Truncation,
    /// Padded tokens: masked (default) or sink nodes (reference).
    pub padding: PaddingMode,
    /// Let real nodes attend themselves in the mask.
    pub self_loops: bool,
    /// Laplacian positional encodings (`None`: no `pe` array; `pe = false` in a run file, as
    /// TOML has no null). Its `cls` must equal ours.
    #[serde(with = "optional_pe")]
    pub pe: Option<PeConfig>,
    /// Random sign flips of the encodings (training only).
    pub sign_flip: SignFlip,
    /// Also build dense edge features `[B, N', N', P]` (CLS and sink entries set to 1 as the
    /// reference pads them), for datasets that have edge features: the graph classifier's A′
    /// (ET eq. 24) then projects them instead of the adjacency.
    pub dense_edge_features: bool,
    /// Whether each batch runs as [`size_buckets`] of graphs of similar size, each padded to its
    /// own largest graph: what a model computes is unchanged (padding is masked), the padded
    /// work is not (random NCI1 batches of 32 pad 30-node means to 71). Sink padding always
    /// runs the whole batch: its encodings depend on the batch, which the reference pads as one.
    pub size_buckets: SizeBuckets,
}

/// Whether a batch of graphs runs in [`size_buckets`]: `true`, `false` or `"auto"` in a run file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SizeBuckets {
    /// Buckets where they pay: when the model's attention is dense (`[B, H, N, N]`, padded
    /// work quadratic in the padded size); one padded batch when it runs over the edge list,
    /// where padding costs attention nothing and the buckets only add small batches.
    #[default]
    Auto,
    /// Always in buckets.
    On,
    /// Always one padded batch.
    Off,
}

impl SizeBuckets {
    /// Whether batches are bucketed for a model whose attention is dense (`dense_attention`)
    /// or runs over the edge list.
    pub fn on(self, dense_attention: bool) -> bool {
        match self {
            Self::Auto => dense_attention,
            Self::On => true,
            Self::Off => false,
        }
    }
}

impl From<bool> for SizeBuckets {
    fn from(on: bool) -> Self {
        if on { Self::On } else { Self::Off }
    }
}

impl Serialize for SizeBuckets {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::On => s.serialize_bool(true),
            Self::Off => s.serialize_bool(false),
        }
    }
}

impl<'de> Deserialize<'de> for SizeBuckets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Bool(bool),
            Text(String),
        }
        match Repr::deserialize(d) {
            Ok(Repr::Bool(on)) => Ok(on.into()),
            Ok(Repr::Text(t)) if t == "auto" => Ok(Self::Auto),
            _ => Err(serde::de::Error::custom(
                "size_buckets must be true, false or \"auto\"",
            )),
        }
    }
}

/// `Option<PeConfig>` as a run file writes it: a table, or `false` for none. (`#[serde(default)]`
/// fills a missing field with the default encodings, and TOML cannot say null, so without
/// this a config without encodings could be neither written nor read back.)
mod optional_pe {
    use std::fmt;

    use serde::de::{self, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::laplacian::PeConfig;

    pub fn serialize<S: Serializer>(pe: &Option<PeConfig>, s: S) -> Result<S::Ok, S::Error> {
        match pe {
            Some(pe) => pe.serialize(s),
            None => s.serialize_bool(false),
        }
    }

    /// A visitor, not an untagged enum, so that an error inside the table (an unknown field, a
    /// wrong type) keeps its own message.
    struct PeVisitor;

    impl<'de> Visitor<'de> for PeVisitor {
        type Value = Option<PeConfig>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("the encodings' table (k, cls, solver, …) or `false` for none")
        }
        fn visit_bool<E: de::Error>(self, on: bool) -> Result<Self::Value, E> {
            if on {
                Err(E::custom(
                    "`pe = true` says no settings: give the encodings' table (k, cls, …), \
                     or `false` for none",
                ))
            } else {
                Ok(None)
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(PeVisitor)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            PeConfig::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PeConfig>, D::Error> {
        d.deserialize_any(PeVisitor)
    }
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self::et_graph()
    }
}

impl BatchConfig {
    /// The graph ET setting with the paper's defaults and basin's masked padding: k = 15
    /// encodings whose signs flip at random per eigenvector in training ("the sign of the top k
    /// eigen-vectors is flipped randomly during training and fixed during evaluation", ET
    /// Appendix D).
    pub fn et_graph() -> Self {
        Self {
            cls: true,
            max_nodes: 500,
            truncation: Truncation::KeepFirst,
            padding: PaddingMode::Masked,
            self_loops: false,
            pe: Some(PeConfig::et_graph()),
            sign_flip: SignFlip::PerEigenvector,
            dense_edge_features: false,
            size_buckets: SizeBuckets::Auto,
        }
    }

    /// The front end of ET's and CDAT's CPU presets: [`Self::et_graph`] with k = 8 Laplacian
    /// eigenvectors (ET eq. 23) in place of the papers' 15, which reach the highest frequencies
    /// of MUTAG's graphs of 10–28 nodes: the CPU-scale models score higher with 8 on most TU sets.
    pub fn tu_cpu() -> Self {
        let mut cfg = Self::et_graph();
        if let Some(pe) = cfg.pe.as_mut() {
            pe.k = 8;
        }
        cfg
    }

    /// The graph ET reference's behaviour: sink padding (the whole batch as one), per-entry
    /// sign flips for training, dense edge features where the dataset has them (its
    /// `use_edge_attr = True`).
    pub fn et_graph_reference() -> Self {
        Self {
            padding: PaddingMode::Sink,
            sign_flip: SignFlip::PerEntry,
            dense_edge_features: true,
            size_buckets: SizeBuckets::Off,
            ..Self::et_graph()
        }
    }

    /// `ids` (graphs of `dataset`) as the batches a model runs: [`size_buckets`] of the capped
    /// token counts when [`BatchConfig::size_buckets`] is on for a model whose attention is
    /// dense (`dense_attention`) or not and padding is masked, else `ids` whole.
    pub fn buckets(
        &self,
        dataset: &GraphDataset,
        ids: &[usize],
        dense_attention: bool,
    ) -> Vec<Vec<usize>> {
        if !self.size_buckets.on(dense_attention) || self.padding == PaddingMode::Sink {
            return vec![ids.to_vec()];
        }
        let tokens: Vec<i64> = ids
            .iter()
            .map(|&i| {
                let n = dataset.graphs.get(i).map_or(0, Graph::num_nodes);
                (n.min(self.max_nodes) + usize::from(self.cls)) as i64
            })
            .collect();
        size_buckets(&tokens, BUCKET_OVERHEAD)
            .into_iter()
            .map(|b| b.into_iter().map(|j| ids[j]).collect())
            .collect()
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(GraphError::invalid("batch config", m));
        if self.max_nodes == 0 {
            return bad("max_nodes must be at least 1");
        }
        if self.padding == PaddingMode::Sink && !self.cls {
            return bad("sink padding needs the CLS token (padded rows attend CLS)");
        }
        if let Some(pe) = &self.pe
            && pe.cls != self.cls
        {
            return bad("pe.cls must equal cls");
        }
        Ok(())
    }
}

/// Dense arrays of a batch (see the module docs for the layout).
#[derive(Clone, Debug, PartialEq)]
pub struct GraphBatch {
    /// Index of each graph in the dataset.
    pub graph_ids: Vec<usize>,
    /// Node features `[B, N', F]` (CLS and padding rows are zero).
    pub features: Array3<f32>,
    /// Positional encodings `[B, N', k]` (padding rows zero in masked mode).
    pub pe: Option<Array3<f32>>,
    /// Real tokens per graph, CLS included.
    pub lengths: Vec<usize>,
    /// `[B, N']`, true for CLS and real nodes.
    pub padding: Array2<bool>,
    /// `[B, N', N']`, `mask[b, q, k]`: `q` may attend `k`.
    pub mask: Array3<bool>,
    /// Dense edge features `[B, N', N', P]`, if asked for and the graphs have them.
    pub edge_features: Option<Array4<f32>>,
    /// Nodes dropped from each graph by the cap.
    pub truncated: Vec<usize>,
}

impl GraphBatch {
    /// Tokens per graph `N'`.
    pub fn tokens(&self) -> usize {
        self.padding.ncols()
    }

    /// The mask as a sparse graph over the flattened `B·N'` tokens: token `b·N' + t`; entry
    /// `(q, k)` when `q` may attend `k`. Use [`Csr::attention_edge_index`] for basin-core.
    pub fn mask_csr(&self) -> Csr {
        let (b, n, _) = self.mask.dim();
        let mut indptr = Vec::with_capacity(b * n + 1);
        let mut indices = Vec::new();
        indptr.push(0);
        for g in 0..b {
            for q in 0..n {
                for k in 0..n {
                    if self.mask[[g, q, k]] {
                        indices.push((g * n + k) as u32);
                    }
                }
                indptr.push(indices.len());
            }
        }
        // Rows are built sorted, so this cannot fail.
        Csr::from_parts(b * n, indptr, indices, None).unwrap_or_else(|_| Csr::empty(b * n))
    }
}

/// A graph cut to the cap (or refused), and how many nodes it lost.
fn capped<'g>(
    g: &'g Graph,
    cfg: &BatchConfig,
    id: usize,
) -> Result<(std::borrow::Cow<'g, Graph>, usize)> {
    let n = g.num_nodes();
    if n <= cfg.max_nodes {
        return Ok((std::borrow::Cow::Borrowed(g), 0));
    }
    match cfg.truncation {
        Truncation::KeepFirst => Ok((
            std::borrow::Cow::Owned(g.truncated(cfg.max_nodes)),
            n - cfg.max_nodes,
        )),
        Truncation::Error => Err(GraphError::invalid(
            format!("graph {id}"),
            format!(
                "{n} nodes exceed the cap of {} (truncation = error)",
                cfg.max_nodes
            ),
        )),
    }
}

/// Builds a batch from `dataset.graphs[ids]`. `pe_cache` (one encoding per dataset graph,
/// computed with `cfg.pe` on each graph, or on a graph above the cap cut to it) is used where
/// its size fits the graph as batched and recomputed otherwise; `rng` draws the sign flips.
pub fn make_batch<R: Rng + ?Sized>(
    dataset: &GraphDataset,
    ids: &[usize],
    cfg: &BatchConfig,
    pe_cache: Option<&[LaplacianPe]>,
    rng: &mut R,
) -> Result<GraphBatch> {
    cfg.validate()?;
    if ids.is_empty() {
        return Err(GraphError::invalid("batch", "no graphs"));
    }
    let graphs: Vec<(std::borrow::Cow<'_, Graph>, usize)> = ids
        .iter()
        .map(|&i| {
            let g = dataset.graphs.get(i).ok_or_else(|| {
                GraphError::invalid("batch", format!("graph {i} of {}", dataset.graphs.len()))
            })?;
            g.validate()
                .map_err(|e| GraphError::invalid(format!("graph {i}"), e.to_string()))?;
            capped(g, cfg, i)
        })
        .collect::<Result<_>>()?;
    let off = usize::from(cfg.cls);
    let n_max = graphs.iter().map(|(g, _)| g.num_nodes()).max().unwrap_or(0);
    let np = n_max + off;
    let b = ids.len();
    let f = graphs[0].0.node_features.ncols();
    if let Some((i, _)) = graphs
        .iter()
        .enumerate()
        .find(|(_, (g, _))| g.node_features.ncols() != f)
    {
        return Err(GraphError::invalid(
            "batch",
            format!("graph {} has a different feature width", ids[i]),
        ));
    }

    // Positional encodings, in parallel over graphs.
    let pe = match &cfg.pe {
        None => None,
        Some(pc) => {
            let per: Vec<Array2<f32>> = graphs
                .par_iter()
                .enumerate()
                .map(|(j, (g, _))| -> Result<Array2<f32>> {
                    match cfg.padding {
                        PaddingMode::Sink => {
                            Ok(reference_sink_pe(&g.adjacency, n_max, pc.k)?.vectors)
                        }
                        PaddingMode::Masked => {
                            // A cached encoding of a graph above the cap has its full size
                            // (recomputed here) unless it was computed on the cut graph.
                            let cached = pe_cache
                                .and_then(|c| c.get(ids[j]))
                                .filter(|p| p.vectors.dim() == (g.num_nodes() + off, pc.k));
                            match cached {
                                Some(p) => Ok(p.vectors.clone()),
                                None => Ok(laplacian_pe(&g.adjacency, pc)?.vectors),
                            }
                        }
                    }
                })
                .collect::<Result<_>>()?;
            let mut out = Array3::<f32>::zeros((b, np, pc.k));
            for (j, mut p) in per.into_iter().enumerate() {
                cfg.sign_flip.apply(&mut p.view_mut(), rng);
                let rows = p.nrows().min(np);
                out.slice_mut(s![j, ..rows, ..])
                    .assign(&p.slice(s![..rows, ..]));
            }
            Some(out)
        }
    };

    let mut features = Array3::<f32>::zeros((b, np, f));
    let mut padding = Array2::<bool>::from_elem((b, np), false);
    let mut mask = Array3::<bool>::from_elem((b, np, np), false);
    let mut lengths = Vec::with_capacity(b);
    let pdim = graphs
        .iter()
        .find_map(|(g, _)| g.edge_features.as_ref().map(|e| e.ncols()));
    let mut edge_features = match (cfg.dense_edge_features, pdim) {
        (true, Some(p)) => Some(Array4::<f32>::zeros((b, np, np, p))),
        _ => None,
    };
    for (j, (g, _)) in graphs.iter().enumerate() {
        let n = g.num_nodes();
        features
            .slice_mut(s![j, off..off + n, ..])
            .assign(&g.node_features);
        padding.slice_mut(s![j, ..off + n]).fill(true);
        lengths.push(n + off);
        let a = &g.adjacency;
        for q in 0..n {
            for (p, &k) in a.row(q).iter().enumerate() {
                if k as usize != q || cfg.self_loops {
                    mask[[j, off + q, off + k as usize]] = true;
                }
                if let (Some(ef), Some(src)) = (&mut edge_features, &g.edge_features) {
                    let e = a.indptr()[q] + p;
                    ef.slice_mut(s![j, off + q, off + k as usize, ..])
                        .assign(&src.row(e));
                }
            }
            if cfg.self_loops {
                mask[[j, off + q, off + q]] = true;
            }
        }
        if cfg.cls {
            let cls_cols = match cfg.padding {
                PaddingMode::Masked => n + 1,
                PaddingMode::Sink => np,
            };
            mask.slice_mut(s![j, 0, ..cls_cols]).fill(true);
            mask.slice_mut(s![j, ..n + 1, 0]).fill(true);
            if cfg.padding == PaddingMode::Sink {
                mask.slice_mut(s![j, n + 1.., ..n + 1]).fill(true);
            }
            if let Some(ef) = &mut edge_features {
                ef.slice_mut(s![j, 0, ..cls_cols, ..]).fill(1.0);
                ef.slice_mut(s![j, ..n + 1, 0, ..]).fill(1.0);
                if cfg.padding == PaddingMode::Sink {
                    ef.slice_mut(s![j, n + 1.., ..n + 1, ..]).fill(1.0);
                }
            }
        }
    }
    Ok(GraphBatch {
        graph_ids: ids.to_vec(),
        features,
        pe,
        lengths,
        padding,
        mask,
        edge_features,
        truncated: graphs.iter().map(|(_, c)| *c).collect(),
    })
}

/// The fixed cost of running attention on one size bucket, in attention entries: a bucket of
/// b graphs padded to n nodes costs about b·n² + this (on two CPU cores an SFi flow-solver pass
/// costs ~0.3 µs per entry and each bucket adds a few ms of per-operation overhead).
pub const BUCKET_OVERHEAD: i64 = 128 * 128;

/// Groups the graphs of `sizes` into buckets of similar size, each padded to its own largest
/// graph, minimising Σ_buckets (b·n² + `overhead`): attention's N² work without the padding a
/// whole batch padded to its largest graph carries (random Peptides-func batches of 32 hold
/// 3.9× fewer entries in these buckets, 8–9 of them, on average). An exact partition of the
/// sorted sizes (dynamic programming, O(B²)). Returns graph indices per bucket, ascending by
/// size; the layout changes only how the work is cut, not what a model computes.
pub fn size_buckets(sizes: &[i64], overhead: i64) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&g| (sizes[g], g));
    let n = order.len();
    let mut best = vec![i64::MAX; n + 1];
    let mut cut = vec![0; n + 1];
    best[0] = 0;
    for j in 1..=n {
        let largest = sizes[order[j - 1]].max(0);
        let square = largest.saturating_mul(largest);
        for i in 0..j {
            let cost = best[i]
                .saturating_add(square.saturating_mul((j - i) as i64))
                .saturating_add(overhead);
            if cost < best[j] {
                best[j] = cost;
                cut[j] = i;
            }
        }
    }
    let mut buckets = Vec::new();
    let mut j = n;
    while j > 0 {
        buckets.push(order[cut[j]..j].to_vec());
        j = cut[j];
    }
    buckets.reverse();
    buckets
}

/// Splits `ids` into batches of `batch_size` (the last one smaller unless `drop_last`),
/// shuffled by `rng` when given.
pub fn batch_indices<R: Rng + ?Sized>(
    ids: &[usize],
    batch_size: usize,
    drop_last: bool,
    rng: Option<&mut R>,
) -> Result<Vec<Vec<usize>>> {
    if batch_size == 0 {
        return Err(GraphError::invalid("batch size", "must be at least 1"));
    }
    let mut order = ids.to_vec();
    if let Some(r) = rng {
        order.shuffle(r);
    }
    Ok(order
        .chunks(batch_size)
        .filter(|c| !drop_last || c.len() == batch_size)
        .map(<[usize]>::to_vec)
        .collect())
}

/// The neighbourhood structure of one graph as a CSR over its tokens: `k`-hop neighbours
/// (`hops ≥ 1`), optional self loops, and with `cls` a CLS token 0 joined to every node in both
/// directions (and to itself). The sparse counterpart of the dense mask for graphs too big to
/// batch densely.
pub fn neighbour_csr(adj: &Csr, hops: usize, self_loops: bool, cls: bool) -> Result<Csr> {
    if hops == 0 {
        return Err(GraphError::invalid("hops", "must be at least 1"));
    }
    let base = if hops == 1 {
        let a = adj.deduplicated();
        if self_loops { a.with_self_loops() } else { a }
    } else {
        adj.k_hop(hops, self_loops)
    };
    let base = match base.weights() {
        Some(_) => Csr::from_parts(
            base.num_nodes(),
            base.indptr().to_vec(),
            base.indices().to_vec(),
            None,
        )?,
        None => base,
    };
    if !cls {
        return Ok(base);
    }
    let n = base.num_nodes();
    let mut indptr = Vec::with_capacity(n + 2);
    let mut indices = Vec::with_capacity(base.nnz() + 2 * n + 1);
    indptr.push(0);
    indices.extend(0..=n as u32);
    indptr.push(indices.len());
    for r in 0..n {
        indices.push(0);
        indices.extend(base.row(r).iter().map(|&c| c + 1));
        indptr.push(indices.len());
    }
    Csr::from_parts(n + 1, indptr, indices, None)
}
