//! The HopfieldPooling bag classifier finds the witness instance of positive bags, and nested
//! cross-validation trains each candidate with its own learning rate: of a candidate that
//! cannot move (lr 1e-9) and one that can, the inner folds choose the second every time; with
//! the epoch count chosen on the inner folds, the final model trains exactly that many epochs.

use std::sync::Arc;

use basin_graph::KFoldConfig;
use basin_graph::mil::{Bag, MilDataset};
use basin_hopfield::bags::{BagClassifierConfig, BagClassifierLearner};
use basin_train::context::RunContext;
use basin_train::optim::OptimConfig;
use basin_train::protocol::{
    Candidate, EpochChoice, GridSearch, Metric, NestedCrossValidation, Protocol, ProtocolReport,
    nothing_after,
};
use basin_train::runner::TrainConfig;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::Device;

/// 120 bags of 4–9 Gaussian instances; a positive bag holds one instance shifted by 3 in its
/// first feature.
fn witness_bags() -> Arc<MilDataset> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let features = 6;
    let bags = (0..120)
        .map(|id| {
            let len = rng.random_range(4..10);
            let label = id % 2 == 0;
            let mut x: Vec<f32> = (0..len * features)
                .map(|_| rng.random_range(-1.0f32..1.0))
                .collect();
            if label {
                x[rng.random_range(0..len) * features] += 3.0;
            }
            Bag {
                id,
                len,
                features: x,
                label,
            }
        })
        .collect();
    Arc::new(MilDataset {
        name: "witness".into(),
        features,
        bags,
    })
}

/// Three outer folds, two inner, one repeat; AUC.
fn protocol(epochs: usize, lr: f64, choice: EpochChoice) -> NestedCrossValidation {
    NestedCrossValidation {
        outer: KFoldConfig {
            folds: 3,
            val_ratio: 0.2,
            seed: 0,
        },
        inner_folds: 2,
        repeats: 1,
        metric: Metric::Auc,
        train: TrainConfig {
            epochs,
            optim: OptimConfig {
                lr,
                ..OptimConfig::default()
            },
            ..TrainConfig::default()
        },
        epochs: choice,
    }
}

/// Runs `protocol` on the witness bags.
fn run(protocol: &NestedCrossValidation, grid: &[BagClassifierConfig]) -> ProtocolReport {
    let data = witness_bags();
    let target: Vec<f64> = data.labels().iter().map(|&l| f64::from(l)).collect();
    let search = GridSearch { protocol, grid };
    search
        .run(
            &target,
            |run| {
                Ok(BagClassifierLearner::new(
                    data.clone(),
                    search.candidate(run),
                    &run.train(),
                    run.seed,
                    Device::Cpu,
                )?)
            },
            nothing_after,
            &RunContext::new("witness"),
        )
        .unwrap()
}

#[test]
fn nested_selection_trains_each_candidate_with_its_own_learning_rate() {
    let candidate = |lr| BagClassifierConfig {
        lr: Some(lr),
        bag_dropout: 0.25,
        beta: Some(1.0),
        ..BagClassifierConfig::new(16, 2, 0.0, 8)
    };
    let grid = [candidate(1e-9), candidate(1e-2)];
    let protocol = protocol(15, 1e-3, EpochChoice::ValidationSplit);
    assert_eq!(grid[0].train(&protocol.train).optim.lr, 1e-9);
    let report = run(&protocol, &grid);
    for run in &report.runs {
        assert_eq!(run.summary["chosen_candidate"], 1.0, "{:?}", run.summary);
    }
    let (auc, _) = report.aggregate["test_auc"];
    assert!(auc > 0.9, "test AUC {auc}");
}

#[test]
fn inner_folds_choose_the_epoch_count_of_the_final_model() {
    let report = run(
        &protocol(12, 1e-2, EpochChoice::InnerFolds),
        &[BagClassifierConfig::new(16, 2, 0.0, 8)],
    );
    for run in &report.runs {
        let n = run.summary["chosen_epochs"];
        assert!((1.0..=12.0).contains(&n), "{:?}", run.summary);
        assert_eq!(
            run.epochs.len() as f64,
            n,
            "trained {} epochs",
            run.epochs.len()
        );
        assert!(run.summary.contains_key("inner_score_of_chosen"));
    }
    // The count is chosen, not the budget: some fold stops short of the 12 epochs.
    assert!(
        report
            .runs
            .iter()
            .any(|r| r.summary["chosen_epochs"] < 12.0),
        "every fold chose the full budget"
    );
    let (auc, _) = report.aggregate["test_auc"];
    assert!(auc > 0.9, "test AUC {auc}");
}

#[test]
fn out_of_range_candidates_are_refused_by_name() {
    let data = witness_bags();
    for (cfg, field) in [
        (
            BagClassifierConfig {
                bag_dropout: 1.0,
                ..BagClassifierConfig::new(16, 2, 0.0, 8)
            },
            "bag_classifier.bag_dropout",
        ),
        (
            BagClassifierConfig {
                lr: Some(f64::NAN),
                ..BagClassifierConfig::new(16, 2, 0.0, 8)
            },
            "bag_classifier.lr",
        ),
        (
            BagClassifierConfig::new(16, 2, 0.0, 0),
            "bag_classifier.embed/heads/batch",
        ),
    ] {
        let err = BagClassifierLearner::new(data.clone(), &cfg, &[0, 1], 0, Device::Cpu)
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{err}");
    }
}
