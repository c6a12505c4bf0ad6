//! Subgraph sampling for node-level tasks on graphs too big for one pass.
//!
//! - [`induced_by_ratio`]: a uniform draw of a fraction of the nodes (of a pool, e.g. the
//!   labelled ones) and the subgraph they induce, optionally with self loops — the per-epoch
//!   5 % subgraph of the ET/CDAT anomaly code (`main_subsample.py`).
//! - [`sample_neighbours`]: GraphSAGE/DGL-style neighbour sampling from seed nodes with one
//!   fan-out per hop (each node expanded once, at the hop that discovers it; at most `fanout`
//!   distinct neighbours drawn without replacement, all of them when it has fewer).
//!
//! Neighbours are the entries of a node's CSR row: the nodes it attends.

use rand::Rng;
use rand::seq::index::sample;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::{Csr, Graph};

/// A sampled subgraph: `graph` over local ids, local `i` is global `nodes[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Subgraph {
    /// Global ids of the local nodes.
    pub nodes: Vec<u32>,
    /// The subgraph.
    pub graph: Graph,
}

/// Draws `⌈ratio · |pool|⌉` nodes (at least one) uniformly without replacement from `pool`
/// (all nodes when `None`), sorts them, and returns the induced subgraph, with a self loop on
/// every node if `self_loops`.
pub fn induced_by_ratio<R: Rng + ?Sized>(
    graph: &Graph,
    pool: Option<&[u32]>,
    ratio: f64,
    self_loops: bool,
    rng: &mut R,
) -> Result<Subgraph> {
    check_ratio(ratio)?;
    let all: Vec<u32>;
    let pool = match pool {
        Some(p) => p,
        None => {
            all = (0..graph.num_nodes() as u32).collect();
            &all
        }
    };
    if pool.is_empty() {
        return Err(GraphError::invalid(
            "sample pool",
            "no nodes to sample from",
        ));
    }
    let count = ((ratio * pool.len() as f64).ceil() as usize).clamp(1, pool.len());
    let mut nodes: Vec<u32> = sample(rng, pool.len(), count)
        .into_iter()
        .map(|i| pool[i])
        .collect();
    nodes.sort_unstable();
    let mut sub = graph.induced(&nodes)?;
    if self_loops {
        sub = sub.with_self_loops();
    }
    Ok(Subgraph { nodes, graph: sub })
}

fn check_ratio(ratio: f64) -> Result<()> {
    if ratio.is_finite() && ratio > 0.0 && ratio <= 1.0 {
        Ok(())
    } else {
        Err(GraphError::invalid(
            "sample ratio",
            format!("{ratio} must lie in (0, 1]"),
        ))
    }
}

/// The CDAT/ET anomaly code's per-epoch sample (ET's `main_subsample.py`, kept by CDAT): from
/// each part (training, validation, test nodes) `⌊ratio · len⌋` nodes (at least one) without
/// replacement, concatenated part after part in that order, and the subgraph they induce with
/// a self loop on every node. Positions in the subgraph follow that order; the second value
/// is how many nodes each part gave.
pub fn reference_subsample<R: Rng + ?Sized>(
    graph: &Graph,
    parts: &[&[u32]],
    ratio: f64,
    rng: &mut R,
) -> Result<(Subgraph, Vec<usize>)> {
    check_ratio(ratio)?;
    let (mut nodes, mut counts) = (Vec::new(), Vec::new());
    for part in parts {
        let count = if part.is_empty() {
            0
        } else {
            ((ratio * part.len() as f64).floor() as usize).clamp(1, part.len())
        };
        nodes.extend(sample(rng, part.len(), count).into_iter().map(|i| part[i]));
        counts.push(count);
    }
    if nodes.is_empty() {
        return Err(GraphError::invalid(
            "sample pool",
            "no nodes to sample from",
        ));
    }
    let sub = graph.induced(&nodes)?.with_self_loops();
    Ok((Subgraph { nodes, graph: sub }, counts))
}

/// Neighbour-sampling settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NeighbourConfig {
    /// Neighbours drawn per node at each hop (`usize::MAX`: all).
    pub fanouts: Vec<usize>,
}

impl Default for NeighbourConfig {
    /// Two hops of 1024 (the CDAT anomaly code's defaults).
    fn default() -> Self {
        Self {
            fanouts: vec![1024, 1024],
        }
    }
}

/// The result of [`sample_neighbours`].
#[derive(Clone, Debug, PartialEq)]
pub struct NeighbourSample {
    /// Global ids: the seeds first (in the order given), then nodes in order of discovery.
    pub nodes: Vec<u32>,
    /// The hop at which each node was reached (0 for seeds).
    pub hop: Vec<u8>,
    /// The sampled edges over local ids (`u → v`: `v` was drawn among `u`'s neighbours).
    pub sampled: Csr,
}

impl NeighbourSample {
    /// Number of seeds (they are local nodes `0..seeds`).
    pub fn num_seeds(&self) -> usize {
        self.hop.iter().take_while(|&&h| h == 0).count()
    }

    /// The subgraph the sampled nodes induce in `graph` (all their edges, not only the
    /// sampled ones), local ids as in `nodes`.
    pub fn induced(&self, graph: &Graph) -> Result<Graph> {
        graph.induced(&self.nodes)
    }
}

/// Samples a neighbourhood of `seeds` (distinct ids) with one fan-out per hop.
pub fn sample_neighbours<R: Rng + ?Sized>(
    adj: &Csr,
    seeds: &[u32],
    cfg: &NeighbourConfig,
    rng: &mut R,
) -> Result<NeighbourSample> {
    let n = adj.num_nodes();
    let mut local = vec![u32::MAX; n];
    let mut nodes = Vec::with_capacity(seeds.len());
    let mut hop = Vec::with_capacity(seeds.len());
    for &s in seeds {
        let slot = local.get_mut(s as usize).ok_or_else(|| {
            GraphError::invalid("seed nodes", format!("node {s} is not below {n}"))
        })?;
        if *slot != u32::MAX {
            return Err(GraphError::invalid(
                "seed nodes",
                format!("node {s} listed twice"),
            ));
        }
        *slot = nodes.len() as u32;
        nodes.push(s);
        hop.push(0u8);
    }
    let mut src = Vec::new();
    let mut dst = Vec::new();
    let mut frontier: Vec<u32> = seeds.to_vec();
    for (h, &fanout) in cfg.fanouts.iter().enumerate() {
        let mut next = Vec::new();
        for &u in &frontier {
            let row = adj.row(u as usize);
            let picks: Vec<u32> = if row.len() <= fanout {
                row.to_vec()
            } else {
                sample(rng, row.len(), fanout)
                    .into_iter()
                    .map(|i| row[i])
                    .collect()
            };
            for v in picks {
                if local[v as usize] == u32::MAX {
                    local[v as usize] = nodes.len() as u32;
                    nodes.push(v);
                    hop.push((h + 1).min(u8::MAX as usize) as u8);
                    next.push(v);
                }
                src.push(local[u as usize]);
                dst.push(local[v as usize]);
            }
        }
        frontier = next;
        if frontier.is_empty() {
            break;
        }
    }
    let sampled = Csr::from_edges(nodes.len(), &src, &dst)?.0.deduplicated();
    Ok(NeighbourSample {
        nodes,
        hop,
        sampled,
    })
}
