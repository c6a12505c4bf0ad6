//! Where datasets live — one rule for every command, test and benchmark: `--data-dir`, else
//! `BASIN_DATA_DIR`, else a per-user cache directory (`$XDG_CACHE_HOME/basin/data` or
//! `~/.cache/basin/data`). Loaders only read from it.
//!
//! Tests and benchmarks that need a real dataset ask [`test_data`]: on a clone without the
//! data they print one line naming what they skipped and pass; with `BASIN_REQUIRE_DATA=1`
//! (as CI sets it) a missing dataset fails the test instead.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The environment variable naming the data directory.
pub const DATA_ENV: &str = "BASIN_DATA_DIR";

/// Set to `1` to make a missing dataset fail a test instead of skipping it.
pub const REQUIRE_ENV: &str = "BASIN_REQUIRE_DATA";

/// If set, skipped tests append one line each to this file (`cargo xtask test` counts them).
pub const SKIP_LOG_ENV: &str = "BASIN_SKIP_LOG";

/// The environment variable naming the folder of derived files (cached encodings); `off`
/// turns caching off.
pub const CACHE_ENV: &str = "BASIN_CACHE_DIR";

/// The per-user cache root: `$XDG_CACHE_HOME/basin`, else `~/.cache/basin`.
fn user_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("basin")
}

/// Where derived files such as Laplacian encodings are cached: `BASIN_CACHE_DIR`, else
/// `~/.cache/basin/encodings`; `None` when `BASIN_CACHE_DIR=off`. Apart from the data
/// directory, which is often shared and read-only; entries are keyed by the data's contents,
/// so one cache serves every copy of a dataset.
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os(CACHE_ENV).filter(|p| !p.is_empty()) {
        Some(p) if p == "off" => None,
        Some(p) => Some(PathBuf::from(p)),
        None => Some(user_cache().join("encodings")),
    }
}

/// The data directory: `explicit` if given, else `BASIN_DATA_DIR`, else the user cache.
pub fn data_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os(DATA_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    user_cache().join("data")
}

/// The data directory as tests see it: [`data_dir`], with a relative `BASIN_DATA_DIR` taken
/// from the workspace root (tests run in their crate's directory; CI sets a relative path).
pub fn test_data_dir() -> PathBuf {
    let dir = data_dir(None);
    if dir.is_absolute() {
        dir
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir)
    }
}

/// `rel` (e.g. `tu/MUTAG`) under the test data directory, if it is there. If it is not, the
/// calling test should return early: this prints `skipped <test>: needs <rel>` (straight to the
/// terminal, past the test harness's capture), logs it to `BASIN_SKIP_LOG` if set, and panics
/// instead when `BASIN_REQUIRE_DATA=1`.
///
/// ```ignore
/// let Some(dir) = basin_data::datadir::test_data("tu/MUTAG") else { return };
/// ```
pub fn test_data(rel: &str) -> Option<PathBuf> {
    let dir = test_data_dir();
    let path = dir.join(rel);
    if path.exists() {
        return Some(path);
    }
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!(
        "skipped {test}: needs dataset `{rel}`, not found under {} (set {DATA_ENV})",
        dir.display()
    );
    if std::env::var_os(REQUIRE_ENV).is_some_and(|v| v == "1") {
        panic!("{line}; {REQUIRE_ENV}=1 makes a missing dataset a failure");
    }
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV) {
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| writeln!(f, "{line}"));
    }
    None
}

/// `rel` under the test data directory, or return from the enclosing test after printing why
/// it was skipped (see [`test_data`]): `let dir = basin_data::require_data!("tu/MUTAG");`.
#[macro_export]
macro_rules! require_data {
    ($rel:expr) => {
        match $crate::datadir::test_data($rel) {
            Some(path) => path,
            None => return,
        }
    };
}
