//! What the CLI tests share: where the benchmark data lives.

use std::path::PathBuf;

/// The shared data directory: `BASIN_DATA_DIR` (relative paths are taken from the workspace
/// root, as CI sets `../shared/data`), else `<workspace>/../shared/data`. Fails the test when
/// it is missing — tests on real data never pass silently without it.
pub fn data_dir() -> PathBuf {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let dir = std::env::var_os("BASIN_DATA_DIR")
        .map(|d| root.join(d))
        .unwrap_or_else(|| root.join("../shared/data"));
    assert!(
        dir.join("tu").is_dir(),
        "benchmark data not found at {}: set BASIN_DATA_DIR (CI: ../shared/data from the workspace root)",
        dir.display()
    );
    dir
}
