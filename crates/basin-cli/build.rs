//! basin-core's rpath, and the git revision the binary is built from (`BASIN_GIT_REVISION`):
//! run records name it wherever the binary runs, a copy outside the repository included.

#[path = "../basin-core/rpath.rs"]
mod rpath;

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    rpath::main();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(hash) = git(&root, &["rev-parse", "--short=12", "HEAD"]) else {
        // Not built from a git checkout: records fall back to the git of the working directory.
        return;
    };
    // Built again when the commit or any source changes (a directory is scanned whole).
    let git_dir = git(&root, &["rev-parse", "--absolute-git-dir"]).unwrap_or_default();
    let watched = ["HEAD", "index", "refs", "packed-refs"]
        .map(|p| Path::new(&git_dir).join(p))
        .into_iter()
        .chain(["crates", "xtask", "Cargo.toml", "Cargo.lock"].map(|p| root.join(p)));
    for p in watched.filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let dirty = git(&root, &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    let revision = if dirty { format!("{hash}-dirty") } else { hash };
    println!("cargo:rustc-env=BASIN_GIT_REVISION={revision}");
}
