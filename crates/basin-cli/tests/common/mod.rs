//! What the CLI tests share: where the benchmark data lives.

use std::path::PathBuf;

/// The data directory the binary is pointed at (`basin_graph::datadir::test_data_dir`): tests
/// that need a dataset first check it with `basin_graph::require_data!`.
pub fn data_dir() -> PathBuf {
    basin_graph::datadir::test_data_dir()
}
