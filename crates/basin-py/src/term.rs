//! Energy terms written in Python: any object with `energy(g) → [B]`, and optionally a
//! closed-form `grad(g) → [B, N, D]`, as one of a block's terms. Without `grad` its gradient
//! is autograd's of its energy (with a graph while training, so its own parameters learn).

use basin_core::energy::{autograd_energy_and_grad, autograd_grad};
use basin_core::{Energy, Structure};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_tch::PyTensor;
use tch::Tensor;

use crate::errors::raise_through;

/// A Python object as an [`Energy`] of the normalised tokens `g: [B, N, D]`.
pub struct PyTerm {
    name: String,
    object: Py<PyAny>,
    closed_form: bool,
}

impl PyTerm {
    /// The term `object` (its `energy`, and `grad` where it has one) under `name`.
    pub fn new(py: Python<'_>, name: String, object: Py<PyAny>) -> PyResult<Self> {
        let bound = object.bind(py);
        if !bound.hasattr("energy")? {
            return Err(PyValueError::new_err(format!(
                "term `{name}`: a term written in Python needs an `energy(g)` method"
            )));
        }
        let closed_form = bound.hasattr("grad")?;
        Ok(Self {
            name,
            object,
            closed_form,
        })
    }

    /// `object.<method>(g)`, checked to be a tensor of `shape`; a Python exception leaves
    /// the descent as it is.
    fn call(&self, method: &str, g: &Tensor, shape: &[i64]) -> Tensor {
        Python::with_gil(|py| {
            let out = self
                .object
                .bind(py)
                .call_method1(method, (PyTensor(g.shallow_clone()),))
                .and_then(|o| o.extract::<PyTensor>());
            match out {
                Ok(t) if t.0.size() == shape => t.0,
                Ok(t) => raise_through(PyValueError::new_err(format!(
                    "term `{}`: {method}(g) must return a tensor of shape {shape:?}, got {:?}",
                    self.name,
                    t.0.size()
                ))),
                Err(e) => raise_through(e),
            }
        })
    }
}

impl Energy for PyTerm {
    fn name(&self) -> &str {
        &self.name
    }

    fn energy(&self, g: &Tensor, _structure: &Structure) -> Tensor {
        self.call("energy", g, &g.size()[..1])
    }

    fn grad(&self, g: &Tensor, structure: &Structure) -> Tensor {
        if self.closed_form {
            self.call("grad", g, &g.size())
        } else {
            autograd_grad(self, g, structure)
        }
    }

    fn energy_and_grad(&self, g: &Tensor, structure: &Structure) -> (Tensor, Tensor) {
        if self.closed_form {
            (self.energy(g, structure), self.grad(g, structure))
        } else {
            autograd_energy_and_grad(self, g, structure)
        }
    }
}
