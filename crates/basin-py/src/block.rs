//! An [`EnergyBlock`] for Python: built from its TOML config (the `[architecture.block]`
//! table of a run file), its parameters handed out as the very tensors the descent reads
//! (so a torch optimiser stepping them steps the block), and the descent, energy and
//! gradient under a structure given as PyTorch tensors.

use basin_core::{BlockConfig, Energy, EnergyBlock, SparseEdges, Structure, TraceOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3_tch::PyTensor;
use tch::{Device, Kind, Tensor, nn};

use std::sync::Mutex;

use crate::errors::{OrPy, guard, without_gil};
use crate::lock;
use crate::term::PyTerm;

/// One energy block: layer norm, energy terms and dynamics (`basin.EnergyBlock` wraps it),
/// behind a lock so that any Python thread may call it, one at a time.
#[pyclass(module = "basin._native")]
pub struct Block {
    inner: Mutex<Inner>,
}

/// What the lock guards.
struct Inner {
    vs: nn::VarStore,
    block: EnergyBlock,
    config: BlockConfig,
}

/// A device name as PyTorch writes it: `cpu`, `cuda`, `cuda:N`.
pub fn parse_device(name: &str) -> PyResult<Device> {
    match name {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        other => other
            .strip_prefix("cuda:")
            .and_then(|i| i.parse().ok())
            .map(Device::Cuda)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "device: expected `cpu`, `cuda` or `cuda:N`, got `{other}`"
                ))
            }),
    }
}

/// A floating dtype name: `float32` or `float64`.
pub fn parse_kind(name: &str) -> PyResult<Kind> {
    match name {
        "float32" | "float" => Ok(Kind::Float),
        "float64" | "double" => Ok(Kind::Double),
        other => Err(PyValueError::new_err(format!(
            "dtype: expected `float32` or `float64`, got `{other}`"
        ))),
    }
}

/// Converts every parameter of `vs` to `dtype` in place (same tensors).
pub(crate) fn set_dtype(vs: &mut tch::nn::VarStore, dtype: &str) -> PyResult<()> {
    let kind = parse_kind(dtype)?;
    guard(|| {
        vs.set_kind(kind);
        Ok(())
    })
}

/// Moves every parameter of `vs` to `device` in place (same tensors).
pub(crate) fn set_device(vs: &mut tch::nn::VarStore, device: &str) -> PyResult<()> {
    let device = parse_device(device)?;
    guard(|| {
        vs.set_device(device);
        Ok(())
    })
}

/// The interaction pattern from the optional tensors of a call.
fn structure(
    x: &Tensor,
    (mask, bias, edge_index, padding, self_attention, scale): StructureArgs,
) -> PyResult<Structure> {
    let given = [mask.is_some(), bias.is_some(), edge_index.is_some()];
    if given.iter().filter(|&&g| g).count() > 1 {
        return Err(PyValueError::new_err(
            "give at most one of `mask`, `bias` and `edge_index`",
        ));
    }
    let mut s = if let Some(m) = mask {
        Structure::mask(m.0).py()?
    } else if let Some(b) = bias {
        Structure::bias(b.0).py()?
    } else if let Some(e) = edge_index {
        let size = x.size();
        let tokens = size.iter().take(size.len().saturating_sub(1)).product();
        Structure::sparse(SparseEdges::from_edge_index(&e.0, tokens).py()?)
    } else {
        Structure::full()
    };
    if let Some(p) = padding {
        s = s.with_padding(p.0).py()?;
    }
    if let Some(allowed) = self_attention {
        s = s.with_self_attention(allowed);
    }
    if let Some(factor) = scale {
        s = s.with_scale(factor.0).py()?;
    }
    Ok(s)
}

impl Inner {
    /// Refuses tokens whose last dimension is not the block's width.
    fn check_width(&self, x: &Tensor) -> PyResult<()> {
        match x.size().last() {
            Some(&d) if d == self.config.dim => Ok(()),
            _ => Err(PyValueError::new_err(format!(
                "x: expected [..., {}] tokens, got {:?}",
                self.config.dim,
                x.size()
            ))),
        }
    }

    /// The structure of a call, checked against `x` and the block.
    fn structure_for(&self, x: &Tensor, args: StructureArgs) -> PyResult<Structure> {
        let s = structure(x, args)?;
        self.block.check(x, &s).py()?;
        Ok(s)
    }
}

/// A call's structure arguments: mask, bias, edge_index, padding, self_attention, scale.
type StructureArgs = (
    Option<PyTensor>,
    Option<PyTensor>,
    Option<PyTensor>,
    Option<PyTensor>,
    Option<bool>,
    Option<PyTensor>,
);

impl Block {
    /// `f(energy, g, structure)` at `g = LN(x)`, or at `g = x` when `normalised`.
    fn at_g(
        &self,
        py: Python<'_>,
        x: PyTensor,
        args: StructureArgs,
        normalised: bool,
        f: impl FnOnce(&dyn Energy, &Tensor, &Structure) -> Tensor + Send,
    ) -> PyResult<PyTensor> {
        without_gil(py, &self.inner, move |me| {
            let s = me.structure_for(&x, args)?;
            let g = if normalised {
                x.0
            } else {
                me.block.norm.forward(&x)
            };
            Ok(PyTensor(f(me.block.energy.as_ref(), &g, &s)))
        })
    }
}

/// What `forward` returns: tokens, energy per step, states, per-term gradients.
type Descent = (
    PyTensor,
    Option<PyTensor>,
    Option<PyTensor>,
    Option<Vec<(String, PyTensor)>>,
);

#[pymethods]
impl Block {
    /// A block from the TOML text of a block config, its parameters initialised as basin
    /// initialises them (seeded by `torch.manual_seed`: one generator in the process).
    /// `python_terms`: `(name, object)` of terms written in Python (see [`PyTerm`]), summed
    /// after the config's with weight 1.
    #[new]
    #[pyo3(signature = (config, device = "cpu", dtype = "float32", python_terms = Vec::new()))]
    fn new(
        py: Python<'_>,
        config: &str,
        device: &str,
        dtype: &str,
        python_terms: Vec<(String, Py<PyAny>)>,
    ) -> PyResult<Self> {
        let extra = python_terms
            .into_iter()
            .map(|(name, object)| {
                Ok((
                    1.0,
                    Box::new(PyTerm::new(py, name, object)?) as Box<dyn Energy>,
                ))
            })
            .collect::<PyResult<Vec<_>>>()?;
        guard(|| {
            let config = if extra.is_empty() {
                BlockConfig::from_toml(config).py()?
            } else {
                // Checked below, with the Python terms' names (the config may name no term).
                toml::from_str(config)
                    .map_err(|e| PyValueError::new_err(format!("config: {}", e.message())))?
            };
            let mut vs = nn::VarStore::new(parse_device(device)?);
            let root = vs.root();
            let block = EnergyBlock::with_terms(&root, &root, &config, extra).py()?;
            vs.set_kind(parse_kind(dtype)?);
            Ok(Self {
                inner: Mutex::new(Inner { vs, block, config }),
            })
        })
    }

    /// The config as TOML (what a run file's `[architecture.block]` holds).
    fn config_toml(&self, py: Python<'_>) -> PyResult<String> {
        let me = lock(py, &self.inner);
        toml::to_string(&me.config).map_err(|e| PyValueError::new_err(format!("config: {e}")))
    }

    /// The token width D.
    #[getter]
    fn dim(&self, py: Python<'_>) -> i64 {
        let me = lock(py, &self.inner);
        me.config.dim
    }

    /// The number of descent steps T.
    #[getter]
    fn steps(&self, py: Python<'_>) -> usize {
        let me = lock(py, &self.inner);
        me.config.steps
    }

    /// Every parameter as `(name, tensor)`, sorted by name: the tensors the descent reads
    /// (same storage and autograd identity), named as in basin's checkpoints.
    fn named_parameters(&self, py: Python<'_>) -> Vec<(String, PyTensor)> {
        let me = lock(py, &self.inner);
        crate::variables(&me.vs)
    }

    /// Converts every parameter to `dtype` in place (same tensors).
    fn set_dtype(&self, py: Python<'_>, dtype: &str) -> PyResult<()> {
        set_dtype(&mut lock(py, &self.inner).vs, dtype)
    }

    /// Moves every parameter to `device` in place (same tensors).
    fn set_device(&self, py: Python<'_>, device: &str) -> PyResult<()> {
        set_device(&mut lock(py, &self.inner).vs, device)
    }

    /// The descent from `x: [B, N, D]`: the final tokens; with `trace`, the total energy per
    /// step `[T + 1, B]`; with `states`, the trajectory `[T + 1, B, N, D]`; with `term_grads`,
    /// each term's `∂E_i/∂g` per step `[T, B, N, D]` (all three detached). Differentiable
    /// through every step (unrolled).
    #[pyo3(signature = (x, mask = None, bias = None, edge_index = None, padding = None, self_attention = None, scale = None, train = false, trace = false, states = false, term_grads = false))]
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &self,
        py: Python<'_>,
        x: PyTensor,
        mask: Option<PyTensor>,
        bias: Option<PyTensor>,
        edge_index: Option<PyTensor>,
        padding: Option<PyTensor>,
        self_attention: Option<bool>,
        scale: Option<PyTensor>,
        train: bool,
        trace: bool,
        states: bool,
        term_grads: bool,
    ) -> PyResult<Descent> {
        // Without the GIL: a term's gradient by autograd (one written in Python, say) runs
        // libtorch's engine, which refuses a thread that holds it.
        without_gil(py, &self.inner, move |me| {
            let args = (mask, bias, edge_index, padding, self_attention, scale);
            let s = me.structure_for(&x, args)?;
            let opts =
                (trace || states || term_grads).then_some(TraceOptions { states, term_grads });
            let (y, tr) = me.block.run(&x, &s, train, opts);
            let Some(tr) = tr else {
                return Ok((PyTensor(y), None, None, None));
            };
            let grads = term_grads.then(|| {
                tr.term_grads
                    .iter()
                    .filter(|(_, g)| !g.is_empty())
                    .map(|(name, g)| (name.clone(), PyTensor(Tensor::stack(g, 0))))
                    .collect()
            });
            Ok((
                PyTensor(y),
                trace.then_some(PyTensor(tr.total)),
                states.then(|| PyTensor(Tensor::stack(&tr.states, 0))),
                grads,
            ))
        })
    }

    /// The energy of each sample `[B]` at tokens `x`, normalised by the block's layer norm
    /// first as the descent does; with `normalised`, `x` is taken as `g` itself (the terms
    /// alone, as `basin.terms`' modules expose them).
    #[pyo3(signature = (x, mask = None, bias = None, edge_index = None, padding = None, self_attention = None, scale = None, normalised = false))]
    #[allow(clippy::too_many_arguments)]
    fn energy(
        &self,
        py: Python<'_>,
        x: PyTensor,
        mask: Option<PyTensor>,
        bias: Option<PyTensor>,
        edge_index: Option<PyTensor>,
        padding: Option<PyTensor>,
        self_attention: Option<bool>,
        scale: Option<PyTensor>,
        normalised: bool,
    ) -> PyResult<PyTensor> {
        let structure = (mask, bias, edge_index, padding, self_attention, scale);
        self.at_g(py, x, structure, normalised, |e, g, s| e.energy(g, s))
    }

    /// The gradient `∂E/∂g` `[B, N, D]` at `g = LN(x)` (the descent's force; closed form where
    /// the terms have one); with `normalised`, at `g = x`.
    #[pyo3(signature = (x, mask = None, bias = None, edge_index = None, padding = None, self_attention = None, scale = None, normalised = false))]
    #[allow(clippy::too_many_arguments)]
    fn grad(
        &self,
        py: Python<'_>,
        x: PyTensor,
        mask: Option<PyTensor>,
        bias: Option<PyTensor>,
        edge_index: Option<PyTensor>,
        padding: Option<PyTensor>,
        self_attention: Option<bool>,
        scale: Option<PyTensor>,
        normalised: bool,
    ) -> PyResult<PyTensor> {
        let structure = (mask, bias, edge_index, padding, self_attention, scale);
        self.at_g(py, x, structure, normalised, |e, g, s| e.grad(g, s))
    }

    /// The block's energy layer norm `g = LN(x)` (ET eq. 1), same shape as `x [..., D]`.
    fn layer_norm(&self, py: Python<'_>, x: PyTensor) -> PyResult<PyTensor> {
        without_gil(py, &self.inner, move |me| {
            me.check_width(&x)?;
            Ok(PyTensor(me.block.norm.forward(&x)))
        })
    }

    /// The layer norm's Lagrangian per token `[...]` (ET eq. 2), whose gradient in `x` is
    /// `LN(x)`; an error with a gain per feature (which has none).
    fn lagrangian(&self, py: Python<'_>, x: PyTensor) -> PyResult<PyTensor> {
        without_gil(py, &self.inner, move |me| {
            me.check_width(&x)?;
            Ok(PyTensor(me.block.norm.lagrangian(&x).py()?))
        })
    }

    /// `loss` plus the implicit-gradient term of this block's pending forwards (a block with
    /// `gradient = "implicit"` or `"phantom"`; unchanged for an unrolled one): backward the
    /// returned loss. The adjoint is solved here, from `loss`'s graph.
    fn attach(&self, py: Python<'_>, loss: PyTensor) -> PyResult<PyTensor> {
        without_gil(py, &self.inner, move |me| {
            let out = basin_core::implicit::attach(&loss, std::iter::once(&me.block));
            Ok(PyTensor(out))
        })
    }

    /// The implicit gradient of one training forward, from PyTorch's backward: `grad` =
    /// `∂L/∂x*` for `output` (the tokens that forward returned); the adjoint is solved and the
    /// parameters' gradients accumulated now. False when nothing is owed for `output`.
    fn backward_settled(&self, py: Python<'_>, output: PyTensor, grad: PyTensor) -> PyResult<bool> {
        without_gil(py, &self.inner, move |me| {
            Ok(basin_core::implicit::backward_settled(
                &me.block, &output, &grad,
            ))
        })
    }

    /// The fixed-point correction states of the training forwards since the last call, each
    /// `(weight, state)` with its graph (`gradient.correction_states`); then cleared.
    fn take_corrections(&self, py: Python<'_>) -> Vec<(f64, PyTensor)> {
        let me = lock(py, &self.inner);
        me.block
            .take_corrections()
            .into_iter()
            .map(|(w, t)| (w, PyTensor(t)))
            .collect()
    }

    /// The settling statistics since the last call (steps, residuals, adjoint iterations).
    fn settle_stats(&self, py: Python<'_>) -> std::collections::BTreeMap<String, f64> {
        let me = lock(py, &self.inner);
        basin_core::implicit::take_stats(std::iter::once(&me.block))
            .metrics()
            .into_iter()
            .collect()
    }

    /// Seconds of each of `reps` descents from `x` timed inside basin, for measuring what
    /// the Python boundary adds: with `target`, a training step (descent, mean squared error
    /// against `target`, backward to the parameters, which accumulate `.grad`); without, an
    /// evaluation descent without a graph.
    #[pyo3(signature = (x, reps, target = None))]
    fn time_descent(
        &self,
        py: Python<'_>,
        x: PyTensor,
        reps: usize,
        target: Option<PyTensor>,
    ) -> PyResult<Vec<f64>> {
        without_gil(py, &self.inner, move |me| {
            let s = Structure::full();
            me.block.check(&x, &s).py()?;
            Ok((0..reps)
                .map(|_| {
                    let t0 = std::time::Instant::now();
                    match &target {
                        Some(t) => {
                            let y = me.block.forward(&x, &s, false);
                            (y - &t.0).square().mean(None).backward();
                        }
                        None => {
                            let _ = tch::no_grad(|| me.block.forward(&x, &s, false));
                        }
                    }
                    basin_core::device::synchronize(x.device());
                    t0.elapsed().as_secs_f64()
                })
                .collect())
        })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let me = lock(py, &self.inner);
        format!("{:?}", me.block)
    }
}

/// The registered energy-term kinds, `(kind, about)`.
#[pyfunction]
pub fn term_kinds() -> Vec<(&'static str, &'static str)> {
    basin_core::registry::term_kinds()
        .into_iter()
        .map(|k| (k.kind, k.about))
        .collect()
}

/// The registered dynamics kinds, `(kind, about)`.
#[pyfunction]
pub fn dynamics_kinds() -> Vec<(&'static str, &'static str)> {
    basin_core::registry::dynamics_kinds()
        .into_iter()
        .map(|k| (k.kind, k.about))
        .collect()
}
