//! Unit tests of the graph classifier.

use super::*;
use basin_graph::Csr;
use basin_graph::GraphDataset;
use basin_graph::batch::BatchConfig;
use tch::nn;
use tch::{Device, Kind, Tensor};

/// A path of three nodes (degrees 1, 2, 1) padded beside a graph of one node, CLS attending
/// everything and a self-loop in the mask: the statistics count only the graph's edges.
#[test]
fn structure_statistics_count_the_graphs_own_edges() {
    let padding =
        Tensor::from_slice(&[true, true, true, true, true, true, false, false]).view([2, 4]);
    let mut m = vec![false; 2 * 16];
    let mut link = |g: usize, a: usize, b: usize| {
        m[g * 16 + a * 4 + b] = true;
        m[g * 16 + b * 4 + a] = true;
    };
    for g in 0..2 {
        for t in 0..4 {
            link(g, 0, t); // CLS with every slot, itself included
            link(g, t, t); // self-loops
        }
    }
    link(0, 1, 2);
    link(0, 2, 3);
    let mask = Tensor::from_slice(&m).view([2, 4, 4]);
    let (degree, _) = node_degrees(&mask, &padding);
    assert_eq!(
        Vec::<i64>::try_from(degree.view([-1])).unwrap(),
        [0, 1, 2, 1, 0, 0, 0, 0]
    );
    let stats = Vec::<f64>::try_from(structure_statistics(&mask, &padding).view([-1])).unwrap();
    let std = (2.0f64 / 9.0).sqrt();
    let want = [3.0, 4.0 / 3.0, std, 2.0, 1.0, 0.0, 0.0, 0.0].map(|v: f64| v.ln_1p());
    for (got, want) in stats.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{stats:?} against {want:?}");
    }
}

#[test]
fn the_size_readout_tells_apart_graphs_whose_mean_token_is_equal() {
    // Two graphs of 3 and 6 nodes whose node tokens are all equal, padded to 7 slots + CLS.
    let x = Tensor::ones([2, 7, 4], (Kind::Double, Device::Cpu)) * 0.5;
    let _ = x.select(1, 0).fill_(2.0);
    let padding = Tensor::from_slice(&[
        true, true, true, true, false, false, false, // CLS + 3 nodes
        true, true, true, true, true, true, true, // CLS + 6 nodes
    ])
    .view([2, 7]);
    let mean = pool(Readout::ClsMean, &x, &padding);
    assert_eq!(mean.size(), [2, 8]);
    assert!(
        mean.get(0).allclose(&mean.get(1), 0.0, 1e-12, false),
        "the mean should not see the size"
    );
    let sized = pool(Readout::ClsMeanSize, &x, &padding);
    assert_eq!(sized.size(), [2, 12]);
    for (row, n) in [(0, 3.0f64), (1, 6.0)] {
        let amplified = sized.get(row).narrow(0, 8, 4);
        let want = Tensor::full([4], 0.5 * (n + 1.0).ln(), (Kind::Double, Device::Cpu));
        assert!(
            amplified.allclose(&want, 0.0, 1e-12, false),
            "graph of {n} nodes"
        );
    }
}

#[test]
fn the_moments_readout_is_the_std_and_max_of_the_real_nodes_only() {
    // Graph 0: CLS + nodes 1, 3 + one padded slot holding 100; graph 1: CLS + nodes −2, 0, 5.
    let x = Tensor::from_slice(&[9.0f64, 1.0, 3.0, 100.0, 9.0, -2.0, 0.0, 5.0]).view([2, 4, 1]);
    let padding =
        Tensor::from_slice(&[true, true, true, false, true, true, true, true]).view([2, 4]);
    let out = pool(Readout::ClsMoments, &x, &padding);
    assert_eq!(out.size(), [2, 5]);
    let var1 = (3.0f64.powi(2) + 1.0 + 4.0f64.powi(2)) / 3.0;
    let want = Tensor::from_slice(&[
        9.0,
        2.0,
        2.0 * 3.0f64.ln(),
        (1.0f64 + 1e-5).sqrt(),
        3.0,
        9.0,
        1.0,
        4.0f64.ln(),
        (var1 + 1e-5).sqrt(),
        5.0,
    ])
    .view([2, 5]);
    assert!(out.allclose(&want, 1e-12, 1e-12, false), "{out}");
    // The padded slot's value must not reach the output or take any gradient.
    let x = x.set_requires_grad(true);
    pool(Readout::ClsMoments, &x, &padding)
        .sum(Kind::Double)
        .backward();
    let g = x.grad();
    assert_eq!(g.double_value(&[0, 3, 0]), 0.0);
    assert!(g.isfinite().all().int64_value(&[]) == 1);
    // A graph of CLS alone reads finite values (max 0, std √ε), not −∞ or NaN.
    let empty =
        Tensor::from_slice(&[true, false, false, false, true, true, true, true]).view([2, 4]);
    let out = pool(Readout::ClsMoments, &x.detach(), &empty);
    assert!(out.isfinite().all().int64_value(&[]) == 1, "{out}");
    assert_eq!(out.double_value(&[0, 4]), 0.0);
}

#[test]
fn the_batch_memory_bound_counts_the_attention_scores_of_every_step() {
    let mut cfg = GraphClassifierConfig {
        batch: 8,
        blocks: 2,
        ..GraphClassifierConfig::default()
    };
    cfg.block.steps = 3;
    let h = cfg.heads().unwrap_or(1) as u64;
    // 99 nodes + CLS = 100 tokens; the batch is capped by the items there are.
    assert_eq!(
        cfg.batch_memory_lower_bound(99, 100),
        4 * 8 * h * 100 * 100 * 6
    );
    assert_eq!(
        cfg.batch_memory_lower_bound(99, 2),
        4 * 2 * h * 100 * 100 * 6
    );
    // The node cap bounds N'.
    cfg.batching.max_nodes = 49;
    assert_eq!(
        cfg.batch_memory_lower_bound(10_000, 100),
        4 * 8 * h * 50 * 50 * 6
    );
    let need = cfg.batch_memory_lower_bound(10_000, 100);
    assert!(cfg.check_batch_memory(10_000, 100, need).is_ok());
    let err = cfg
        .check_batch_memory(10_000, 100, need - 1)
        .expect_err("too big");
    assert!(err.to_string().contains("batch"), "{err}");
    // Without an attention term only the X ⊗ X map counts, once.
    cfg.block.terms.retain(|t| !t.params.contains_key("heads"));
    assert_eq!(cfg.heads(), None);
    assert_eq!(cfg.batch_memory_lower_bound(10_000, 100), 4 * 8 * 50 * 50);
    // No overflow on absurd sizes.
    cfg.batching.max_nodes = usize::MAX - 1;
    assert_eq!(
        cfg.batch_memory_lower_bound(usize::MAX - 1, usize::MAX),
        u64::MAX
    );
}

/// A graph above the node cap is encoded as the batches see it: cut to the cap.
#[test]
fn dataset_encodings_of_large_graphs_are_those_of_the_cut_graph() {
    let cycle = |n: u32| {
        let src: Vec<u32> = (0..n).collect();
        let dst: Vec<u32> = (0..n).map(|a| (a + 1) % n).collect();
        let (adj, _) = Csr::from_edges(n as usize, &src, &dst).unwrap();
        let adj = adj.symmetrized();
        basin_graph::Graph::new(adj, ndarray::Array2::zeros((n as usize, 1))).unwrap()
    };
    let data = GraphDataset {
        name: "cycles".into(),
        graphs: vec![cycle(30), cycle(8)],
        targets: basin_graph::Targets::Classes {
            labels: vec![0, 1],
            num_classes: 2,
        },
        class_values: vec![0, 1],
        official_split: None,
        node_features: None,
    };
    let batching = BatchConfig {
        max_nodes: 20,
        ..BatchConfig::et_graph()
    };
    let Some(pe_cfg) = &batching.pe else {
        panic!("the preset has encodings")
    };
    let pe = dataset_pe(&data, &batching).unwrap().unwrap();
    let cut = basin_graph::laplacian::laplacian_pe(&data.graphs[0].truncated(20).adjacency, pe_cfg)
        .unwrap();
    assert_eq!(pe[0].vectors, cut.vectors);
    assert_eq!(pe[1].vectors.nrows(), 9, "8 nodes and CLS, uncut");
}

#[test]
fn readout_hidden_adds_a_hidden_layer_before_the_class_logits() {
    let shapes = |hidden| {
        let cfg = GraphClassifierConfig {
            readout: Readout::ClsMeanSize,
            readout_hidden: hidden,
            ..GraphClassifierConfig::default()
        };
        let vs = nn::VarStore::new(Device::Cpu);
        let _model = GraphClassifier::new(&vs.root(), &cfg, 5, 3).unwrap();
        let mut v: Vec<(String, Vec<i64>)> = vs
            .variables()
            .into_iter()
            .filter(|(n, _)| n.starts_with("readout"))
            .map(|(n, t)| (n, t.size()))
            .collect();
        v.sort();
        (cfg.block.dim, v)
    };
    // Linear (the papers): one map from CLS ⊕ mean ⊕ size-scaled mean to the classes, under
    // the name existing checkpoints use.
    let (d, linear) = shapes(None);
    assert_eq!(
        linear,
        [
            ("readout.bias".to_string(), vec![3]),
            ("readout.weight".to_string(), vec![3, 3 * d]),
        ]
    );
    let (d, mlp) = shapes(Some(16));
    assert_eq!(
        mlp,
        [
            ("readout.bias".to_string(), vec![3]),
            ("readout.weight".to_string(), vec![3, 16]),
            ("readout_hidden.bias".to_string(), vec![16]),
            ("readout_hidden.weight".to_string(), vec![16, 3 * d]),
        ]
    );
}
