//! Run files (`basin train`, `basin eval`): a dispatcher over every task that implements
//! [`Task`] and registers itself ([`register_task!`](crate::register_task)). A run file names the task, the dataset,
//! the model and the protocol:
//!
//! ```toml
//! task = "graph-classification"   # or "node-anomaly", "image-completion", "gps"
//! data = "MUTAG"                  # a name under the data directory, or a path
//! [architecture]                  # the task's model config
//! blocks = 2
//! [architecture.block]            # the energy block: any registered terms and dynamics
//! dim = 32
//! [[architecture.block.terms]]
//! kind = "attention"
//! heads = 4
//! [protocol]                      # the task's protocol
//! repeats = 1
//! ```
//!
//! [`RunSpec`] reads one (`--set` overrides first, [`crate::overrides`]) and trains or re-scores it
//! through [`crate::run`].

use std::any::Any;
use std::path::Path;

use basin_train::protocol::{PlannedRun, Protocol};
use basin_train::runner::Learner;
use serde::Deserialize;
use tch::Device;

use basin_train::context::RunContext;

use crate::overrides::apply_sets;
use crate::run::{self, RunOutcome, to_toml};
use crate::task::Task;
use crate::{Result, TaskError};

/// A run file of one task, behind the dispatcher.
#[doc(hidden)]
pub trait RunFile: std::fmt::Debug + Send + Sync {
    fn task(&self) -> &'static str;
    fn data(&self) -> &str;
    fn validate(&self) -> Result<()>;
    fn to_toml(&self) -> Result<String>;
    fn train(&self, ctx: &RunContext) -> Result<RunOutcome>;
    fn eval(&self, out: &Path, data_dir: Option<&Path>, device: Device) -> Result<RunOutcome>;
    fn open(&self, run: usize, data_dir: Option<&Path>, device: Device) -> Result<OpenRun>;
    fn as_any(&self) -> &dyn Any;
}

/// One planned run of a run file with its learner built, untrained: what a training loop
/// outside `basin train` (the Python package's) drives, step by step, as the runner would.
pub struct OpenRun {
    /// The model, its batches and losses.
    pub learner: Box<dyn Learner + Send>,
    /// The run: its directory name, split and seed.
    pub planned: PlannedRun,
    /// How many runs the protocol plans.
    pub runs: usize,
}

impl std::fmt::Debug for OpenRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenRun")
            .field("run", &self.planned.dir)
            .field("runs", &self.runs)
            .finish()
    }
}

impl<T: Task + Send + Sync + 'static> RunFile for T {
    fn task(&self) -> &'static str {
        T::NAME
    }
    fn data(&self) -> &str {
        self.data_name()
    }
    fn validate(&self) -> Result<()> {
        Task::validate(self)
    }
    fn to_toml(&self) -> Result<String> {
        to_toml(self)
    }
    fn train(&self, ctx: &RunContext) -> Result<RunOutcome> {
        run::train(self, ctx, |old| same_run_but_repeats(old, self))
    }
    fn eval(&self, out: &Path, data_dir: Option<&Path>, device: Device) -> Result<RunOutcome> {
        run::eval(self, out, data_dir, device)
    }
    fn open(&self, run: usize, data_dir: Option<&Path>, device: Device) -> Result<OpenRun> {
        let data = self.load(data_dir, device)?;
        let plan = self.protocol().plan(self.targets(&data))?;
        let runs = plan.len();
        let planned = plan.into_iter().nth(run).ok_or_else(|| {
            TaskError::invalid("run", format!("the protocol plans {runs} runs (0..{runs})"))
        })?;
        let learner = self.learner(&data, &planned, device)?;
        Ok(OpenRun {
            learner: Box::new(learner),
            planned,
            runs,
        })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Whether the run file `old` found in a directory is `new` but for `protocol.repeats`: a
/// cross-validation fold's run leaves that number out of its identity, so the finished folds
/// are read back and only the new repeats train (the run file is rewritten).
fn same_run_but_repeats<T: Task>(old: &str, new: &T) -> bool {
    let Ok(old) = parse_as::<T>(old) else {
        return false;
    };
    let strip = |t: &T| {
        let mut v = serde_json::to_value(t).ok()?;
        v.get_mut("protocol")?.as_object_mut()?.remove("repeats");
        Some(v)
    };
    matches!((strip(&old), strip(new)), (Some(a), Some(b)) if a == b)
}

/// A task the run files know: its name and how its file is read (what [`register_task!`](crate::register_task)
/// submits).
pub struct TaskEntry {
    /// `task = "…"`.
    pub name: &'static str,
    parse: fn(&str) -> std::result::Result<Box<dyn RunFile>, toml::de::Error>,
}

impl TaskEntry {
    /// The registration of `T`.
    pub const fn of<T: Task + Send + Sync + 'static>() -> Self {
        Self {
            name: T::NAME,
            parse: |text| Ok(Box::new(parse_as::<T>(text)?)),
        }
    }
}

inventory::collect!(TaskEntry);

/// Registers a run file's task (a type implementing [`Task`]) so that `task = "<its NAME>"`
/// works in run files. Write it next to the task.
#[macro_export]
macro_rules! register_task {
    ($task:ty) => {
        $crate::inventory::submit! { $crate::run_file::TaskEntry::of::<$task>() }
    };
}

/// Every registered task, sorted by name.
pub fn tasks() -> Vec<&'static TaskEntry> {
    let mut v: Vec<&TaskEntry> = inventory::iter::<TaskEntry>.into_iter().collect();
    v.sort_by_key(|t| t.name);
    v
}

fn parse_as<T: Task>(fields: &str) -> std::result::Result<T, toml::de::Error> {
    toml::from_str(&without_task_line(fields))
}

/// The text with its `task = …` line blanked (its bytes kept, so that lines and columns of
/// errors stay where they were).
fn without_task_line(text: &str) -> String {
    #[derive(Deserialize)]
    struct Named {
        task: toml::Spanned<String>,
    }
    let Ok(named) = toml::from_str::<Named>(text) else {
        return text.to_owned();
    };
    let span = named.task.span();
    let start = text[..span.start].rfind('\n').map_or(0, |i| i + 1);
    let end = text[span.end..]
        .find('\n')
        .map_or(text.len(), |i| span.end + i);
    let blank: String = text[start..end]
        .chars()
        .map(|c| if c == '\t' { c } else { ' ' })
        .collect();
    format!("{}{blank}{}", &text[..start], &text[end..])
}

/// What `basin train` runs: the run file of one task.
#[derive(Debug)]
pub struct RunSpec(Box<dyn RunFile>);

impl RunSpec {
    /// Parses a run file; errors name the file and the field.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| basin_core::CoreError::io(path, e))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Reads a run file with `sets` applied over it (`basin train --set KEY=VALUE`, see
    /// [`apply_sets`]); errors name the file, and the override where one is at fault.
    pub fn read_with(path: &Path, sets: &[String]) -> Result<Self> {
        if sets.is_empty() {
            return Self::read(path);
        }
        let text = std::fs::read_to_string(path).map_err(|e| basin_core::CoreError::io(path, e))?;
        let file = format!("{} (with --set {})", path.display(), sets.join(", --set "));
        Self::parse(&apply_sets(&text, sets, &file)?, &file)
    }

    /// Parses run-file text (`file` names it in errors) and checks the model and protocol.
    /// The task's fields are read from the text itself, so that a wrong type (`k = -3`) names
    /// its line and field.
    pub fn parse(text: &str, file: &str) -> Result<Self> {
        #[derive(Deserialize)]
        struct Named {
            task: String,
        }
        let err =
            |e: toml::de::Error| TaskError::invalid(file, e.to_string().trim_end().to_owned());
        let named: Named = toml::from_str(text).map_err(err)?;
        let tasks = tasks();
        let Some(task) = tasks.iter().find(|t| t.name == named.task) else {
            let known: Vec<String> = tasks.iter().map(|t| format!("`{}`", t.name)).collect();
            return Err(TaskError::invalid(
                format!("{file}: task"),
                format!(
                    "unknown task `{}`; expected one of {}",
                    named.task,
                    known.join(", ")
                ),
            ));
        };
        let parsed = (task.parse)(text).map_err(err)?;
        parsed
            .validate()
            .map_err(|e| TaskError::invalid(file, e.to_string()))?;
        Ok(Self(parsed))
    }

    /// The task's name.
    pub fn task(&self) -> &'static str {
        self.0.task()
    }

    /// `<task> on <data>`.
    pub fn title(&self) -> String {
        format!("{} on {}", self.0.task(), self.0.data())
    }

    /// The run file as `T`, if it is one.
    pub fn get<T: Task + 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    /// The run file as TOML.
    pub fn to_toml(&self) -> Result<String> {
        self.0.to_toml()
    }

    /// Trains as the file says (see `basin_tasks::run::train`).
    pub fn train(&self, ctx: &RunContext) -> Result<RunOutcome> {
        self.0.train(ctx)
    }

    /// Run `run` of the protocol's plan with its learner built and not trained (the data
    /// loaded and prepared as `train` does; the same seed, split and initial weights).
    pub fn open(&self, run: usize, data_dir: Option<&Path>, device: Device) -> Result<OpenRun> {
        self.0.open(run, data_dir, device)
    }

    /// Scores every trained run under `out` again (see `basin_tasks::run::eval`).
    pub fn eval(&self, out: &Path, data_dir: Option<&Path>, device: Device) -> Result<RunOutcome> {
        self.0.eval(out, data_dir, device)
    }
}

/// Trains `spec` into `out` with every run and progress shown.
pub fn train(
    spec: &RunSpec,
    data_dir: Option<&Path>,
    out: &Path,
    device: Device,
) -> Result<RunOutcome> {
    let mut ctx = RunContext::new(spec.title())
        .with_out(out)
        .with_device(device);
    ctx.data_dir = data_dir.map(Path::to_path_buf);
    spec.train(&ctx)
}

/// Reads `out/run.toml` and scores every trained run there again.
pub fn eval(out: &Path, data_dir: Option<&Path>, device: Device) -> Result<RunOutcome> {
    RunSpec::read(&out.join("run.toml"))?.eval(out, data_dir, device)
}
