//! libtorch 2.11.0 from the PyPI wheel, cached per user and linked into the workspace; the gloo
//! headers basin-dist compiles its c10d shim against (Debian's `libgloo-dev`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The libtorch version `tch = "=0.24.0"` is built against.
pub const TORCH_VERSION: &str = "2.11.0";

/// What `pip` installs: torch itself and the two CUDA libraries libtorch_cpu needs at load time.
const PACKAGES: [&str; 3] = [
    "torch==2.11.0",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cupti==13.0.85",
];

/// Makes sure a usable libtorch exists and returns its directory (the one holding `lib/`).
///
/// 1. An exported `LIBTORCH` that is not this workspace's `.torch` link is used as it is.
/// 2. Otherwise the per-user cache is filled once (pip into a temporary directory, then an
///    atomic rename) and `<workspace>/.torch` is pointed at it; `.cargo/config.toml` sets
///    `LIBTORCH` to that link and every crate that links libtorch embeds its `lib/` as rpath.
pub fn ensure(root: &Path) -> Result<PathBuf> {
    let link = root.join(".torch");
    if let Some(user) = std::env::var_os("LIBTORCH").map(PathBuf::from)
        && !same_path(&user, &link)
    {
        check_libtorch(&user).with_context(|| {
            format!("LIBTORCH={} is set but is not a usable libtorch {TORCH_VERSION}; unset it to let `cargo xtask setup` install one", user.display())
        })?;
        return Ok(user);
    }
    let cache = cache_dir()?;
    let torch = cache.join("torch");
    if check_libtorch(&torch).is_err() {
        install(&cache)?;
        check_libtorch(&torch).context("pip finished but the installed libtorch is not usable")?;
    }
    point_link(&link, &torch)?;
    Ok(torch)
}

fn same_path(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// `$BASIN_LIBTORCH_CACHE`, else `$XDG_CACHE_HOME/basin/libtorch-2.11.0`, else
/// `~/.cache/basin/libtorch-2.11.0`.
fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("BASIN_LIBTORCH_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) if !x.is_empty() => PathBuf::from(x),
        _ => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => bail!(
                "neither HOME nor XDG_CACHE_HOME is set; set BASIN_LIBTORCH_CACHE to a directory for libtorch"
            ),
        },
    };
    Ok(base.join("basin").join(format!("libtorch-{TORCH_VERSION}")))
}

/// A libtorch directory is usable when it has `lib/libtorch_cpu.so` and the right version.
fn check_libtorch(dir: &Path) -> Result<()> {
    let lib = dir.join("lib").join("libtorch_cpu.so");
    if !lib.exists() {
        bail!("{} not found", lib.display());
    }
    // The wheel records its version in version.py; a libtorch zip in build-version.
    for (file, marker) in [
        ("version.py", format!("__version__ = '{TORCH_VERSION}")),
        ("build-version", TORCH_VERSION.to_owned()),
    ] {
        let path = dir.join(file);
        if let Ok(text) = std::fs::read_to_string(&path) {
            if text.contains(&marker) {
                return Ok(());
            }
            bail!("{} does not say version {TORCH_VERSION}", path.display());
        }
    }
    bail!(
        "cannot tell the libtorch version in {} (no version.py or build-version)",
        dir.display()
    )
}

fn install(cache: &Path) -> Result<()> {
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).args(["-m", "pip", "--version"]).output().is_ok_and(|o| o.status.success()))
        .context(
            "python3 with pip is needed to fetch libtorch from PyPI.\n\
             Install it (Debian/Ubuntu: `apt-get install python3-pip`), or download libtorch 2.11.0 \
             yourself and `export LIBTORCH=/path/to/libtorch`.",
        )?;
    let parent = cache
        .parent()
        .context("the libtorch cache directory has no parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let partial = parent.join(format!(
        ".libtorch-{TORCH_VERSION}.partial-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&partial);
    println!(
        "xtask: installing libtorch {TORCH_VERSION} from PyPI into {} (about 1.2 GB, once per user)…",
        cache.display()
    );
    let status = pip_install(python)
        .args(["--no-deps", "--target"])
        .arg(&partial)
        .args(PACKAGES)
        .status()
        .with_context(|| format!("could not run {python} -m pip"))?;
    if !status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        bail!(
            "`{python} -m pip install --no-deps --target DIR {}` failed ({status}).\n\
             Check that PyPI is reachable (or a pip index is configured), or install libtorch \
             {TORCH_VERSION} yourself and `export LIBTORCH=/path/to/libtorch`.",
            PACKAGES.join(" ")
        );
    }
    match std::fs::rename(&partial, cache) {
        Ok(()) => Ok(()),
        // Another process finished first: keep its copy.
        Err(_) if check_libtorch(&cache.join("torch")).is_ok() => {
            let _ = std::fs::remove_dir_all(&partial);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&partial);
            Err(e).with_context(|| format!("moving the installed libtorch to {}", cache.display()))
        }
    }
}

/// Points `<workspace>/.torch` at `target` (replacing a stale link; a real directory that
/// already holds a usable libtorch is left alone).
fn point_link(link: &Path, target: &Path) -> Result<()> {
    match std::fs::symlink_metadata(link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if std::fs::read_link(link).is_ok_and(|t| t == target) {
                return Ok(());
            }
            std::fs::remove_file(link)
                .with_context(|| format!("removing the stale link {}", link.display()))?;
        }
        Ok(_) if check_libtorch(link).is_ok() => return Ok(()),
        Ok(_) => bail!(
            "{} exists and is not a libtorch directory or link; move it away",
            link.display()
        ),
        Err(_) => {}
    }
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("linking {} → {}", link.display(), target.display()))
}

/// Where basin-dist's build script looks for `gloo/algorithm.h` (keep in step with
/// `crates/basin-dist/build.rs`).
fn gloo_found() -> bool {
    let mut dirs: Vec<PathBuf> = std::env::var_os("BASIN_GLOO_INCLUDE")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.extend(["/usr/include", "/usr/local/include"].map(PathBuf::from));
    dirs.iter().any(|d| d.join("gloo/algorithm.h").exists())
}

/// Makes sure the gloo headers are there for data-parallel training: installs `libgloo-dev`
/// with apt-get when running as root, else says how. Without them basin still builds and
/// trains in one process; `basin train --nproc` then explains what is missing.
pub fn ensure_gloo(workspace: &Path) {
    if gloo_found() {
        return;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root && Path::new("/usr/bin/apt-get").exists() {
        eprintln!("xtask: installing libgloo-dev (gloo headers for data-parallel training)");
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", "libgloo-dev"])
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        let updated = || {
            Command::new("apt-get")
                .arg("update")
                .status()
                .is_ok_and(|s| s.success())
        };
        if (install() || (updated() && install())) && gloo_found() {
            // The package's files keep their old dates: touch the shim so that cargo reruns
            // basin-dist's build script, which now finds them.
            let shim = workspace.join("crates/basin-dist/src/shim.cpp");
            if let Ok(f) = std::fs::File::options().append(true).open(&shim) {
                let _ = f.set_modified(std::time::SystemTime::now());
            }
            return;
        }
    }
    eprintln!(
        "xtask: warning: gloo headers not found; basin builds without data-parallel training. \
         Install them (`sudo apt-get install libgloo-dev`) or set BASIN_GLOO_INCLUDE to the \
         directory holding gloo/, then rebuild"
    );
}

/// `py -m pip install --quiet --disable-pip-version-check --no-input`, to which the caller adds
/// its options and packages.
pub fn pip_install(py: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut pip = Command::new(py);
    pip.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
    ]);
    pip
}
