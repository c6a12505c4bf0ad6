//! The protocols on toy learners: test items never reach training or selection, the same seed
//! gives the same numbers, and a toy model learns a separable task through each protocol.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use basin_data::split::{KFoldConfig, Split, SplitConfig};
use basin_train::context::RunContext;
use basin_train::loss::{cross_entropy, weighted_bce};
use basin_train::protocol::*;
use basin_train::runner::{Learner, Scores, StepOutput, TrainConfig};
use basin_train::{TrainError, optim::OptimConfig};
use rand_chacha::ChaCha8Rng;
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

/// What a learner was asked to do, to check for leaks.
#[derive(Default, Debug)]
struct Log {
    trained_on: BTreeSet<usize>,
    predicted: Vec<Vec<usize>>,
}

/// A linear model on fixed features; binary tasks output one probability, others class logits.
struct Linear {
    vs: nn::VarStore,
    lin: nn::Linear,
    x: Tensor,
    y: Tensor,
    binary: bool,
    log: Rc<RefCell<Log>>,
}

impl Linear {
    fn new(x: &Tensor, y: &Tensor, classes: i64, seed: u64, log: Rc<RefCell<Log>>) -> Self {
        tch::manual_seed(seed as i64);
        let vs = nn::VarStore::new(Device::Cpu);
        let binary = classes == 2 && y.kind() == Kind::Bool;
        let out = if binary { 1 } else { classes };
        let lin = nn::linear(vs.root() / "lin", x.size()[1], out, Default::default());
        Self {
            vs,
            lin,
            x: x.shallow_clone(),
            y: y.shallow_clone(),
            binary,
            log,
        }
    }
    fn idx(items: &[usize]) -> Tensor {
        Tensor::from_slice(&items.iter().map(|&i| i as i64).collect::<Vec<_>>())
    }
}

impl Learner for Linear {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn batch_size(&self) -> Option<usize> {
        None // full batch, like the anomaly references
    }
    fn train_step(
        &mut self,
        train: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> Result<StepOutput, TrainError> {
        self.log
            .borrow_mut()
            .trained_on
            .extend(train.iter().copied());
        let logits = self.lin.forward(&self.x);
        let idx = Self::idx(train);
        let (loss, pre) = if self.binary {
            let z = logits.squeeze_dim(1);
            let labels: Vec<bool> = train
                .iter()
                .map(|&i| self.y.int64_value(&[i as i64]) != 0)
                .collect();
            let omega = basin_train::loss::anomaly_weight(&labels);
            let pre = Scores::from_tensor(&z.sigmoid())?;
            (
                weighted_bce(
                    &z.index_select(0, &idx),
                    &self.y.index_select(0, &idx),
                    omega,
                ),
                Some(pre),
            )
        } else {
            (
                cross_entropy(
                    &logits.index_select(0, &idx),
                    &self.y.index_select(0, &idx),
                    0.0,
                ),
                None,
            )
        };
        Ok(StepOutput {
            pre_step_scores: pre,
            ..StepOutput::loss(loss)
        })
    }
    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        self.log.borrow_mut().predicted.push(items.to_vec());
        let logits = self.lin.forward(&self.x.index_select(0, &Self::idx(items)));
        Scores::from_tensor(&if self.binary {
            logits.sigmoid()
        } else {
            logits.softmax(-1, Kind::Float)
        })
    }
}

/// `n` items whose classes cycle through `0..classes`, with `width` features drawn N(0, 1) and
/// shifted by 4 × the class (separable): features, classes, and the classes as targets.
fn toy_classes(n: i64, classes: i64, width: i64) -> (Tensor, Tensor, Vec<f64>) {
    let y = Tensor::arange(n, (Kind::Int64, Device::Cpu)).remainder(classes);
    let x = Tensor::randn([n, width], (Kind::Float, Device::Cpu))
        + y.to_kind(Kind::Float).unsqueeze(1) * 4.0;
    let target = (0..n).map(|i| (i % classes) as f64).collect();
    (x, y, target)
}

/// 800 nodes, 10% anomalies shifted in feature space.
fn anomaly_data() -> (Tensor, Tensor, Vec<bool>) {
    tch::manual_seed(11);
    let n = 800;
    let is_anomaly: Vec<bool> = (0..n).map(|i| i % 10 == 0).collect();
    let y = Tensor::from_slice(&is_anomaly);
    let x = Tensor::randn([n as i64, 3], (Kind::Float, Device::Cpu))
        + y.to_kind(Kind::Float).unsqueeze(1) * 2.5;
    (x, y, is_anomaly)
}

fn train_cfg(epochs: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        optim: OptimConfig {
            lr: 0.1,
            ..OptimConfig::default()
        },
        ..TrainConfig::default()
    }
}

#[test]
fn anomaly_protocol_learns_without_leaking_and_is_deterministic() {
    let _s = basin_core::testing::lock_generator();
    let (x, y, is_anomaly) = anomaly_data();
    // The first 100 nodes are unlabelled (like Amazon's first 3305): never used anywhere.
    let labelled: Vec<u32> = (100..800).collect();
    let protocol = AnomalyProtocol {
        split: SplitConfig::bwgnn(0.4),
        runs: 3,
        seed: 5,
        train: train_cfg(40),
        ..AnomalyProtocol::default()
    };
    let log = Rc::new(RefCell::new(Log::default()));
    let report = protocol
        .run(
            AnomalyTargets {
                labelled: &labelled,
                is_anomaly: &is_anomaly,
            },
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, log.clone())),
            |_, _| Ok(()),
            &RunContext::new("toy"),
        )
        .unwrap();
    assert_eq!(report.runs.len(), 3);
    let (auc, _) = report.aggregate["test_auc"];
    let (f1, _) = report.aggregate["test_macro_f1"];
    assert!(
        auc > 0.9 && f1 > 0.75,
        "did not learn: AUC {auc}, macro-F1 {f1}"
    );

    // Leak check: per run, 40 validation calls, then exactly one test call.
    let log = log.borrow();
    assert_eq!(log.predicted.len(), 3 * 41);
    let val: BTreeSet<usize> = log.predicted[0].iter().copied().collect();
    let test: BTreeSet<usize> = log.predicted[40].iter().copied().collect();
    for run in 0..3 {
        for call in &log.predicted[run * 41..run * 41 + 40] {
            assert!(
                call.iter().all(|i| val.contains(i)),
                "selection saw a non-validation item"
            );
        }
        assert_eq!(
            log.predicted[run * 41 + 40]
                .iter()
                .copied()
                .collect::<BTreeSet<_>>(),
            test
        );
    }
    assert!(
        val.is_disjoint(&test)
            && log.trained_on.is_disjoint(&test)
            && log.trained_on.is_disjoint(&val)
    );
    assert!(
        log.trained_on
            .iter()
            .chain(&val)
            .chain(&test)
            .all(|&i| i >= 100),
        "an unlabelled node was used"
    );
    assert_eq!(log.trained_on.len() + val.len() + test.len(), 700);
    // val:test = 1:2.
    let ratio = test.len() as f64 / val.len() as f64;
    assert!((ratio - 2.0).abs() < 0.1, "val:test = 1:{ratio}");

    // Same seed, same numbers.
    let again = protocol
        .run(
            AnomalyTargets {
                labelled: &labelled,
                is_anomaly: &is_anomaly,
            },
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, Rc::default())),
            |_, _| Ok(()),
            &RunContext::new("toy"),
        )
        .unwrap();
    assert_eq!(again.aggregate, report.aggregate);
    for (a, b) in again.runs.iter().zip(&report.runs) {
        assert_eq!(a.without_timings(), b.without_timings());
    }
    // Every epoch splits its time by phase, and the phases fit inside the epoch.
    for e in report.runs.iter().flat_map(|r| &r.epochs) {
        let p = &e.phases;
        let sum = p.data + p.forward + p.backward + p.optimiser + p.evaluation;
        assert!(
            p.forward > 0.0 && p.backward > 0.0 && p.optimiser > 0.0 && p.evaluation > 0.0,
            "epoch {}: {p:?}",
            e.epoch
        );
        assert!(
            sum <= e.seconds * 1.001 + 1e-6,
            "epoch {}: {p:?} sum {sum} > {}",
            e.epoch,
            e.seconds
        );
    }

    // The reference quirk runs, is labelled, and reads test metrics from every epoch.
    let quirk = AnomalyProtocol {
        score: ScoreMode::ReferencePreStep,
        ..protocol.clone()
    };
    let log2 = Rc::new(RefCell::new(Log::default()));
    let q = quirk
        .run(
            AnomalyTargets {
                labelled: &labelled,
                is_anomaly: &is_anomaly,
            },
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, log2.clone())),
            |_, _| Ok(()),
            &RunContext::new("toy"),
        )
        .unwrap();
    assert!(q.notes.iter().any(|n| n.contains("reference-pre-step")));
    assert!(q.aggregate["test_auc"].0 > 0.9);
    assert!(
        log2.borrow().predicted.is_empty(),
        "quirk mode scores the pre-step logits only"
    );

    // The CDAT code's subsample scoring reads only the scored (finite) entries, and a
    // validation sample without an anomaly still selects by macro-F1, its AUC left out.
    let sub = AnomalyProtocol {
        score: ScoreMode::ReferenceSubsample,
        ..protocol.clone()
    };
    let plan = sub
        .plan(AnomalyTargets {
            labelled: &labelled,
            is_anomaly: &is_anomaly,
        })
        .unwrap();
    // The scored entries: `(val, test)` of node i kept or not.
    let sampled = |keep_of: &dyn Fn(usize, bool, bool) -> bool| {
        let keep: Vec<bool> = (0..is_anomaly.len())
            .map(|i| {
                let i32 = i as u32;
                let (v, t) = (
                    plan[0].split.val.contains(&i32),
                    plan[0].split.test.contains(&i32),
                );
                keep_of(i, v, t)
            })
            .collect();
        sub.run(
            AnomalyTargets {
                labelled: &labelled,
                is_anomaly: &is_anomaly,
            },
            |run: &PlannedRun| {
                Ok(Sampled {
                    inner: Linear::new(&x, &y, 2, run.seed, Rc::default()),
                    keep: keep.clone(),
                })
            },
            |_, _| Ok(()),
            &RunContext::new("toy"),
        )
        .unwrap()
    };
    let s = sampled(&|i, v, t| (v && !is_anomaly[i]) || t);
    assert!(s.notes.iter().any(|n| n.contains("reference-subsample")));
    // (Selection on negatives alone is uninformative; what counts is that it runs.)
    assert!(s.aggregate["test_auc"].0.is_finite());
    let epoch = &s.runs[0].epochs[0];
    assert!(epoch.metrics.contains_key("val_macro_f1") && !epoch.metrics.contains_key("val_auc"));

    // A test sample without an anomaly does not stop the run either: its AUC and AP are left
    // out (macro-F1 kept), and the report says so.
    let t = sampled(&|i, v, t| v || (t && !is_anomaly[i]));
    let summary = &t.runs[0].summary;
    assert!(summary.contains_key("test_macro_f1"), "{summary:?}");
    assert!(!summary.contains_key("test_auc") && !summary.contains_key("test_ap"));
    assert!(
        t.notes.iter().any(|n| n.contains("held one class")),
        "{:?}",
        t.notes
    );
}

/// A learner whose pre-step scores are NaN except on `keep` (what the CDAT code's sample scores).
struct Sampled {
    inner: Linear,
    keep: Vec<bool>,
}

impl Learner for Sampled {
    fn vars(&self) -> &nn::VarStore {
        self.inner.vars()
    }
    fn batch_size(&self) -> Option<usize> {
        None
    }
    fn train_step(
        &mut self,
        train: &[usize],
        rng: &mut ChaCha8Rng,
    ) -> Result<StepOutput, TrainError> {
        let mut out = self.inner.train_step(train, rng)?;
        if let Some(Scores(rows)) = out.pre_step_scores.as_mut() {
            for (row, &k) in rows.iter_mut().zip(&self.keep) {
                if !k {
                    row.iter_mut().for_each(|v| *v = f64::NAN);
                }
            }
        }
        Ok(out)
    }
    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        self.inner.predict(items)
    }
}

#[test]
fn cross_validation_partitions_and_learns() {
    let _s = basin_core::testing::lock_generator();
    tch::manual_seed(12);
    let n = 300;
    let (x, y, target) = toy_classes(n, 3, 4);
    let cv = CrossValidation {
        folds: KFoldConfig {
            folds: 5,
            val_ratio: 0.2,
            seed: 3,
        },
        repeats: 2,
        train: train_cfg(40),
        ..CrossValidation::default()
    };
    let log = Rc::new(RefCell::new(Log::default()));
    let report = cv
        .run(
            &target,
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 3, run.seed, log.clone())),
            |_, _| Ok(()),
            &RunContext::new("toy-cv"),
        )
        .unwrap();
    assert_eq!(report.runs.len(), 10);
    assert!(
        report.aggregate["test_accuracy"].0 > 0.85,
        "{:?}",
        report.aggregate
    );
    // In each repeat the test folds (the last call of each fold) partition the items.
    let log = log.borrow();
    for r in 0..2 {
        let tests: Vec<&Vec<usize>> = (0..5)
            .map(|f| &log.predicted[(r * 5 + f) * 41 + 40])
            .collect();
        let mut all: Vec<usize> = tests.iter().flat_map(|t| t.iter().copied()).collect();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..n as usize).collect::<Vec<_>>(),
            "test folds do not partition the items"
        );
        for (f, test) in tests.iter().enumerate() {
            let val = &log.predicted[(r * 5 + f) * 41];
            assert!(
                val.iter().all(|i| !test.contains(i)),
                "validation overlaps the test fold"
            );
        }
    }
}

/// Predicts every item's class with the confidence `conf[e]` in the truth after `e + 1`
/// epochs, except that where `miss[e]` is `Some(q)` every item `i ≡ 0 (mod 4)` gets `q`: with
/// no misses and `conf > 0.5` the validation accuracy is 1 at every epoch and only the
/// cross-entropy moves. What it trained on and predicted goes to `log`.
struct Scripted {
    vs: nn::VarStore,
    w: Tensor,
    target: Vec<f64>,
    conf: Vec<f64>,
    miss: Vec<Option<f64>>,
    epochs: usize,
    log: Rc<RefCell<Log>>,
}

impl Learner for Scripted {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn batch_size(&self) -> Option<usize> {
        None
    }
    fn train_step(
        &mut self,
        train: &[usize],
        _: &mut ChaCha8Rng,
    ) -> Result<StepOutput, TrainError> {
        self.epochs += 1;
        self.log
            .borrow_mut()
            .trained_on
            .extend(train.iter().copied());
        Ok(StepOutput::loss(self.w.square().sum(Kind::Float)))
    }
    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        self.log.borrow_mut().predicted.push(items.to_vec());
        let e = self.epochs.clamp(1, self.conf.len()) - 1;
        Ok(Scores(
            items
                .iter()
                .map(|&i| {
                    let p = match self.miss[e] {
                        Some(q) if i % 4 == 0 => q,
                        _ => self.conf[e],
                    };
                    match self.target[i] as usize {
                        0 => vec![p, 1.0 - p],
                        _ => vec![1.0 - p, p],
                    }
                })
                .collect(),
        ))
    }
}

#[test]
fn selection_ranks_by_accuracy_then_loss_or_by_loss_when_asked() {
    let _s = basin_core::testing::lock_generator();
    let target: Vec<f64> = (0..40).map(|i| (i % 2) as f64).collect();
    let conf = vec![0.55, 0.7, 0.9, 0.8, 0.6];
    let miss = vec![None; conf.len()];
    let run = |selection: Selection, conf: &Vec<f64>, miss: &Vec<Option<f64>>| {
        let cv = CrossValidation {
            folds: KFoldConfig {
                folds: 2,
                val_ratio: 0.5,
                seed: 1,
            },
            selection,
            train: train_cfg(conf.len()),
            ..CrossValidation::default()
        };
        cv.validate("protocol").unwrap();
        cv.run(
            &target,
            |_| {
                let vs = nn::VarStore::new(Device::Cpu);
                let w = vs.root().zeros("w", &[1]);
                Ok(Scripted {
                    vs,
                    w,
                    target: target.clone(),
                    conf: conf.clone(),
                    miss: miss.clone(),
                    epochs: 0,
                    log: Rc::default(),
                })
            },
            |_, _| Ok(()),
            &RunContext::new("ties"),
        )
        .unwrap()
    };
    let by_metric = run(Selection::Metric, &conf, &miss);
    let by_loss = run(Selection::MetricThenLoss, &conf, &miss);
    for (a, b) in by_metric.runs.iter().zip(&by_loss.runs) {
        assert_eq!(a.selected_epoch, Some(0), "ties keep the earliest epoch");
        assert_eq!(
            b.selected_epoch,
            Some(2),
            "the least validation loss among ties"
        );
        for (e, &p) in b.epochs.iter().zip(&conf) {
            let loss = e.metrics["val_loss"];
            assert!(
                (loss + f64::ln(p)).abs() < 1e-12,
                "val_loss {loss} for p = {p}"
            );
            assert_eq!(e.metrics["val_accuracy"], 1.0);
        }
    }
    assert!(by_loss.notes[0].contains("lower validation cross-entropy"));
    // `loss` follows the cross-entropy where accuracy disagrees: epoch 0 is right everywhere
    // but unsure, epoch 1 sure and wrong on a quarter of the items, only slightly.
    let (conf, miss) = (vec![0.6, 0.99, 0.6], vec![None, Some(0.4), None]);
    let by_metric = run(Selection::MetricThenLoss, &conf, &miss);
    let by_loss = run(Selection::Loss, &conf, &miss);
    for (a, b) in by_metric.runs.iter().zip(&by_loss.runs) {
        assert_eq!(a.selected_epoch, Some(0), "the highest accuracy");
        assert!(
            b.epochs[1].metrics["val_accuracy"] < 1.0,
            "epoch 1 misses some"
        );
        assert!(b.epochs[1].metrics["val_loss"] < b.epochs[0].metrics["val_loss"]);
        assert_eq!(b.selected_epoch, Some(1), "the lowest validation loss");
    }
    assert!(by_loss.notes[0].contains("lowest validation cross-entropy"));
    // Run files name it; it is the default.
    let cv: CrossValidation = serde_json::from_str(r#"{"selection": "metric"}"#).unwrap();
    assert_eq!(cv.selection, Selection::Metric);
    assert_eq!(
        CrossValidation::default().selection,
        Selection::MetricThenLoss
    );
    assert_eq!("loss".parse::<Selection>(), Ok(Selection::Loss));
    assert!("latest".parse::<Selection>().is_err());
}

#[test]
fn et_paper_and_fixed_split_protocols_run_and_say_what_they_are() {
    let _s = basin_core::testing::lock_generator();
    tch::manual_seed(13);
    let (x, y, target) = toy_classes(200, 2, 2);
    let et = EtPaperProtocol {
        repeats: 20,
        seed: 1,
        train: train_cfg(100),
    };
    let report = et
        .run(
            &target,
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, Rc::default())),
            nothing_after,
            &RunContext::new("toy-et"),
        )
        .unwrap();
    assert_eq!(report.protocol, "et-paper");
    assert!(report.notes[0].contains("training-set accuracies"));
    assert!(report.aggregate["et_paper_accuracy"].0 > 0.9);
    assert_eq!(
        report.runs[0].selected_epoch,
        Some(99),
        "et-paper uses the final epoch"
    );

    let split = Split::new(
        (0..120).collect(),
        (120..160).collect(),
        (160..200).collect(),
    );
    let fixed = FixedSplitProtocol {
        runs: 2,
        seed: 4,
        metric: Metric::BalancedAccuracy,
        curves: false,
        train: train_cfg(100),
    };
    let report = fixed
        .run(
            PublishedSplit {
                split: &split,
                target: (&target).into(),
            },
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, Rc::default())),
            |_, _| Ok(()),
            &RunContext::new("toy-fixed"),
        )
        .unwrap();
    assert!(report.aggregate["test_balanced_accuracy"].0 > 0.9);
    assert!(report.show("test_balanced_accuracy", 100.0).contains('±'));
    let md = report.to_markdown();
    assert!(
        md.contains("| test_balanced_accuracy |") && md.contains("toy-fixed/run-1"),
        "{md}"
    );
    let overlapping = Split::new(
        (0..120).collect(),
        (100..160).collect(),
        (160..200).collect(),
    );
    assert!(
        fixed
            .run(
                PublishedSplit {
                    split: &overlapping,
                    target: (&target).into()
                },
                |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, Rc::default())),
                |_, _| Ok(()),
                &RunContext::new("bad")
            )
            .is_err()
    );
}

#[test]
fn code_cv_partitions_keeps_the_final_epoch_and_never_trains_on_its_fold() {
    let _s = basin_core::testing::lock_generator();
    tch::manual_seed(14);
    let n = 103;
    let (x, y, target) = toy_classes(n, 2, 2);
    let cv = CodeCrossValidation {
        folds: 10,
        seed: 42,
        train: train_cfg(5),
    };
    let plan = cv.plan(&vec![0.0; n as usize]).unwrap();
    let sizes: Vec<usize> = plan.iter().map(|r| r.split.test.len()).collect();
    assert_eq!(sizes, [11, 11, 11, 10, 10, 10, 10, 10, 10, 10]);
    let mut all: Vec<u32> = plan.iter().flat_map(|r| r.split.test.clone()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..n as u32).collect::<Vec<_>>());
    assert!(plan.iter().all(|r| r.split.val.is_empty()));
    let log = Rc::new(RefCell::new(Log::default()));
    let report = cv
        .run(
            &target,
            |run: &PlannedRun| {
                log.borrow_mut().trained_on.clear();
                Ok(Linear::new(&x, &y, 2, run.seed, log.clone()))
            },
            nothing_after,
            &RunContext::new("toy-code-cv"),
        )
        .unwrap();
    assert_eq!(report.runs.len(), 10);
    assert!(report.runs.iter().all(|r| r.selected_epoch == Some(4)));
    assert!(
        report.aggregate["test_accuracy"].0 > 0.85,
        "{:?}",
        report.aggregate
    );
    // The last fold's learner never saw its own test items.
    let last = &plan[9].split.test;
    assert!(
        last.iter()
            .all(|&i| !log.borrow().trained_on.contains(&(i as usize)))
    );
    assert!(
        CodeCrossValidation {
            folds: 1,
            ..cv.clone()
        }
        .plan(&[0.0; 10])
        .is_err()
    );
}

#[test]
fn shards_split_the_folds_and_an_unsharded_run_reads_them_without_training() {
    use basin_train::context::Shard;
    let _s = basin_core::testing::lock_generator();
    assert_eq!(
        "1/3".parse::<Shard>().unwrap(),
        Shard { index: 1, count: 3 }
    );
    for bad in ["2/2", "0/0", "1", "a/2", "-1/2"] {
        let e = bad.parse::<Shard>().unwrap_err().to_string();
        assert!(e.contains("shard") && e.contains(bad), "{bad}: {e}");
    }
    tch::manual_seed(7);
    let (x, y, target) = toy_classes(120, 3, 4);
    let cv = CrossValidation {
        folds: KFoldConfig {
            folds: 5,
            val_ratio: 0.2,
            seed: 3,
        },
        train: train_cfg(6),
        ..CrossValidation::default()
    };
    let run = |dir: &std::path::Path, shard: Option<Shard>| {
        let log = Rc::new(RefCell::new(Log::default()));
        let report = cv
            .run(
                &target,
                |run: &PlannedRun| Ok(Linear::new(&x, &y, 3, run.seed, log.clone())),
                |_, _| Ok(()),
                &RunContext::new("shards").with_out(dir).with_shard(shard),
            )
            .unwrap();
        let trained = !log.borrow().trained_on.is_empty();
        (report, trained)
    };
    let folds =
        |r: &ProtocolReport| -> Vec<String> { r.runs.iter().map(|run| run.name.clone()).collect() };
    let shared = tempfile::tempdir().unwrap();
    let (zero, trained) = run(shared.path(), Some(Shard { index: 0, count: 2 }));
    assert!(trained);
    assert_eq!(
        folds(&zero),
        [
            "shards/repeat-0/fold-0",
            "shards/repeat-0/fold-2",
            "shards/repeat-0/fold-4"
        ]
    );
    let (one, _) = run(shared.path(), Some(Shard { index: 1, count: 2 }));
    assert_eq!(
        folds(&one),
        ["shards/repeat-0/fold-1", "shards/repeat-0/fold-3"]
    );
    // Unsharded, every fold is finished: read back, nothing trained.
    let (whole, trained) = run(shared.path(), None);
    assert!(!trained, "finished folds were trained again");
    assert_eq!(whole.runs.len(), 5);
    // The same numbers as one process training every fold.
    let alone = tempfile::tempdir().unwrap();
    let (straight, _) = run(alone.path(), None);
    for (a, b) in whole.runs.iter().zip(&straight.runs) {
        assert_eq!(a.name, b.name);
        assert_eq!(a.summary, b.summary, "{}", a.name);
        assert_eq!(a.split_hashes, b.split_hashes);
    }
}

#[test]
fn more_repeats_reuse_the_finished_folds_also_of_records_that_name_their_repeats() {
    let _s = basin_core::testing::lock_generator();
    tch::manual_seed(7);
    let (x, y, target) = toy_classes(60, 2, 4);
    let cv = |repeats| CrossValidation {
        folds: KFoldConfig {
            folds: 3,
            val_ratio: 0.2,
            seed: 5,
        },
        repeats,
        train: train_cfg(3),
        ..CrossValidation::default()
    };
    // The report and the runs that trained.
    let run = |repeats, dir: &std::path::Path| {
        let learned: RefCell<Vec<(String, Rc<RefCell<Log>>)>> = RefCell::default();
        let report = cv(repeats)
            .run(
                &target,
                |run: &PlannedRun| {
                    let log = Rc::new(RefCell::new(Log::default()));
                    learned.borrow_mut().push((run.dir.clone(), log.clone()));
                    Ok(Linear::new(&x, &y, 2, run.seed, log))
                },
                |_, _| Ok(()),
                &RunContext::new("grow").with_out(dir),
            )
            .unwrap();
        let trained: Vec<String> = learned
            .into_inner()
            .into_iter()
            .filter(|(_, log)| !log.borrow().trained_on.is_empty())
            .map(|(d, _)| d)
            .collect();
        (report, trained)
    };
    let dir = tempfile::tempdir().unwrap();
    let (one, trained) = run(1, dir.path());
    assert_eq!(trained.len(), 3);
    let (two, trained) = run(2, dir.path());
    assert_eq!(
        trained,
        ["repeat-1/fold-0", "repeat-1/fold-1", "repeat-1/fold-2"],
        "only the new repeat trains"
    );
    assert_eq!(two.runs.len(), 6);
    for (a, b) in one.runs.iter().zip(&two.runs) {
        assert_eq!((&a.name, &a.summary), (&b.name, &b.summary));
    }
    // A record written before the count left a run's identity carries `repeats`: still its run.
    let ckpt = dir.path().join("repeat-0/fold-0/checkpoint.safetensors");
    let (tensors, mut meta) = basin_core::checkpoint::read_file(&ckpt).unwrap();
    let mut record: serde_json::Value = serde_json::from_str(&meta["record"]).unwrap();
    record["config"]["repeats"] = 1.into();
    meta.insert("record".into(), record.to_string());
    basin_core::checkpoint::write_tensors(&ckpt, &tensors, Some(meta.clone())).unwrap();
    let (_, trained) = run(2, dir.path());
    assert!(trained.is_empty(), "{trained:?} trained again");
    // Any other difference still refuses the directory.
    record["config"]["folds"]["val_ratio"] = 0.3.into();
    meta.insert("record".into(), record.to_string());
    basin_core::checkpoint::write_tensors(&ckpt, &tensors, Some(meta)).unwrap();
    let e = cv(2)
        .run(
            &target,
            |run: &PlannedRun| Ok(Linear::new(&x, &y, 2, run.seed, Rc::default())),
            |_, _| Ok(()),
            &RunContext::new("grow").with_out(dir.path()),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("holds another run") && e.contains("config.folds.val_ratio"),
        "{e}"
    );
}

/// A planned run and what its learner was asked to do.
type Learned = (PlannedRun, Rc<RefCell<Log>>);

#[test]
fn inner_folds_choose_the_epoch_count_on_the_training_part_then_train_on_all_of_it() {
    let _s = basin_core::testing::lock_generator();
    let n = 60;
    let target: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
    // Accuracy 1 at every epoch; the cross-entropy is lowest after 3 epochs.
    let conf = vec![0.55, 0.7, 0.9, 0.8, 0.6];
    let folds = KFoldConfig {
        folds: 3,
        val_ratio: 0.2,
        seed: 5,
    };
    let protocol = |inner_folds: usize, selection: Selection| CrossValidation {
        folds: folds.clone(),
        selection,
        train: train_cfg(conf.len()),
        inner_folds,
        ..CrossValidation::default()
    };
    let cv = protocol(3, Selection::MetricThenLoss);
    cv.validate("protocol").unwrap();
    // The plan: each fold's training part whole (no validation split), the same test folds.
    let plain = protocol(0, Selection::MetricThenLoss)
        .plan(&target)
        .unwrap();
    let plan = cv.plan(&target).unwrap();
    for (p, q) in plain.iter().zip(&plan) {
        let mut all: Vec<u32> = p.split.train.iter().chain(&p.split.val).copied().collect();
        all.sort_unstable();
        assert_eq!(q.split.train, all);
        assert!(q.split.val.is_empty());
        assert_eq!(q.split.test, p.split.test);
        assert_eq!((&q.dir, q.seed), (&p.dir, p.seed));
        // Its inner folds partition that training part.
        let inner = cv.inner_plan(q, &target).unwrap();
        assert_eq!(inner.len(), 3);
        let mut tests: Vec<u32> = inner.iter().flat_map(|r| r.split.test.clone()).collect();
        tests.sort_unstable();
        assert_eq!(tests, all);
        for r in &inner {
            assert!(r.dir.starts_with(&format!("{}/inner-", q.dir)), "{}", r.dir);
            assert!(r.split.train.iter().all(|i| !r.split.test.contains(i)));
        }
    }
    let make_run = |cv: &CrossValidation, dir: Option<&std::path::Path>| {
        let logs: Rc<RefCell<Vec<Learned>>> = Rc::default();
        let report = cv
            .run(
                &target,
                |run: &PlannedRun| {
                    let vs = nn::VarStore::new(Device::Cpu);
                    let w = vs.root().zeros("w", &[1]);
                    let log = Rc::new(RefCell::new(Log::default()));
                    logs.borrow_mut().push((run.clone(), log.clone()));
                    Ok(Scripted {
                        vs,
                        w,
                        target: target.clone(),
                        conf: conf.clone(),
                        miss: vec![None; conf.len()],
                        epochs: 0,
                        log,
                    })
                },
                |_, _| Ok(()),
                &RunContext::new("inner").writing_to(dir),
            )
            .unwrap();
        (report, logs)
    };
    let (report, logs) = make_run(&cv, None);
    // Only the folds' own runs are reported, each trained for the chosen count; the curves the
    // counts were chosen on come beside them, over every epoch of the schedule.
    assert_eq!(report.runs.len(), 3);
    for k in ["train_loss", "inner_test_accuracy", "inner_test_loss"] {
        assert_eq!(report.inner_curves[k].len(), conf.len(), "{k}");
    }
    for (l, p) in report.inner_curves["inner_test_loss"].iter().zip(&conf) {
        assert!(
            (l + p.ln()).abs() < 1e-12,
            "mean held-out loss {l} for p = {p}"
        );
    }
    for run in &report.runs {
        assert_eq!(run.summary["chosen_epochs"], 3.0, "{:?}", run.summary);
        assert_eq!(run.epochs.len(), 3);
        assert_eq!(run.summary["inner_accuracy"], 1.0);
        assert_eq!(run.summary["test_accuracy"], 1.0);
    }
    assert!(
        report.notes[0].contains("3 inner stratified folds"),
        "{:?}",
        report.notes
    );
    // Per fold: three inner learners, then the fold's. No learner trains on the fold's test
    // items; inner learners never predict them; the fold's learner predicts them once, last.
    let logs = logs.borrow();
    assert_eq!(logs.len(), 3 * 4);
    for (f, fold) in plan.iter().enumerate() {
        let test: Vec<usize> = fold.split.test.iter().map(|&i| i as usize).collect();
        for (run, log) in &logs[f * 4..f * 4 + 4] {
            let log = log.borrow();
            assert!(
                log.trained_on.iter().all(|i| !test.contains(i)),
                "{}",
                run.dir
            );
            let fold_run = run.dir == fold.dir;
            for (k, p) in log.predicted.iter().enumerate() {
                let last = k + 1 == log.predicted.len();
                assert_eq!(
                    p.iter().any(|i| test.contains(i)),
                    fold_run && last,
                    "{} predicted the test fold",
                    run.dir
                );
            }
            if fold_run {
                assert_eq!(log.trained_on.len(), fold.split.train.len());
            } else {
                assert_eq!(log.predicted.len(), conf.len(), "one score per epoch");
            }
        }
    }
    // `metric` keeps the earliest of the tied accuracies.
    let (first, _) = make_run(&protocol(3, Selection::Metric), None);
    assert!(first.runs.iter().all(|r| r.summary["chosen_epochs"] == 1.0));
    // On disk, inner runs sit under their fold and do not pair in comparisons: two "models"
    // pair fold by fold only.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    make_run(&cv, Some(a.path()));
    make_run(&cv, Some(b.path()));
    assert!(
        a.path()
            .join("repeat-0/fold-0/inner-2/record.json")
            .exists()
    );
    let records = |d: &std::path::Path| -> Vec<basin_train::record::RunRecord> {
        basin_train::compare::read_records(d)
            .unwrap()
            .into_iter()
            .map(|(_, r)| r)
            .collect()
    };
    let (ra, rb) = (records(a.path()), records(b.path()));
    assert_eq!(ra.len(), 3 * 4);
    // The fold's record keeps the count and the inner runs' time.
    let fold = ra
        .iter()
        .find(|r| r.name == "inner/repeat-0/fold-0")
        .unwrap();
    assert_eq!(fold.summary["chosen_epochs"], 3.0);
    assert!(fold.summary["inner_seconds"] > 0.0);
    let paired = basin_train::compare::Paired::new(&ra, &rb, "test_accuracy").unwrap();
    assert_eq!((paired.pairs, paired.unmatched_a), (3, 0));
    // Rerun into the same directory: every run is read back, the same report.
    let (again, logs) = make_run(&cv, Some(a.path()));
    assert!(
        logs.borrow()
            .iter()
            .all(|(_, l)| l.borrow().trained_on.is_empty())
    );
    assert_eq!(again.runs.len(), 3);
    // 1 is refused; the default leaves no trace in a protocol's JSON (records made before the
    // switch existed resume).
    let e = protocol(1, Selection::Metric)
        .validate("protocol")
        .unwrap_err();
    assert!(e.to_string().contains("protocol.inner_folds"), "{e}");
    let json = serde_json::to_value(CrossValidation::default()).unwrap();
    assert!(json.get("inner_folds").is_none(), "{json}");
    assert_eq!(serde_json::to_value(&cv).unwrap()["inner_folds"], 3);
}
