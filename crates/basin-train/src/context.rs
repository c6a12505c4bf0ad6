//! Where and how runs train: [`RunContext`] names the evaluation, its output directory, the
//! device, the data directory, the process's [`Shard`] of the runs and whether progress is
//! shown. The one context of training: `basin train` builds one, a paper table wraps one. Every protocol takes one, and builds each run's [`Runner`] from it, so no
//! setting of a command lives in process-wide state.

use std::path::{Path, PathBuf};

use crate::TrainError;
use crate::plan::PlannedRun;
use crate::runner::{Runner, TrainConfig};

/// One of `count` processes that share a command's runs (`basin train|reproduce … --shard
/// index/count`): run `i` of each protocol's plan (folds, seeds) is trained by the process
/// with `index = i mod count`, so the processes fill one output directory without touching
/// each other's runs, and each model's folds line up across shards for the paired comparisons.
/// Reports are left to a last unsharded run of the same command, which reads the finished runs
/// instead of training them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This process's shard, `0..count`.
    pub index: usize,
    /// How many processes share the runs.
    pub count: usize,
}

impl Shard {
    /// Whether run `i` of a plan belongs to this shard.
    pub fn owns(&self, i: usize) -> bool {
        i % self.count == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = TrainError;

    /// `I/N` with `0 ≤ I < N`.
    fn from_str(s: &str) -> Result<Self, TrainError> {
        let bad = |m: &str| TrainError::Flag {
            flag: "--shard".into(),
            message: format!("`{s}`: {m}"),
        };
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("expected INDEX/COUNT, e.g. 0/2"))?;
        let parse = |v: &str| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| bad("INDEX and COUNT must be whole numbers"))
        };
        let (index, count) = (parse(i)?, parse(n)?);
        if count == 0 || index >= count {
            return Err(bad(
                "INDEX must be below COUNT (shards 0/2 and 1/2 split the runs in two)",
            ));
        }
        Ok(Self { index, count })
    }
}

/// What a protocol's runs are trained under.
#[derive(Clone, Debug, PartialEq)]
pub struct RunContext {
    /// What is evaluated (dataset, model), the prefix of every run's name.
    pub name: String,
    /// Where each run writes its record and checkpoints (`out/<run dir>`); without one nothing
    /// is written and a crash loses the runs.
    pub out: Option<PathBuf>,
    /// The device the runs train on.
    pub device: tch::Device,
    /// The device as records name it (`basin_core::device::describe`).
    pub device_label: String,
    /// Where datasets named by their registered name are read from (`None`: `BASIN_DATA_DIR`,
    /// else the user cache).
    pub data_dir: Option<PathBuf>,
    /// This process's share of the runs (`None`: all of them).
    pub shard: Option<Shard>,
    /// Show progress bars (hidden anyway when stderr is not a terminal).
    pub progress: bool,
    /// Retrain a run whose checkpoint cannot be read rather than stop (`--restart-damaged`).
    pub restart_damaged: bool,
}

impl RunContext {
    /// A context named `name` that writes nothing, on the CPU's label, unsharded, with progress.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            out: None,
            device: tch::Device::Cpu,
            device_label: "cpu".into(),
            data_dir: None,
            shard: None,
            progress: true,
            restart_damaged: false,
        }
    }

    /// The same context retraining damaged runs (or not).
    pub fn with_restart_damaged(mut self, restart: bool) -> Self {
        self.restart_damaged = restart;
        self
    }

    /// The same context writing under `out`.
    pub fn with_out(mut self, out: impl Into<PathBuf>) -> Self {
        self.out = Some(out.into());
        self
    }

    /// The same context training on `device` (and naming it so in records).
    pub fn with_device(mut self, device: tch::Device) -> Self {
        self.device = device;
        self.device_label = basin_core::device::describe(device);
        self
    }

    /// The same context reading registered datasets from `dir`.
    pub fn with_data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// The same context under another name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The same context with progress shown or not.
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress;
        self
    }

    /// The same context training only `shard`'s runs.
    pub fn with_shard(mut self, shard: Option<Shard>) -> Self {
        self.shard = shard;
        self
    }

    /// A context for a part of this one: named `name/part`, writing under `out/part`.
    pub fn part(&self, part: &str) -> Self {
        Self {
            name: format!("{}/{part}", self.name),
            out: self.out.as_ref().map(|o| o.join(part)),
            ..self.clone()
        }
    }

    /// The same context with its output directory replaced (`None`: nothing written).
    pub fn writing_to(&self, out: Option<&Path>) -> Self {
        Self {
            out: out.map(Path::to_path_buf),
            ..self.clone()
        }
    }

    /// Whether this process trains run `i` of a plan (always, unless sharded).
    pub fn owns(&self, i: usize) -> bool {
        self.shard.is_none_or(|s| s.owns(i))
    }

    /// The runs of `plan` this process trains, in order, each announced in the log as
    /// `<name>: run i/total (<dir>)` when it starts.
    pub fn owned_runs(&self, plan: Vec<PlannedRun>) -> impl Iterator<Item = PlannedRun> + '_ {
        let total = plan.len();
        plan.into_iter()
            .enumerate()
            .filter(|(i, _)| self.owns(*i))
            .map(move |(i, run)| {
                tracing::info!("{}: run {}/{total} ({})", self.name, i + 1, run.dir);
                run
            })
    }

    /// Whether this process holds every run, and so writes reports and plots.
    pub fn reports(&self) -> bool {
        self.shard.is_none()
    }

    /// The runner of `run`: its name `name/<dir>`, its directory `out/<dir>`, its seed, the
    /// training `train` and the identity `config` recorded with it.
    pub fn runner(
        &self,
        run: &PlannedRun,
        train: TrainConfig,
        config: serde_json::Value,
    ) -> Runner {
        Runner {
            name: format!("{}/{}", self.name, run.dir),
            train,
            seed: run.seed,
            dir: self.out.as_ref().map(|o| o.join(&run.dir)),
            device: self.device_label.clone(),
            config,
            progress: self.progress,
            restart_damaged: self.restart_damaged,
        }
    }
}
