//! The shared training loop: it learns, selects on validation, stops on NaN, and a run resumed
//! after a crash gives the same record and weights as a straight run.

use std::collections::BTreeMap;

use basin_train::loss::cross_entropy;
use basin_train::metrics::accuracy;
use basin_train::runner::{Learner, Runner, Scores, StepOutput, TrainConfig, Validation};
use basin_train::{TrainError, optim::OptimConfig, record::RunStatus};
use rand_chacha::ChaCha8Rng;
use tch::nn::{self, Module, ModuleT};
use tch::{Device, Kind, Tensor};

/// Two Gaussian blobs in 4-d, a small MLP with dropout (so libtorch's generator matters).
struct Toy {
    vs: nn::VarStore,
    net: nn::Sequential,
    drop: f64,
    x: Tensor,
    y: Tensor,
    /// Fail at the start of this optimiser step (8 steps per epoch: 120 items in 16s).
    crash_at_step: Option<usize>,
    steps: usize,
    poison: bool,
    /// What [`Learner::config`] reports.
    config: serde_json::Value,
    /// Read recorded configs as [`ToyConfig`] (a type whose `init` switch came later).
    typed: bool,
    /// The weights at the start of each training step (after the previous optimiser step).
    history: Vec<Tensor>,
    /// The weights at each `predict` (each epoch's validation, then the test).
    predicted: Vec<Tensor>,
}

/// The toy's configuration type once an `init` switch was added, defaulting to the behaviour
/// before it existed.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ToyConfig {
    hidden: i64,
    dropout: f64,
    init: String,
}

impl Default for ToyConfig {
    fn default() -> Self {
        Self {
            hidden: 16,
            dropout: 0.2,
            init: "tch".into(),
        }
    }
}

impl Toy {
    fn new(seed: i64) -> Self {
        tch::manual_seed(seed);
        let n = 200;
        let y = Tensor::arange(n, (Kind::Int64, Device::Cpu)).remainder(2);
        let x = Tensor::randn([n, 4], (Kind::Float, Device::Cpu))
            + y.unsqueeze(1).to_kind(Kind::Float) * 2.0;
        let vs = nn::VarStore::new(Device::Cpu);
        let root = vs.root();
        let net = nn::seq()
            .add(nn::linear(&root / "l1", 4, 16, Default::default()))
            .add_fn(|t| t.relu())
            .add(nn::linear(&root / "l2", 16, 2, Default::default()));
        Self {
            vs,
            net,
            drop: 0.2,
            x,
            y,
            crash_at_step: None,
            steps: 0,
            poison: false,
            config: serde_json::json!({"hidden": 16, "dropout": 0.2}),
            typed: false,
            history: Vec::new(),
            predicted: Vec::new(),
        }
    }

    /// Every variable, flattened and joined in name order.
    fn weights(&self) -> Tensor {
        let mut vars: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        Tensor::cat(
            &vars
                .iter()
                .map(|(_, t)| t.detach().flatten(0, -1))
                .collect::<Vec<_>>(),
            0,
        )
    }
}

impl Learner for Toy {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn batch_size(&self) -> Option<usize> {
        Some(16)
    }
    fn train_step(
        &mut self,
        items: &[usize],
        _rng: &mut ChaCha8Rng,
    ) -> Result<StepOutput, TrainError> {
        if self.crash_at_step == Some(self.steps) {
            return Err(TrainError::State("simulated crash".into()));
        }
        self.steps += 1;
        self.history.push(self.weights().copy());
        let idx = Tensor::from_slice(&items.iter().map(|&i| i as i64).collect::<Vec<_>>());
        let h = self.x.index_select(0, &idx).dropout(self.drop, true);
        let mut logits = self.net.forward(&h);
        if self.poison {
            logits = logits * f64::NAN;
        }
        Ok(StepOutput::loss(cross_entropy(
            &logits,
            &self.y.index_select(0, &idx),
            0.0,
        )))
    }
    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        self.predicted.push(self.weights().copy());
        let idx = Tensor::from_slice(&items.iter().map(|&i| i as i64).collect::<Vec<_>>());
        let p = self
            .net
            .forward_t(&self.x.index_select(0, &idx), false)
            .softmax(-1, Kind::Float);
        Scores::from_tensor(&p)
    }
    fn config(&self) -> Option<basin_train::runner::ModelConfig> {
        if self.config.is_null() {
            return None;
        }
        Some(basin_train::runner::ModelConfig {
            value: self.config.clone(),
            read: if self.typed {
                basin_train::runner::with_defaults::<ToyConfig>
            } else {
                |recorded| recorded.clone()
            },
        })
    }
}

fn labels(toy: &Toy, items: &[usize]) -> Vec<i64> {
    items
        .iter()
        .map(|&i| toy.y.int64_value(&[i as i64]))
        .collect()
}

fn runner(dir: Option<std::path::PathBuf>, epochs: usize) -> Runner {
    Runner {
        name: "toy".into(),
        train: TrainConfig {
            epochs,
            optim: OptimConfig {
                lr: 0.01,
                ..OptimConfig::default()
            },
            ..TrainConfig::default()
        },
        seed: 7,
        dir,
        device: "cpu".into(),
        config: serde_json::json!({"model": "toy-mlp"}),
        progress: false,
        restart_damaged: false,
    }
}

fn fit(toy: &mut Toy, r: &Runner) -> Result<basin_train::record::RunRecord, TrainError> {
    let (train, val, test): (Vec<usize>, Vec<usize>, Vec<usize>) = (
        (0..120).collect(),
        (120..160).collect(),
        (160..200).collect(),
    );
    let yv = labels(toy, &val);
    let yt = labels(toy, &test);
    r.fit(
        toy,
        &train,
        &[("train", &train), ("val", &val), ("test", &test)],
        |l, _, _| {
            let acc = accuracy(&yv, &l.predict(&val)?.argmax())?;
            Ok(Validation {
                metrics: BTreeMap::from([("val_acc".into(), acc)]),
                score: acc,
                ..Validation::default()
            })
        },
        |l, _| {
            Ok(BTreeMap::from([(
                "test_acc".into(),
                accuracy(&yt, &l.predict(&test)?.argmax())?,
            )]))
        },
    )
}

#[test]
fn learns_a_separable_task_and_selects_on_validation() {
    let _serial = basin_core::testing::lock_generator();
    let mut toy = Toy::new(1);
    let rec = fit(&mut toy, &runner(None, 15)).unwrap();
    assert_eq!(rec.status, RunStatus::Finished);
    assert_eq!(rec.epochs.len(), 15);
    assert!(
        rec.summary["test_acc"] > 0.75,
        "well above chance (0.5): {:?}",
        rec.summary
    );
    let sel = rec.selected_epoch.unwrap();
    let best = rec
        .epochs
        .iter()
        .map(|e| e.metrics["val_acc"])
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(
        rec.epochs[sel].metrics["val_acc"], best,
        "selected epoch is not the best validation epoch"
    );
    assert_eq!(
        rec.epochs.iter().position(|e| e.metrics["val_acc"] == best),
        Some(sel),
        "ties keep the earlier epoch"
    );
    assert_eq!(rec.split_hashes.len(), 3);
}

#[test]
fn resumed_run_equals_a_straight_run() {
    let _serial = basin_core::testing::lock_generator();
    let straight_dir = tempfile::tempdir().unwrap();
    let resumed_dir = tempfile::tempdir().unwrap();
    let mut a = Toy::new(2);
    let straight = fit(&mut a, &runner(Some(straight_dir.path().into()), 6)).unwrap();
    // The per-epoch metrics beside the record, as CSV.
    let csv = std::fs::read_to_string(straight_dir.path().join("record.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 7, "{csv}");
    assert!(lines[0].starts_with("epoch,lr,seconds,") && lines[0].contains("train_loss"));
    assert!(lines[6].starts_with("5,"));

    let mut b = Toy::new(2);
    b.crash_at_step = Some(3 * 8);
    let err = fit(&mut b, &runner(Some(resumed_dir.path().into()), 6)).unwrap_err();
    assert!(err.to_string().contains("simulated crash"));
    let crashed =
        basin_train::record::RunRecord::read(&resumed_dir.path().join("record.json")).unwrap();
    assert!(matches!(crashed.status, RunStatus::Failed { .. }));
    assert_eq!(crashed.epochs.len(), 3);

    // A new process: same data, other weights (they must come from the checkpoint); it resumes
    // after epoch 3.
    let mut c = Toy::new(2);
    tch::no_grad(|| {
        for (_, v) in c.vs.variables() {
            v.shallow_clone().copy_(&v.randn_like());
        }
    });
    let resumed = fit(&mut c, &runner(Some(resumed_dir.path().into()), 6)).unwrap();
    assert_eq!(resumed.without_timings(), straight.without_timings());
    for (name, t) in a.vs.variables() {
        assert!(
            t.equal(&c.vs.variables()[&name]),
            "{name} differs after resume"
        );
    }
    // A checkpoint of another run is refused, not silently reused.
    let mut other = runner(Some(resumed_dir.path().into()), 6);
    other.seed = 8;
    let err = fit(&mut Toy::new(2), &other).unwrap_err().to_string();
    assert!(err.contains("another run"), "{err}");
    assert!(err.contains("seed: 7 there, 8 here"), "{err}");
    // So is a checkpoint of another model under the same protocol.
    assert_eq!(
        resumed.model,
        serde_json::json!({"hidden": 16, "dropout": 0.2})
    );
    let mut wider = Toy::new(2);
    wider.config = serde_json::json!({"hidden": 16, "dropout": 0.3});
    let err = fit(&mut wider, &runner(Some(resumed_dir.path().into()), 6))
        .unwrap_err()
        .to_string();
    assert!(err.contains("another model"), "{err}");
    // The message names what differs.
    assert!(err.contains("model.dropout: 0.2 there, 0.3 here"), "{err}");
}

/// A record without a model (written before models were recorded) is resumed on trust, and
/// from then on carries the model.
#[test]
fn a_record_without_a_model_is_resumed_and_then_checked() {
    let _serial = basin_core::testing::lock_generator();
    let dir = tempfile::tempdir().unwrap();
    let mut old = Toy::new(4);
    old.config = serde_json::Value::Null;
    old.crash_at_step = Some(2 * 8);
    fit(&mut old, &runner(Some(dir.path().into()), 4)).unwrap_err();
    let crashed = basin_train::record::RunRecord::read(&dir.path().join("record.json")).unwrap();
    assert!(crashed.model.is_null());
    let done = fit(&mut Toy::new(4), &runner(Some(dir.path().into()), 4)).unwrap();
    assert_eq!(done.epochs.len(), 4);
    assert_eq!(
        done.model,
        serde_json::json!({"hidden": 16, "dropout": 0.2})
    );
    let mut other = Toy::new(4);
    other.config = serde_json::json!({"hidden": 32});
    let err = fit(&mut other, &runner(Some(dir.path().into()), 4))
        .unwrap_err()
        .to_string();
    assert!(err.contains("another model"), "{err}");
    // A field one side lacks reads `absent`.
    assert!(
        err.contains("model.dropout: 0.2 there, absent here"),
        "{err}"
    );
    assert!(err.contains("model.hidden: 16 there, 32 here"), "{err}");
}

/// A run recorded before a switch existed resumes under the switch's default, read through
/// the learner's configuration type, and is refused under any other value of it.
#[test]
fn a_switch_added_since_the_run_reads_as_its_default() {
    let _serial = basin_core::testing::lock_generator();
    let dir = tempfile::tempdir().unwrap();
    let mut old = Toy::new(5);
    old.crash_at_step = Some(2 * 8);
    fit(&mut old, &runner(Some(dir.path().into()), 4)).unwrap_err();
    let with_switch = |init: &str| {
        let mut t = Toy::new(5);
        t.typed = true;
        t.config = serde_json::json!({"hidden": 16, "dropout": 0.2, "init": init});
        t
    };
    let err = fit(
        &mut with_switch("torch"),
        &runner(Some(dir.path().into()), 4),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("another model"), "{err}");
    assert!(
        err.contains(r#"model.init: "tch" there, "torch" here"#),
        "{err}"
    );
    // Without the typed reading the absent field refuses too.
    let mut untyped = with_switch("tch");
    untyped.typed = false;
    let err = fit(&mut untyped, &runner(Some(dir.path().into()), 4))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(r#"model.init: absent there, "tch" here"#),
        "{err}"
    );
    let done = fit(&mut with_switch("tch"), &runner(Some(dir.path().into()), 4)).unwrap();
    assert_eq!(done.epochs.len(), 4);
    assert_eq!(done.model["init"], "tch");
    // A recorded value the type does not read is compared as it is.
    assert_eq!(
        basin_train::runner::with_defaults::<ToyConfig>(&serde_json::json!({"width": 3})),
        serde_json::json!({"width": 3})
    );
}

#[test]
fn nan_loss_stops_the_run_naming_epoch_and_step() {
    let _serial = basin_core::testing::lock_generator();
    let dir = tempfile::tempdir().unwrap();
    let mut toy = Toy::new(3);
    toy.poison = true;
    let err = fit(&mut toy, &runner(Some(dir.path().into()), 3)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("non-finite loss") && msg.contains("epoch 0") && msg.contains("step 0"),
        "{msg}"
    );
    let rec = basin_train::record::RunRecord::read(&dir.path().join("record.json")).unwrap();
    assert!(matches!(rec.status, RunStatus::Failed { .. }));
}

#[test]
fn checkpoints_from_before_the_tie_break_still_read() {
    // The best-epoch entry as runs wrote it before `tie_break` existed.
    let v: Validation = serde_json::from_str(
        r#"{"metrics": {"val_accuracy": 0.9}, "score": 0.9, "for_test": {}, "test_now": null}"#,
    )
    .unwrap();
    assert_eq!((v.score, v.tie_break), (0.9, 0.0));
}

/// With `ema`, validation and the test see the weights' average (TensorFlow's warm-up rule),
/// training continues from the live weights, and a resumed run equals a straight one.
#[test]
fn validation_and_test_see_the_weights_average() {
    let _serial = basin_core::testing::lock_generator();
    let epochs = 4;
    let with_ema = |dir: Option<std::path::PathBuf>| {
        let mut r = runner(dir, epochs);
        r.train.ema = Some(0.9);
        r
    };
    let mut toy = Toy::new(4);
    let rec = fit(&mut toy, &with_ema(None)).unwrap();
    assert_eq!(
        toy.predicted.len(),
        epochs + 1,
        "a validation per epoch, one test"
    );
    let (seen, tested) = (&toy.predicted[..epochs], &toy.predicted[epochs]);
    // The average, recomputed from the live weights at each step: step t (from 1) leaves
    // history[t] behind, and the average starts from the initial weights, history[0].
    let steps_per_epoch = 120usize.div_ceil(16);
    let history = &toy.history;
    assert_eq!(history.len(), epochs * steps_per_epoch);
    let mut average = history[0].copy();
    for (t, live) in history.iter().enumerate().skip(1) {
        let d = 0.9f64.min((1.0 + t as f64) / (10.0 + t as f64));
        average = &average * d + live * (1.0 - d);
        if t % steps_per_epoch == 0 {
            let e = t / steps_per_epoch - 1;
            let gap = (&seen[e] - &average).abs().max().double_value(&[]);
            assert!(
                gap < 1e-5,
                "epoch {e}: validation saw another average ({gap})"
            );
            // Not the live weights, which training went on from.
            let live = (&seen[e] - live).abs().max().double_value(&[]);
            assert!(live > 1e-4, "epoch {e}: validation saw the live weights");
        }
    }
    let sel = rec.selected_epoch.unwrap();
    assert!(
        tested.equal(&seen[sel]),
        "the test ran on another model than the selected epoch's average"
    );

    // Interrupted after two epochs and resumed: the same record and weights.
    let (straight_dir, resumed_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = Toy::new(5);
    let straight = fit(&mut a, &with_ema(Some(straight_dir.path().into()))).unwrap();
    let mut b = Toy::new(5);
    b.crash_at_step = Some(2 * steps_per_epoch);
    assert!(fit(&mut b, &with_ema(Some(resumed_dir.path().into()))).is_err());
    let mut c = Toy::new(5);
    tch::no_grad(|| {
        for (_, v) in c.vs.variables() {
            v.shallow_clone().copy_(&v.randn_like());
        }
    });
    let resumed = fit(&mut c, &with_ema(Some(resumed_dir.path().into()))).unwrap();
    assert_eq!(resumed.without_timings(), straight.without_timings());
    assert!(
        a.weights().equal(&c.weights()),
        "weights differ after resume"
    );
    // A decay outside [0, 1) is refused by name.
    let mut bad = runner(None, 2);
    bad.train.ema = Some(1.0);
    let err = fit(&mut Toy::new(5), &bad).unwrap_err().to_string();
    assert!(err.contains("train.ema"), "{err}");
}

/// A truncated checkpoint stops the resume with the way on named; with `restart_damaged` the
/// run trains again from its first epoch and ends with a straight run's record.
#[test]
fn a_damaged_checkpoint_names_the_way_on_and_restart_damaged_retrains_it() {
    let _serial = basin_core::testing::lock_generator();
    let straight_dir = tempfile::tempdir().unwrap();
    let straight = fit(
        &mut Toy::new(5),
        &runner(Some(straight_dir.path().into()), 3),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    fit(&mut Toy::new(5), &runner(Some(dir.path().into()), 3)).unwrap();
    let ckpt = dir.path().join("checkpoint.safetensors");
    let bytes = std::fs::read(&ckpt).unwrap();
    std::fs::write(&ckpt, &bytes[..bytes.len() / 3]).unwrap();
    let err = fit(&mut Toy::new(5), &runner(Some(dir.path().into()), 3))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoint.safetensors") && err.contains("--restart-damaged"),
        "{err}"
    );
    let restart = Runner {
        restart_damaged: true,
        ..runner(Some(dir.path().into()), 3)
    };
    let again = fit(&mut Toy::new(5), &restart).unwrap();
    assert_eq!(again.without_timings(), straight.without_timings());
}
