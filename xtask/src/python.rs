//! The Python package: a virtual environment with torch 2.11.0 (the libtorch basin links),
//! the wheel built in it by maturin, and its pytest suite.
//!
//! The environment lives beside the libtorch cache (`…/basin/venv-2.11.0`) and is shared by
//! every clone. Its `torch` is the cached PyPI wheel itself (a `.pth` file points at it), so
//! the 1.2 GB wheel is neither downloaded nor unpacked twice and the extension and PyTorch
//! load one libtorch; pip adds torch's other requirements (PyTorch's CUDA libraries, which
//! `import torch` loads even on a CPU) and maturin and pytest. A half-made environment is
//! recognised by its missing `.ready` file and made again.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::setup::{TORCH_VERSION, pip_install};

/// Requirements of torch that only `torch.compile` and CUDA's Python bindings use.
const SKIPPED: [&str; 2] = ["triton", "cuda-bindings"];

/// The environment's directory: beside the libtorch cache.
fn venv_dir(torch: &Path) -> PathBuf {
    let cache = torch.parent().unwrap_or(torch);
    let base = cache.parent().unwrap_or(cache);
    base.join(format!("venv-{TORCH_VERSION}"))
}

/// The environment's interpreter.
pub fn python(venv: &Path) -> PathBuf {
    venv.join("bin").join("python")
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("could not start {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// torch's own requirements (read from its wheel's METADATA) less the extras and [`SKIPPED`].
fn torch_requirements(torch: &Path) -> Result<Vec<String>> {
    let site = torch
        .parent()
        .context("the torch directory has no parent")?;
    let meta = site
        .join(format!("torch-{TORCH_VERSION}.dist-info"))
        .join("METADATA");
    let text =
        std::fs::read_to_string(&meta).with_context(|| format!("reading {}", meta.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("Requires-Dist: "))
        .filter(|r| !r.contains("extra =="))
        .filter(|r| {
            let name = r
                .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
                .next();
            !name.is_some_and(|n| SKIPPED.contains(&n))
        })
        .map(str::to_owned)
        .collect())
}

/// A new virtual environment at `venv` (`python3 -m venv`).
fn make_venv(venv: &Path) -> Result<()> {
    run(
        Command::new("python3").args(["-m", "venv"]).arg(venv),
        "`python3 -m venv` (Debian/Ubuntu: apt-get install python3-venv)",
    )
}

/// Installs `package` into the environment of interpreter `py` unless `module` imports there
/// already; an error if it still does not import after pip.
fn ensure_module(py: &Path, module: &str, package: &str) -> Result<()> {
    let imports = || {
        Command::new(py)
            .args(["-c", &format!("import {module}")])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if imports() {
        return Ok(());
    }
    println!("xtask: installing {package} into {}…", py.display());
    run(
        pip_install(py).arg(package),
        &format!("pip install of {package}"),
    )?;
    if !imports() {
        bail!("{package} installed but `import {module}` still fails");
    }
    Ok(())
}

/// Makes sure the environment exists and is complete; returns its directory.
pub fn ensure_venv(torch: &Path) -> Result<PathBuf> {
    let venv = venv_dir(torch);
    let ready = venv.join(".ready");
    if ready.exists() {
        return Ok(venv);
    }
    let _ = std::fs::remove_dir_all(&venv);
    println!(
        "xtask: making the Python environment {} (torch {TORCH_VERSION} from the libtorch cache; its CUDA libraries, maturin and pytest from PyPI, once per user)…",
        venv.display()
    );
    make_venv(&venv)?;
    let py = python(&venv);
    let mut pip = pip_install(&py);
    pip.args(["maturin>=1.8,<2", "pytest", "numpy"]);
    if torch.join("__init__.py").exists() {
        // The cached wheel is a complete `torch` package: put it on the path as it is.
        let site = Command::new(&py)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()
            .context("asking the environment for its site-packages")?;
        let site = PathBuf::from(String::from_utf8_lossy(&site.stdout).trim());
        let parent = torch
            .parent()
            .context("the torch directory has no parent")?;
        std::fs::write(
            site.join("basin-torch.pth"),
            format!("{}\n", parent.display()),
        )
        .with_context(|| format!("writing the .pth file into {}", site.display()))?;
        pip.args(torch_requirements(torch)?);
    } else {
        // A libtorch from elsewhere (LIBTORCH set to a zip's folder): PyPI's wheel of the same
        // version.
        pip.arg(format!("torch=={TORCH_VERSION}"));
    }
    run(
        &mut pip,
        "pip install of torch's requirements, maturin and pytest",
    )?;
    run(
        Command::new(&py).args([
            "-c",
            "import torch; assert torch.__version__.startswith('2.11.0')",
        ]),
        "`import torch` in the new environment",
    )?;
    std::fs::write(&ready, "").with_context(|| format!("writing {}", ready.display()))?;
    Ok(venv)
}

/// The environment variables that build and run the extension inside `venv`.
fn venv_env(cmd: &mut Command, venv: &Path) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv.join("bin")];
    paths.extend(std::env::split_paths(&path));
    cmd.env("VIRTUAL_ENV", venv)
        .env("PATH", std::env::join_paths(paths).unwrap_or(path))
        // torch-sys asks the environment's torch where libtorch and its headers are.
        .env("LIBTORCH_USE_PYTORCH", "1")
        .env_remove("LIBTORCH");
}

/// Builds the wheel into `<root>/target/wheels` and returns its path.
pub fn build_wheel(root: &Path, venv: &Path) -> Result<PathBuf> {
    let out = root.join("target").join("wheels");
    if out.exists() {
        for entry in std::fs::read_dir(&out)?.flatten() {
            if entry.file_name().to_string_lossy().starts_with("basin-") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let mut cmd = Command::new(venv.join("bin").join("maturin"));
    cmd.args(["build", "--release", "--auditwheel", "skip", "--out"])
        .arg(&out)
        .current_dir(root.join("crates").join("basin-py"))
        // Its own target folder: the extension's tch has other features than the workspace's.
        .env("CARGO_TARGET_DIR", root.join("target").join("python"));
    venv_env(&mut cmd, venv);
    println!("xtask: maturin build --release (crates/basin-py)");
    run(&mut cmd, "maturin build")?;
    let wheel = std::fs::read_dir(&out)?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "whl")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("basin-"))
        })
        .context("maturin finished but wrote no basin wheel")?;
    Ok(wheel)
}

/// Installs `wheel` into `venv` (its dependency, torch, is there already).
pub fn install_wheel(venv: &Path, wheel: &Path) -> Result<()> {
    run(
        pip_install(python(venv))
            .args(["--no-deps", "--force-reinstall"])
            .arg(wheel),
        "pip install of the basin wheel",
    )
}

/// Format and clippy of the extension crate (its own workspace, so not in the root's run).
pub fn lint(root: &Path, venv: &Path) -> Result<()> {
    let manifest = root.join("crates").join("basin-py").join("Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut fmt = Command::new(&cargo);
    fmt.args(["fmt", "--check", "--manifest-path"])
        .arg(&manifest);
    run(
        &mut fmt,
        "`cargo fmt --check` of crates/basin-py (run `cargo fmt --manifest-path crates/basin-py/Cargo.toml`)",
    )?;
    let mut clippy = Command::new(&cargo);
    clippy
        .args(["clippy", "--release", "--manifest-path"])
        .arg(&manifest)
        .args(["--", "-D", "warnings"])
        .env("CARGO_TARGET_DIR", root.join("target").join("python"));
    venv_env(&mut clippy, venv);
    println!("xtask: cargo clippy of crates/basin-py");
    run(&mut clippy, "clippy of crates/basin-py")
}

/// PyG, for the tests of the converter `crates/basin-graph/scripts/to_basin_npz.py`: installed
/// into the environment once where PyPI serves it. Without it those tests skip, and this says so.
fn ensure_pyg(venv: &Path) {
    if let Err(e) = ensure_module(&python(venv), "torch_geometric", "torch_geometric") {
        println!("xtask: {e:#}; the converter's tests will be skipped");
    }
}

/// The pytest suite of the package against the installed wheel.
pub fn pytest(root: &Path, venv: &Path) -> Result<()> {
    ensure_pyg(venv);
    let mut cmd = Command::new(python(venv));
    cmd.args(["-m", "pytest", "-q"])
        .arg(root.join("crates").join("basin-py").join("tests"))
        .current_dir(root);
    crate::absolute_data_dir(&mut cmd)?;
    println!("xtask: pytest crates/basin-py/tests");
    run(&mut cmd, "pytest of the Python package")
}

/// What a user does, checked end to end: a new environment with torch 2.11.0 from the package
/// index, `pip install ./crates/basin-py` (the README's command, through the package's build
/// backend, which finds that torch), `import basin` and a training step. The environment is
/// made again each time (`target/fresh-venv`); pip's cache keeps torch's download, and the
/// build's own target folder (`target/pip-install`) keeps the compiled crates between runs.
pub fn fresh_install_check(root: &Path) -> Result<()> {
    let venv = root.join("target").join("fresh-venv");
    let _ = std::fs::remove_dir_all(&venv);
    println!(
        "xtask: the README's install into a new environment ({})",
        venv.display()
    );
    make_venv(&venv)?;
    let py = python(&venv);
    let user = |cmd: &mut Command| {
        // Nothing of this repository's own build set-up: a user's shell.
        cmd.env_remove("LIBTORCH")
            .env_remove("LIBTORCH_USE_PYTORCH")
            .env_remove("VIRTUAL_ENV")
            .env("CARGO_TARGET_DIR", root.join("target").join("pip-install"))
            .current_dir(root);
    };
    let mut torch = pip_install(&py);
    torch.arg(format!("torch=={TORCH_VERSION}"));
    user(&mut torch);
    run(&mut torch, "pip install of torch from the package index")?;
    let mut basin = Command::new(&py);
    basin.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "./crates/basin-py",
    ]);
    user(&mut basin);
    run(
        &mut basin,
        "`pip install ./crates/basin-py` (the README's command)",
    )?;
    let mut step = Command::new(&py);
    step.args(["-c", FIRST_STEP]);
    user(&mut step);
    run(
        &mut step,
        "`import basin` and a training step in the new environment",
    )
}

/// The first lines a user runs: an energy block trained for one step inside a torch loop.
const FIRST_STEP: &str = "
import torch, basin
block = basin.EnergyBlock(dim=8, steps=3, terms=[basin.terms.Attention(heads=2, head_dim=4),
                                                 basin.terms.HopfieldMemory(memories=6)])
opt = torch.optim.Adam(block.parameters(), lr=1e-2)
x = torch.randn(2, 5, 8)
loss = block(x).pow(2).mean()
loss.backward()
before = [p.detach().clone() for p in block.parameters()]
opt.step()
assert any(not torch.equal(a, p) for a, p in zip(before, block.parameters()))
print('basin', basin.__version__, 'trained a step on torch', torch.__version__)
";

/// The package's API pages: pdoc (installed into the environment once) over `basin`.
pub fn api_pages(venv: &Path, out: &Path) -> Result<()> {
    let py = python(venv);
    ensure_module(&py, "pdoc", "pdoc")?;
    run(
        Command::new(&py)
            .args(["-m", "pdoc", "--docformat", "restructuredtext", "-o"])
            .arg(out)
            .arg("basin"),
        "pdoc of the basin package",
    )?;
    println!("API pages: {}", out.join("basin.html").display());
    Ok(())
}
