//! A planned run of a run file as a model Python can train: its learner (the model of any
//! task, ET, CDAT or SFi-Former), its split, the epochs' batches and random draws exactly as
//! `basin train` makes them, and the loss of a batch on PyTorch's tape.

use std::path::PathBuf;
use std::sync::Mutex;

use basin_tasks::overrides::apply_sets;
use basin_tasks::run_file::{OpenRun, RunSpec};
use basin_train::runner::{epoch_batches, epoch_start};
use pyo3::prelude::*;
use pyo3_tch::PyTensor;
use rand_chacha::ChaCha8Rng;
use tch::{Kind, Tensor};

use crate::block::parse_device;
use crate::errors::{OrPy, guard, without_gil};
use crate::lock;

/// Run `run` of a run file, built and untrained (`basin.models.Model` wraps it).
#[pyclass(module = "basin._native")]
pub struct Model {
    /// Behind a lock, so that any thread may call (one at a time).
    inner: Mutex<State>,
}

struct State {
    open: OpenRun,
    /// The current epoch's generator (set by `epoch`; the run's seed before the first).
    rng: ChaCha8Rng,
}

fn items(ids: Vec<u32>) -> Vec<usize> {
    ids.into_iter().map(|i| i as usize).collect()
}

#[pymethods]
impl Model {
    /// The run file's text `text` (named `file` in errors) with `sets` (`KEY=VALUE`) applied;
    /// its data loaded from `data_dir` (else `BASIN_DATA_DIR`, else the cache).
    #[new]
    #[pyo3(signature = (text, file = "<run file>", run = 0, sets = Vec::new(), data_dir = None, device = "cpu"))]
    fn new(
        text: &str,
        file: &str,
        run: usize,
        sets: Vec<String>,
        data_dir: Option<PathBuf>,
        device: &str,
    ) -> PyResult<Self> {
        let device = parse_device(device)?;
        guard(|| {
            let text = apply_sets(text, &sets, file).py()?;
            let spec = RunSpec::parse(&text, file).py()?;
            let data = basin_data::datadir::data_dir(data_dir.as_deref());
            let open = spec.open(run, Some(&data), device).py()?;
            let rng = epoch_start(open.planned.seed, 0, 0);
            Ok(Self {
                inner: Mutex::new(State { open, rng }),
            })
        })
    }

    /// Every parameter as `(name, tensor)`, sorted: the learner's own tensors, named as in
    /// the run's `checkpoint.safetensors`.
    fn named_parameters(&self, py: Python<'_>) -> Vec<(String, PyTensor)> {
        crate::variables(lock(py, &self.inner).open.learner.vars())
    }

    /// The run's `(train, val, test)` items.
    fn split(&self, py: Python<'_>) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let me = lock(py, &self.inner);
        let s = &me.open.planned.split;
        (s.train.clone(), s.val.clone(), s.test.clone())
    }

    /// The run's directory name (`repeat-0/fold-0`, `run-0`), model seed and the number of
    /// runs the protocol plans.
    fn run_info(&self, py: Python<'_>) -> (String, u64, usize) {
        let me = lock(py, &self.inner);
        (
            me.open.planned.dir.clone(),
            me.open.planned.seed,
            me.open.runs,
        )
    }

    /// Starts epoch `epoch` as the runner does (libtorch's generator and the epoch's own
    /// reseeded) and returns its batches of training items in order.
    fn epoch(&self, py: Python<'_>, epoch: usize) -> PyResult<Vec<Vec<usize>>> {
        let mut me = lock(py, &self.inner);
        let me = &mut *me;
        guard(|| {
            me.rng = epoch_start(me.open.planned.seed, epoch, 0);
            let train = items(me.open.planned.split.train.clone());
            epoch_batches(me.open.learner.as_ref(), &train, &mut me.rng).py()
        })
    }

    /// The training-mode loss of a batch of items, a scalar with its graph: `backward()` it.
    fn loss(&self, py: Python<'_>, items: Vec<usize>) -> PyResult<PyTensor> {
        // Without the GIL: an implicit block's step runs a backward pass of its own (the
        // adjoint's).
        without_gil(py, &self.inner, move |me| {
            let learner = &mut me.open.learner;
            let out = learner.train_step(&items, &mut me.rng).py()?;
            // As the runner does: an implicit block's gradient comes through the attached loss.
            Ok(PyTensor(basin_core::implicit::attach(
                &out.loss,
                learner.blocks(),
            )))
        })
    }

    /// What the learner finishes after `backward` (a block trained with recomputed
    /// activations); call it before the optimiser step.
    fn after_backward(&self, py: Python<'_>) -> PyResult<()> {
        let mut me = lock(py, &self.inner);
        guard(|| {
            me.open.learner.after_backward();
            Ok(())
        })
    }

    /// Evaluation-mode scores of `items` (class probabilities, or the task's outputs),
    /// `[len(items), C]` float64, without a graph.
    fn predict(&self, py: Python<'_>, items: Vec<usize>) -> PyResult<PyTensor> {
        let mut me = lock(py, &self.inner);
        guard(|| {
            let scores = me.open.learner.predict(&items).py()?;
            let cols = scores.0.first().map_or(0, Vec::len) as i64;
            let flat: Vec<f64> = scores.0.into_iter().flatten().collect();
            Ok(PyTensor(
                Tensor::from_slice(&flat)
                    .to_kind(Kind::Double)
                    .view([-1, cols.max(1)]),
            ))
        })
    }

    /// The model's configuration as JSON (what the run's record holds under `model`).
    fn config_json(&self, py: Python<'_>) -> String {
        lock(py, &self.inner)
            .open
            .learner
            .config()
            .map_or(serde_json::Value::Null, |c| c.value)
            .to_string()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("{:?}", lock(py, &self.inner).open)
    }
}
