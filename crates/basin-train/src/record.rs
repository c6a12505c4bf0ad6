//! Run records: one JSON file per run, rewritten atomically after every epoch, so that a crash
//! leaves the last complete record, never a half-written one.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::TrainError;

/// Metrics of one epoch (training loss, validation metrics, …) and its cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// Epoch index, from 0.
    pub epoch: usize,
    /// Learning rate at the epoch's first step.
    pub lr: f64,
    /// Named metrics, e.g. `train_loss`, `val_macro_f1`.
    pub metrics: BTreeMap<String, f64>,
    /// Wall time of the epoch in seconds (excluded from reproducibility comparisons).
    pub seconds: f64,
    /// Where the training part of the epoch's time went (absent in records written before it).
    #[serde(default, skip_serializing_if = "Phases::is_empty")]
    pub phases: Phases,
}

/// An epoch's training time split by phase, in seconds. `data` is what the learner reports as
/// batch preparation (the rest of its step is `forward`); on CUDA each boundary synchronises
/// the device, so that kernels count where they run. Validation is `evaluation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Building batches (gathering graphs, padding, encodings) and moving them to the device.
    pub data: f64,
    /// The forward pass and the loss.
    pub forward: f64,
    /// `backward` (and [`crate::runner::Learner::after_backward`]).
    pub backward: f64,
    /// Gradient clipping and the optimiser step.
    pub optimiser: f64,
    /// Data-parallel runs: reducing the loss and all-reducing the gradients across ranks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub communication: f64,
    /// Validation (and test curves) after the epoch.
    pub evaluation: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Phases {
    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Where the run is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Still going (or crashed: resume picks it up).
    Running,
    /// Completed.
    Finished,
    /// Stopped by an error.
    Failed {
        /// The error.
        error: String,
    },
}

/// Everything needed to know what a run did and to redo it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Name of the run (protocol, dataset, fold, …).
    pub name: String,
    /// The full configuration (model, optimiser, protocol, switches).
    pub config: serde_json::Value,
    /// The model's own configuration, as its learner reports it
    /// ([`crate::runner::Learner::config`]); null where the learner reports none (and in
    /// records written before it). A run resumes only with the same model.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub model: serde_json::Value,
    /// The seed everything was derived from.
    pub seed: u64,
    /// SHA-256 of each split's sorted indices (`train`, `val`, `test`, …).
    pub split_hashes: BTreeMap<String, String>,
    /// One entry per finished epoch.
    pub epochs: Vec<EpochRecord>,
    /// The run's result (e.g. the test metrics at the selected epoch).
    pub summary: BTreeMap<String, f64>,
    /// The selected epoch, if the protocol selects one.
    pub selected_epoch: Option<usize>,
    /// Device description.
    pub device: String,
    /// `git describe`-style revision of the code (`unknown` outside a git checkout).
    pub git_revision: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall time so far in seconds, summed over resumed sessions.
    pub wall_seconds: f64,
    /// Status.
    pub status: RunStatus,
}

impl RunRecord {
    /// A new record for a run starting now.
    pub fn new(
        name: impl Into<String>,
        config: serde_json::Value,
        seed: u64,
        device: String,
    ) -> Self {
        Self {
            name: name.into(),
            config,
            model: serde_json::Value::Null,
            seed,
            split_hashes: BTreeMap::new(),
            epochs: Vec::new(),
            summary: BTreeMap::new(),
            selected_epoch: None,
            device,
            git_revision: git_revision(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            wall_seconds: 0.0,
            status: RunStatus::Running,
        }
    }

    /// Writes the record as pretty JSON, atomically.
    ///
    /// The per-epoch metrics also go beside it as CSV (`<stem>.csv`: epoch, lr, seconds, then
    /// one column per metric), ready for pandas or a spreadsheet.
    pub fn write(&self, path: &Path) -> Result<(), TrainError> {
        let json = serde_json::to_string_pretty(self)
            .map_err(|e| TrainError::State(format!("cannot serialise the run record: {e}")))?;
        basin_core::fsio::write_atomic(path, json.as_bytes())?;
        basin_core::fsio::write_atomic(&path.with_extension("csv"), self.epochs_csv().as_bytes())?;
        Ok(())
    }

    /// The per-epoch metrics as CSV (missing values empty).
    pub fn epochs_csv(&self) -> String {
        let mut keys: Vec<&String> = self.epochs.iter().flat_map(|e| e.metrics.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut csv = String::from("epoch,lr,seconds");
        for k in &keys {
            csv.push(',');
            csv.push_str(k);
        }
        csv.push('\n');
        for e in &self.epochs {
            csv.push_str(&format!("{},{},{}", e.epoch, e.lr, e.seconds));
            for k in &keys {
                csv.push(',');
                if let Some(v) = e.metrics.get(*k) {
                    csv.push_str(&v.to_string());
                }
            }
            csv.push('\n');
        }
        csv
    }

    /// Reads a record written by [`RunRecord::write`].
    pub fn read(path: &Path) -> Result<Self, TrainError> {
        let text = std::fs::read_to_string(path).map_err(|e| TrainError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        serde_json::from_str(&text).map_err(|e| {
            TrainError::State(format!(
                "{}: line {}, column {}: {e}",
                path.display(),
                e.line(),
                e.column()
            ))
        })
    }

    /// The record without its timings (epoch seconds, wall time, start time), for checking that
    /// two runs computed the same thing.
    pub fn without_timings(&self) -> Self {
        let mut r = self.clone();
        r.wall_seconds = 0.0;
        r.started_unix = 0;
        for e in &mut r.epochs {
            e.seconds = 0.0;
            e.phases = Phases::default();
        }
        r
    }
}

/// SHA-256 (hex) of a split: the sorted indices as little-endian u64.
pub fn split_hash(indices: &[usize]) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    let mut h = Sha256::new();
    for i in sorted {
        h.update((i as u64).to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The revision records carry, when the program knows the one it was built from.
static BUILD_REVISION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Makes [`git_revision`] the revision the program was built from (the `basin` binary passes
/// its own, so that a copy run outside the repository still names it). The first call wins.
pub fn set_build_revision(revision: &str) {
    let _ = BUILD_REVISION.set(revision.to_owned());
}

/// The git revision (`<hash>` or `<hash>-dirty`): the one set by [`set_build_revision`], else
/// the working directory's repository's, else `unknown`.
pub fn git_revision() -> String {
    if let Some(r) = BUILD_REVISION.get() {
        return r.clone();
    }
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match run(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{hash}-dirty") } else { hash }
        }
        None => "unknown".into(),
    }
}
