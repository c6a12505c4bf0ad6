//! `cargo xtask`: set-up and orchestration for basin (no libtorch needed to build it).
//!
//! - `setup`: install libtorch 2.11.0 (the version `tch = "=0.24.0"` expects) from the PyPI
//!   wheel into a per-user cache and link it as `.torch`, so that plain `cargo test`/`cargo run`
//!   work afterwards; and the gloo headers data-parallel training compiles against
//!   (`libgloo-dev`, installed with apt-get when run as root).
//! - `test`: setup, `cargo fmt --check`, clippy with `-D warnings`, the single-ndarray check,
//!   the API docs without a warning,
//!   `cargo test --workspace`, then the Python package: its lints, its wheel and its pytest
//!   suite in the package's environment.
//! - `wheel`: setup, then the Python package's wheel (`target/wheels/`), built by maturin in a
//!   per-user environment whose torch is the cached libtorch wheel.
//! - `demo`: setup, then `basin demo`. Every command that builds (`test`, `demo`,
//!   `reproduce`, `fuzz`, `bench`) runs the same set-up.
//! - `reproduce <table> [flags]`: `basin reproduce` from a release build, flags passed on as
//!   they are (the tables are the binary's registry: `reproduce --list`).
//! - `bench`: setup, then the criterion benchmarks.

mod python;
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
    /// Setup, then formatting, clippy (-D warnings), the one-ndarray check, the API docs
    /// (no warning) and all tests, the Python package's pytest suite included.
    Test,
    /// Setup, then build the Python package's wheel into `target/wheels/` (maturin, release)
    /// and install it into the package's environment; prints how to `pip install` it
    /// elsewhere.
    Wheel {
        /// Also install the wheel into this Python (a venv's `bin/python`, say) with pip.
        #[arg(long, value_name = "PYTHON")]
        install_into: Option<PathBuf>,
    },
    /// Setup, build and install the wheel, then write the Python package's API pages (pdoc,
    /// from its docstrings) into `--out`; open `<out>/basin.html`.
    Pydoc {
        /// Output directory.
        #[arg(long, default_value = "target/python-doc")]
        out: PathBuf,
    },
    /// Setup, then the demo: an ET block fitted on synthetic patterns completes masked ones.
    Demo {
        /// Output directory.
        #[arg(long, default_value = "reports/demo")]
        out: PathBuf,
    },
    /// Reproduce a paper table: `basin reproduce` from a release build, with every argument
    /// passed on as it is (`cargo xtask reproduce --list`, `cargo xtask reproduce et-table1 --cpu
    /// --data-dir /data/basin`; `basin reproduce --help` lists the flags).
    Reproduce {
        /// The table and the flags of `basin reproduce`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fuzz every reader of user files: `basin-fuzz` from a release build, every argument
    /// passed on (`cargo xtask fuzz --inputs 1000000`; `--reader NAME`, `--large`, `--out F`).
    Fuzz {
        /// The flags of `basin-fuzz` (see `cargo xtask fuzz --help` below the line).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Setup, then run the criterion benchmarks (`cargo bench -p basin-benches`).
    Bench {
        /// Only benchmarks whose name contains this.
        filter: Option<String>,
    },
}

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
            let torch = set_up(&root)?;
            println!("libtorch ready: {}", torch.display());
            Ok(())
        }
        Task::Test => {
            set_up(&root)?;
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
            // The API docs build without a warning (a broken link is one).
            cargo_with(
                &root,
                &["doc", "--workspace", "--no-deps"],
                &[("RUSTDOCFLAGS", Path::new("-D warnings"))],
            )?;
            // Tests that need a dataset the data directory lacks are skipped, one line each
            // (`BASIN_REQUIRE_DATA=1` makes them fail instead, as CI does); they are counted here.
            let log = root.join("target").join("skipped-data-tests.log");
            let _ = std::fs::remove_file(&log);
            let result = cargo_with(&root, &["test", "--workspace"], &[("BASIN_SKIP_LOG", &log)]);
            report_skips(&log);
            result?;
            let torch = setup::ensure(&root)?;
            let venv = python::ensure_venv(&torch)?;
            python::lint(&root, &venv)?;
            let wheel = python::build_wheel(&root, &venv)?;
            python::install_wheel(&venv, &wheel)?;
            python::pytest(&root, &venv)?;
            python::fresh_install_check(&root)
        }
        Task::Wheel { install_into } => {
            let torch = set_up(&root)?;
            let venv = python::ensure_venv(&torch)?;
            let wheel = python::build_wheel(&root, &venv)?;
            python::install_wheel(&venv, &wheel)?;
            if let Some(py) = install_into {
                let status = Command::new(&py)
                    .args(["-m", "pip", "install", "--force-reinstall", "--no-deps"])
                    .arg(&wheel)
                    .status()
                    .with_context(|| format!("could not start {}", py.display()))?;
                if !status.success() {
                    bail!("pip install into {} failed ({status})", py.display());
                }
            }
            println!("wheel: {}", wheel.display());
            println!(
                "installed into {} (activate it with `source {}/bin/activate`); elsewhere: pip install {} (into an environment with torch==2.11.0)",
                venv.display(),
                venv.display(),
                wheel.display()
            );
            Ok(())
        }
        Task::Pydoc { out } => {
            let torch = set_up(&root)?;
            let venv = python::ensure_venv(&torch)?;
            let wheel = python::build_wheel(&root, &venv)?;
            python::install_wheel(&venv, &wheel)?;
            python::api_pages(&venv, &root.join(out))
        }
        Task::Demo { out } => {
            set_up(&root)?;
            let out = out.to_string_lossy().into_owned();
            cargo(
                &root,
                &[
                    // Not --quiet: the first build takes minutes and its progress is the only
                    // sign of life until the demo starts.
                    "run",
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
        Task::Reproduce { args } => {
            set_up(&root)?;
            let mut cmd = vec![
                "run",
                "--release",
                "-p",
                "basin-cli",
                "--bin",
                "basin",
                "--",
                "reproduce",
            ];
            cmd.extend(args.iter().map(String::as_str));
            cargo(&root, &cmd)
        }
        Task::Fuzz { args } => {
            set_up(&root)?;
            let mut cmd = vec!["run", "--release", "-p", "basin-fuzz", "--"];
            cmd.extend(args.iter().map(String::as_str));
            cargo(&root, &cmd)
        }
        Task::Bench { filter } => {
            set_up(&root)?;
            let mut args = vec!["bench", "-p", "basin-benches"];
            if let Some(f) = filter.as_deref() {
                args.extend(["--", f]);
            }
            cargo(&root, &args)
        }
    }
}

/// The one set-up every command that builds runs: libtorch and the gloo headers, so that every
/// feature the README offers (data-parallel training included) works after any of them.
fn set_up(root: &Path) -> Result<PathBuf> {
    let torch = setup::ensure(root)?;
    setup::ensure_gloo(root);
    Ok(torch)
}

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Runs `cargo <args>` in the workspace root, failing with the command line when it fails.
fn cargo(root: &Path, args: &[&str]) -> Result<()> {
    cargo_with(root, args, &[])
}

/// Tests run from their crate's directory: a relative `BASIN_DATA_DIR` is made absolute for
/// `cmd` against the directory `cargo xtask` was started from, so every crate sees the same one.
fn absolute_data_dir(cmd: &mut Command) -> Result<()> {
    if let Some(dir) = std::env::var_os("BASIN_DATA_DIR").map(PathBuf::from)
        && dir.is_relative()
    {
        let cwd = std::env::current_dir().context("reading the current directory")?;
        cmd.env("BASIN_DATA_DIR", cwd.join(dir));
    }
    Ok(())
}

/// Prints how many data-dependent tests were skipped, and which.
fn report_skips(log: &Path) {
    let Ok(text) = std::fs::read_to_string(log) else {
        println!("xtask: no test was skipped for missing data");
        return;
    };
    let lines: Vec<&str> = text.lines().collect();
    println!(
        "xtask: {} test(s) skipped for missing data (set BASIN_DATA_DIR; BASIN_REQUIRE_DATA=1 makes them fail):",
        lines.len()
    );
    for l in lines {
        println!("  {l}");
    }
}

/// [`cargo`] with extra environment variables for the child.
fn cargo_with(root: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("xtask: cargo {}", args.join(" "));
    let mut cmd = Command::new(&cargo);
    cmd.args(args).current_dir(root);
    for (k, v) in env {
        cmd.env(k, v);
    }
    absolute_data_dir(&mut cmd)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `cargo xtask reproduce` passes every flag of `basin reproduce` on as it is, `--data-dir`
    /// included, rather than refusing it as "use '-- --data-dir'".
    #[test]
    fn reproduce_passes_every_flag_through() {
        let argv = [
            "cargo xtask",
            "reproduce",
            "et-table1",
            "--data-dir",
            "/data/basin",
            "--cpu",
            "--dataset",
            "reddit",
        ];
        let cli = Cli::try_parse_from(argv).expect("parses");
        let Task::Reproduce { args } = cli.command else {
            panic!("not reproduce")
        };
        assert_eq!(
            args,
            argv[2..].iter().map(|s| s.to_string()).collect::<Vec<_>>()
        );
        let cli = Cli::try_parse_from(["cargo xtask", "reproduce", "--list"]).expect("parses");
        assert!(matches!(cli.command, Task::Reproduce { args } if args == ["--list"]));
    }
}
