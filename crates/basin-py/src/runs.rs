//! `basin train` and `basin reproduce` as calls (the same library functions the binary
//! calls; results come back as the JSON the commands write, parsed on the Python side), and
//! basin's safetensors checkpoints read and written as name → tensor maps.

use std::collections::HashMap;
use std::path::PathBuf;

use basin_repro::{Context, Preset};
use basin_tasks::run_file::RunSpec;
use basin_train::context::RunContext;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_tch::PyTensor;

use crate::block::parse_device;
use crate::errors::{OrPy, guard};

/// Trains the run file `run_file` into `out` with `sets` (`KEY=VALUE`, as `--set` takes them)
/// applied; returns the outcome as JSON (task, resolved spec, held-out metrics per run,
/// energy per step).
#[pyfunction]
#[pyo3(signature = (run_file, out, sets = Vec::new(), data_dir = None, device = "cpu", progress = false))]
pub fn train(
    py: Python<'_>,
    run_file: PathBuf,
    out: PathBuf,
    sets: Vec<String>,
    data_dir: Option<PathBuf>,
    device: &str,
    progress: bool,
) -> PyResult<String> {
    let device = parse_device(device)?;
    guard(|| {
        let spec = RunSpec::read_with(&run_file, &sets).py()?;
        std::fs::create_dir_all(&out)
            .map_err(|e| basin_core::CoreError::io(&out, e))
            .py()?;
        let ctx = RunContext::new(spec.title())
            .with_out(&out)
            .with_device(device)
            .with_data_dir(basin_data::datadir::data_dir(data_dir.as_deref()))
            .with_progress(progress);
        // Training can take minutes: other Python threads run meanwhile.
        let outcome = py.allow_threads(|| spec.train(&ctx)).py()?;
        serde_json::to_string(&outcome).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// Reproduces the table `table` (`et-table2`, …) with `preset` (`quick`, `cpu`, `paper`) into
/// `out`; returns its `report.json`.
#[pyfunction]
#[pyo3(signature = (table, preset, out, data_dir = None, device = "cpu", progress = false))]
pub fn reproduce(
    py: Python<'_>,
    table: &str,
    preset: &str,
    out: PathBuf,
    data_dir: Option<PathBuf>,
    device: &str,
    progress: bool,
) -> PyResult<String> {
    let device = parse_device(device)?;
    let preset = match preset {
        "quick" => Preset::Quick,
        "cpu" => Preset::Cpu,
        "paper" => Preset::Paper,
        other => {
            return Err(PyValueError::new_err(format!(
                "preset: expected `quick`, `cpu` or `paper`, got `{other}`"
            )));
        }
    };
    guard(|| {
        let data = basin_data::datadir::data_dir(data_dir.as_deref());
        let mut ctx = Context::new(data, out.clone(), device, preset);
        ctx.run.progress = progress;
        ctx.preset_reason = "given by the caller".into();
        let table = table.to_owned();
        let report = py
            .allow_threads(move || basin_repro::reproduce(&table, &ctx))
            .py()?;
        serde_json::to_string(&report.json).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

/// Every registered table, `(id, title)`.
#[pyfunction]
pub fn tables() -> Vec<(&'static str, &'static str)> {
    basin_repro::registry()
        .into_iter()
        .map(|t| (t.id(), t.title()))
        .collect()
}

/// Named tensors of a checkpoint, in file order, and its metadata.
type Checkpoint = (Vec<(String, PyTensor)>, HashMap<String, String>);

/// The tensors of a safetensors checkpoint (on the CPU, file order) and its metadata.
#[pyfunction]
pub fn read_checkpoint(path: PathBuf) -> PyResult<Checkpoint> {
    guard(|| {
        let (tensors, meta) = basin_core::checkpoint::read_file(&path).py()?;
        Ok((
            tensors.into_iter().map(|(n, t)| (n, PyTensor(t))).collect(),
            meta,
        ))
    })
}

/// Writes named tensors and metadata as a safetensors checkpoint, atomically.
#[pyfunction]
#[pyo3(signature = (path, tensors, metadata = None))]
pub fn write_checkpoint(
    path: PathBuf,
    tensors: Vec<(String, PyTensor)>,
    metadata: Option<HashMap<String, String>>,
) -> PyResult<()> {
    guard(|| {
        let tensors: Vec<(String, tch::Tensor)> =
            tensors.into_iter().map(|(n, t)| (n, t.0)).collect();
        basin_core::checkpoint::write_tensors(&path, &tensors, metadata).py()
    })
}

/// The text of an example run file (`basin train --example NAME`; `list` names them all).
#[pyfunction]
pub fn example(name: &str) -> PyResult<String> {
    basin_repro::examples::example(name).py()
}
