//! A planted-anomaly graph for demos and tests: a stochastic block model with community-
//! dependent Gaussian features, plus the two injected anomaly kinds of the graph anomaly
//! detection literature (Ding et al. 2019, DOMINANT; PyGOD's `gen_structural_outlier` and
//! `gen_contextual_outlier`):
//!
//! - **structural**: `cliques` groups of `clique_size` random nodes, each group made a clique;
//! - **contextual**: a random node's features are replaced by those of the candidate, among
//!   `candidates` random nodes, farthest from it (Euclidean).
//!
//! Labels are 1 for either kind; `graph.node_labels` says which (0 normal, 1 structural,
//! 2 contextual; a node picked twice keeps its first kind). Seeded and deterministic.
//!
//! [`generate_relation_planted`] makes a graph of two relations whose anomalies show in one
//! relation only, for the heterogeneous models (ET Table 12).

use ndarray::Array2;
use rand::seq::index::sample;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::{Csr, Graph, NodeDataset};

/// Planted-anomaly graph settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlantedConfig {
    /// Nodes.
    pub nodes: usize,
    /// Communities (equal sizes, round robin).
    pub communities: usize,
    /// Expected degree inside a node's community.
    pub degree_in: f64,
    /// Expected degree towards other communities.
    pub degree_out: f64,
    /// Feature width.
    pub features: usize,
    /// Distance between community feature means (in units of the noise).
    pub separation: f64,
    /// Number of structural cliques.
    pub cliques: usize,
    /// Nodes per clique.
    pub clique_size: usize,
    /// Number of contextual anomalies.
    pub contextual: usize,
    /// Candidates examined per contextual anomaly.
    pub candidates: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for PlantedConfig {
    /// 2000 nodes, 4 communities, degree ≈ 10, 16 features, 5 cliques of 10 and 50 contextual
    /// anomalies (5 % anomalous).
    fn default() -> Self {
        Self {
            nodes: 2000,
            communities: 4,
            degree_in: 8.0,
            degree_out: 2.0,
            features: 16,
            separation: 2.0,
            cliques: 5,
            clique_size: 10,
            contextual: 50,
            candidates: 50,
            seed: 0,
        }
    }
}

/// A standard normal draw (Box–Muller).
fn normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Bernoulli(p) successes among `total` trials by geometric skips (`O(successes)`), each
/// success index mapped to a node pair.
fn skip_run<R: Rng + ?Sized>(
    pairs: &mut Vec<(u32, u32)>,
    total: u64,
    p: f64,
    map: impl Fn(u64) -> (u32, u32),
    rng: &mut R,
) {
    if p <= 0.0 || total == 0 {
        return;
    }
    let lq = (1.0 - p).ln();
    let mut k: u64 = 0;
    loop {
        let gap = if p >= 1.0 {
            0
        } else {
            ((1.0 - rng.random::<f64>()).ln() / lq).floor() as u64
        };
        k = k.saturating_add(gap);
        if k >= total {
            break;
        }
        pairs.push(map(k));
        k += 1;
    }
}

/// Index `idx` of the upper triangle (pairs `a < b`, ordered by `b` then `a`) → `(a, b)`.
fn triangle(idx: u64) -> (u64, u64) {
    let mut b = ((((8 * idx + 1) as f64).sqrt() + 1.0) / 2.0).floor() as u64;
    while b * (b.saturating_sub(1)) / 2 > idx {
        b -= 1;
    }
    while (b + 1) * b / 2 <= idx {
        b += 1;
    }
    (idx - b * (b - 1) / 2, b)
}

/// SBM edges with expected in/out degrees, by community blocks.
fn sbm_pairs<R: Rng + ?Sized>(
    comm: &[usize],
    c: usize,
    cfg: &PlantedConfig,
    rng: &mut R,
) -> Vec<(u32, u32)> {
    let n = comm.len();
    let per = n as f64 / c as f64;
    let p_in = (cfg.degree_in / (per - 1.0).max(1.0)).min(1.0);
    let p_out = (cfg.degree_out / (n as f64 - per).max(1.0)).min(1.0);
    let mut members = vec![Vec::new(); c];
    for (v, &k) in comm.iter().enumerate() {
        members[k].push(v as u32);
    }
    let mut pairs = Vec::new();
    for m in &members {
        let s = m.len() as u64;
        let map = |idx: u64| {
            let (a, b) = triangle(idx);
            (m[a as usize], m[b as usize])
        };
        skip_run(&mut pairs, s * s.saturating_sub(1) / 2, p_in, map, rng);
    }
    for x in 0..c {
        for y in x + 1..c {
            let (mx, my) = (&members[x], &members[y]);
            let w = my.len() as u64;
            let map = |idx: u64| (mx[(idx / w) as usize], my[(idx % w) as usize]);
            skip_run(&mut pairs, mx.len() as u64 * w, p_out, map, rng);
        }
    }
    pairs
}

/// Generates a planted-anomaly node dataset.
pub fn generate_planted(cfg: &PlantedConfig) -> Result<NodeDataset> {
    let n = cfg.nodes;
    if n < 2 || cfg.communities == 0 || cfg.communities > n || cfg.features == 0 {
        return Err(GraphError::invalid(
            "planted config",
            "need nodes ≥ 2, 1 ≤ communities ≤ nodes, features ≥ 1",
        ));
    }
    if cfg.cliques * cfg.clique_size > n
        || cfg.contextual > n
        || cfg.candidates == 0
        || cfg.candidates > n
    {
        return Err(GraphError::invalid(
            "planted config",
            "more anomalies or candidates than nodes",
        ));
    }
    if !(cfg.degree_in >= 0.0 && cfg.degree_out >= 0.0 && cfg.separation.is_finite()) {
        return Err(GraphError::invalid(
            "planted config",
            "degrees must be ≥ 0 and separation finite",
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let c = cfg.communities;
    let comm: Vec<usize> = (0..n).map(|v| v % c).collect();
    let mut pairs = sbm_pairs(&comm, c, cfg, &mut rng);
    // Community means: random directions scaled to `separation`.
    let means: Vec<Vec<f64>> = (0..c)
        .map(|_| {
            let v: Vec<f64> = (0..cfg.features).map(|_| normal(&mut rng)).collect();
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
            v.into_iter().map(|x| x / norm * cfg.separation).collect()
        })
        .collect();
    let mut x = Array2::<f32>::zeros((n, cfg.features));
    for v in 0..n {
        for f in 0..cfg.features {
            x[[v, f]] = (means[comm[v]][f] + normal(&mut rng)) as f32;
        }
    }
    let mut kind = vec![0i64; n];
    // Structural anomalies: cliques.
    let picked = sample(&mut rng, n, cfg.cliques * cfg.clique_size).into_vec();
    for clique in picked.chunks(cfg.clique_size.max(1)) {
        for (i, &a) in clique.iter().enumerate() {
            kind[a] = 1;
            for &b in &clique[i + 1..] {
                pairs.push((a as u32, b as u32));
            }
        }
    }
    // Contextual anomalies: features of the farthest of `candidates` random nodes.
    let targets = sample(&mut rng, n, cfg.contextual).into_vec();
    let original = x.clone();
    for &t in &targets {
        let cands = sample(&mut rng, n, cfg.candidates).into_vec();
        let dist = |u: usize| -> f64 {
            original
                .row(t)
                .iter()
                .zip(original.row(u))
                .map(|(a, b)| ((a - b) as f64).powi(2))
                .sum()
        };
        let far = cands
            .iter()
            .copied()
            .max_by(|&a, &b| dist(a).total_cmp(&dist(b)))
            .unwrap_or(t);
        let row = original.row(far).to_owned();
        x.row_mut(t).assign(&row);
        if kind[t] == 0 {
            kind[t] = 2;
        }
    }
    let adjacency = Csr::from_undirected(n, &pairs)?;
    let mut graph = Graph::new(adjacency, x)?;
    graph.node_labels = Some(kind.clone());
    let ds = NodeDataset {
        name: "planted".into(),
        graph,
        relations: Vec::new(),
        labels: kind.iter().map(|&k| usize::from(k != 0)).collect(),
        num_classes: 2,
        labelled: (0..n as u32).collect(),
        official_splits: Vec::new(),
    };
    ds.validate()?;
    Ok(ds)
}

#[cfg(test)]
mod tests {
    use super::triangle;

    #[test]
    fn triangle_indexing() {
        let mut idx = 0;
        for b in 1..50u64 {
            for a in 0..b {
                assert_eq!(triangle(idx), (a, b));
                idx += 1;
            }
        }
    }
}

/// Settings of [`generate_relation_planted`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelationPlantedConfig {
    /// Nodes.
    pub nodes: usize,
    /// Anomalous nodes.
    pub anomalies: usize,
    /// Links each node makes in each relation.
    pub degree: usize,
    /// Feature width (the first carries the node's type).
    pub features: usize,
    /// Standard deviation of the feature noise.
    pub noise: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for RelationPlantedConfig {
    /// 400 nodes, 40 anomalous, 4 links per relation, 4 features, noise 0.3.
    fn default() -> Self {
        Self {
            nodes: 400,
            anomalies: 40,
            degree: 4,
            features: 4,
            noise: 0.3,
            seed: 0,
        }
    }
}

/// A graph of two relations whose anomalies show in one relation only (the question of ET
/// Table 12). Every node has a type, X or Y (its first feature is ±1 plus noise, the others
/// noise), independent of its label, and links to `degree` nodes in each relation: a normal
/// node's `r0` links go to X nodes and its `r1` links to Y nodes, an anomaly's the other way
/// round. In the union of the relations every node has `degree` X and `degree` Y neighbours
/// whatever its label, and what it receives depends on its type alone, so a model of the
/// homogeneous graph cannot tell an anomaly from a normal node; one block per relation can.
/// Relations `r0`, `r1`; the graph is their union. Seeded and deterministic.
pub fn generate_relation_planted(cfg: &RelationPlantedConfig) -> Result<NodeDataset> {
    let n = cfg.nodes;
    if n < 4 || cfg.features == 0 || cfg.degree == 0 || cfg.anomalies > n {
        return Err(GraphError::invalid(
            "relation planted config",
            "need nodes ≥ 4, features ≥ 1, degree ≥ 1, anomalies ≤ nodes",
        ));
    }
    if !(cfg.noise >= 0.0 && cfg.noise.is_finite()) {
        return Err(GraphError::invalid(
            "relation planted config",
            "noise must be finite and ≥ 0",
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let is_x: Vec<bool> = (0..n).map(|v| v % 2 == 0).collect();
    let of_type = |x: bool| -> Vec<usize> { (0..n).filter(|&v| is_x[v] == x).collect() };
    let (xs, ys) = (of_type(true), of_type(false));
    if cfg.degree > xs.len().min(ys.len()) - 1 {
        return Err(GraphError::invalid(
            "relation planted config",
            format!("degree {} exceeds the nodes of one type", cfg.degree),
        ));
    }
    let mut anomalous = vec![false; n];
    for a in sample(&mut rng, n, cfg.anomalies) {
        anomalous[a] = true;
    }
    let mut relations = [Vec::new(), Vec::new()];
    for (v, &anomaly) in anomalous.iter().enumerate() {
        // Relation 0 to X nodes and relation 1 to Y nodes, swapped for an anomaly.
        let (first, second) = if anomaly { (&ys, &xs) } else { (&xs, &ys) };
        for (pairs, pool) in relations.iter_mut().zip([first, second]) {
            let mut linked = 0;
            while linked < cfg.degree {
                let u = pool[rng.random_range(0..pool.len())];
                if u != v {
                    pairs.push((v as u32, u as u32));
                    linked += 1;
                }
            }
        }
    }
    let mut x = Array2::<f32>::zeros((n, cfg.features));
    for v in 0..n {
        x[[v, 0]] = if is_x[v] { 1.0 } else { -1.0 };
        for f in 0..cfg.features {
            x[[v, f]] += (cfg.noise * normal(&mut rng)) as f32;
        }
    }
    let union: Vec<(u32, u32)> = relations.iter().flatten().copied().collect();
    let graph = Graph::new(Csr::from_undirected(n, &union)?, x)?;
    let relations = relations
        .iter()
        .enumerate()
        .map(|(r, pairs)| {
            Ok(crate::Relation {
                name: format!("r{r}"),
                adjacency: Csr::from_undirected(n, pairs)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ds = NodeDataset {
        name: "relation-planted".into(),
        graph,
        relations,
        labels: anomalous.iter().map(|&a| usize::from(a)).collect(),
        num_classes: 2,
        labelled: (0..n as u32).collect(),
        official_splits: Vec::new(),
    };
    ds.validate()?;
    Ok(ds)
}
