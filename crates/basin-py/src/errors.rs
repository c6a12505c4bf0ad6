//! basin's errors as Python exceptions with the same messages: a missing file or dataset is a
//! `FileNotFoundError`, a bad config, tensor or file content a `ValueError`, anything else
//! (libtorch, a diverged training) a `RuntimeError`; and [`guard`], which turns a panic into a
//! `RuntimeError` before it reaches the interpreter.

use std::panic::{AssertUnwindSafe, catch_unwind};

use basin_core::CoreError;
use basin_data::DataError;
use basin_graph::GraphError;
use basin_tasks::TaskError;
use basin_train::TrainError;
use pyo3::PyErr;
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};

/// Which Python exception an error becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `FileNotFoundError`.
    NotFound,
    /// `ValueError`.
    Value,
    /// `RuntimeError`.
    Runtime,
}

/// The exception kind of each of basin's error types (the transparent variants forward to the
/// error they wrap).
pub trait Classify: std::fmt::Display {
    /// Which exception this error becomes.
    fn kind(&self) -> Kind;

    /// The exception, with the error's message.
    fn to_py(&self) -> PyErr {
        let msg = self.to_string();
        match self.kind() {
            Kind::NotFound => PyFileNotFoundError::new_err(msg),
            Kind::Value => PyValueError::new_err(msg),
            Kind::Runtime => PyRuntimeError::new_err(msg),
        }
    }
}

fn io_kind(e: &std::io::Error) -> Kind {
    if e.kind() == std::io::ErrorKind::NotFound {
        Kind::NotFound
    } else {
        Kind::Runtime
    }
}

impl Classify for CoreError {
    fn kind(&self) -> Kind {
        match self {
            Self::Io { source, .. } => io_kind(source),
            Self::Format { .. }
            | Self::Mismatch { .. }
            | Self::Config { .. }
            | Self::Environment { .. }
            | Self::Tensor { .. } => Kind::Value,
            Self::Busy { .. } | Self::Device(_) | Self::Torch(_) => Kind::Runtime,
        }
    }
}

impl Classify for DataError {
    fn kind(&self) -> Kind {
        match self {
            Self::Io { source, .. } => io_kind(source),
            Self::MissingFile { .. } | Self::MissingDataset { .. } => Kind::NotFound,
            Self::Format { .. } | Self::Invalid { .. } | Self::Checksum { .. } => Kind::Value,
            _ => Kind::Runtime,
        }
    }
}

impl Classify for GraphError {
    fn kind(&self) -> Kind {
        match self {
            Self::Data(e) => e.kind(),
            Self::NoConvergence { .. } => Kind::Runtime,
            _ => Kind::Value,
        }
    }
}

impl Classify for TrainError {
    fn kind(&self) -> Kind {
        match self {
            Self::Config { .. } | Self::Flag { .. } | Self::Unpaired(_) => Kind::Value,
            Self::Data(e) => e.kind(),
            _ => Kind::Runtime,
        }
    }
}

impl Classify for TaskError {
    fn kind(&self) -> Kind {
        match self {
            Self::Config { .. } | Self::Invalid { .. } | Self::Metric(_) => Kind::Value,
            Self::Core(e) => e.kind(),
            Self::Train(e) => e.kind(),
            Self::Data(e) => e.kind(),
            Self::Graph(e) => e.kind(),
            Self::Image(e) => image_kind(e),
            Self::Torch(_) => Kind::Runtime,
        }
    }
}

fn image_kind(e: &basin_image::ImageError) -> Kind {
    use basin_image::ImageError as E;
    match e {
        E::Io { source, .. } => io_kind(source),
        E::Data(d) => d.kind(),
        E::Format { .. } | E::Invalid { .. } => Kind::Value,
        #[allow(unreachable_patterns)]
        _ => Kind::Runtime,
    }
}

impl Classify for tch::TchError {
    fn kind(&self) -> Kind {
        match self {
            Self::Io(e) => io_kind(e),
            _ => Kind::Runtime,
        }
    }
}

/// Runs `f`, turning a panic (a libtorch error inside an op, say) into a `RuntimeError` that
/// carries the panic's message.
pub fn guard<T>(f: impl FnOnce() -> pyo3::PyResult<T>) -> pyo3::PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) if payload.is::<Raised>() => Err(RAISED
            .with(|r| r.borrow_mut().take())
            .unwrap_or_else(|| PyRuntimeError::new_err("basin: a Python exception was lost"))),
        Err(payload) => {
            let msg = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            Err(PyRuntimeError::new_err(format!("basin: {msg}")))
        }
    }
}

/// The unwind payload of [`raise_through`]: the exception waits in [`RAISED`].
struct Raised;

thread_local! {
    /// The Python exception that is unwinding through basin's code on this thread.
    static RAISED: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// Leaves basin's code (a descent calling a term written in Python, say) with the exception
/// `e`, which [`guard`] raises unchanged in the caller; no panic message is printed.
pub fn raise_through(e: PyErr) -> ! {
    RAISED.with(|r| *r.borrow_mut() = Some(e));
    std::panic::resume_unwind(Box::new(Raised))
}

/// `?` for basin's errors inside a `PyResult` function.
pub trait OrPy<T> {
    /// The value, or the error as its Python exception.
    fn py(self) -> pyo3::PyResult<T>;
}

impl<T, E: Classify> OrPy<T> for Result<T, E> {
    fn py(self) -> pyo3::PyResult<T> {
        self.map_err(|e| e.to_py())
    }
}

/// Runs `f` on the value behind `m` with the GIL released (and a panic turned into an
/// exception, as [`guard`] does), for work that calls libtorch's autograd engine (which refuses
/// to run while the calling thread holds the GIL, since PyTorch's own backward hooks may need
/// it) or trains for a long time. `f` takes what it needs by value: tensors cross no thread,
/// but pyo3 asks for `Send` all the same.
pub fn without_gil<S: Send, T: Send>(
    py: pyo3::Python<'_>,
    m: &std::sync::Mutex<S>,
    f: impl FnOnce(&mut S) -> pyo3::PyResult<T> + Send,
) -> pyo3::PyResult<T> {
    py.allow_threads(|| {
        guard(|| {
            let mut state = m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut state)
        })
    })
}
