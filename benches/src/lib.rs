//! Benchmarks live in `benches/`; this library holds what several of them share.

use std::path::PathBuf;

/// The data directory the benchmarks read (the one rule of `basin_data::datadir`, relative
/// `BASIN_DATA_DIR` taken from the workspace root); panics naming what is missing, since a
/// benchmark without its data measures nothing.
pub fn data_dir(needs: &str) -> PathBuf {
    let dir = basin_data::datadir::test_data_dir();
    assert!(
        dir.join(needs).exists(),
        "benchmark data not found: {} (set BASIN_DATA_DIR to the folder holding tu/, anomaly/, …)",
        dir.join(needs).display()
    );
    dir
}

/// Peak resident set size of this process in MiB (Linux `VmHWM`; `None` elsewhere).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Current resident set size in MiB (Linux `VmRSS`).
pub fn rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Resets the peak-RSS counter (Linux ≥ 4.0), so that the next [`peak_rss_mib`] covers only
/// what runs after it.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Runs `f` once and prints the peak resident memory it reached, above what was resident
/// before (`label` names it in the output).
///
/// glibc keeps freed blocks for reuse once its dynamic mmap threshold has grown, so a step run
/// after a warm-up can reach no new peak at all; run with `MALLOC_MMAP_THRESHOLD_=131072` for
/// figures that count what the step itself allocates (`benches/compare.py` does, in a pass of
/// its own: with it every large allocation is a fresh mmap, which slows the timings). Without
/// it the line says so.
pub fn print_peak_rss(label: &str, f: impl FnOnce()) {
    reset_peak_rss();
    let before = rss_mib();
    f();
    if let (Some(b), Some(a)) = (before, peak_rss_mib()) {
        let caveat = if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
            ""
        } else {
            " [MALLOC_MMAP_THRESHOLD_ unset: freed memory is reused, the figure is a lower bound]"
        };
        println!(
            "{label}: peak RSS {a:.0} MiB ({:.0} MiB above the resident state before it){caveat}",
            a - b
        );
    }
}
