//! `cargo xtask`: set-up and orchestration for basin (no libtorch needed to build it).
//!
//! - `setup`: install libtorch 2.11.0 (the version `tch = "=0.24.0"` expects) from the PyPI
//!   wheel into a per-user cache and link it as `.torch`, so that plain `cargo test`/`cargo run`
//!   work afterwards.
//! - `test`: setup, `cargo fmt --check`, clippy with `-D warnings`, the single-ndarray check and
//!   `cargo test --workspace`.
//! - `demo`: setup, then `basin demo`.
//! - `reproduce <table>`: paper reproductions (listed by `reproduce --list`).
//! - `bench`: setup, then the criterion benchmarks.

mod setup;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// Task runner for the basin workspace.
#[derive(Parser)]
#[command(name = "cargo xtask", about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install libtorch 2.11.0 into the per-user cache (idempotent) and link it as `.torch`.
    ///
    /// The cache is `$BASIN_LIBTORCH_CACHE`, else `$XDG_CACHE_HOME/basin/libtorch-2.11.0`, else
    /// `~/.cache/basin/libtorch-2.11.0`, shared by every clone. An exported `LIBTORCH` is used
    /// as it is.
    Setup,
    /// Setup, then formatting, clippy (-D warnings), the one-ndarray check and all tests.
    Test,
    /// Setup, then the demo: an ET block fitted on synthetic patterns completes masked ones.
    Demo {
        /// Output directory.
        #[arg(long, default_value = "reports/demo")]
        out: PathBuf,
    },
    /// Reproduce a paper table and write reports/<table>/report.md beside the paper's numbers.
    ///
    /// Runs `basin reproduce <table>` from a release build; extra arguments after `--` are passed
    /// on (e.g. `-- --epochs 5 --dataset cifar10`).
    Reproduce {
        /// The table, e.g. `et-table14` (see --list).
        table: Option<String>,
        /// List the tables and their status.
        #[arg(long)]
        list: bool,
        /// Minutes-long version for CI.
        #[arg(long, conflicts_with = "cpu")]
        quick: bool,
        /// The documented CPU-scale configuration (et-table1, et-table2).
        #[arg(long)]
        cpu: bool,
        /// cpu, cuda or auto.
        #[arg(long)]
        device: Option<String>,
        /// Passed on to `basin reproduce`.
        #[arg(last = true)]
        rest: Vec<String>,
    },
    /// Setup, then run the criterion benchmarks (`cargo bench -p basin-benches`).
    Bench {
        /// Only benchmarks whose name contains this.
        filter: Option<String>,
    },
}

/// Paper tables and their status (`ready`, or the issue that will deliver them).
const TABLES: &[(&str, &str, &str)] = &[
    (
        "et-table1",
        "ET Table 1: node anomaly detection (macro-F1, AUC) on the anomaly graphs found",
        "ready",
    ),
    (
        "et-table2",
        "ET Table 2: TU classification, leak-free CV beside the paper's et-paper procedure",
        "ready",
    ),
    (
        "et-table14",
        "ET Table 14: module ablation of masked image completion (CIFAR-10, Fashion-MNIST)",
        "ready",
    ),
    (
        "hopfield-memory",
        "Hopfield slides: retrieval, metastability, capacity, energy",
        "ready",
    ),
    (
        "hopfield-mil",
        "Hopfield slides: MIL benchmarks (Tiger, Fox, Elephant, UCSB, Musk), nested CV",
        "ready",
    ),
];

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let root = workspace_root();
    match cli.command {
        Task::Setup => {
            let torch = setup::ensure(&root)?;
            println!("libtorch ready: {}", torch.display());
            Ok(())
        }
        Task::Test => {
            setup::ensure(&root)?;
            cargo(&root, &["fmt", "--all", "--", "--check"])
                .context("formatting differs: run `cargo fmt --all`")?;
            cargo(
                &root,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            )?;
            check_single_ndarray(&root)?;
            cargo(&root, &["test", "--workspace"])
        }
        Task::Demo { out } => {
            setup::ensure(&root)?;
            let out = out.to_string_lossy().into_owned();
            cargo(
                &root,
                &[
                    "run",
                    "--quiet",
                    "-p",
                    "basin-cli",
                    "--bin",
                    "basin",
                    "--",
                    "demo",
                    "--out",
                    &out,
                ],
            )
        }
        Task::Reproduce {
            table,
            list,
            quick,
            cpu,
            device,
            rest,
        } => {
            let Some(table) = reproducible(table.as_deref(), list)? else {
                return Ok(());
            };
            setup::ensure(&root)?;
            let mut args = vec![
                "run",
                "--release",
                "--quiet",
                "-p",
                "basin-cli",
                "--bin",
                "basin",
                "--",
                "reproduce",
                table,
            ];
            if quick {
                args.push("--quick");
            }
            if cpu {
                args.push("--cpu");
            }
            if let Some(d) = device.as_deref() {
                args.extend(["--device", d]);
            }
            args.extend(rest.iter().map(String::as_str));
            cargo(&root, &args)
        }
        Task::Bench { filter } => {
            setup::ensure(&root)?;
            let mut args = vec!["bench", "-p", "basin-benches"];
            if let Some(f) = filter.as_deref() {
                args.extend(["--", f]);
            }
            cargo(&root, &args)
        }
    }
}

/// The canonical name of a table that can run now; `None` after printing the list.
fn reproducible(table: Option<&str>, list: bool) -> Result<Option<&'static str>> {
    let print = || {
        println!("tables ([ready] runs now; the others arrive with their issue):");
        for (name, what, status) in TABLES {
            println!("  {name:<16} {what}  [{status}]");
        }
    };
    match table {
        None if list => {
            print();
            Ok(None)
        }
        None => bail!("name a table (cargo xtask reproduce --list)"),
        Some(t) => {
            let alias = if t == "table1" { "et-table1" } else { t };
            match TABLES.iter().find(|(name, _, _)| *name == alias) {
                Some((name, _, "ready")) => Ok(Some(name)),
                Some((name, what, issue)) => {
                    bail!("`{name}` ({what}) is not implemented yet; it is tracked in {issue}")
                }
                None => {
                    print();
                    bail!("unknown table `{t}`")
                }
            }
        }
    }
}

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Runs `cargo <args>` in the workspace root, failing with the command line when it fails.
fn cargo(root: &Path, args: &[&str]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("xtask: cargo {}", args.join(" "));
    let mut cmd = Command::new(&cargo);
    cmd.args(args).current_dir(root);
    // Tests run from their crate's directory: a relative data directory is made absolute
    // against the directory `cargo xtask` was started from, so every crate sees the same one.
    if let Some(dir) = std::env::var_os("BASIN_DATA_DIR").map(PathBuf::from)
        && dir.is_relative()
    {
        let cwd = std::env::current_dir().context("reading the current directory")?;
        cmd.env("BASIN_DATA_DIR", cwd.join(dir));
    }
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{cargo}`"))?;
    if !status.success() {
        bail!("`cargo {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// One ndarray version in the tree (a second one breaks sprs ↔ ndarray interop; a plain
/// `cargo update` can bring 0.17 back in).
fn check_single_ndarray(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "tree",
            "--workspace",
            "--edges",
            "normal,build,dev",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(root)
        .output()
        .context("could not run `cargo tree`")?;
    if !out.status.success() {
        bail!(
            "`cargo tree` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut versions: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("ndarray v"))
        .map(|v| v.split_whitespace().next().unwrap_or(v))
        .collect();
    versions.sort_unstable();
    versions.dedup();
    if versions.len() > 1 {
        bail!(
            "several ndarray versions in the tree ({}); pin one with `cargo update -p ndarray@<newer> --precise 0.16.1`",
            versions.join(", ")
        );
    }
    println!(
        "xtask: one ndarray version in the tree ({})",
        versions.first().copied().unwrap_or("none")
    );
    Ok(())
}
