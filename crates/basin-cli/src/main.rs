//! `basin`: one run of an energy-based attractor transformer per invocation.
//!
//! - `basin energy`: run an energy block's descent on given tokens and write the energy per
//!   step, the final tokens and ∂E/∂g (inspect an energy landscape; compare implementations).
//! - `basin demo`: fit a small ET block and watch it complete masked patterns.
//! - `basin data`: inspect a dataset's statistics, export its Laplacian encodings.
//! - `basin train` / `basin eval`: train a model from a run file; score it again.
//! - `basin reproduce`: a paper table end to end.
//! - `basin compare`: two models' runs on the same folds, paired fold by fold.
//! - `basin select`: a hyperparameter chosen fold by fold among candidates' runs, by validation.

mod compare;
mod data;
mod demo;
mod energy;
mod reproduce;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc serves every allocation of the process: with the `override` feature it replaces
/// `malloc` and `free` themselves, libtorch's included. A training step frees and allocates
/// the same tensors again and again, and glibc's bins (and mimalloc's default of returning freed
/// pages to the OS) make each one slow; `benches/RESULTS.md` ("The allocator") has the
/// measurements.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` of mimalloc.h (the same index since it was `reset_delay`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory in the process for reuse instead of handing it back to the OS after
/// mimalloc's purge delay, unless `MIMALLOC_PURGE_DELAY` says otherwise: the peak resident
/// size stays what glibc's is, and the next step's tensors need no fresh pages.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: stores one of mimalloc's global option values (atomically); touches no memory.
        #[allow(unsafe_code)]
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1)
        };
    }
}

/// basin: energy-based attractor transformers (Energy Transformer, CDAT, SFi-Former, modern
/// Hopfield networks) on libtorch.
///
/// The device is chosen by `--device` or `BASIN_DEVICE` (cpu, cuda, auto; default auto).
#[derive(Parser)]
#[command(name = "basin", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bars or progress lines (warnings and errors only).
    #[arg(long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run an energy block's descent on input tokens and write energies, final tokens and ∂E/∂g.
    Energy(energy::Args),
    /// Fit a small ET block on synthetic patterns, then complete masked ones (energy plot, pictures).
    Demo(demo::Args),
    /// Reproduce a paper table end to end (report.md and report.json beside the paper's numbers).
    Reproduce(reproduce::Args),
    /// Inspect a dataset (statistics as JSON) or export its Laplacian positional encodings.
    Data(data::Args),
    /// Train a model from a run file (records, checkpoints, report); `--example` prints one.
    Train(train::TrainArgs),
    /// Score a trained run's saved weights on its held-out split again (and plot its energy).
    Eval(train::EvalArgs),
    /// Compare two models' runs on the same folds, fold by fold (mean difference ± standard
    /// error, wins / ties / losses).
    Compare(compare::Args),
    /// Choose among candidate configurations fold by fold, by each fold's validation score
    /// (never its test score): the chosen runs, as one model's, for `basin compare`.
    Select(compare::SelectArgs),
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let level = if cli.quiet { "warn" } else { "info" };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    basin_train::runner::set_quiet(cli.quiet);
    if let Some(revision) = option_env!("BASIN_GIT_REVISION") {
        basin_train::record::set_build_revision(revision);
    }
    let result = match cli.command {
        Command::Energy(args) => energy::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::Data(args) => data::run(&args),
        Command::Train(args) => train::train(&args),
        Command::Eval(args) => train::eval(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Select(args) => compare::select(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by `: ` (anyhow's `{:#}`), leaving out a cause whose text
/// the message already ends with: library errors such as `GraphError::Io` put their source in
/// their own message, so `{:#}` would print it twice.
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// The command's arguments without `--jobs N` (or `--jobs=N`).
pub(crate) fn without_jobs(
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        match a.to_str() {
            Some("--jobs") => skip_value = true,
            Some(s) if s.starts_with("--jobs=") => {}
            _ => out.push(a),
        }
    }
    out
}

/// `--shard I/N` (see [`basin_train::runner::Shard`]).
fn parse_shard(s: &str) -> Result<basin_train::runner::Shard, String> {
    s.parse()
        .map_err(|e: basin_train::TrainError| e.to_string())
}

/// A moving average's decay, in [0, 1).
fn parse_decay(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if (0.0..1.0).contains(&d) => Ok(d),
        _ => Err(format!("`{s}`: expected a decay in [0, 1), e.g. 0.99")),
    }
}

/// The device from `--device` (if given) or `BASIN_DEVICE`.
fn device(choice: Option<basin_core::device::DeviceChoice>) -> anyhow::Result<tch::Device> {
    Ok(match choice {
        Some(c) => basin_core::device::select(c)?,
        None => basin_core::device::from_env()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cause already in its error's message is printed once; a context's cause still follows.
    #[test]
    fn error_chain_prints_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::from(basin_graph::GraphError::Io {
            path: "a.txt".into(),
            source: io,
        });
        assert_eq!(error_chain(&e), "a.txt: no such file");
        let e = e.context("loading MUTAG");
        assert_eq!(error_chain(&e), "loading MUTAG: a.txt: no such file");
    }

    #[allow(unsafe_code)]
    fn purge_delay() -> std::ffi::c_long {
        // SAFETY: reads one of mimalloc's global option values.
        unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
    }

    /// The index is mimalloc's purge delay: a child run of this test, started with
    /// `MIMALLOC_PURGE_DELAY=4321`, reads 4321 through it and keeps it; here, without the
    /// variable, `keep_freed_memory` sets it to −1.
    #[test]
    fn the_option_index_is_mimallocs_purge_delay() {
        if std::env::var("MIMALLOC_PURGE_DELAY").as_deref() == Ok("4321") {
            keep_freed_memory();
            assert_eq!(purge_delay(), 4321);
            return;
        }
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            keep_freed_memory();
            assert_eq!(purge_delay(), -1);
        }
        let child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args([
                "--exact",
                "tests::the_option_index_is_mimallocs_purge_delay",
            ])
            .env("MIMALLOC_PURGE_DELAY", "4321")
            .output()
            .expect("the child test runs");
        let out = String::from_utf8_lossy(&child.stdout);
        assert!(child.status.success() && out.contains("1 passed"), "{out}");
    }
}
