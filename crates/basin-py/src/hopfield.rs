//! The modern Hopfield layers of hopfield-layers (Ramsauer et al.) for Python: `Hopfield`
//! (states retrieve from a stored set), `HopfieldPooling` (learned queries pool a set) and
//! `HopfieldLayer` (learned stored patterns), built from an [`AssociationConfig`].

use std::sync::Mutex;

use basin_hopfield::{AssociationConfig, Hopfield, HopfieldLayer, HopfieldPooling};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_tch::PyTensor;
use tch::nn;

use crate::block::{parse_device, parse_kind, set_device, set_dtype};
use crate::errors::{OrPy, guard};
use crate::lock;

enum Layer {
    Hopfield(Hopfield),
    Pooling(HopfieldPooling),
    Lookup(HopfieldLayer),
}

/// One Hopfield association layer (`basin.Hopfield`, `HopfieldPooling`, `HopfieldLayer`),
/// behind a lock so that any Python thread may call it, one at a time.
#[pyclass(module = "basin._native")]
pub struct Association {
    inner: Mutex<Inner>,
}

/// What the lock guards.
struct Inner {
    vs: nn::VarStore,
    layer: Layer,
}

#[pymethods]
impl Association {
    /// `kind` is `hopfield`, `pooling` or `layer`; `config` the TOML of an association config
    /// (`state_size`, `stored_size`, `heads`, `beta`, `update_steps_max`, …); `quantity` the
    /// learned queries (pooling) or stored patterns (layer).
    #[new]
    #[pyo3(signature = (kind, config, quantity = 1, device = "cpu", dtype = "float32"))]
    fn new(kind: &str, config: &str, quantity: i64, device: &str, dtype: &str) -> PyResult<Self> {
        let device = parse_device(device)?;
        let dtype = parse_kind(dtype)?;
        guard(|| {
            let cfg: AssociationConfig = toml::from_str(config)
                .map_err(|e| PyValueError::new_err(format!("config: {}", e.message())))?;
            let mut vs = nn::VarStore::new(device);
            let root = vs.root();
            let layer = match kind {
                "hopfield" => Layer::Hopfield(Hopfield::new(&root, &cfg).py()?),
                "pooling" => Layer::Pooling(HopfieldPooling::new(&root, &cfg, quantity).py()?),
                "layer" => Layer::Lookup(HopfieldLayer::new(&root, &cfg, quantity).py()?),
                other => {
                    return Err(PyValueError::new_err(format!(
                        "kind: expected `hopfield`, `pooling` or `layer`, got `{other}`"
                    )));
                }
            };
            vs.set_kind(dtype);
            Ok(Self {
                inner: Mutex::new(Inner { vs, layer }),
            })
        })
    }

    /// Every parameter as `(name, tensor)`, sorted (the layer's own tensors).
    fn named_parameters(&self, py: Python<'_>) -> Vec<(String, PyTensor)> {
        crate::variables(&lock(py, &self.inner).vs)
    }

    /// Converts every parameter to `dtype` in place (same tensors).
    fn set_dtype(&self, py: Python<'_>, dtype: &str) -> PyResult<()> {
        set_dtype(&mut lock(py, &self.inner).vs, dtype)
    }

    /// Moves every parameter to `device` in place (same tensors).
    fn set_device(&self, py: Python<'_>, device: &str) -> PyResult<()> {
        set_device(&mut lock(py, &self.inner).vs, device)
    }

    /// `Hopfield`: `(r [B, S, state], y [B, N, stored], ignore)` → `[B, S, out]`;
    /// `HopfieldPooling`: `(y, ignore)` → `[B, quantity·out]`; `HopfieldLayer`: `(r)` →
    /// `[B, S, out]`. `ignore [B, N]` bool marks stored patterns left out (the Python side's
    /// `key_padding_mask`).
    #[pyo3(signature = (first, second = None, ignore = None))]
    fn forward(
        &self,
        py: Python<'_>,
        first: PyTensor,
        second: Option<PyTensor>,
        ignore: Option<PyTensor>,
    ) -> PyResult<PyTensor> {
        let me = lock(py, &self.inner);
        guard(|| {
            let ignore = ignore.as_ref().map(|t| &t.0);
            Ok(PyTensor(match &me.layer {
                Layer::Hopfield(h) => {
                    let y = second.ok_or_else(|| {
                        PyValueError::new_err("Hopfield needs the stored patterns `y`")
                    })?;
                    h.forward(&first, &y, ignore)
                }
                Layer::Pooling(p) => p.forward(&first, ignore),
                Layer::Lookup(l) => l.forward(&first),
            }))
        })
    }
}
