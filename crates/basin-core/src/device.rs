//! CPU or CUDA, chosen at run time: one binary serves both.
//!
//! `BASIN_DEVICE=cpu|cuda|auto` (default `auto`) picks the device. rustc drops
//! `libtorch_cuda.so` at link time because no symbol of it is referenced, which would leave a
//! binary with no CUDA backend; [`load_cuda_backend`] therefore `dlopen`s it at start-up. On a
//! machine without a GPU (or without the CUDA libraries) that fails quietly and the CPU is used.
//!
//! `BASIN_TF32=1` lets cuBLAS run float32 matrix products on TF32 tensor cores (10-bit
//! mantissa), PyTorch's `torch.backends.cuda.matmul.allow_tf32 = True`; off by default, as in
//! PyTorch. It changes nothing on the CPU.

use std::ffi::CString;
use std::str::FromStr;
use std::sync::OnceLock;

use tch::Device;

use crate::error::{CoreError, Result};

/// The environment variable that selects the device.
pub const DEVICE_ENV: &str = "BASIN_DEVICE";

/// The environment variable that allows TF32 matrix products on CUDA (`1`; default `0`).
pub const TF32_ENV: &str = "BASIN_TF32";

/// Which device the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// Always the CPU.
    Cpu,
    /// The first CUDA device; an error when none is usable.
    Cuda,
    /// CUDA when available, else the CPU.
    #[default]
    Auto,
}

impl FromStr for DeviceChoice {
    type Err = CoreError;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda),
            "auto" | "" => Ok(Self::Auto),
            other => Err(CoreError::Environment {
                name: DEVICE_ENV.into(),
                message: format!("expected one of cpu, cuda, auto; got `{other}`"),
            }),
        }
    }
}

impl std::fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Auto => "auto",
        })
    }
}

static CUDA_BACKEND: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Loads libtorch's CUDA backend once (`dlopen` with `RTLD_NOW | RTLD_GLOBAL`), so that its
/// kernels register with the dispatcher. Returns why it could not be loaded, if it could not.
pub fn load_cuda_backend() -> std::result::Result<(), String> {
    CUDA_BACKEND.get_or_init(dlopen_torch_cuda).clone()
}

#[allow(unsafe_code)]
fn dlopen_torch_cuda() -> std::result::Result<(), String> {
    let name = CString::new("libtorch_cuda.so").map_err(|e| e.to_string())?;
    // SAFETY: `name` is a valid NUL-terminated string; the handle is deliberately kept open
    // for the life of the process (the backend must stay registered).
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local C string or null.
        let msg = unsafe {
            let err = libc::dlerror();
            if err.is_null() {
                "unknown dlopen error".to_owned()
            } else {
                std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned()
            }
        };
        return Err(msg);
    }
    Ok(())
}

/// Whether a CUDA device is usable by this process (loads the backend first).
pub fn cuda_available() -> bool {
    load_cuda_backend().is_ok() && tch::Cuda::is_available()
}

/// Resolves a [`DeviceChoice`] to a device, applying [`TF32_ENV`] when it is CUDA.
pub fn select(choice: DeviceChoice) -> Result<Device> {
    let device = select_device(choice)?;
    if device.is_cuda() {
        set_tf32(tf32_from_env()?);
    }
    Ok(device)
}

/// What [`TF32_ENV`] asks for (unset: no).
pub fn tf32_from_env() -> Result<bool> {
    match std::env::var(TF32_ENV) {
        Err(_) => Ok(false),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "on" | "yes" => Ok(true),
            "0" | "false" | "off" | "no" | "" => Ok(false),
            other => Err(CoreError::Environment {
                name: TF32_ENV.into(),
                message: format!("expected 1 or 0; got `{other}`"),
            }),
        },
    }
}

// `cpp/tf32.cpp`, compiled by the build script against the linked libtorch's headers.
#[allow(unsafe_code)]
mod ffi {
    unsafe extern "C" {
        pub(super) safe fn basin_set_allow_tf32(on: bool);
        pub(super) safe fn basin_allow_tf32() -> bool;
    }
}

/// Allows (or forbids) TF32 in cuBLAS float32 products and cuDNN convolutions, as PyTorch's
/// `torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32` do. Process
/// wide; a no-op for CPU kernels.
pub fn set_tf32(on: bool) {
    ffi::basin_set_allow_tf32(on);
}

/// Whether cuBLAS float32 products may use TF32 now (see [`set_tf32`]).
pub fn tf32() -> bool {
    ffi::basin_allow_tf32()
}

fn select_device(choice: DeviceChoice) -> Result<Device> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Auto => Ok(if cuda_available() {
            Device::Cuda(0)
        } else {
            Device::Cpu
        }),
        DeviceChoice::Cuda => {
            if let Err(why) = load_cuda_backend() {
                return Err(CoreError::Device(format!(
                    "CUDA was requested but libtorch_cuda.so could not be loaded: {why}"
                )));
            }
            if !tch::Cuda::is_available() {
                return Err(CoreError::Device(
                    "CUDA was requested but no CUDA device is visible".into(),
                ));
            }
            Ok(Device::Cuda(0))
        }
    }
}

/// The device chosen by `BASIN_DEVICE` (default `auto`).
pub fn from_env() -> Result<Device> {
    let choice = match std::env::var(DEVICE_ENV) {
        Ok(v) => v.parse()?,
        Err(_) => DeviceChoice::Auto,
    };
    select(choice)
}

/// A short human description, for run records and reports.
pub fn describe(device: Device) -> String {
    match device {
        Device::Cpu => format!("cpu ({} threads)", tch::get_num_threads()),
        Device::Cuda(i) => format!(
            "cuda:{i} (of {} devices{})",
            tch::Cuda::device_count(),
            if tf32() { ", tf32" } else { "" }
        ),
        other => format!("{other:?}"),
    }
}

/// Waits for queued kernels on `device` (a no-op on the CPU); benchmarks time up to this point.
pub fn synchronize(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// Memory the operating system can still give this process (`MemAvailable` of
/// `/proc/meminfo`), in bytes; `None` where that is not known (not Linux).
pub fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}
