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
//!
//!
//! ```sh
//! cargo run -p basin-cli -- --help
//! cargo run -p basin-cli -- energy --config data/blocks/et-small.toml --input in.safetensors --output out.safetensors
//! cargo run -p basin-cli -- demo --out reports/demo
//! cargo run --release -p basin-cli -- reproduce --list
//! cargo run --release -p basin-cli -- reproduce et-table14 --quick --data-dir DATA
//! cargo run --release -p basin-cli -- train --example et-graph
//! ```
//!
//! ## `basin energy`: inspect an energy landscape, compare implementations
//!
//! Runs one block's descent on given tokens. The block config is TOML (see
//! [`data/blocks/et-small.toml`](data/blocks/et-small.toml)):
//!
//! ```toml
//! dim = 32
//! steps = 12
//! [norm]
//! eps = 1e-5
//! [[terms]]
//! kind = "attention"      # heads, head_dim, beta (default 1/sqrt(head_dim)), learn_beta, init_std
//! heads = 4
//! head_dim = 8
//! [[terms]]
//! kind = "hopfield"       # memories, activation = relu | power | exp | softmax, beta, power, init_std
//! memories = 128          # every term also takes name (default: the kind) and weight (default 1)
//! [dynamics]
//! kind = "gradient-flow"  # or kind = "langevin" with sigma, decay, in_eval
//! alpha = 0.1
//! ```
//!
//! The input safetensors file holds the tokens and, unless `--weights FILE` is given, the weights.
//! Weights use the checkpoint names (term names come from the config; these are the defaults):
//!
//! | tensor | shape | |
//! |---|---|---|
//! | `x` | `[B, N, D]` float | input tokens (required) |
//! | `padding` | `[B, N]` bool/int | nonzero = real token (optional) |
//! | `mask` | `[B, N, N]` bool/int | nonzero: query `q` may attend key `k` (optional) |
//! | `bias` | `[B, H, N, N]` float | added to the β-scaled logits; `-inf` blocks a pair (optional) |
//! | `edge_index` | `[2, E]` int64 | sparse pattern over the flattened `B·N` tokens, PyG convention: row 0 = source = key, row 1 = target = query (optional) |
//! | `norm.gamma`, `norm.delta` | `[]`, `[D]` | layer norm |
//! | `attention.w_q`, `attention.w_k`, `attention.beta` | `[H, Y, D]`, `[H, Y, D]`, `[H]` | energy attention |
//! | `hopfield.xi` (`hopfield.beta` for exp/softmax) | `[K, D]` (`[]`) | Hopfield memories |
//!
//! At most one of `mask`, `bias`, `edge_index`; none means all pairs. `--self-attention` lets
//! tokens attend to themselves, `--steps` overrides T, `--double` computes in float64,
//! `--train-mode` turns Langevin noise on. The output file holds `energy` `[T+1, B]` (entry t
//! is the energy at `x_t`), `energy.<term>` `[T+1, B]` for each term, `x_final` `[B, N, D]` and
//! `grad_input` = ∂E/∂g at the input `[B, N, D]`; the config is in its `__metadata__`. Bad input
//! (malformed TOML, a missing tensor, a wrong shape) is an error that names the field or tensor
//! and the shapes, never a panic.
//!
//! ## `basin data`: datasets by name
//!
//! `basin data list | fetch | verify | inspect | pe`: the registry, its commands and every
//! dataset are described in `data/README.md`.
//!
//! ## `basin train` / `basin eval`: one run from a file
//!
//! ```sh
//! basin train --example list                           # et-graph, et-anomaly, cdat-graph, cdat-anomaly, et-image
//! basin train --example et-graph > mutag.toml          # a complete run file (CPU-scale ET model)
//! basin train mutag.toml --out runs/mutag --data-dir DATA
//! basin train mutag.toml --set architecture.batching.pe.k=15 --out runs/mutag-k15 # one field overridden
//! basin eval runs/mutag                                # score the saved weights again
//! basin compare runs/mutag-cdat runs/mutag             # two models on the same folds, fold by fold
//! basin select runs/mutag runs/mutag-k15 --out runs/sel # a hyperparameter chosen fold by fold on validation
//! basin train --example et-image > fmnist.toml && basin train fmnist.toml --out runs/fmnist
//! ```
//!
//! A run file names the `task` (`node-anomaly` under the anomaly protocol, `graph-classification`
//! under stratified k-fold cross-validation, `image-completion` on seeded draws of training,
//! validation and test images, scored over several masking seeds with PSNR and SSIM beside two
//! baselines on the same masks: predicting the training mean and each image's visible mean),
//! `data` (a name or path, as for `basin data`),
//! `[architecture]` (the task's config with its `[architecture.block]`: any registered terms and
//! dynamics; omitted fields take ET's preset) and `[protocol]` (split, runs or folds, epochs,
//! optimiser, schedule). Unknown fields and kinds are errors that name the file and the field.
//! `--set KEY=VALUE` (repeatable) overrides one field of the file: a dotted key, an array element
//! by its index (`architecture.block.terms.1.memories=256`), a TOML value or a bare word as a
//! string (`--set data=PROTEINS`); the resulting file is what `run.toml` records, so a sweep is one
//! file and an `--out` per value, and `basin select` then chooses among them fold by fold.
//! `train` loads and encodes the data once and writes `run.toml`, a directory per run or fold with
//! its `record.json` and `checkpoint.safetensors` (it resumes from there when restarted with the
//! same file), `report.md`/`report.json` and `energy.png` (each block's energy per step under the
//! first run's selected weights). `eval` rebuilds every split from `run.toml` (the protocol's own
//! plan), refuses a split whose hash differs from the run's record, loads the selected weights and
//! writes `eval.md`/`eval.json`.
//! `compare A B` pairs the runs of two models that were evaluated on the same test splits (matched
//! by the split hashes of their records: `basin train` outputs with the same fold seed, or a
//! reproduction's `OUT/NCI1/ET/cv` beside its `OUT/NCI1/baseline-pooled`) and prints, per `test_*`
//! metric, both means and the mean paired difference ± its standard error with wins / ties /
//! losses (`--json` for programs). Folds differ in difficulty by several points on the TU sets,
//! which hides a one-point difference between two means; the paired difference does not. The TU
//! reports with baselines (`et-table2`, `cdat-table1`, `cdat-table11`) carry the same comparison of every model with both
//! baselines.
//! `select A B …` chooses among candidate configurations (the same run file with `pe.k = 15` and
//! `pe.k = 8`, say) fold by fold: each test fold takes the candidate whose run scored best on that
//! fold's own validation data (`selected_val_<metric>`, or `inner_<metric>` under inner folds),
//! ordered by the runs' own rule (`metric-then-loss`: ties to the lower validation loss), remaining
//! ties to the first candidate listed. The test scores are read only to report: the selected runs'
//! mean estimates "this model with that hyperparameter chosen on validation", where the best
//! candidate's mean over the same test folds is optimistic (it was chosen on them). `--out DIR`
//! writes the chosen runs (and `selection.json`, `selection.md`) as one model's runs, for
//! `basin compare DIR BASELINE`.
//!
//! Bad values are refused when the file is read, before any data is loaded or anything written,
//! naming the file and the field (a table-driven test holds one bad value per field); what depends
//! on the data (folds against the smallest class, the PE `k` against the node cap) is refused once
//! the data is read, still before `run.toml` is written. A run killed at any moment (SIGKILL) and
//! restarted ends with the same records as an uninterrupted one, wall-clock fields aside: every
//! file is written to a temporary, fsynced and renamed, and temporaries of killed writes are
//! removed on restart (`crates/basin-cli/tests/it/kill_resume.rs` kills a run 12 times). A reproduction
//! killed and restarted resumes each run from its checkpoint (finished runs are not trained
//! again) and ends with the same records (the same test kills `reproduce et-table14 --quick`).
//! Each record also carries its model's configuration (`model` in `record.json`, from
//! `Learner::config`): a checkpoint left by another model under the same protocol, seed and splits
//! is refused on resume instead of being trained on, and the refusal names the first fields that
//! differ (records written before the field existed are resumed on trust). A recorded `model` is
//! read through the learner's configuration type first (`Learner::read_config`), so a switch added
//! since the run takes its default; a switch's default keeps the behaviour from before it (so far
//! `dense_init` and `multihead_init`; the `recorded_starts` test holds the tables' models to their
//! recorded starts). ET's DD records of the earlier presets' TU table (`crates/basin-repro/RESULTS.md`) predate `dense_init` and resume under
//! its default `tch`; any other value is refused.
//!
//! Determinism: the same seed on CPU with the same thread count gives the same `record.json` from
//! two processes, wall-clock fields aside (checked: 3 folds of `--example et-graph`). With another
//! thread count (`OMP_NUM_THREADS`) libtorch splits float32 reductions differently: measured, 1
//! against 2 threads changed two training losses in the 8th significant digit (0.63091551 vs
//! 0.63091552) and nothing else over 3 folds × 3 epochs; the record's `device` names the thread
//! count.
//!
//! While training, a terminal shows a bar per run (epoch, loss, validation metric, ETA) and
//! protocols log `run i/N` before each run; without a terminal (CI logs, `nohup`) the bar becomes
//! one line per epoch; `basin --quiet …` keeps only warnings and errors. Every run's per-epoch
//! metrics are in `record.json` and, for pandas or a spreadsheet, `record.csv` beside it. An
//! image-completion run also writes `reconstructions.png`, `worst.png`, `best.png`, `dynamics.png`,
//! `memories.png`, `kernels.png` and `positions.png`.
//!
//! The model switches of each task (readouts, kernels, encodings, initialisations) are the
//! fields of its config, each documented where it is defined (`basin_tasks`), with what was
//! measured of them in `crates/basin-repro/RESULTS.md`.
//!
//! # Devices
//!
//!
//! One binary serves CPU and GPU: `BASIN_DEVICE=cpu|cuda|auto` (default `auto`, or `--device`).
//! rustc drops `libtorch_cuda.so` at link time because nothing references it, so
//! `basin_core::device` `dlopen`s it at start-up; on a machine without CUDA libraries that fails
//! quietly and the CPU is used, while `BASIN_DEVICE=cuda` then fails with the reason. To run on a
//! GPU machine that has PyTorch 2.11 (cu130) but no Rust, build here and point the loader at its
//! libtorch: `LD_LIBRARY_PATH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')/lib`.
//!
//! `BASIN_TF32=1` lets CUDA's float32 matrix products run on TF32 tensor cores (10-bit mantissa),
//! as `torch.backends.cuda.matmul.allow_tf32 = True` does; off by default, as in PyTorch. Run records
//! and reports name it in the device (`cuda:0 (of 1 devices, tf32)`). It changes nothing on a CPU.
//!
//! GPU measurements: `crates/basin-repro/RESULTS.md`, "On an NVIDIA H100 80GB HBM3 (2026-11-27)".

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
