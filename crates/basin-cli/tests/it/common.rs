//! What the CLI tests share: where the benchmark data lives, and a one-thread run of the binary.

use std::path::PathBuf;

/// The data directory the binary is pointed at (`basin_data::datadir::test_data_dir`): tests
/// that need a dataset first check it with `basin_data::require_data!`.
pub fn data_dir() -> PathBuf {
    basin_data::datadir::test_data_dir()
}

/// Runs `basin args…` on the CPU with one thread (so that runs compare across process counts)
/// and the test data; its stdout, after asserting it succeeded.
pub fn basin_one_thread(args: &[&str]) -> String {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(args)
        .env("BASIN_DEVICE", "cpu")
        .env("BASIN_DATA_DIR", data_dir())
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("basin runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}
