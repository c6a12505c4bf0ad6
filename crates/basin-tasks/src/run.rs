//! One run file of any [`Task`], trained into a directory ([`train`]) and scored again from
//! it ([`eval`]): the loop `basin train` and `basin eval` run, written once for every task.
//!
//! `train` writes `run.toml` (the resolved file), one directory per planned run with its
//! `record.json` and `checkpoint.safetensors` (the selected epoch's weights included),
//! `report.md` / `report.json` and `energy.png` (the first run's selected model's energy per
//! step). The data are loaded and prepared once, the splits come from the protocol, each
//! run's model is built once, and an interrupted run resumes where it stopped. `eval`
//! rebuilds every split from `run.toml`, checks it against the hash in the run's record,
//! loads the selected weights and scores the held-out part again.

use std::collections::BTreeMap;
use std::path::Path;

use basin_train::context::RunContext;
use basin_train::plot::{Series, line_panels};
use basin_train::protocol::{PlannedRun, Protocol, ProtocolReport};
use basin_train::record::{RunRecord, split_hash};
use basin_train::runner::{Learner, Validation, load_best};
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::task::Task;
use crate::{Result, TaskError};

/// What a train or eval call produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The task's name (`task = "…"`).
    pub task: String,
    /// The run file, as it ran.
    pub spec: serde_json::Value,
    /// Per run: its directory and held-out metrics.
    pub runs: Vec<(String, BTreeMap<String, f64>)>,
    /// Each block's (or relation's, or term's) energy per step, selected model of the first run.
    pub energy: Vec<(String, Vec<f64>)>,
    /// Runs `eval` could not score, each with why (none after `train`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unscored: Vec<(String, String)>,
    /// What the report says about the data as loaded ([`Task::data_notes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_notes: Vec<String>,
}

/// `run` as its run file's TOML, `task = "…"` first.
pub fn to_toml<T: Task>(run: &T) -> Result<String> {
    let body = toml::to_string(run)
        .map_err(|e| TaskError::config("run", format!("cannot serialise: {e}")))?;
    Ok(format!("task = \"{}\"\n{body}", T::NAME))
}

/// A protocol error against the dataset (folds against its smallest class, …), named as the
/// run file's `protocol` section.
fn in_run_file(e: basin_train::TrainError) -> TaskError {
    TaskError::config("protocol", e.to_string())
}

/// Trains `run` under `ctx.out`, resuming an interrupted run there, on `ctx.device` with the
/// datasets of `ctx.data_dir`. `resumes(old)` says whether a run file found in the directory
/// is this one (a graph run may grow by repeats).
pub fn train<T: Task>(
    run: &T,
    ctx: &RunContext,
    resumes: impl Fn(&str) -> bool,
) -> Result<RunOutcome> {
    let Some(out) = ctx.out.as_ref() else {
        return Err(TaskError::invalid(
            "out",
            "a run file trains into a directory: give the context one (RunContext::with_out)",
        ));
    };
    let file = out.join("run.toml");
    let text = to_toml(run)?;
    basin_core::fsio::remove_stale_temporaries(out);
    if let Ok(old) = std::fs::read_to_string(&file)
        && old != text
        && !resumes(&old)
    {
        return Err(TaskError::config(
            file.display().to_string(),
            "this directory holds another run (a graph run may change its `protocol.repeats` alone); choose another --out or remove it",
        ));
    }
    let data = run.load(ctx.data_dir.as_deref(), ctx.device)?;
    let targets = run.targets(&data);
    run.protocol().plan(targets).map_err(in_run_file)?;
    // The run file is written once the data is read and the protocol fits it: a refused run
    // leaves nothing behind. In a data-parallel run rank 0 alone writes (records too).
    let writer = basin_dist::is_writer();
    if writer {
        basin_core::fsio::write_atomic(&file, text.as_bytes())?;
    }
    let ctx = ctx.clone().named(run.title(&data));
    let device = ctx.device;
    let mut energy = Vec::new();
    let report = run.protocol().run(
        targets,
        |r: &PlannedRun| Ok(run.learner(&data, r, device)?),
        |r, learner| {
            if energy.is_empty() && writer {
                energy = run.figures(&data, learner, r, &out.join(&r.dir))?;
            }
            Ok(())
        },
        &ctx,
    )?;
    let outcome = RunOutcome {
        task: T::NAME.to_owned(),
        spec: json(run)?,
        runs: report
            .runs
            .iter()
            .map(|r| {
                let dir = r.name.split_once('/').map_or(r.name.as_str(), |(_, d)| d);
                // What `eval` measures again (the selection's validation numbers stay in the
                // report).
                let test = r
                    .summary
                    .iter()
                    .filter(|(k, _)| !k.starts_with("selected_"))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                (dir.to_owned(), test)
            })
            .collect(),
        energy,
        unscored: Vec::new(),
        data_notes: run.data_notes(&data),
    };
    if writer && ctx.reports() {
        write_outputs(run, out, &outcome, Some(&report), "report")?;
    }
    Ok(outcome)
}

/// Scores the held-out part of every trained run under `out` again from its saved weights and
/// writes `eval.md`, `eval.json` and `energy.png` there. A run whose checkpoint or record cannot
/// be read is listed with why and the others are scored; none scored is an error.
pub fn eval<T: Task>(
    run: &T,
    out: &Path,
    data_dir: Option<&Path>,
    device: Device,
) -> Result<RunOutcome> {
    let data = run.load(data_dir, device)?;
    let plan = run
        .protocol()
        .plan(run.targets(&data))
        .map_err(in_run_file)?;
    let trained: Vec<PlannedRun> = plan
        .into_iter()
        .filter(|r| out.join(&r.dir).join("checkpoint.safetensors").exists())
        .collect();
    if trained.is_empty() {
        return Err(TaskError::config(
            out.display().to_string(),
            "no run with a checkpoint here (train first: basin train)",
        ));
    }
    let (mut runs, mut energy, mut unscored) = (Vec::new(), Vec::new(), Vec::new());
    for planned in trained {
        let mut learner = run.learner(&data, &planned, device)?;
        let selected = match restore(out, &planned, &learner) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("{}: not scored: {e}", planned.dir);
                unscored.push((planned.dir.clone(), e.to_string()));
                continue;
            }
        };
        let metrics = run.rescore(&data, &mut learner, &planned, &selected)?;
        if energy.is_empty() {
            energy = run.figures(&data, &learner, &planned, &out.join(&planned.dir))?;
        }
        runs.push((planned.dir, metrics));
    }
    if runs.is_empty() {
        let why: Vec<String> = unscored.iter().map(|(d, e)| format!("{d}: {e}")).collect();
        return Err(TaskError::config(
            out.display().to_string(),
            format!(
                "no run could be scored ({}); `basin train … --restart-damaged` retrains the damaged runs",
                why.join("; ")
            ),
        ));
    }
    let outcome = RunOutcome {
        task: T::NAME.to_owned(),
        spec: json(run)?,
        runs,
        energy,
        unscored,
        data_notes: run.data_notes(&data),
    };
    write_outputs(run, out, &outcome, None, "eval")?;
    Ok(outcome)
}

fn json(value: &impl Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|e| TaskError::config("run", format!("cannot serialise: {e}")))
}

/// Loads a run's selected weights, after checking that its record was made on the same test
/// items.
fn restore<L: Learner>(out: &Path, run: &PlannedRun, learner: &L) -> Result<Validation> {
    let run_dir = out.join(&run.dir);
    let record = RunRecord::read(&run_dir.join("record.json"))?;
    let recorded = record.split_hashes.get("test").cloned().unwrap_or_default();
    if recorded != split_hash(&run.test()) {
        return Err(TaskError::config(
            run_dir.join("record.json").display().to_string(),
            "the test split rebuilt from run.toml differs from the one this run was trained with (was the dataset changed?)",
        ));
    }
    Ok(load_best(
        &run_dir.join("checkpoint.safetensors"),
        learner.vars(),
    )?)
}

/// How training at the attractor went, over every run and epoch: the training forwards, all
/// settling forwards (validation ones included) and the adjoint solves that converged (the
/// records' `settle_train_forwards` and `settle_train_unconverged`, `settle_forwards` and
/// `settle_unconverged`, `adjoint_solves` and `adjoint_unconverged`); `None` where no forward
/// settled.
fn attractor_line(report: &ProtocolReport) -> Option<String> {
    let sum = |key: &str| -> f64 {
        let epochs = report.runs.iter().flat_map(|r| &r.epochs);
        epochs.filter_map(|e| e.metrics.get(key)).sum()
    };
    let converged = |all: f64, failed: f64, what: &str| {
        let done = all - failed;
        format!("{done:.0} of {all:.0} {what} ({:.1} %)", 100.0 * done / all)
    };
    let forwards = sum("settle_forwards");
    if forwards == 0.0 {
        return None;
    }
    let all = converged(forwards, sum("settle_unconverged"), "settling forwards");
    let train = sum("settle_train_forwards");
    let counts = if train > 0.0 {
        let train = converged(train, sum("settle_train_unconverged"), "training forwards");
        format!("{train} converged ({all} with the validation ones)")
    } else {
        format!("{all} converged")
    };
    let mut line = format!("Training at the attractor, over every run and epoch: {counts}");
    let solves = sum("adjoint_solves");
    if solves > 0.0 {
        let adjoint = converged(solves, sum("adjoint_unconverged"), "adjoint solves");
        line.push_str(&format!(", and {adjoint}"));
    }
    line.push_str(" (per epoch: each run's `record.csv`).\n\n");
    Some(line)
}

/// `energy.png`, `<stem>.md` and `<stem>.json` under `out`.
fn write_outputs<T: Task>(
    run: &T,
    out: &Path,
    outcome: &RunOutcome,
    report: Option<&ProtocolReport>,
    stem: &str,
) -> Result<()> {
    let title = format!("{} on {}", T::NAME, run.data_name());
    let series: Vec<Series> = outcome
        .energy
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(n, v)| Series::new(n.clone(), v.clone()))
        .collect();
    if !series.is_empty() {
        let path = out.join("energy.png");
        line_panels(
            &path,
            &format!("{title}: energy per step (selected model, first run)"),
            "step",
            &series,
        )
        .map_err(|e| TaskError::config(path.display().to_string(), e.to_string()))?;
    }
    let mut md = format!("# {title} — {stem}\n\n");
    if let Some(model) = run.describe() {
        md.push_str(&format!("Model: {model} (every setting: `run.toml`).\n\n"));
    }
    for note in &outcome.data_notes {
        md.push_str(&format!("Data: {note}.\n\n"));
    }
    match report {
        Some(r) => {
            md.push_str(&r.to_markdown());
            md.push('\n');
            md.push_str(&attractor_line(r).unwrap_or_default());
        }
        None => md.push_str("Each run's selected weights, re-scored on the held-out split rebuilt from `run.toml` (split hashes checked against the run records).\n\n"),
    }
    md.push_str("| run | metrics |\n|---|---|\n");
    for (dir, m) in &outcome.runs {
        let cells: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v:.4}")).collect();
        md.push_str(&format!("| {dir} | {} |\n", cells.join(", ")));
    }
    for (dir, why) in &outcome.unscored {
        md.push_str(&format!("| {dir} | not scored: {why} |\n"));
    }
    if !series.is_empty() {
        md.push_str("\nEnergy per step: `energy.png`.\n");
    }
    let json = serde_json::json!({ "outcome": outcome, "report": report });
    basin_core::fsio::write_atomic(&out.join(format!("{stem}.md")), md.as_bytes())?;
    let text = serde_json::to_string_pretty(&json)
        .map_err(|e| TaskError::config("outcome", format!("cannot serialise: {e}")))?;
    basin_core::fsio::write_atomic(&out.join(format!("{stem}.json")), text.as_bytes())?;
    Ok(())
}
