//! The run files of the tasks through the one run loop (`basin_tasks::run`): `eval` scores a
//! run again with the run file's own metric, and the anomaly task never makes up a threshold.

use std::collections::BTreeMap;

use basin_tasks::graph_classification::{GraphClassifierConfig, GraphRun};
use basin_tasks::node_anomaly::{AnomalyRun, NodeAnomalyConfig};
use basin_tasks::run::{eval, train};
use basin_tasks::task::Task;
use basin_tasks::testing::rings_and_stars;
use basin_train::context::RunContext;
use basin_train::protocol::{AnomalyProtocol, CrossValidation, Metric};
use basin_train::runner::{TrainConfig, Validation};
use tch::Device;

/// A graph run whose metric is macro-F1 is scored again under macro-F1, not accuracy.
#[test]
fn eval_rescores_a_graph_run_with_its_own_metric() {
    let _g = basin_core::testing::lock_generator();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("SHAPES");
    basin_graph::tu::write_tu(&rings_and_stars(24), &data).unwrap();
    let mut architecture = GraphClassifierConfig {
        block: basin_core::testing::et_block(8, 2, 4, 8, 1),
        batch: 8,
        ..GraphClassifierConfig::default()
    };
    architecture.batching.pe = None;
    let run = GraphRun {
        data: data.display().to_string(),
        architecture,
        protocol: CrossValidation {
            folds: basin_graph::KFoldConfig {
                folds: 2,
                val_ratio: 0.25,
                seed: 0,
            },
            metric: Metric::MacroF1,
            train: TrainConfig {
                epochs: 1,
                ..TrainConfig::default()
            },
            ..CrossValidation::default()
        },
        node_features: Default::default(),
    };
    run.validate().unwrap();
    let out = work.path().join("run");
    let ctx = RunContext::new("task").with_out(&out).with_progress(false);
    let trained = train(&run, &ctx, |_| false).unwrap();
    let scored = eval(&run, &out, None, Device::Cpu).unwrap();
    assert_eq!(scored.runs.len(), 2);
    for ((dir, again), (_, first)) in scored.runs.iter().zip(&trained.runs) {
        assert!(
            again.contains_key("test_macro_f1") && !again.contains_key("test_accuracy"),
            "{dir}: {again:?}"
        );
        assert_eq!(again["test_macro_f1"], first["test_macro_f1"], "{dir}");
    }
}

/// An anomaly run's selected epoch without a recorded threshold is an error when it is scored
/// again, never a silent 0.5.
#[test]
fn rescoring_an_anomaly_run_needs_its_threshold() {
    let _g = basin_core::testing::lock_generator();
    let run = AnomalyRun {
        data: "planted".into(),
        architecture: NodeAnomalyConfig {
            block: basin_core::testing::et_block(8, 1, 8, 8, 1),
            readout_hidden: 8,
            ..NodeAnomalyConfig::default()
        },
        protocol: AnomalyProtocol {
            runs: 1,
            ..AnomalyProtocol::default()
        },
    };
    let data = run.load(None, Device::Cpu).unwrap();
    let plan = basin_train::protocol::Protocol::plan(run.protocol(), run.targets(&data)).unwrap();
    let mut learner = run.learner(&data, &plan[0], Device::Cpu).unwrap();
    let e = run
        .rescore(&data, &mut learner, &plan[0], &Validation::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("threshold"), "{e}");
    let with = Validation {
        for_test: BTreeMap::from([("threshold".to_owned(), 0.5)]),
        ..Validation::default()
    };
    let m = run.rescore(&data, &mut learner, &plan[0], &with).unwrap();
    assert!(
        m.contains_key("test_macro_f1") && m.contains_key("test_auc"),
        "{m:?}"
    );
}

/// Fixed-point correction is read by image completion only: the graph tasks refuse it by name
/// instead of letting its states pile up unread.
#[test]
fn fixed_point_correction_is_refused_where_no_loss_reads_it() {
    let mut graph = GraphClassifierConfig::default();
    graph.block.gradient.correction_states = 2;
    let mut anomaly = NodeAnomalyConfig::default();
    anomaly.block.gradient.correction_states = 2;
    for e in [
        graph.validate().unwrap_err(),
        anomaly.validate().unwrap_err(),
    ] {
        assert!(
            e.to_string().contains("block.gradient.correction_states"),
            "{e}"
        );
    }
}
