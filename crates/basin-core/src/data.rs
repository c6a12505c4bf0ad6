//! Where datasets live: `--data-dir`, else `BASIN_DATA_DIR`, else a per-user cache directory
//! (`$XDG_CACHE_HOME/basin/data` or `~/.cache/basin/data`). Loaders only read from it.

use std::path::{Path, PathBuf};

/// The environment variable naming the data directory.
pub const DATA_ENV: &str = "BASIN_DATA_DIR";

/// The data directory: `explicit` if given, else `BASIN_DATA_DIR`, else the user cache.
pub fn data_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os(DATA_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."));
    cache.join("basin").join("data")
}
