//! `basin data inspect` and `basin data pe` end to end, on real data and generated sets.

use std::process::Command;

use basin_graph::cache::DatasetPe;
use basin_graph::laplacian::{PeConfig, laplacian_pe};
use serde_json::Value;

use crate::common::data_dir;

fn basin(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(args)
        .env_remove("BASIN_DATA_DIR")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stderr.contains("panicked"), "basin panicked:\n{stderr}");
    (out.status.success(), stdout, stderr)
}

#[test]
fn inspect_prints_statistics() {
    basin_data::require_data!("tu/MUTAG");
    basin_data::require_data!("anomaly/reddit.npz");
    let dir = data_dir();
    let d = dir.to_str().unwrap();
    let (ok, out, err) = basin(&["data", "inspect", "MUTAG", "--data-dir", d]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["graphs"], 188);
    assert_eq!(v["class_counts"], serde_json::json!([63, 125]));
    assert!((v["avg_edges"].as_f64().unwrap() - 19.79).abs() < 0.005);
    let path = dir.join("anomaly/reddit.npz");
    let (ok, out, err) = basin(&["data", "inspect", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "node");
    assert_eq!(v["nodes"], 10_984);
    assert!((v["anomaly_ratio"].as_f64().unwrap() - 0.0333).abs() < 5e-5);
    let (ok, out, _) = basin(&["data", "inspect", "planted"]);
    assert!(ok);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["labelled_nodes"], 2000);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let (ok, _, err) = basin(&["data", "inspect", "no-such-dataset"]);
    assert!(!ok && err.contains("BASIN_DATA_DIR"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("X");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("X_A.txt"), "1, 2\n2\n").unwrap();
    std::fs::write(bad.join("X_graph_indicator.txt"), "1\n1\n").unwrap();
    std::fs::write(bad.join("X_graph_labels.txt"), "0\n").unwrap();
    let (ok, _, err) = basin(&["data", "inspect", bad.to_str().unwrap()]);
    assert!(
        !ok && err.contains("X_A.txt:2: expected 2 column(s), found 1"),
        "{err}"
    );
    let out = tmp.path().join("pe.npz");
    let (ok, _, err) = basin(&[
        "data",
        "pe",
        "planted",
        "--k",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("--k"), "{err}");
}

#[test]
fn pe_writes_the_documented_npz() {
    basin_data::require_data!("tu/MUTAG");
    let dir = data_dir();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("mutag.npz");
    let (ok, stdout, err) = basin(&[
        "data",
        "pe",
        "MUTAG",
        "--data-dir",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["rows"], 3371 + 188);
    let pe = DatasetPe::read_npz(&out).unwrap();
    assert_eq!(pe.encodings.len(), 188);
    assert!(pe.cls && pe.k == 15);
    // Same as the library's encoding of the loaded graph.
    let mutag = basin_graph::tu::load_tu(&dir.join("tu/MUTAG")).unwrap();
    for g in [0usize, 100, 187] {
        let want = laplacian_pe(&mutag.graphs[g].adjacency, &PeConfig::et_graph()).unwrap();
        assert_eq!(pe.encodings[g], want);
    }
    // Per-graph layout, plain Laplacian, cached: the second run is a cache hit.
    let out2 = tmp.path().join("per.npz");
    let cache = tmp.path().join("cache");
    let args = [
        "data",
        "pe",
        "MUTAG",
        "--data-dir",
        dir.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
        "--layout",
        "per-graph",
        "--no-cls",
        "--k",
        "4",
        "--cache-dir",
        cache.to_str().unwrap(),
    ];
    let (ok, first, err) = basin(&args);
    assert!(ok, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&first).unwrap()["cached"],
        false
    );
    let (ok, second, _) = basin(&args);
    assert!(ok);
    assert_eq!(
        serde_json::from_str::<Value>(&second).unwrap()["cached"],
        true
    );
    let per = DatasetPe::read_npz(&out2).unwrap();
    assert!(!per.cls && per.k == 4);
    assert_eq!(
        per.encodings[0].vectors.nrows(),
        mutag.graphs[0].num_nodes()
    );
}
