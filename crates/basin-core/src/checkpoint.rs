//! Checkpoints: safetensors files with the config as JSON beside them, written atomically.
//!
//! - [`write_tensors`] / [`read_tensors`]: named tensors to and from a `.safetensors` file. A
//!   write goes to a temporary file in the same directory, is flushed to disk and then renamed
//!   over the target, so a crash never leaves a half-written file. A read checks the header
//!   and names the tensor a truncated file cuts off.
//! - [`save`] / [`load`]: every variable of a `VarStore` under its path name (e.g.
//!   `attention.w_q`), with the config in `<name>.json` beside the weights. Loading checks names
//!   and shapes and reports every mismatch at once.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tch::{Device, Kind, Tensor, nn::VarStore};

use crate::error::{CoreError, Result};
use crate::fsio::write_atomic;

/// The sidecar holding the config of the checkpoint at `weights` (`model.safetensors` →
/// `model.json`).
pub fn config_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

fn dtype_of(name: &str, kind: Kind) -> Result<Dtype> {
    Ok(match kind {
        Kind::Bool => Dtype::BOOL,
        Kind::Uint8 => Dtype::U8,
        Kind::Int8 => Dtype::I8,
        Kind::Int16 => Dtype::I16,
        Kind::Int => Dtype::I32,
        Kind::Int64 => Dtype::I64,
        Kind::BFloat16 => Dtype::BF16,
        Kind::Half => Dtype::F16,
        Kind::Float => Dtype::F32,
        Kind::Double => Dtype::F64,
        other => {
            return Err(CoreError::tensor(
                name,
                "a dtype safetensors can store",
                format!("{other:?}"),
            ));
        }
    })
}

fn kind_of(name: &str, dtype: Dtype) -> Result<Kind> {
    Ok(match dtype {
        Dtype::BOOL => Kind::Bool,
        Dtype::U8 => Kind::Uint8,
        Dtype::I8 => Kind::Int8,
        Dtype::I16 => Kind::Int16,
        Dtype::I32 => Kind::Int,
        Dtype::I64 => Kind::Int64,
        Dtype::BF16 => Kind::BFloat16,
        Dtype::F16 => Kind::Half,
        Dtype::F32 => Kind::Float,
        Dtype::F64 => Kind::Double,
        other => {
            return Err(CoreError::tensor(
                name,
                "a dtype libtorch supports",
                format!("{other:?}"),
            ));
        }
    })
}

/// Writes named tensors (any device, any layout) to a safetensors file, atomically.
/// `metadata` goes to the file's `__metadata__` header.
pub fn write_tensors(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: Option<HashMap<String, String>>,
) -> Result<()> {
    let mut owned = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let t = t.detach().to_device(Device::Cpu).contiguous();
        let dtype = dtype_of(name, t.kind())?;
        let mut bytes = vec![0u8; t.numel() * t.kind().elt_size_in_bytes()];
        t.f_copy_data_u8(&mut bytes, t.numel())?;
        let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
        owned.push((name.clone(), dtype, shape, bytes));
    }
    let mut views = Vec::with_capacity(owned.len());
    for (name, dtype, shape, bytes) in &owned {
        let view = TensorView::new(*dtype, shape.clone(), bytes).map_err(|e| {
            CoreError::tensor(name, "a consistent shape and byte size", e.to_string())
        })?;
        views.push((name.as_str(), view));
    }
    let buffer =
        safetensors::tensor::serialize(views, metadata).map_err(|e| CoreError::Format {
            path: path.to_path_buf(),
            reason: format!("cannot serialise: {e}"),
        })?;
    write_atomic(path, &buffer)
}

/// Reads every tensor of a safetensors file (on the CPU), in the file's order.
///
/// A file shorter than its header announces is reported with the name of the first tensor
/// that is cut off.
pub fn read_tensors(path: &Path) -> Result<NamedTensors> {
    read_file(path).map(|(tensors, _)| tensors)
}

/// Named tensors, in file order.
pub type NamedTensors = Vec<(String, Tensor)>;

/// [`read_tensors`] plus the `__metadata__` map of the header.
pub fn read_file(path: &Path) -> Result<(NamedTensors, HashMap<String, String>)> {
    let bytes = std::fs::read(path).map_err(|e| CoreError::io(path, e))?;
    let format = |reason: String| CoreError::Format {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < 8 {
        return Err(format(format!(
            "not a safetensors file: {} bytes, too short for the 8-byte header length",
            bytes.len()
        )));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[..8]);
    let header_len = u64::from_le_bytes(len);
    let available = (bytes.len() - 8) as u64;
    if header_len > available {
        return Err(format(format!(
            "truncated or not a safetensors file: the header announces {header_len} bytes, only {available} follow"
        )));
    }
    let start = 8 + header_len as usize;
    let data_len = bytes.len() - start;
    // Parse the header ourselves first, to name the tensor a truncated file cuts off.
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..start])
            .map_err(|e| format(format!("invalid safetensors header: {e}")))?;
    let mut ends: Vec<(u64, &String)> = header
        .iter()
        .filter(|(name, _)| name.as_str() != "__metadata__")
        .filter_map(|(name, v)| {
            v.get("data_offsets")?
                .get(1)?
                .as_u64()
                .map(|end| (end, name))
        })
        .collect();
    ends.sort();
    if let Some((end, name)) = ends.iter().find(|(end, _)| *end as usize > data_len) {
        return Err(format(format!(
            "truncated: tensor `{name}` needs data bytes up to {end}, the file holds {data_len}"
        )));
    }
    let (_, meta) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| format(format!("invalid safetensors header: {e:?}")))?;
    let mut infos: Vec<_> = meta.tensors().into_iter().collect();
    infos.sort_by_key(|(_, info)| info.data_offsets.0);
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| format(format!("invalid safetensors file: {e:?}")))?;
    let mut out = Vec::with_capacity(infos.len());
    for (name, _) in &infos {
        let view = st
            .tensor(name)
            .map_err(|e| format(format!("tensor `{name}`: {e:?}")))?;
        let kind = kind_of(name, view.dtype())?;
        let size: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let t = Tensor::f_from_data_size(view.data(), &size, kind)?;
        out.push((name.clone(), t));
    }
    let metadata = meta.metadata().clone().unwrap_or_default();
    Ok((out, metadata))
}

/// Saves every variable of `vs` to `path` (safetensors) and `config` to [`config_path`].
pub fn save<C: Serialize>(vs: &VarStore, path: &Path, config: &C) -> Result<()> {
    let json = serde_json::to_string_pretty(config)
        .map_err(|e| CoreError::config("<config>", format!("cannot serialise: {e}")))?;
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    let tensors: Vec<(String, Tensor)> = vars.into_iter().collect();
    let metadata = HashMap::from([("config".to_owned(), json.clone())]);
    write_tensors(path, &tensors, Some(metadata))?;
    write_atomic(&config_path(path), json.as_bytes())
}

/// Reads the config saved beside the checkpoint at `path`.
pub fn load_config<C: DeserializeOwned>(path: &Path) -> Result<C> {
    let cfg = config_path(path);
    let text = std::fs::read_to_string(&cfg).map_err(|e| CoreError::io(&cfg, e))?;
    serde_json::from_str(&text).map_err(|e| CoreError::Format {
        path: cfg.clone(),
        reason: format!("line {}, column {}: {e}", e.line(), e.column()),
    })
}

/// Loads the checkpoint at `path` into the variables of `vs`; see [`assign`].
pub fn load(vs: &VarStore, path: &Path) -> Result<()> {
    let tensors: HashMap<String, Tensor> = read_tensors(path)?.into_iter().collect();
    assign(vs, &tensors, path, &[])
}

/// Copies `tensors` into the variables of `vs`, by name.
///
/// Every variable must be present with its exact shape; floating-point tensors are converted to
/// the variable's dtype. Names in `tensors` that are not variables are errors unless listed in
/// `ignore`. All problems are collected and reported together ([`CoreError::Mismatch`]); on
/// error no variable is modified.
pub fn assign(
    vs: &VarStore,
    tensors: &HashMap<String, Tensor>,
    source: &Path,
    ignore: &[&str],
) -> Result<()> {
    let vars: BTreeMap<String, Tensor> = vs.variables().into_iter().collect();
    let mut problems = Vec::new();
    for (name, var) in &vars {
        match tensors.get(name) {
            None => problems.push(format!(
                "missing tensor `{name}` (expected shape {:?})",
                var.size()
            )),
            Some(t) if t.size() != var.size() => problems.push(format!(
                "tensor `{name}`: expected shape {:?}, the file has {:?}",
                var.size(),
                t.size()
            )),
            Some(t) if !t.is_floating_point() && var.is_floating_point() => problems.push(format!(
                "tensor `{name}`: expected a floating-point dtype, the file has {:?}",
                t.kind()
            )),
            Some(_) => {}
        }
    }
    let mut extra: Vec<&String> = tensors
        .keys()
        .filter(|n| !vars.contains_key(*n) && !ignore.contains(&n.as_str()))
        .collect();
    extra.sort();
    for name in extra {
        problems.push(format!(
            "unexpected tensor `{name}` {:?} (not a parameter of the model)",
            tensors[name].size()
        ));
    }
    if !problems.is_empty() {
        return Err(CoreError::Mismatch {
            path: source.to_path_buf(),
            problems,
        });
    }
    tch::no_grad(|| {
        for (name, var) in &vars {
            if let Some(t) = tensors.get(name) {
                var.shallow_clone()
                    .copy_(&t.to_kind(var.kind()).to_device(var.device()));
            }
        }
    });
    Ok(())
}
