//! `basin train` / `basin eval` end to end: both models on small real or generated data, the
//! re-evaluation from disk equals what training measured, and bad input is a named error.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::data_dir;

fn basin(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(args)
        .env("BASIN_DEVICE", "cpu")
        .env("BASIN_DATA_DIR", data_dir())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(!stderr.contains("panicked"), "basin panicked:\n{stderr}");
    (o.status.success(), stdout, stderr)
}

/// The example run file of `model`, made tiny by line edits.
fn tiny_run(dir: &Path, model: &str, edits: &[(&str, &str)]) -> PathBuf {
    let (ok, mut text, err) = basin(&["train", "--example", model]);
    assert!(ok, "{err}");
    for (from, to) in edits {
        assert!(text.contains(from), "`{from}` not in the example:\n{text}");
        text = text.replacen(from, to, 1);
    }
    let p = dir.join(format!("{model}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// Trains, evaluates, and checks that evaluation reproduces the training's test metrics.
fn train_then_eval(run: &Path, out: &Path, runs: usize) {
    let out_s = out.to_str().unwrap();
    let (ok, trained, err) = basin(&["train", run.to_str().unwrap(), "--out", out_s]);
    assert!(ok, "{err}");
    for f in ["run.toml", "report.md", "report.json", "energy.png"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let (ok, evaluated, err) = basin(&["eval", out_s]);
    assert!(ok, "{err}");
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.contains("test_"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(lines(&trained).len(), runs, "{trained}");
    assert_eq!(lines(&trained), lines(&evaluated));
    assert!(out.join("eval.md").is_file());
}

#[test]
fn et_graph_trains_and_evaluates_on_mutag() {
    basin_graph::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "et-graph",
        &[("folds = 10", "folds = 3"), ("epochs = 100", "epochs = 2")],
    );
    train_then_eval(&run, &tmp.path().join("out"), 3);
    let report = std::fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(report.contains("MUTAG/repeat-0/fold-2"), "{report}");
}

#[test]
fn et_anomaly_trains_and_evaluates_on_a_planted_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "et-anomaly",
        &[
            ("data = \"tolokers\"", "data = \"planted\""),
            ("epochs = 100", "epochs = 2"),
        ],
    );
    train_then_eval(&run, &tmp.path().join("out"), 1);
}

#[test]
fn bad_run_files_and_directories_are_named_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "task = \"graph-classification\"\ndata = \"MUTAG\"\n[architecture]\ndimm = 3\n",
    )
    .unwrap();
    let (ok, _, err) = basin(&["train", bad.to_str().unwrap()]);
    assert!(
        !ok && err.contains("bad.toml") && err.contains("dimm"),
        "{err}"
    );

    std::fs::write(&bad, "task = \"et-vision\"\ndata = \"MUTAG\"\n").unwrap();
    let (ok, _, err) = basin(&["train", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("et-vision"), "{err}");

    // A term kind nobody registered, named with the registered ones.
    std::fs::write(
        &bad,
        "task = \"graph-classification\"\ndata = \"MUTAG\"\n[architecture.block]\ndim = 8\n[[architecture.block.terms]]\nkind = \"attentoin\"\n",
    )
    .unwrap();
    let (ok, _, err) = basin(&["train", bad.to_str().unwrap()]);
    assert!(
        !ok && err.contains("block.terms[0].kind") && err.contains("attentoin"),
        "{err}"
    );

    // A graph-level dataset for the node-level model.
    basin_graph::require_data!("tu/MUTAG");
    std::fs::write(&bad, "task = \"node-anomaly\"\ndata = \"MUTAG\"\n").unwrap();
    let out = tmp.path().join("o");
    let (ok, _, err) = basin(&[
        "train",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("graph-level"), "{err}");

    // Refused when the file is read, naming the field (defects of issue 18).
    let (_, example, _) = basin(&["train", "--example", "et-graph"]);
    for (from, to, field) in [
        ("epochs = 100", "epochs = 0", "protocol.train.epochs"),
        ("k = 15", "k = 100000", "batching.pe.k"),
    ] {
        std::fs::write(&bad, example.replacen(from, to, 1)).unwrap();
        let (ok, _, err) = basin(&["train", bad.to_str().unwrap()]);
        assert!(
            !ok && err.contains("bad.toml") && err.contains(field),
            "{err}"
        );
    }

    let (ok, _, err) = basin(&["train", "--example", "et-vision"]);
    assert!(!ok && err.contains("et-vision"), "{err}");

    let (ok, _, err) = basin(&["eval", tmp.path().join("nothing").to_str().unwrap()]);
    assert!(!ok && err.contains("run.toml"), "{err}");
}
