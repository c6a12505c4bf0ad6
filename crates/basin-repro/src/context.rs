//! Everything a reproduction runs with: the data, the output, the device, the preset and its
//! overrides, the shard, and when the command started.

use std::path::{Path, PathBuf};
use std::time::Instant;

use basin_train::context::RunContext;
use tch::Device;

use crate::preset::{Overrides, Preset};

/// Everything a reproduction runs with: the run context of its runs (the data directory,
/// the output directory, the device, the shard, progress) and what a table adds to it.
#[derive(Clone, Debug)]
pub struct Context {
    /// Where the runs read and write, and on what; its `out` is the table's folder.
    pub run: RunContext,
    /// How much to run.
    pub preset: Preset,
    /// Flags that change the preset.
    pub overrides: Overrides,
    /// Why this preset runs (`chosen for this machine: no CUDA device`, `--cpu given`), printed
    /// first and written into the report.
    pub preset_reason: String,
    /// When the table's command started (before any `--jobs` shard), for the report's footer.
    pub command_started: Instant,
    /// When this pass of the table started.
    pub pass_started: Instant,
}

impl Context {
    /// A context writing to `out` with the preset's defaults: every run, progress shown.
    pub fn new(data_dir: PathBuf, out: PathBuf, device: Device, preset: Preset) -> Self {
        Self {
            run: RunContext::new("")
                .with_out(out)
                .with_data_dir(data_dir)
                .with_device(device),
            preset,
            overrides: Overrides::default(),
            preset_reason: format!("{} given", preset.flag()),
            command_started: Instant::now(),
            pass_started: Instant::now(),
        }
    }

    /// Where the report, run records and pictures go.
    pub fn out(&self) -> &Path {
        self.run.out.as_deref().unwrap_or(Path::new("."))
    }

    /// Where datasets are read from.
    pub fn data_dir(&self) -> &Path {
        self.run.data_dir.as_deref().unwrap_or(Path::new("."))
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.run.device
    }

    /// The same context writing to `out`.
    pub fn writing_to(&self, out: PathBuf) -> Self {
        Self {
            run: self.run.clone().with_out(out),
            ..self.clone()
        }
    }

    /// The device as the reports name it.
    pub fn device_name(&self) -> String {
        self.run.device_label.clone()
    }

    /// The context of a protocol's runs named `name`, writing under `dir` (the device, the
    /// shard and progress are this one's).
    pub fn runs(&self, name: impl Into<String>, dir: impl Into<PathBuf>) -> RunContext {
        self.run.clone().named(name).with_out(dir)
    }

    /// Whether this process holds every run, and so writes reports and plots.
    pub fn reports(&self) -> bool {
        self.run.reports()
    }
}
