//! A planned run of a run file as a model Python can train: its learner (the model of any
//! task, ET, CDAT or SFi-Former), its split, the epochs' batches and random draws exactly as
//! `basin train` makes them, and the loss of a batch on PyTorch's tape.

use std::path::PathBuf;

use basin_tasks::overrides::apply_sets;
use basin_tasks::run_file::{OpenRun, RunSpec};
use basin_train::runner::{epoch_batches, epoch_start};
use pyo3::prelude::*;
use pyo3_tch::PyTensor;
use rand_chacha::ChaCha8Rng;
use tch::{Kind, Tensor};

use crate::block::parse_device;
use crate::errors::{OrPy, guard, without_gil};

/// Run `run` of a run file, built and untrained (`basin.models.Model` wraps it).
#[pyclass(unsendable, module = "basin._native")]
pub struct Model {
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
            Ok(Self { open, rng })
        })
    }

    /// Every parameter as `(name, tensor)`, sorted: the learner's own tensors, named as in
    /// the run's `checkpoint.safetensors`.
    fn named_parameters(&self) -> Vec<(String, PyTensor)> {
        crate::variables(self.open.learner.vars())
    }

    /// The run's `(train, val, test)` items.
    fn split(&self) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
        let s = &self.open.planned.split;
        (s.train.clone(), s.val.clone(), s.test.clone())
    }

    /// The run's directory name (`repeat-0/fold-0`, `run-0`), model seed and the number of
    /// runs the protocol plans.
    fn run_info(&self) -> (String, u64, usize) {
        (
            self.open.planned.dir.clone(),
            self.open.planned.seed,
            self.open.runs,
        )
    }

    /// Starts epoch `epoch` as the runner does (libtorch's generator and the epoch's own
    /// reseeded) and returns its batches of training items in order.
    fn epoch(&mut self, epoch: usize) -> PyResult<Vec<Vec<usize>>> {
        guard(|| {
            self.rng = epoch_start(self.open.planned.seed, epoch, 0);
            let train = items(self.open.planned.split.train.clone());
            epoch_batches(self.open.learner.as_ref(), &train, &mut self.rng).py()
        })
    }

    /// The training-mode loss of a batch of items, a scalar with its graph: `backward()` it.
    fn loss(&mut self, py: Python<'_>, items: Vec<usize>) -> PyResult<PyTensor> {
        guard(|| {
            // An implicit block's step runs a backward pass of its own (the adjoint's).
            let (learner, rng) = (&mut self.open.learner, &mut self.rng);
            let out = without_gil(py, || learner.train_step(&items, rng)).py()?;
            // As the runner does: an implicit block's gradient comes through the attached loss.
            Ok(PyTensor(basin_core::implicit::attach(
                &out.loss,
                learner.blocks(),
            )))
        })
    }

    /// What the learner finishes after `backward` (a block trained with recomputed
    /// activations); call it before the optimiser step.
    fn after_backward(&mut self) -> PyResult<()> {
        guard(|| {
            self.open.learner.after_backward();
            Ok(())
        })
    }

    /// Evaluation-mode scores of `items` (class probabilities, or the task's outputs),
    /// `[len(items), C]` float64, without a graph.
    fn predict(&mut self, items: Vec<usize>) -> PyResult<PyTensor> {
        guard(|| {
            let scores = self.open.learner.predict(&items).py()?;
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
    fn config_json(&self) -> String {
        self.open
            .learner
            .config()
            .map_or(serde_json::Value::Null, |c| c.value)
            .to_string()
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.open)
    }
}
