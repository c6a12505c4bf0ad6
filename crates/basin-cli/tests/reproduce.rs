//! Every reproduction runs end to end in its `--quick` form on the real data and writes its
//! report (the numbers of a quick run mean nothing; the path is what is checked).
#![allow(clippy::unwrap_used)]

use std::process::Command;

mod common;
use common::data_dir;

/// Runs a quick reproduction; `files` must exist in its output directory afterwards.
fn reproduce(table: &str, extra: &[&str], files: &[&str]) -> String {
    let out = tempfile::tempdir().unwrap();
    let mut args = vec![
        "reproduce",
        table,
        "--quick",
        "--out",
        out.path().to_str().unwrap(),
    ];
    args.extend(extra);
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(&args)
        .env("BASIN_DEVICE", "cpu")
        .env("BASIN_DATA_DIR", data_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !stderr.contains("panicked"),
        "{table}: {stderr}"
    );
    for f in files {
        let p = out.path().join(f);
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 0),
            "{table}: {} missing",
            p.display()
        );
    }
    std::fs::read_to_string(out.path().join("report.md")).unwrap()
}

#[test]
fn et_table14_quick() {
    let md = reproduce("et-table14", &["--dataset", "fashion-mnist"], &[]);
    assert!(
        md.contains("| ET-Full (Ours) |") && md.contains("fashion-mnist MSE"),
        "{md}"
    );
}

#[test]
fn et_table1_quick() {
    let md = reproduce(
        "et-table1",
        &["--dataset", "reddit"],
        &["reddit-1pct/energy.png", "reddit-40pct/energy.png"],
    );
    assert!(
        md.contains("| reddit | 1 % |")
            && md.contains("| reddit | 40 % |")
            && md.contains("- reddit 40 % (homogeneous): "),
        "{md}"
    );
}

#[test]
fn et_table2_quick() {
    let md = reproduce("et-table2", &["--dataset", "MUTAG"], &["MUTAG/energy.png"]);
    assert!(
        md.contains("| MUTAG | 188 |")
            && md.contains("et-paper")
            && md.contains("MUTAG: energy per step of CV fold 0's selected model"),
        "{md}"
    );
}

#[test]
fn hopfield_reproductions_quick() {
    let md = reproduce("hopfield-memory", &[], &[]);
    assert!(
        md.contains("Never rises for any of the four memories: **true**"),
        "{md}"
    );
    let md = reproduce("hopfield-mil", &[], &[]);
    assert!(
        md.contains("| elephant | 200 | 1391 |") && md.contains("| musk1 | 92 | 476 |"),
        "{md}"
    );
}

#[test]
fn unknown_tables_are_refused() {
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(["reproduce", "table99"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("unknown or not yet reproducible table `table99`")
    );
}
