//! The graph classifier with ET blocks learns to tell graph shapes apart from structure alone.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use basin_graph::{Csr, Graph, GraphDataset, Split, Targets};
use basin_tasks::graph_classification::{
    AdjacencyMode, GraphClassifierConfig, GraphClassifierLearner, dataset_pe,
};
use basin_train::optim::OptimConfig;
use basin_train::protocol::{FixedSplitProtocol, Metric};
use basin_train::runner::TrainConfig;
use tch::Device;

/// Rings (class 0) and stars (class 1) of 6–11 nodes, every node feature 1: only the structure
/// tells them apart.
fn shapes(count: usize) -> GraphDataset {
    let mut graphs = Vec::new();
    let mut labels = Vec::new();
    for i in 0..count {
        let n = 6 + (i % 6) as u32;
        let class = i % 2;
        let (src, dst): (Vec<u32>, Vec<u32>) = if class == 0 {
            (0..n)
                .flat_map(|a| [(a, (a + 1) % n), ((a + 1) % n, a)])
                .unzip()
        } else {
            (1..n).flat_map(|a| [(0, a), (a, 0)]).unzip()
        };
        let (adj, _) = Csr::from_edges(n as usize, &src, &dst).unwrap();
        graphs.push(Graph::new(adj, ndarray::Array2::ones((n as usize, 1))).unwrap());
        labels.push(class);
    }
    GraphDataset {
        name: "shapes".into(),
        graphs,
        targets: Targets::Classes {
            labels,
            num_classes: 2,
        },
        class_values: vec![0, 1],
        official_split: None,
    }
}

#[test]
fn et_graph_classifier_learns_shapes_from_structure() {
    let data = Arc::new(shapes(120));
    let target: Vec<f64> = data
        .targets
        .classes()
        .unwrap()
        .iter()
        .map(|&c| c as f64)
        .collect();
    let split = Split::new((0..80).collect(), (80..100).collect(), (100..120).collect());
    for adjacency in [AdjacencyMode::Masked, AdjacencyMode::ReferenceMultiply] {
        let cfg = GraphClassifierConfig {
            adjacency,
            batch: 16,
            ..basin_et::graph::tu_cpu()
        };
        let pe = dataset_pe(&data, &cfg.batching).unwrap().map(Arc::new);
        let protocol = FixedSplitProtocol {
            runs: 1,
            seed: 0,
            metric: Metric::Accuracy,
            curves: false,
            train: TrainConfig {
                epochs: 15,
                optim: OptimConfig {
                    lr: 3e-3,
                    ..OptimConfig::et_graph()
                },
                ..TrainConfig::default()
            },
        };
        let report = protocol
            .run(
                "shapes",
                &split,
                &target,
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
                None,
                "cpu",
            )
            .unwrap();
        let acc = report.aggregate["test_accuracy"].0;
        assert!(acc > 0.9, "{adjacency:?}: accuracy {acc} (chance 0.5)");
    }
}

/// The reference's parameter counts (reference-implementations §2.4): DD 1,064,834 and
/// NCI109 1,058,306 (ET Tables 4 and 14 of the CDAT paper).
#[test]
fn reference_parameter_counts_are_the_references() {
    let count = |features: i64| {
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
    assert_eq!(count(89), 1_064_834);
    assert_eq!(count(38), 1_058_306);
}
