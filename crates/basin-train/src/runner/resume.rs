//! Checkpoints after every epoch, exact resume of the same run, damaged checkpoints, and the
//! two ways of reading a finished run's weights back ([`warm_start`], [`load_best`]).

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;
use tch::{Tensor, nn::VarStore};

use super::{Learner, Runner, Validation};
use crate::TrainError;
use crate::ema::Ema;
use crate::optim::AdamW;
use crate::record::RunRecord;

pub(super) fn named(prefix: &str, vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (format!("{prefix}{n}"), t))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Copies every variable of `vs` found in `from` under `prefix` with the same shape; returns
/// the names absent from `from` and those present with another shape.
fn copy_matching(
    vs: &VarStore,
    from: &HashMap<String, Tensor>,
    prefix: &str,
) -> (Vec<String>, Vec<String>) {
    let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut absent, mut misshaped) = (Vec::new(), Vec::new());
    tch::no_grad(|| {
        for (name, var) in &vars {
            match from.get(&format!("{prefix}{name}")) {
                Some(t) if t.size() == var.size() => {
                    var.shallow_clone()
                        .copy_(&t.to_kind(var.kind()).to_device(var.device()));
                }
                Some(_) => misshaped.push(format!("{prefix}{name}")),
                None => absent.push(format!("{prefix}{name}")),
            }
        }
    });
    (absent, misshaped)
}

/// [`copy_matching`] where every variable must be there.
pub(super) fn copy_into(
    vs: &VarStore,
    from: &HashMap<String, Tensor>,
    prefix: &str,
) -> Result<(), TrainError> {
    let (mut missing, misshaped) = copy_matching(vs, from, prefix);
    missing.extend(misshaped);
    TrainError::restored(&missing, "the weights")
}

impl Runner {
    pub(super) fn checkpoint<L: Learner>(
        &self,
        learner: &L,
        opt: &AdamW,
        ema: Option<&Ema>,
        record: &RunRecord,
        best: Option<&(Validation, Vec<(String, Tensor)>)>,
    ) -> Result<(), TrainError> {
        let (Some(ckpt), Some(rec)) = (
            self.path("checkpoint.safetensors"),
            self.path("record.json"),
        ) else {
            return Ok(());
        };
        let mut tensors = named("model.", learner.vars());
        tensors.extend(opt.state());
        if let Some(e) = ema {
            tensors.extend(e.state());
        }
        let mut meta = HashMap::new();
        meta.insert("record".to_owned(), to_json(record)?);
        if let Some((v, weights)) = best {
            tensors.extend(
                weights
                    .iter()
                    .map(|(n, t)| (format!("best.{n}"), t.shallow_clone())),
            );
            meta.insert("best".to_owned(), to_json(v)?);
        }
        basin_core::checkpoint::write_tensors(&ckpt, &tensors, Some(meta))?;
        record.write(&rec)
    }

    /// Loads `dir/checkpoint.safetensors` if it belongs to this run.
    #[allow(clippy::type_complexity)]
    pub(super) fn resume<L: Learner>(
        &self,
        learner: &mut L,
        opt: &mut AdamW,
        ema: Option<&mut Ema>,
        fresh: &RunRecord,
    ) -> Result<Option<(RunRecord, Option<(Validation, Vec<(String, Tensor)>)>)>, TrainError> {
        // Every rank reads rank 0's checkpoint.
        let Some(ckpt) = self.dir.as_ref().map(|d| d.join("checkpoint.safetensors")) else {
            return Ok(None);
        };
        if !ckpt.exists() {
            return Ok(None);
        }
        // What cannot be read is damage, not another run: the run is retrained under
        // `restart_damaged` (nothing has been loaded into the learner yet), and refused with the
        // way on otherwise.
        let read = || -> Result<_, TrainError> {
            let (tensors, meta) = basin_core::checkpoint::read_file(&ckpt)?;
            let entry = |key: &str| -> Result<String, TrainError> {
                meta.get(key).cloned().ok_or_else(|| {
                    TrainError::State(format!("no `{key}` in the checkpoint metadata"))
                })
            };
            let record: RunRecord = serde_json::from_str(&entry("record")?)
                .map_err(|e| TrainError::State(format!("bad record: {e}")))?;
            let best: Option<Validation> = match meta.get("best") {
                Some(b) => Some(
                    serde_json::from_str(b)
                        .map_err(|e| TrainError::State(format!("bad best-epoch entry: {e}")))?,
                ),
                None => None,
            };
            Ok((tensors, record, best))
        };
        let (tensors, record, best_validation) = match read() {
            Ok(read) => read,
            Err(e) => return self.damaged(&ckpt, e),
        };
        let there = as_identity(&record.config, &fresh.config);
        if there != fresh.config
            || record.seed != fresh.seed
            || record.split_hashes != fresh.split_hashes
        {
            let mut what = json_differences(&there, &fresh.config, "config");
            if record.seed != fresh.seed {
                what.push(format!("seed: {} there, {} here", record.seed, fresh.seed));
            }
            if record.split_hashes != fresh.split_hashes {
                what.push("the splits".into());
            }
            return Err(TrainError::State(format!(
                "{} holds another run (different config, seed or splits: {}); remove it or choose another directory",
                ckpt.display(),
                what.join("; ")
            )));
        }
        // A record without a model (written before models were recorded, or by a learner that
        // reports none) is taken on trust.
        let recorded = learner
            .config()
            .map_or_else(|| record.model.clone(), |c| (c.read)(&record.model));
        if !recorded.is_null() && !fresh.model.is_null() && recorded != fresh.model {
            return Err(TrainError::State(format!(
                "{} holds a run of another model (its `model` in record.json differs from this one's: {}); remove it or choose another directory",
                ckpt.display(),
                json_differences(&recorded, &fresh.model, "model").join("; ")
            )));
        }
        let mut record = record;
        record.model = fresh.model.clone();
        let map: HashMap<String, Tensor> = tensors.into_iter().collect();
        copy_into(learner.vars(), &map, "model.")?;
        opt.load_state(&map)?;
        if let Some(e) = ema {
            e.load_state(&map)?;
        }
        let best = match best_validation {
            Some(v) => {
                let weights = named("", learner.vars())
                    .into_iter()
                    .map(|(n, _)| {
                        let t = map.get(&format!("best.{n}")).map(|t| t.shallow_clone());
                        t.map(|t| (n.clone(), t))
                            .ok_or_else(|| TrainError::State(format!("checkpoint lacks best.{n}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Some((v, weights))
            }
            None => None,
        };
        tracing::info!("resuming {} at epoch {}", self.name, record.epochs.len());
        Ok(Some((record, best)))
    }

    /// A checkpoint that cannot be read: under [`Runner::restart_damaged`] the run's files are
    /// removed and it trains from the start (a line says so); otherwise the error names the
    /// file and the way on.
    #[allow(clippy::type_complexity)]
    fn damaged(
        &self,
        checkpoint: &Path,
        e: TrainError,
    ) -> Result<Option<(RunRecord, Option<(Validation, Vec<(String, Tensor)>)>)>, TrainError> {
        if !self.restart_damaged {
            return Err(TrainError::Damaged {
                path: checkpoint.to_path_buf(),
                message: e.to_string(),
            });
        }
        tracing::warn!(
            "{}: {e}; retraining {} from its first epoch (--restart-damaged)",
            checkpoint.display(),
            self.name
        );
        if basin_dist::is_writer()
            && let Some(dir) = &self.dir
        {
            for file in ["checkpoint.safetensors", "record.json", "record.csv"] {
                let path = dir.join(file);
                if let Err(e) = std::fs::remove_file(&path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(TrainError::Io { path, source: e });
                }
            }
        }
        Ok(None)
    }
}

/// A recorded run's config as `here`, this run's, identifies runs: cross-validation folds leave
/// out the number of repeats (it says how many runs there are, not what one is), and records
/// written before they did still carry it at the top level, which is then dropped. Where
/// `here` has `repeats` (the et-paper procedure, whose scores depend on it) nothing is.
fn as_identity(there: &serde_json::Value, here: &serde_json::Value) -> serde_json::Value {
    let mut there = there.clone();
    let is_cv = here.get("folds").is_some_and(serde_json::Value::is_object);
    if is_cv
        && here.get("repeats").is_none()
        && let Some(fields) = there.as_object_mut()
    {
        fields.remove("repeats");
    }
    there
}

/// Where two recorded JSON values differ, as `path: A there, B here` (the first five; a field
/// one side lacks reads `absent`): what a refused resume names, so that a changed setting, or a
/// field added since the run, is found without diffing the files by hand.
fn json_differences(
    there: &serde_json::Value,
    here: &serde_json::Value,
    path: &str,
) -> Vec<String> {
    fn walk(
        a: Option<&serde_json::Value>,
        b: Option<&serde_json::Value>,
        path: &str,
        out: &mut Vec<String>,
    ) {
        use serde_json::Value;
        if out.len() >= 5 || a == b {
            return;
        }
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    walk(x.get(k), y.get(k), &format!("{path}.{k}"), out);
                }
            }
            _ => {
                let show = |v: Option<&Value>| v.map_or("absent".to_owned(), Value::to_string);
                out.push(format!("{path}: {} there, {} here", show(a), show(b)));
            }
        }
    }
    let mut out = Vec::new();
    walk(Some(there), Some(here), path, &mut out);
    out
}

fn to_json<T: Serialize>(value: &T) -> Result<String, TrainError> {
    serde_json::to_string(value).map_err(|e| TrainError::State(format!("cannot serialise: {e}")))
}

/// Warm start: copies the selected epoch's weights of the run at `checkpoint` into every
/// variable of `vars` that it holds under the same name and shape (SFi-Former+ starts from a
/// trained DFi-Former). Returns the names left as initialised; a name held with another shape
/// is an error.
pub fn warm_start(checkpoint: &Path, vars: &VarStore) -> Result<Vec<String>, TrainError> {
    let (tensors, meta) = basin_core::checkpoint::read_file(checkpoint)?;
    if !meta.contains_key("best") {
        return Err(TrainError::State(format!(
            "{}: no selected epoch to start from",
            checkpoint.display()
        )));
    }
    let map: HashMap<String, Tensor> = tensors.into_iter().collect();
    let (absent, misshaped) = copy_matching(vars, &map, "best.");
    if !misshaped.is_empty() {
        return Err(TrainError::State(format!(
            "{}: another shape there for {}",
            checkpoint.display(),
            misshaped.join(", ")
        )));
    }
    Ok(absent
        .into_iter()
        .map(|n| n.strip_prefix("best.").unwrap_or(&n).to_owned())
        .collect())
}

/// Loads the selected epoch's weights of a finished or interrupted run from its
/// `checkpoint.safetensors` into `vars`, and returns that epoch's validation (with what the
/// test step needs, e.g. the threshold). This is how a trained run is evaluated again.
pub fn load_best(checkpoint: &Path, vars: &VarStore) -> Result<Validation, TrainError> {
    let (tensors, meta) = basin_core::checkpoint::read_file(checkpoint)?;
    let best = meta.get("best").ok_or_else(|| {
        TrainError::State(format!(
            "{}: no selected epoch in the checkpoint (the run stopped before its first epoch ended)",
            checkpoint.display()
        ))
    })?;
    let v: Validation = serde_json::from_str(best).map_err(|e| {
        TrainError::State(format!(
            "{}: bad best-epoch entry: {e}",
            checkpoint.display()
        ))
    })?;
    let map: HashMap<String, Tensor> = tensors.into_iter().collect();
    copy_into(vars, &map, "best.")
        .map_err(|e| TrainError::State(format!("{}: {e}", checkpoint.display())))?;
    Ok(v)
}
