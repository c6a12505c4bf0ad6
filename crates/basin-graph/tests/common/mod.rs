//! Shared test helpers: where the real benchmark data lives.
#![allow(dead_code)]

use std::path::PathBuf;

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared data directory: `BASIN_DATA_DIR` (relative paths are taken from the workspace
/// root, as CI sets `../shared/data`), else `<workspace root>/../shared/data`. Fails the test
/// when neither exists — tests on real data never pass silently without it.
pub fn data_dir() -> PathBuf {
    let root = workspace_root();
    let dir = match std::env::var_os("BASIN_DATA_DIR") {
        Some(d) => {
            let d = PathBuf::from(d);
            if d.is_absolute() { d } else { root.join(d) }
        }
        None => root.join("../shared/data"),
    };
    assert!(
        dir.is_dir(),
        "benchmark data not found at {}: set BASIN_DATA_DIR to the folder holding tu/, anomaly/, \
         lrgb/ (CI uses ../shared/data, relative to the workspace root)",
        dir.display()
    );
    dir
}

/// A file or folder under the data directory; fails the test if it is missing.
pub fn data(rel: &str) -> PathBuf {
    let p = data_dir().join(rel);
    assert!(
        p.exists(),
        "{} is missing from the data directory (BASIN_DATA_DIR)",
        p.display()
    );
    p
}
