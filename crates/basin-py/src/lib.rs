//! # basin-py
//!
//! The native half of the `basin` Python package (`basin._native`); the Python half
//! (`python/basin`) wraps it in `torch.nn.Module`s. Tensors cross as the same libtorch
//! tensors in both directions (pyo3-tch: no copy, `data_ptr` equal), so the descent's ops are
//! recorded on PyTorch's autograd tape and `loss.backward()` in Python reaches basin's
//! parameters and the caller's inputs.
//!
//! - [`block`]: an energy block built from its TOML config, its parameters, its descent,
//!   energy and gradient.
//! - [`model`]: a planned run of any run file as a model: its learner, split, batches and
//!   loss, for a PyTorch training loop that trains as `basin train` does.
//! - [`hopfield`]: the modern Hopfield layers (Hopfield, HopfieldPooling, HopfieldLayer).
//! - [`data`]: datasets by name or path, and Laplacian encodings of an edge list.
//! - [`runs`]: `basin train` of a run file and `basin reproduce` of a table, as calls.
//! - [`term`]: energy terms written in Python, inside a block's sum.
//! - [`errors`]: basin's errors as Python exceptions, and no panic across the boundary.

use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;
use pyo3_tch::PyTensor;

pub mod block;
pub mod data;
pub mod errors;
pub mod hopfield;
pub mod model;
pub mod runs;
pub mod term;

/// The state behind a module's lock, waited for without the GIL when another thread holds it
/// (that thread may need the GIL to finish: PyTorch's autograd hooks). A lock poisoned by a
/// panic is taken as it is: the panic was already turned into a Python exception.
pub(crate) fn lock<'a, T: Send>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    loop {
        match m.try_lock() {
            Ok(guard) => return guard,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => py.allow_threads(|| drop(m.lock())),
        }
    }
}

/// Every variable of `vs` as `(name, tensor)`, sorted by name: the tensors the model reads
/// (same storage and autograd identity), named as in basin's checkpoints.
pub(crate) fn variables(vs: &tch::nn::VarStore) -> Vec<(String, PyTensor)> {
    let mut v: Vec<(String, tch::Tensor)> = vs.variables().into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.into_iter().map(|(n, t)| (n, PyTensor(t))).collect()
}

/// The `basin._native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<block::Block>()?;
    m.add_class::<model::Model>()?;
    m.add_class::<hopfield::Association>()?;
    m.add_function(wrap_pyfunction!(block::term_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(block::dynamics_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(data::load_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(data::laplacian_pe, m)?)?;
    m.add_function(wrap_pyfunction!(runs::train, m)?)?;
    m.add_function(wrap_pyfunction!(runs::reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(runs::tables, m)?)?;
    m.add_function(wrap_pyfunction!(runs::example, m)?)?;
    m.add_function(wrap_pyfunction!(runs::read_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(runs::write_checkpoint, m)?)?;
    Ok(())
}
