//! `basin`: the command line of the basin crates, one run of an energy-based attractor
//! transformer per invocation, on the CPU or CUDA from one binary.
//!
//! - `basin energy`: one energy block's descent on given tokens (energies, final tokens, ∂E/∂g).
//! - `basin demo`: fit a small ET block and watch it complete masked patterns.
//! - `basin data`: list, fetch and verify datasets; their statistics; Laplacian encodings.
//! - `basin train` / `basin eval`: train a model from a run file; score its weights again.
//! - `basin reproduce`: a paper table end to end.
//! - `basin compare`: two models' runs on the same folds, paired fold by fold.
//! - `basin select`: a hyperparameter chosen fold by fold among candidates' runs, by validation.
//!
//! `basin --help` names the environment variables every command reads (device, TF32, threads,
//! logging); `basin <command> --help` gives that command's arguments, files and behaviour. That
//! help is the doc comments of the clap structs here (one module per command), so it is written
//! once, for the command line.
//!
//! ```sh
//! cargo run --release -p basin-cli -- --help
//! cargo run --release -p basin-cli -- train --example et-graph > mutag.toml
//! cargo run --release -p basin-cli -- train mutag.toml --out runs/mutag
//! cargo run --release -p basin-cli -- reproduce et-table14 --quick --data-dir DATA
//! ```

/// `println!` for the command's output: when its reader has gone (`basin data list | head -1`)
/// the process ends quietly, as command-line tools do, instead of panicking on the closed pipe.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` with the same rule as [`outln!`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_out(format_args!($($arg)*))
    };
}

/// Writes `args` to standard output; a closed pipe ends the process with success (its reader
/// took what it wanted), any other write error with failure.
pub(crate) fn write_out(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to standard output: {e}");
        std::process::exit(1);
    }
}

/// The hold on the output directory `out` this process takes before it writes
/// (`basin_core::fsio::DirLock`: a second process into it is refused, naming this one), or
/// none where its launcher holds it (a shard of `--jobs`, a rank of `--nproc`) or it is a rank
/// other than 0 of an outside launcher's group.
pub(crate) fn hold(
    out: &std::path::Path,
    shard: Option<basin_train::context::Shard>,
) -> anyhow::Result<Option<basin_core::fsio::DirLock>> {
    let launched = |var: &str| std::env::var_os(var).is_some();
    if launched(basin_dist::launch::LAUNCHED_SHARD) || launched(basin_dist::launch::LAUNCHED_RANK) {
        return Ok(None);
    }
    if std::env::var("RANK").is_ok_and(|r| r.trim() != "0") {
        return Ok(None);
    }
    let part = shard.map_or("all".to_owned(), |s| {
        format!("shard-{}-of-{}", s.index, s.count)
    });
    Ok(Some(basin_core::fsio::DirLock::acquire(out, &part)?))
}

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
/// pages to the OS) make each one slow.
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
/// Hopfield networks) on libtorch, one run per invocation. `basin <command> --help` describes
/// each command.
///
/// The environment (a command's flag, where it has one, wins):
///
/// BASIN_DEVICE=cpu|cuda|auto (a command's `--device`; default auto): auto takes CUDA where its
/// libraries load and the CPU otherwise, cuda fails with the reason. One binary serves both
/// (libtorch_cuda.so is opened at start-up). To run a binary built elsewhere on a GPU machine
/// that has PyTorch 2.11 (cu130) but no Rust, point the loader at that PyTorch's libtorch:
/// `LD_LIBRARY_PATH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib`.
///
/// BASIN_TF32=1: CUDA's float32 matrix products run on TF32 tensor cores (10-bit mantissa), as
/// PyTorch's `torch.backends.cuda.matmul.allow_tf32 = True` does; off by default, as in PyTorch,
/// and nothing changes on a CPU. Records and reports name it in the device
/// (`cuda:0 (of 1 devices, tf32)`).
///
/// BASIN_DATA_DIR (a command's `--data-dir`): where datasets live, else
/// `$XDG_CACHE_HOME/basin/data` or `~/.cache/basin/data`. BASIN_DATA_MIRROR: a copy of a data
/// directory (URL or folder) that `basin data fetch` fetches from.
///
/// OMP_NUM_THREADS: libtorch's CPU threads. The same seed on the CPU with the same thread count
/// gives the same `record.json`, wall-clock fields aside; another thread count splits float32
/// reductions differently, which can move losses in their last digits, so a record's `device`
/// names the thread count.
///
/// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK (set by torchrun or srun),
/// BASIN_DIST_TIMEOUT (seconds a rendezvous or collective may wait, default 300) and
/// GLOO_SOCKET_IFNAME (the network interface): data-parallel training, `basin train --help`
/// (`--nproc`).
///
/// RUST_LOG: the log filter (default `info`, `warn` with `--quiet`). MIMALLOC_PURGE_DELAY:
/// basin keeps freed memory for reuse; a delay in milliseconds hands it back to the OS after it.
///
/// Progress: on a terminal a bar per run (epoch, loss, validation metric, ETA), and each protocol
/// logs `run i/N` before each run; without one (CI logs, nohup) one line per epoch. SIGINT or
/// SIGTERM stops training at its next step with its finished epochs saved (exit status 130; the
/// same command resumes); a second signal stops at once.
#[derive(Parser)]
#[command(name = "basin", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// No progress bars or progress lines (warnings and errors only).
    #[arg(long, global = true)]
    quiet: bool,
}

// The commands. Each one's help (`about`, `long_about`) is the doc comment of its arguments
// struct: a doc comment on a variant here would replace it.
#[derive(Subcommand)]
enum Command {
    Energy(energy::Args),
    Demo(demo::Args),
    Reproduce(reproduce::Args),
    Data(data::Args),
    Train(train::TrainArgs),
    Eval(train::EvalArgs),
    Compare(compare::Args),
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
    if let Some(revision) = option_env!("BASIN_GIT_REVISION") {
        basin_train::record::set_build_revision(revision);
    }
    // SIGINT or SIGTERM: training stops at its next step (its finished epochs are saved); a
    // second signal ends the process at once.
    let _ = ctrlc::set_handler(|| {
        if basin_train::interrupt::requested() {
            std::process::exit(130);
        }
        basin_train::interrupt::request();
        eprintln!("basin: stopping at the next training step (a second signal stops at once)");
    });
    let result = match cli.command {
        Command::Energy(args) => energy::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Reproduce(args) => reproduce::run(&args, cli.quiet),
        Command::Data(args) => data::run(&args, cli.quiet),
        Command::Train(args) => train::train(&args, cli.quiet),
        Command::Eval(args) => train::eval(&args),
        Command::Compare(args) => compare::run(&args),
        Command::Select(args) => compare::select(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = error_chain(&e);
            eprintln!("error: {message}");
            if basin_train::interrupt::requested() {
                // The conventional status of a process stopped by a signal it handled.
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The error and its causes joined by `: ` (anyhow's `{:#}`), leaving out a cause whose text
/// the message already ends with: library errors such as `DataError::Io` put their source in
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

/// `--shard I/N` (see [`basin_train::context::Shard`]).
fn parse_shard(s: &str) -> Result<basin_train::context::Shard, String> {
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
        let e = anyhow::Error::from(basin_graph::GraphError::from(basin_data::DataError::Io {
            path: "a.txt".into(),
            source: io,
        }));
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
