//! The GNN Benchmark SBM datasets PATTERN and CLUSTER (Dwivedi et al., "Benchmarking Graph
//! Neural Networks"), generated with the published parameters of the benchmarking-gnns
//! notebooks (`data/sbm/` in the shared data holds them). The notebooks set no seed, so the
//! published pickles cannot be reproduced bit for bit; these are seeded draws from the same
//! distribution.
//!
//! - Stochastic block model: community `r` has `randint(size_min, size_max)` nodes (upper bound
//!   exclusive, as numpy); each pair `i < j` is joined with probability `p` inside a community
//!   and `q` across; nodes are then shuffled.
//! - CLUSTER: 6 communities of 5..34 nodes, p = 0.55, q = 0.25; node label = community; node
//!   feature 0 except one random node per community with feature `r + 1`; 10000/1000/1000 graphs.
//! - PATTERN: 5 communities, p = 0.5, q = 0.35, SBM node features `randint(3)`; 100 pattern
//!   instances, each a random graph of `randint(5, 35)` nodes (edge probability 0.5) with fixed
//!   features `randint(3)`, joined to every SBM node with probability 0.5; node label 1 on the
//!   pattern; per instance 100 train, 20 val and 20 test graphs (10000/2000/2000).
//!
//! Each graph carries its integer node feature as a one-column `node_features` and its labels
//! in `node_labels`; targets are [`Targets::NodeClasses`]; the official split is train, then
//! val, then test, in generation order. Graphs are generated in parallel, each from its own
//! ChaCha8 stream, so the result depends on the seed only.

use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::{Csr, Graph, GraphDataset, Targets};
use basin_data::split::Split;

/// Parameters of an unbalanced stochastic block model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SbmParams {
    /// Number of communities.
    pub communities: usize,
    /// Smallest community size.
    pub size_min: usize,
    /// Community sizes are below this (numpy's exclusive `randint` bound).
    pub size_max: usize,
    /// Edge probability inside a community.
    pub p: f64,
    /// Edge probability across communities.
    pub q: f64,
}

impl SbmParams {
    fn validate(&self, what: &str) -> Result<()> {
        let ok = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if self.communities == 0
            || self.size_min == 0
            || self.size_max <= self.size_min
            || !ok(self.p)
            || !ok(self.q)
        {
            return Err(GraphError::invalid(
                what,
                "need communities ≥ 1, 1 ≤ size_min < size_max, p and q in [0, 1]",
            ));
        }
        Ok(())
    }
}

/// CLUSTER settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// The block model.
    pub sbm: SbmParams,
    /// Graphs in train, val, test.
    pub sizes: [usize; 3],
    /// Seed.
    pub seed: u64,
}

impl Default for ClusterConfig {
    /// The published parameters.
    fn default() -> Self {
        Self {
            sbm: SbmParams {
                communities: 6,
                size_min: 5,
                size_max: 35,
                p: 0.55,
                q: 0.25,
            },
            sizes: [10_000, 1_000, 1_000],
            seed: 0,
        }
    }
}

/// PATTERN settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PatternConfig {
    /// The background block model.
    pub sbm: SbmParams,
    /// Edge probability inside a pattern.
    pub p_pattern: f64,
    /// Probability of an edge between a pattern node and an SBM node.
    pub q_pattern: f64,
    /// Node features are `0..vocab_size`.
    pub vocab_size: usize,
    /// Pattern sizes are `randint(pattern_size_min, pattern_size_max)`.
    pub pattern_size_min: usize,
    /// Exclusive upper bound of pattern sizes.
    pub pattern_size_max: usize,
    /// Number of pattern instances.
    pub patterns: usize,
    /// Graphs per pattern in train, val, test.
    pub per_pattern: [usize; 3],
    /// Seed.
    pub seed: u64,
}

impl Default for PatternConfig {
    /// The published parameters.
    fn default() -> Self {
        Self {
            sbm: SbmParams {
                communities: 5,
                size_min: 5,
                size_max: 35,
                p: 0.5,
                q: 0.35,
            },
            p_pattern: 0.5,
            q_pattern: 0.5,
            vocab_size: 3,
            pattern_size_min: 5,
            pattern_size_max: 35,
            patterns: 100,
            per_pattern: [100, 20, 20],
            seed: 0,
        }
    }
}

/// Stream key of the PATTERN instances.
const PATTERN_KEY: u64 = 0x9e37_79b9_7f4a_7c15;

impl ClusterConfig {
    /// The node count of every graph the generator will produce (the first draws of each
    /// graph's stream), without generating edges.
    pub fn node_counts(&self) -> Vec<usize> {
        let total: usize = self.sizes.iter().sum();
        (0..total)
            .into_par_iter()
            .map(|g| block_model(&self.sbm, &mut stream(self.seed, g as u64)).len())
            .collect()
    }
}

impl PatternConfig {
    /// The pattern instance of each graph, in dataset order: all train graphs (pattern-major),
    /// then val, then test.
    fn jobs(&self) -> Vec<usize> {
        let mut jobs = Vec::new();
        for &count in &self.per_pattern {
            for pat in 0..self.patterns {
                jobs.extend(std::iter::repeat_n(pat, count));
            }
        }
        jobs
    }

    /// The node count of every graph the generator will produce, without generating edges.
    pub fn node_counts(&self) -> Vec<usize> {
        let sizes: Vec<usize> = (0..self.patterns)
            .map(|i| {
                stream(self.seed ^ PATTERN_KEY, i as u64)
                    .random_range(self.pattern_size_min..self.pattern_size_max)
            })
            .collect();
        self.jobs()
            .par_iter()
            .enumerate()
            .map(|(g, &pat)| {
                block_model(&self.sbm, &mut stream(self.seed, g as u64)).len() + sizes[pat]
            })
            .collect()
    }
}

/// A reproducible RNG for item `index` of a dataset seeded with `seed`.
fn stream(seed: u64, index: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(index);
    r
}

/// `count` uniform `u32` draws in one bulk call (fast even in unoptimised builds).
fn uniform_u32<R: Rng + ?Sized>(rng: &mut R, count: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; 4 * count];
    rng.fill_bytes(&mut bytes);
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `p` as a threshold on a uniform `u32` (`draw < threshold` has probability `p`).
fn threshold(p: f64) -> u64 {
    (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64
}

/// A dense symmetric 0/1 matrix (row-major, `n × n`).
struct Dense {
    n: usize,
    bits: Vec<bool>,
}

impl Dense {
    fn new(n: usize) -> Self {
        Self {
            n,
            bits: vec![false; n * n],
        }
    }

    fn set(&mut self, i: usize, j: usize) {
        self.bits[i * self.n + j] = true;
        self.bits[j * self.n + i] = true;
    }

    /// Joins each pair `i < j` of `nodes` with probability `prob(i, j)` (thresholds).
    fn draw<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        nodes: std::ops::Range<usize>,
        thr: impl Fn(usize, usize) -> u64,
    ) {
        let m = nodes.len();
        let r = uniform_u32(rng, m * m.saturating_sub(1) / 2);
        let mut k = 0;
        for i in nodes.clone() {
            for j in i + 1..nodes.end {
                if u64::from(r[k]) < thr(i, j) {
                    self.set(i, j);
                }
                k += 1;
            }
        }
    }

    /// The CSR of the matrix with nodes permuted: new node `a` is old node `perm[a]`.
    fn permuted_csr(&self, perm: &[usize]) -> Result<Csr> {
        let n = self.n;
        let mut indptr = Vec::with_capacity(n + 1);
        let mut indices = Vec::new();
        indptr.push(0);
        for &oa in perm {
            let row = &self.bits[oa * n..(oa + 1) * n];
            for (b, &ob) in perm.iter().enumerate() {
                if row[ob] {
                    indices.push(b as u32);
                }
            }
            indptr.push(indices.len());
        }
        Csr::from_parts(n, indptr, indices, None)
    }
}

/// One SBM draw into the first nodes of `w` (which may be larger): community of each node.
fn block_model<R: Rng + ?Sized>(p: &SbmParams, rng: &mut R) -> Vec<usize> {
    let mut comm = Vec::new();
    for r in 0..p.communities {
        let size = rng.random_range(p.size_min..p.size_max);
        comm.extend(std::iter::repeat_n(r, size));
    }
    comm
}

fn draw_sbm<R: Rng + ?Sized>(w: &mut Dense, comm: &[usize], p: &SbmParams, rng: &mut R) {
    let (tp, tq) = (threshold(p.p), threshold(p.q));
    w.draw(
        rng,
        0..comm.len(),
        |i, j| if comm[i] == comm[j] { tp } else { tq },
    );
}

fn node_graph(adj: Csr, feature: Vec<f32>, labels: Vec<i64>) -> Result<Graph> {
    let n = adj.num_nodes();
    let mut g = Graph::new(
        adj,
        Array2::from_shape_vec((n, 1), feature)
            .map_err(|e| GraphError::invalid("sbm", e.to_string()))?,
    )?;
    g.node_labels = Some(labels);
    Ok(g)
}

fn official(sizes: [usize; 3]) -> Split {
    let (a, b, c) = (sizes[0] as u32, sizes[1] as u32, sizes[2] as u32);
    Split::new(
        (0..a).collect(),
        (a..a + b).collect(),
        (a + b..a + b + c).collect(),
    )
}

/// Generates CLUSTER.
pub fn generate_cluster(cfg: &ClusterConfig) -> Result<GraphDataset> {
    cfg.sbm.validate("CLUSTER config")?;
    let total: usize = cfg.sizes.iter().sum();
    let graphs: Vec<Graph> = (0..total)
        .into_par_iter()
        .map(|g| {
            let mut rng = stream(cfg.seed, g as u64);
            let comm = block_model(&cfg.sbm, &mut rng);
            let n = comm.len();
            let mut w = Dense::new(n);
            draw_sbm(&mut w, &comm, &cfg.sbm, &mut rng);
            let mut perm: Vec<usize> = (0..n).collect();
            perm.shuffle(&mut rng);
            let adj = w.permuted_csr(&perm)?;
            let labels: Vec<i64> = perm.iter().map(|&o| comm[o] as i64).collect();
            let mut feature = vec![0f32; n];
            for r in 0..cfg.sbm.communities {
                let members: Vec<usize> = (0..n).filter(|&k| labels[k] == r as i64).collect();
                let pick = members[rng.random_range(0..members.len())];
                feature[pick] = (r + 1) as f32;
            }
            node_graph(adj, feature, labels)
        })
        .collect::<Result<_>>()?;
    Ok(GraphDataset {
        name: "CLUSTER".into(),
        graphs,
        targets: Targets::NodeClasses {
            num_classes: cfg.sbm.communities,
        },
        class_values: (0..cfg.sbm.communities as i64).collect(),
        official_split: Some(official(cfg.sizes)),
        node_features: None,
    })
}

/// Generates PATTERN.
pub fn generate_pattern(cfg: &PatternConfig) -> Result<GraphDataset> {
    cfg.sbm.validate("PATTERN config")?;
    let ok = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    if !ok(cfg.p_pattern)
        || !ok(cfg.q_pattern)
        || cfg.vocab_size == 0
        || cfg.pattern_size_min == 0
        || cfg.pattern_size_max <= cfg.pattern_size_min
    {
        return Err(GraphError::invalid(
            "PATTERN config",
            "need p/q_pattern in [0, 1], vocab_size ≥ 1, 1 ≤ pattern_size_min < pattern_size_max",
        ));
    }
    // The pattern instances (their own key, so they do not depend on the dataset's size).
    let patterns: Vec<(Dense, Vec<usize>)> = (0..cfg.patterns)
        .map(|i| {
            let mut rng = stream(cfg.seed ^ PATTERN_KEY, i as u64);
            let size = rng.random_range(cfg.pattern_size_min..cfg.pattern_size_max);
            let mut w0 = Dense::new(size);
            let t = threshold(cfg.p_pattern);
            w0.draw(&mut rng, 0..size, |_, _| t);
            let feats = (0..size)
                .map(|_| rng.random_range(0..cfg.vocab_size))
                .collect();
            (w0, feats)
        })
        .collect();
    let graphs: Vec<Graph> = cfg
        .jobs()
        .par_iter()
        .enumerate()
        .map(|(g, &pat)| {
            let mut rng = stream(cfg.seed, g as u64);
            let comm = block_model(&cfg.sbm, &mut rng);
            let n = comm.len();
            let (w0, u0) = &patterns[pat];
            let n0 = u0.len();
            let total = n + n0;
            let mut w = Dense::new(total);
            draw_sbm(&mut w, &comm, &cfg.sbm, &mut rng);
            let mut feats: Vec<usize> = (0..n)
                .map(|_| rng.random_range(0..cfg.vocab_size))
                .collect();
            // V = rand(n0, n) < q_pattern: each pattern node to each SBM node.
            let tq = threshold(cfg.q_pattern);
            let v = uniform_u32(&mut rng, n0 * n);
            for a in 0..n0 {
                for b in 0..n {
                    if u64::from(v[a * n + b]) < tq {
                        w.set(b, n + a);
                    }
                }
            }
            for a in 0..n0 {
                for b in a + 1..n0 {
                    if w0.bits[a * n0 + b] {
                        w.set(n + a, n + b);
                    }
                }
            }
            feats.extend_from_slice(u0);
            let mut perm: Vec<usize> = (0..total).collect();
            perm.shuffle(&mut rng);
            let adj = w.permuted_csr(&perm)?;
            let labels: Vec<i64> = perm.iter().map(|&o| i64::from(o >= n)).collect();
            let feature: Vec<f32> = perm.iter().map(|&o| feats[o] as f32).collect();
            node_graph(adj, feature, labels)
        })
        .collect::<Result<_>>()?;
    let sizes = [
        cfg.per_pattern[0] * cfg.patterns,
        cfg.per_pattern[1] * cfg.patterns,
        cfg.per_pattern[2] * cfg.patterns,
    ];
    Ok(GraphDataset {
        name: "PATTERN".into(),
        graphs,
        targets: Targets::NodeClasses { num_classes: 2 },
        class_values: vec![0, 1],
        official_split: Some(official(sizes)),
        node_features: None,
    })
}

/// `data` with node feature column 0 (an integer in `0..classes`) replaced by its one-hot
/// encoding, as PyG's GNN Benchmark files store PATTERN (3 values) and CLUSTER (7); a value
/// outside the range is an error naming the graph.
pub fn one_hot_features(data: &GraphDataset, classes: usize) -> Result<GraphDataset> {
    let mut out = data.clone();
    for (i, g) in out.graphs.iter_mut().enumerate() {
        let n = g.node_features.nrows();
        let mut x = Array2::<f32>::zeros((n, classes));
        for r in 0..n {
            let v = g.node_features.get((r, 0)).copied().unwrap_or(f32::NAN);
            if !(v >= 0.0 && (v as usize) < classes && v.fract() == 0.0) {
                return Err(GraphError::invalid(
                    format!("{} graph {i} node {r}", data.name),
                    format!("feature {v} is not an integer in 0..{classes}"),
                ));
            }
            x[(r, v as usize)] = 1.0;
        }
        g.node_features = x;
    }
    Ok(out)
}
