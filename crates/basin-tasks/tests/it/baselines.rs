//! The baselines learn what they can see: GIN and the pooled-feature MLP tell rings from stars;
//! the pooled-feature MLP is at chance when graphs differ only in how their edges connect
//! (a 6-cycle against two triangles: same nodes, edges and degrees); the anomaly floor finds
//! planted anomalies from neighbour means; the graph transformer gives the same predictions and
//! loss whether a batch runs whole or in size buckets.

use std::sync::Arc;

use basin_core::testing::lock_generator;
use basin_graph::anomaly::{PlantedConfig, generate_planted};
use basin_graph::{Csr, Graph, GraphDataset, Split, SplitConfig, Targets};
use basin_tasks::baselines::{
    GinConfig, GinLearner, GraphTransformerConfig, GraphTransformerLearner, MlpConfig,
    NeighbourMeanLearner, PooledFeaturesLearner, pooled_features,
};
use basin_tasks::graph_classification::dataset_pe;
use basin_tasks::testing::assert_bucket_layout_invariant;
use basin_train::context::RunContext;
use basin_train::optim::OptimConfig;
use basin_train::protocol::{
    AnomalyProtocol, AnomalyTargets, FixedSplitProtocol, Metric, Protocol, PublishedSplit,
};
use basin_train::runner::TrainConfig;
use tch::Device;

/// Undirected edges, node count, class.
type ToyGraph = (Vec<(u32, u32)>, usize, usize);

fn dataset(graphs: Vec<ToyGraph>) -> Arc<GraphDataset> {
    let mut gs = Vec::new();
    let mut labels = Vec::new();
    for (edges, n, class) in graphs {
        let (src, dst): (Vec<u32>, Vec<u32>) =
            edges.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).unzip();
        let (adj, _) = Csr::from_edges(n, &src, &dst).unwrap();
        gs.push(Graph::new(adj, ndarray::Array2::ones((n, 1))).unwrap());
        labels.push(class);
    }
    Arc::new(GraphDataset {
        name: "toy".into(),
        graphs: gs,
        targets: Targets::Classes {
            labels,
            num_classes: 2,
        },
        class_values: vec![0, 1],
        official_split: None,
        node_features: None,
    })
}

fn rings_and_stars(count: usize) -> Arc<GraphDataset> {
    dataset(
        (0..count)
            .map(|i| {
                let n = 6 + (i % 6) as u32;
                if i % 2 == 0 {
                    ((0..n).map(|a| (a, (a + 1) % n)).collect(), n as usize, 0)
                } else {
                    ((1..n).map(|a| (0, a)).collect(), n as usize, 1)
                }
            })
            .collect(),
    )
}

fn accuracy<L: basin_train::runner::Learner>(
    data: &Arc<GraphDataset>,
    epochs: usize,
    make: impl Fn(&[usize], u64) -> L,
) -> f64 {
    let n = data.graphs.len() as u32;
    let target: Vec<f64> = data
        .targets
        .classes()
        .unwrap()
        .iter()
        .map(|&c| c as f64)
        .collect();
    let split = Split::new(
        (0..n * 2 / 3).collect(),
        (n * 2 / 3..n * 5 / 6).collect(),
        (n * 5 / 6..n).collect(),
    );
    FixedSplitProtocol {
        runs: 1,
        seed: 0,
        metric: Metric::Accuracy,
        curves: false,
        train: TrainConfig {
            epochs,
            optim: OptimConfig {
                lr: 1e-2,
                ..OptimConfig::default()
            },
            ..TrainConfig::default()
        },
    }
    .run(
        PublishedSplit {
            split: &split,
            target: (&target).into(),
        },
        |run| Ok(make(&run.train(), run.seed)),
        |_, _| Ok(()),
        &RunContext::new("toy"),
    )
    .unwrap()
    .aggregate["test_accuracy"]
        .0
}

#[test]
fn gin_and_the_pooled_mlp_tell_rings_from_stars() {
    let _g = lock_generator();
    let data = rings_and_stars(120);
    let gin = accuracy(&data, 20, |train, seed| {
        GinLearner::new(
            data.clone(),
            &GinConfig::default(),
            train,
            seed,
            Device::Cpu,
        )
        .unwrap()
    });
    assert!(gin > 0.9, "GIN {gin}");
    let pooled = accuracy(&data, 40, |train, seed| {
        PooledFeaturesLearner::new(&data, &MlpConfig::default(), train, seed, Device::Cpu).unwrap()
    });
    assert!(pooled > 0.9, "pooled {pooled}");
}

#[test]
fn the_pooled_mlp_cannot_see_how_edges_connect() {
    let _g = lock_generator();
    let cycle: Vec<(u32, u32)> = (0..6).map(|a| (a, (a + 1) % 6)).collect();
    let triangles = vec![(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)];
    let data = dataset(
        (0..40)
            .map(|i| {
                if i % 2 == 0 {
                    (cycle.clone(), 6, 0)
                } else {
                    (triangles.clone(), 6, 1)
                }
            })
            .collect(),
    );
    let x = pooled_features(&data);
    assert_eq!(
        x.row(0),
        x.row(1),
        "the two classes pool to the same features"
    );
}

#[test]
fn the_anomaly_floor_learns_planted_anomalies() {
    let _g = lock_generator();
    let data = generate_planted(&PlantedConfig {
        nodes: 600,
        cliques: 3,
        clique_size: 8,
        contextual: 20,
        separation: 4.0,
        ..PlantedConfig::default()
    })
    .unwrap();
    let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
    let report = AnomalyProtocol {
        split: SplitConfig::bwgnn(0.4),
        runs: 1,
        train: TrainConfig {
            epochs: 100,
            optim: OptimConfig {
                lr: 1e-2,
                ..OptimConfig::default()
            },
            ..TrainConfig::default()
        },
        ..AnomalyProtocol::default()
    }
    .run(
        AnomalyTargets {
            labelled: &data.labelled,
            is_anomaly: &is_anomaly,
        },
        |run| {
            Ok(NeighbourMeanLearner::new(
                &data,
                &MlpConfig::default(),
                &run.train(),
                run.seed,
                Device::Cpu,
            )?)
        },
        |_, _| Ok(()),
        &RunContext::new("planted"),
    )
    .unwrap();
    assert!(
        report.aggregate["test_auc"].0 > 0.6,
        "{:?}",
        report.aggregate
    );
}

#[test]
fn the_graph_transformer_gives_the_same_answers_in_size_buckets() {
    let _g = lock_generator();
    // Rings of 4 to 170 nodes: a batch of them splits into buckets.
    let sizes = [170u32, 4, 9, 120, 6, 150, 5, 60];
    let data = dataset(
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                (
                    (0..n).map(|a| (a, (a + 1) % n)).collect(),
                    n as usize,
                    i % 2,
                )
            })
            .collect(),
    );
    let items = [3usize, 0, 6, 1, 7, 4, 2, 5];
    let mut cfg = GraphTransformerConfig {
        dim: 16,
        heads: 2,
        layers: 2,
        batch: 8,
        ..GraphTransformerConfig::default()
    };
    // No sign flips of the encodings: a training step is then deterministic.
    cfg.batching.sign_flip = basin_graph::laplacian::SignFlip::None;
    assert!(cfg.batching.buckets(&data, &items, true).len() > 1);
    let pe = dataset_pe(&data, &cfg.batching).unwrap().map(Arc::new);
    let rows = assert_bucket_layout_invariant(
        |size_buckets| {
            cfg.batching.size_buckets = size_buckets.into();
            GraphTransformerLearner::new(data.clone(), pe.clone(), &cfg, &items, 0, Device::Cpu)
                .unwrap()
        },
        &items,
    );
    assert_eq!(rows, items.len());
}

/// GIN in evaluation mode scores a graph the same alone, in any batch and under any numbering
/// of its nodes: a wrong offset in the batch's edge list or readout would mix graphs.
#[test]
fn gin_scores_a_graph_alone_as_in_a_batch_and_under_relabelling() {
    use basin_train::runner::Learner;
    use rand::{RngExt, SeedableRng, seq::SliceRandom};
    let _g = lock_generator();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let (mut graphs, mut labels) = (Vec::new(), Vec::new());
    for i in 0..6usize {
        let n = 5 + 3 * i;
        // A random tree and n random extra edges (self loops and repeats dropped or merged).
        let mut edges: Vec<(u32, u32)> =
            (1..n as u32).map(|a| (a, rng.random_range(0..a))).collect();
        for _ in 0..n {
            let (a, b) = (rng.random_range(0..n as u32), rng.random_range(0..n as u32));
            if a != b {
                edges.push((a, b));
            }
        }
        let x = ndarray::Array2::from_shape_fn((n, 3), |_| rng.random_range(-2.0f32..2.0));
        let mut perm: Vec<u32> = (0..n as u32).collect();
        perm.shuffle(&mut rng);
        // Graph 2i and graph 2i + 1: the same graph, node a renamed perm[a].
        for (edges, x) in [
            (edges.clone(), x.clone()),
            (
                edges
                    .iter()
                    .map(|&(a, b)| (perm[a as usize], perm[b as usize]))
                    .collect(),
                ndarray::Array2::from_shape_fn((n, 3), |(r, c)| {
                    x[[perm.iter().position(|&p| p as usize == r).unwrap(), c]]
                }),
            ),
        ] {
            let (src, dst): (Vec<u32>, Vec<u32>) =
                edges.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).unzip();
            let (adj, _) = Csr::from_edges(n, &src, &dst).unwrap();
            graphs.push(Graph::new(adj, x).unwrap());
            labels.push(i % 2);
        }
    }
    let data = Arc::new(GraphDataset {
        name: "toy".into(),
        graphs,
        targets: Targets::Classes {
            labels,
            num_classes: 2,
        },
        class_values: vec![0, 1],
        official_split: None,
        node_features: None,
    });
    let all: Vec<usize> = (0..12).collect();
    // Narrow, so that the sum readout's logits stay small enough for no probability to round to
    // 0 or 1.
    let cfg = GinConfig {
        layers: 2,
        hidden: 4,
        ..GinConfig::default()
    };
    let mut gin = GinLearner::new(data, &cfg, &all, 0, Device::Cpu).unwrap();
    // Training-mode passes bring the batch norms' running statistics near the batch's (at their
    // start the sum readout saturates the softmax).
    for _ in 0..60 {
        gin.train_step(&all, &mut rng).unwrap();
    }
    let batch = gin.predict(&[7, 2, 11, 0, 5]).unwrap().0;
    for (row, i) in batch.iter().zip([7usize, 2, 11, 0, 5]) {
        let alone = &gin.predict(&[i]).unwrap().0[0];
        let renamed = &gin.predict(&[i ^ 1]).unwrap().0[0];
        for ((a, b), c) in row.iter().zip(alone).zip(renamed) {
            assert!(
                (a - b).abs() < 1e-5,
                "graph {i}: {row:?} in a batch, {alone:?} alone"
            );
            assert!(
                (a - c).abs() < 1e-5,
                "graph {i}: {row:?}, renamed {renamed:?}"
            );
        }
    }
}

/// GIN's batch norms start at scale 1; a training batch of a single one-node graph gives
/// batch norm one row: an error that says so, not a panic; evaluation scores it.
#[test]
fn gin_refuses_to_train_on_one_node_and_still_scores_it() {
    use basin_train::runner::Learner;
    use rand::SeedableRng;
    let data = dataset(vec![(vec![], 1, 0), (vec![(0, 1)], 2, 1)]);
    let mut gin = GinLearner::new(data, &GinConfig::default(), &[0, 1], 0, Device::Cpu).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    // Batch norms start as PyTorch's: scale 1, shift 0.
    let mut checked = 0;
    for (name, t) in gin.vars().variables() {
        let want = if name.ends_with("bn1.weight") || name.ends_with("bn2.weight") {
            1.0
        } else if name.contains(".bn") && name.ends_with(".bias") {
            0.0
        } else {
            continue;
        };
        assert!(t.eq(want).all().int64_value(&[]) == 1, "{name}: {t}");
        checked += 1;
    }
    assert_eq!(checked, 4 * GinConfig::default().layers);
    let err = gin.train_step(&[0], &mut rng).unwrap_err().to_string();
    assert!(err.contains("two or more"), "{err}");
    assert!(gin.train_step(&[0, 1], &mut rng).is_ok());
    assert_eq!(gin.predict(&[0]).unwrap().0.len(), 1);
}
