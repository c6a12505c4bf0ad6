//! The graph classifier with ET blocks learns to tell graph shapes apart from structure alone,
//! and gives the same predictions and losses whether a batch runs whole or in size buckets.

use std::sync::Arc;

use basin_core::DynamicsConfig;
use basin_core::testing::lock_generator;
use basin_graph::{Csr, Graph, GraphDataset, Split, Targets};
use basin_tasks::graph_classification::{
    AdjacencyMode, GraphClassifierConfig, GraphClassifierLearner, Readout, dataset_pe,
};
use basin_tasks::testing::{
    assert_bucket_layout_invariant, classified, graph_classifier_accuracy, rings_and_stars,
};
use tch::Device;

#[test]
fn et_graph_classifier_learns_shapes_from_structure() {
    // Learners seed libtorch's generator: the other tests here must not draw from it meanwhile.
    let _g = lock_generator();
    let data = Arc::new(rings_and_stars(120));
    let split = Split::new((0..80).collect(), (80..100).collect(), (100..120).collect());
    for adjacency in [AdjacencyMode::Masked, AdjacencyMode::ReferenceMultiply] {
        let cfg = GraphClassifierConfig {
            adjacency,
            batch: 16,
            // The reference's Â reaches every pair, so it has no edge-list form.
            sparse_attention: adjacency != AdjacencyMode::ReferenceMultiply,
            ..basin_et::graph::tu_cpu()
        };
        let acc = graph_classifier_accuracy(&data, &cfg, &split, 15);
        assert!(acc > 0.9, "{adjacency:?}: accuracy {acc} (chance 0.5)");
    }
}

/// Paths of 5 nodes whose every node carries the graph's value v in [−1, 1); the class is
/// |v| > 0.5, which no linear function of v separates.
fn bands(count: usize) -> GraphDataset {
    let (graphs, labels) = (0..count)
        .map(|i| {
            let v = -1.0 + 2.0 * ((i as f32 * 0.618_034) % 1.0);
            let (src, dst): (Vec<u32>, Vec<u32>) =
                (0..4u32).flat_map(|a| [(a, a + 1), (a + 1, a)]).unzip();
            let (adj, _) = Csr::from_edges(5, &src, &dst).unwrap();
            let x = ndarray::Array2::from_elem((5, 1), v);
            (Graph::new(adj, x).unwrap(), usize::from(v.abs() > 0.5))
        })
        .unzip();
    classified("bands", graphs, labels, 2)
}

/// The CPU preset with a linear readout in place of its MLP (`readout_hidden: None`) learns a
/// class that no linear function of the node attribute separates, and the descent steps supply
/// the non-linearity: with them stopped (α = 10⁻⁹, the smallest legal step, no noise) every
/// readout input is affine in v (all nodes carry v, so their mean, spread and maximum are), and
/// the best such rule, a threshold on v, scores 77 % on this test split.
#[test]
fn linear_readout_learns_a_non_monotone_function_of_the_attributes() {
    let _g = lock_generator();
    let data = Arc::new(bands(160));
    let split = Split::new(
        (0..100).collect(),
        (100..130).collect(),
        (130..160).collect(),
    );
    let cfg = GraphClassifierConfig {
        batch: 16,
        readout_hidden: None,
        ..basin_et::graph::tu_cpu()
    };
    let acc = graph_classifier_accuracy(&data, &cfg, &split, 15);
    assert!(acc > 0.9, "accuracy {acc} (chance 0.5)");
    let mut still = cfg.clone();
    still.block.dynamics = DynamicsConfig::langevin(1e-9, 0.0);
    let acc_still = graph_classifier_accuracy(&data, &still, &split, 15);
    eprintln!("linear readout on bands: accuracy {acc} with descent, {acc_still} without");
    assert!(
        acc_still < 0.85,
        "without descent: accuracy {acc_still}, where a threshold on v is the best affine rule"
    );
}

/// The reference's parameter counts (the public ET graph code's notebooks): DD 1,064,834 and
/// NCI109 1,058,306 (ET Tables 4 and 14 of the CDAT paper); with edge features, A′'s
/// projection has C·H + H of them (MUTAG: F = 7 and C = 4 bond types).
#[test]
fn reference_parameter_counts_are_the_references() {
    let _g = lock_generator();
    let count = |features: basin_tasks::graph_classification::InputWidths| {
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let _m = basin_tasks::graph_classification::GraphClassifier::new(
            &vs.root(),
            &basin_et::graph::tu_reference(),
            features,
            2,
        )
        .unwrap();
        vs.trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum::<i64>()
    };
    let nodes = |f| basin_tasks::graph_classification::InputWidths::from(f);
    assert_eq!(count(nodes(89)), 1_064_834);
    assert_eq!(count(nodes(38)), 1_058_306);
    let mutag = basin_tasks::graph_classification::InputWidths {
        nodes: 7,
        edges: Some(4),
    };
    assert_eq!(count(mutag), 1_064_834 - (89 - 7) * 128 + (4 - 1) * 12);
}

/// Rings of very different sizes (4 to 180 nodes), so that a batch splits into size buckets;
/// graph and node classes from the size and the node's index.
fn rings(sizes: &[u32]) -> (GraphDataset, GraphDataset) {
    let graphs: Vec<Graph> = sizes
        .iter()
        .map(|&n| {
            let (src, dst): (Vec<u32>, Vec<u32>) = (0..n)
                .flat_map(|a| [(a, (a + 1) % n), ((a + 1) % n, a)])
                .unzip();
            let (adj, _) = Csr::from_edges(n as usize, &src, &dst).unwrap();
            let x = ndarray::Array2::from_shape_fn((n as usize, 2), |(i, j)| {
                ((i * 7 + j * 3) % 5) as f32
            });
            Graph::new(adj, x).unwrap()
        })
        .collect();
    let labels: Vec<usize> = sizes.iter().map(|&n| usize::from(n > 50)).collect();
    let graph_level = classified("rings", graphs, labels, 2);
    let mut node_level = GraphDataset {
        targets: Targets::NodeClasses { num_classes: 2 },
        ..graph_level.clone()
    };
    for g in &mut node_level.graphs {
        g.node_labels = Some((0..g.num_nodes() as i64).map(|i| i % 2).collect());
    }
    (graph_level, node_level)
}

#[test]
fn size_buckets_change_neither_predictions_nor_losses() {
    let _g = lock_generator();
    let sizes = [180u32, 4, 9, 120, 6, 150, 5, 60, 7, 175];
    let (graphs, nodes) = rings(&sizes);
    // Shuffled items: predictions must come back in their order, bucket by bucket.
    let items = [3usize, 0, 8, 1, 9, 4, 6, 2, 7, 5];
    // The dense form pads each bucket to its own largest graph; the edge list (the preset's)
    // pads too, for the tokens: both must give what the whole batch gives.
    let cases = [(graphs, Readout::ClsMean), (nodes, Readout::Nodes)]
        .into_iter()
        .flat_map(|(data, readout)| [(data.clone(), readout, false), (data, readout, true)]);
    for (data, readout, sparse_attention) in cases {
        let data = Arc::new(data);
        let mut cfg = GraphClassifierConfig {
            readout,
            batch: 10,
            sparse_attention,
            ..basin_et::graph::tu_cpu()
        };
        // No Langevin noise and no sign flips: a training step is then deterministic.
        cfg.block.dynamics = basin_core::DynamicsConfig::gradient_flow(0.1);
        cfg.batching.sign_flip = basin_graph::laplacian::SignFlip::None;
        let bucketed = cfg.batching.buckets(&data, &items, true);
        assert!(bucketed.len() > 1, "{readout:?}: the batch should split");
        let pe = dataset_pe(&data, &cfg.batching).unwrap().map(Arc::new);
        let rows = assert_bucket_layout_invariant(
            |size_buckets| {
                cfg.batching.size_buckets = size_buckets.into();
                GraphClassifierLearner::new(data.clone(), pe.clone(), &cfg, &items, 0, Device::Cpu)
                    .unwrap()
            },
            &items,
        );
        let want = match readout {
            Readout::Nodes => sizes.iter().sum::<u32>() as usize,
            _ => items.len(),
        };
        assert_eq!(rows, want, "{readout:?}");
    }
}

/// ET's ZINC model (`zinc_cpu`) regresses a value read from the graph with the L1 loss: on
/// generated ZINC-shaped molecules whose target is the share of one atom type, its test MAE falls
/// well below that of the best constant (the training median).
#[test]
fn the_zinc_model_regresses_a_graph_value_with_the_l1_loss() {
    use basin_train::context::RunContext;
    use basin_train::optim::OptimConfig;
    use basin_train::protocol::{FixedSplitProtocol, Metric, Protocol, PublishedSplit, TargetView};
    use basin_train::runner::TrainConfig;
    let _g = lock_generator();
    let raw = basin_graph::synthetic::lrgb_like(basin_graph::lrgb::LrgbSet::Zinc, 200, 0).unwrap();
    let data = Arc::new(basin_graph::sbm::one_hot_features(&raw, 28).unwrap());
    let split = raw.official_split.clone().unwrap();
    let Targets::Regression(y) = &data.targets else {
        panic!("ZINC has real targets")
    };
    let rows: Vec<Vec<f64>> = y
        .rows()
        .into_iter()
        .map(|r| vec![f64::from(r[0])])
        .collect();
    let cfg = GraphClassifierConfig {
        batch: 16,
        ..basin_et::graph::zinc_cpu()
    };
    let pe = dataset_pe(&data, &cfg.batching).unwrap().map(Arc::new);
    let protocol = FixedSplitProtocol {
        runs: 1,
        seed: 0,
        metric: Metric::Mae,
        curves: false,
        train: TrainConfig {
            epochs: 60,
            optim: OptimConfig {
                lr: 3e-3,
                ..OptimConfig::et_graph()
            },
            ..TrainConfig::default()
        },
    };
    let report = protocol
        .run(
            PublishedSplit {
                split: &split,
                target: TargetView::Labels(&rows),
            },
            |run| {
                Ok(GraphClassifierLearner::new(
                    data.clone(),
                    pe.clone(),
                    &cfg,
                    &run.train(),
                    run.seed,
                    Device::Cpu,
                )?)
            },
            |_, _| Ok(()),
            &RunContext::new("zinc-like"),
        )
        .unwrap();
    let mae = report.aggregate["test_mae"].0;
    let mut train: Vec<f64> = split.train.iter().map(|&i| rows[i as usize][0]).collect();
    train.sort_by(f64::total_cmp);
    let median = train[train.len() / 2];
    let floor = split
        .test
        .iter()
        .map(|&i| (rows[i as usize][0] - median).abs())
        .sum::<f64>()
        / split.test.len() as f64;
    eprintln!("ZINC-like: test MAE {mae:.4}, constant {floor:.4}");
    assert!(
        mae < 0.7 * floor,
        "test MAE {mae} against the constant's {floor}"
    );
}

/// ET's superpixel model (`superpixels_cpu`) adds Appendix D.3's edge reconstruction to its
/// loss: Â's projection to the edge channels gets a gradient, the loss exceeds the same step's
/// without it by the weighted MSE, and a model without Â or edge features refuses it.
#[test]
fn the_superpixel_model_reconstructs_the_edge_features_from_a_hat() {
    use basin_train::runner::Learner;
    use rand::SeedableRng;
    let _g = lock_generator();
    let raw =
        basin_graph::synthetic::lrgb_like(basin_graph::lrgb::LrgbSet::MnistSuperpixels, 24, 0)
            .unwrap();
    let data = Arc::new(raw);
    let items: Vec<usize> = (0..8).collect();
    let step = |weight: f64| {
        let mut cfg = basin_et::graph::superpixels_cpu();
        cfg.edge_reconstruction = weight;
        cfg.block.dynamics = DynamicsConfig::langevin(0.25, 0.0);
        let pe = dataset_pe(&data, &cfg.batching).unwrap().map(Arc::new);
        let mut learner =
            GraphClassifierLearner::new(data.clone(), pe, &cfg, &items, 0, Device::Cpu).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let loss = learner.train_step(&items, &mut rng).unwrap().loss;
        loss.backward();
        let decoder_grad = learner
            .vars()
            .variables()
            .iter()
            .filter(|(n, _)| n.contains("edge_decoder"))
            .map(|(_, v)| v.grad().abs().sum(tch::Kind::Double).double_value(&[]))
            .sum::<f64>();
        (loss.double_value(&[]), decoder_grad)
    };
    let (with, grad) = step(1.0);
    let (twice, _) = step(2.0);
    let (without, none) = step(0.0);
    assert!(grad > 0.0, "the edge decoder gets no gradient");
    assert_eq!(none, 0.0, "no decoder without the reconstruction");
    // The same seed draws the same model: the classification part is equal, the MSE adds.
    let mse = with - without;
    assert!(mse > 0.0, "{with} against {without}");
    assert!((twice - without - 2.0 * mse).abs() < 1e-4 * twice.abs().max(1.0));
    let mut sparse = basin_et::graph::superpixels_cpu();
    sparse.sparse_attention = true;
    let e = sparse.validate().unwrap_err().to_string();
    assert!(e.contains("edge_reconstruction"), "{e}");
}

/// The TU reports' per-class energy: each class's group holds exactly the items of that class,
/// one value per step of the last block (T + 1), in the order the classes sort.
#[test]
fn the_energy_by_class_groups_the_graphs_by_their_labels() {
    let _g = lock_generator();
    let data = Arc::new(rings_and_stars(40));
    let cfg = basin_et::graph::tu_cpu();
    let pe = dataset_pe(&data, &cfg.batching).unwrap().map(Arc::new);
    let items: Vec<usize> = (0..27).map(|i| i + i / 3).collect();
    let learner =
        GraphClassifierLearner::new(data.clone(), pe, &cfg, &items, 0, Device::Cpu).unwrap();
    let labels: Vec<f64> = data
        .targets
        .classes()
        .unwrap()
        .iter()
        .map(|&c| c as f64)
        .collect();
    let groups = learner.graph_energy_by_class(&items, &labels).unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(names, ["class 0", "class 1"]);
    for g in &groups {
        let class: f64 = g.group.trim_start_matches("class ").parse().unwrap();
        let want = items.iter().filter(|&&i| labels[i] == class).count();
        assert_eq!(g.count, want, "{}", g.group);
        assert_eq!(g.median.len(), cfg.block.steps + 1);
        assert!(g.q1.iter().zip(&g.q3).all(|(a, b)| a <= b));
    }
}
