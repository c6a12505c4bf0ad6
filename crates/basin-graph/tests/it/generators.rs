//! Generators: SBM CLUSTER and PATTERN against the published statistics and parameters, and
//! the planted-anomaly graph.

use basin_graph::Targets;
use basin_graph::anomaly::{PlantedConfig, generate_planted};
use basin_graph::sbm::{ClusterConfig, PatternConfig, generate_cluster, generate_pattern};

/// Fraction of node pairs joined, split by `same(i, j)`.
fn densities(ds: &basin_graph::GraphDataset, same: impl Fn(i64, i64) -> bool) -> (f64, f64) {
    let (mut e_in, mut p_in, mut e_out, mut p_out) = (0u64, 0u64, 0u64, 0u64);
    for g in &ds.graphs {
        let l = g.node_labels.as_ref().unwrap();
        let n = g.num_nodes();
        for i in 0..n {
            for j in i + 1..n {
                let joined = u64::from(g.adjacency.contains(i, j as u32));
                if same(l[i], l[j]) {
                    e_in += joined;
                    p_in += 1;
                } else {
                    e_out += joined;
                    p_out += 1;
                }
            }
        }
    }
    (e_in as f64 / p_in as f64, e_out as f64 / p_out as f64)
}

fn mean(v: &[usize]) -> f64 {
    v.iter().sum::<usize>() as f64 / v.len() as f64
}

#[test]
fn cluster_matches_published_statistics() {
    // The full dataset's sizes (12,000 graphs), from the generator's own first draws.
    let cfg = ClusterConfig::default();
    let counts = cfg.node_counts();
    assert_eq!(counts.len(), 12_000);
    // Published: 117.20 nodes per graph; the generator's mean is 6 × 19.5 = 117 with a standard
    // error of 0.19 over 12,000 graphs.
    assert!(
        (mean(&counts) - 117.20).abs() < 0.6,
        "avg nodes {}",
        mean(&counts)
    );
    assert!(counts.iter().all(|&n| (30..=6 * 34).contains(&n)));
    // The generated graphs (a 600-graph prefix: graph g depends on the seed and g only).
    let small = ClusterConfig {
        sizes: [400, 100, 100],
        ..cfg.clone()
    };
    let ds = generate_cluster(&small).unwrap();
    ds.validate().unwrap();
    assert_eq!(ds.official_split.as_ref().unwrap().sizes(), [400, 100, 100]);
    let got: Vec<usize> = ds.graphs.iter().map(|g| g.num_nodes()).collect();
    assert_eq!(got, counts[..600]);
    let s = ds.stats();
    assert_eq!(s.classes, 6);
    assert!(matches!(
        ds.targets,
        Targets::NodeClasses { num_classes: 6 }
    ));
    for g in &ds.graphs {
        assert!(g.adjacency.is_symmetric() && g.adjacency.num_self_loops() == 0);
        let l = g.node_labels.as_ref().unwrap();
        // Exactly one node per community carries feature r + 1, every other node 0.
        for r in 0..6 {
            let marked: Vec<usize> = (0..g.num_nodes())
                .filter(|&v| g.node_features[[v, 0]] == (r + 1) as f32)
                .collect();
            assert_eq!(marked.len(), 1);
            assert_eq!(l[marked[0]], r as i64);
        }
        assert_eq!(g.node_features.iter().filter(|&&x| x != 0.0).count(), 6);
    }
    let (p, q) = densities(&ds, |a, b| a == b);
    assert!(
        (p - 0.55).abs() < 0.01 && (q - 0.25).abs() < 0.01,
        "p {p} q {q}"
    );
    // Seeded: same seed, same graphs; another seed, other graphs.
    let tiny = ClusterConfig {
        sizes: [20, 0, 0],
        ..cfg
    };
    let d = generate_cluster(&tiny).unwrap();
    assert_eq!(d.graphs[..], ds.graphs[..20]);
    assert_ne!(
        generate_cluster(&ClusterConfig { seed: 1, ..tiny })
            .unwrap()
            .graphs[0],
        d.graphs[0]
    );
}

#[test]
fn pattern_matches_published_statistics() {
    let cfg = PatternConfig::default();
    let counts = cfg.node_counts();
    assert_eq!(counts.len(), 14_000);
    // Published: 118.89 nodes per graph. The expectation is 5 × 19.5 + 19.5 = 117; the 100
    // pattern sizes are shared by 140 graphs each, so one dataset's mean has a standard error of
    // ≈ 8.66/√100 = 0.87 (the SBM part adds ≈ 0.16). Ours must lie within 3 standard errors of
    // the expectation, and within 3 standard errors of the difference of two independent
    // draws (0.87·√2 ≈ 1.23) of the published one.
    let m = mean(&counts);
    assert!((m - 117.0).abs() < 2.7, "avg nodes {m}");
    assert!((m - 118.89).abs() < 3.7, "avg nodes {m}");
    // The SBM part alone (5 communities of randint(5, 35)) has mean 97.5 and a tiny error.
    let sizes: Vec<usize> = {
        let one = PatternConfig {
            per_pattern: [1, 0, 0],
            ..cfg.clone()
        };
        let d = generate_pattern(&PatternConfig {
            patterns: 100,
            ..one
        })
        .unwrap();
        d.graphs
            .iter()
            .map(|g| {
                g.node_labels
                    .as_ref()
                    .unwrap()
                    .iter()
                    .filter(|&&l| l == 1)
                    .count()
            })
            .collect()
    };
    let sbm_mean = m - mean(&sizes);
    assert!((sbm_mean - 97.5).abs() < 0.6, "SBM part {sbm_mean}");
    // Split sizes 10,000 / 2,000 / 2,000 (checked on the split the generator records).
    let few = PatternConfig {
        patterns: 10,
        ..cfg.clone()
    };
    let ds = generate_pattern(&few).unwrap();
    ds.validate().unwrap();
    assert_eq!(
        ds.official_split.as_ref().unwrap().sizes(),
        [1_000, 200, 200]
    );
    let got: Vec<usize> = ds.graphs.iter().map(|g| g.num_nodes()).collect();
    assert_eq!(got, few.node_counts());
    assert_eq!(ds.stats().classes, 2);
    // Graphs of one pattern instance share its size; so do its val and test graphs.
    for pat in [0usize, 7] {
        let ones = |g: &basin_graph::Graph| {
            g.node_labels
                .as_ref()
                .unwrap()
                .iter()
                .filter(|&&l| l == 1)
                .count()
        };
        let size = ones(&ds.graphs[pat * 100]);
        assert!((5..35).contains(&size));
        assert!((0..100).all(|k| ones(&ds.graphs[pat * 100 + k]) == size));
        assert_eq!(ones(&ds.graphs[1_000 + pat * 20]), size);
        assert_eq!(ones(&ds.graphs[1_200 + pat * 20 + 19]), size);
    }
    assert!(
        ds.graphs
            .iter()
            .all(|g| g.node_features.iter().all(|&x| (0.0..3.0).contains(&x)))
    );
    let small = PatternConfig {
        patterns: 20,
        per_pattern: [10, 0, 0],
        ..cfg
    };
    let d = generate_pattern(&small).unwrap();
    // Pattern–pattern pairs: p_pattern = 0.5; pattern–SBM pairs: q_pattern = 0.5.
    let (both, _) = densities(&d, |a, b| a == 1 && b == 1);
    let (mixed, _) = densities(&d, |a, b| a != b);
    let (sbm, _) = densities(&d, |a, b| a == 0 && b == 0);
    assert!((both - 0.5).abs() < 0.02, "{both}");
    assert!((mixed - 0.5).abs() < 0.01, "{mixed}");
    // SBM pairs mix p = 0.5 (≈ 1/5 of pairs) and q = 0.35: density between them.
    assert!(sbm > 0.36 && sbm < 0.42, "{sbm}");
    assert_eq!(generate_pattern(&small).unwrap(), d);
}

#[test]
fn planted_anomalies() {
    let cfg = PlantedConfig::default();
    let d = generate_planted(&cfg).unwrap();
    let s = d.stats();
    assert_eq!(s.nodes, 2000);
    let kinds = d.graph.node_labels.as_ref().unwrap();
    let structural: Vec<usize> = (0..2000).filter(|&v| kinds[v] == 1).collect();
    assert_eq!(structural.len(), 50);
    let contextual = kinds.iter().filter(|&&k| k == 2).count();
    assert!((40..=50).contains(&contextual));
    assert_eq!(s.class_counts[1], 50 + contextual);
    // Every structural anomaly sits in a clique of 10: at least 9 structural neighbours.
    for &v in &structural {
        let k = d
            .graph
            .adjacency
            .row(v)
            .iter()
            .filter(|&&u| kinds[u as usize] == 1)
            .count();
        assert!(k >= 9, "node {v}");
    }
    let avg_degree = d.graph.adjacency.nnz() as f64 / 2000.0;
    assert!((avg_degree - 10.4).abs() < 1.0, "{avg_degree}");
    assert!(d.graph.adjacency.is_symmetric());
    assert_eq!(generate_planted(&cfg).unwrap(), d);
    let bad = PlantedConfig {
        cliques: 1000,
        ..cfg
    };
    assert!(generate_planted(&bad).is_err());
}
