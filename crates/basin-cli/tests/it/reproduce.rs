//! Every reproduction runs end to end in its `--quick` form on the real data and writes its
//! report (the numbers of a quick run mean nothing; the path is what is checked).

use std::process::Command;

use crate::common::data_dir;

/// Runs a quick reproduction; `files` must exist in its output directory afterwards.
fn reproduce(table: &str, extra: &[&str], files: &[&str]) -> String {
    reproduce_in(tempfile::tempdir().unwrap().path(), table, extra, files)
}

/// The `report.json` a reproduction wrote into `out`.
fn report_json(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// [`reproduce`] into `out`.
fn reproduce_in(out: &std::path::Path, table: &str, extra: &[&str], files: &[&str]) -> String {
    let mut args = vec![
        "reproduce",
        table,
        "--quick",
        "--out",
        out.to_str().unwrap(),
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
        let p = out.join(f);
        assert!(
            std::fs::metadata(&p).is_ok_and(|m| m.len() > 0),
            "{table}: {} missing",
            p.display()
        );
    }
    std::fs::read_to_string(out.join("report.md")).unwrap()
}

#[test]
fn et_table14_quick() {
    basin_data::require_data!("images/fashion-mnist");
    let md = reproduce("et-table14", &["--dataset", "fashion-mnist"], &[]);
    assert!(
        md.contains("| ET-Full (Ours) |") && md.contains("fashion-mnist MSE"),
        "{md}"
    );
}

#[test]
fn et_table1_quick() {
    basin_data::require_data!("anomaly/reddit.npz");
    let out = tempfile::tempdir().unwrap();
    let table1 = || {
        reproduce_in(
            out.path(),
            "et-table1",
            &["--dataset", "reddit"],
            &["reddit-1pct/ET/energy.png", "reddit-40pct/ET/energy.png"],
        )
    };
    let md = table1();
    assert!(
        md.contains("| reddit | 1 % |")
            && md.contains("| reddit | 40 % |")
            && md.contains("- reddit 40 % ET: homogeneous "),
        "{md}"
    );
    // Run again into the same directory (as the report pass of `--jobs` does), the ET runs are
    // read back, and each row's wall time is still the runs' own training time, as their
    // records keep it, not the time of reading them back.
    let first = report_json(out.path());
    table1();
    let again = report_json(out.path());
    let walls = |row: &serde_json::Value| -> Vec<f64> {
        row["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["report"])
            .chain([&row["floor"]])
            .flat_map(|r| r["runs"].as_array().unwrap())
            .map(|run| run["wall_seconds"].as_f64().unwrap())
            .collect()
    };
    for (a, b) in first["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["results"].as_array().unwrap())
    {
        // Read back: the same epochs and scores, and a record's time still covers the epochs
        // it trained (it also counts the retest, so it need not equal the first pass's).
        let et_runs = |row: &serde_json::Value| row["models"][0]["report"]["runs"].clone();
        for (x, y) in et_runs(a)
            .as_array()
            .unwrap()
            .iter()
            .zip(et_runs(b).as_array().unwrap())
        {
            assert_eq!(x["epochs"], y["epochs"]);
            assert_eq!(x["summary"], y["summary"]);
            let epochs = y["epochs"].as_array().unwrap();
            let trained: f64 = epochs.iter().map(|e| e["seconds"].as_f64().unwrap()).sum();
            let wall = y["wall_seconds"].as_f64().unwrap();
            assert!(trained > 0.0 && wall >= trained, "{wall} against {trained}");
        }
        let (seconds, runs) = (b["seconds"].as_f64().unwrap(), walls(b));
        let sum: f64 = runs.iter().sum();
        assert!((seconds - sum).abs() < 1e-6, "{seconds} against {runs:?}");
    }
    let md = reproduce(
        "cdat-table2",
        &["--dataset", "reddit"],
        &[
            "reddit-40pct/CDAT/energy.png",
            "reddit-40pct/CDAT-code/run-0/record.json",
        ],
    );
    assert!(
        md.contains("| reddit | 40 % |")
            && md.contains("homogeneous V")
            && md.contains("CDAT-code AUC"),
        "{md}"
    );
}

#[test]
fn et_table2_quick() {
    basin_data::require_data!("tu/MUTAG");
    // `--repeats` repeats the model's folds and the baselines' alike; so do `--selection` and
    // `--ema`.
    let out = tempfile::tempdir().unwrap();
    let md = reproduce_in(
        out.path(),
        "et-table2",
        &[
            "--dataset",
            "MUTAG",
            "--repeats",
            "2",
            "--selection",
            "metric",
            "--ema",
            "0.9",
        ],
        &[
            "MUTAG/ET/energy.png",
            "MUTAG/loss.png",
            "MUTAG/ET/cv/repeat-1/fold-2/record.json",
            "MUTAG/baseline-pooled/repeat-1/fold-2/record.json",
            "MUTAG/baseline-gin/repeat-1/fold-2/record.json",
        ],
    );
    assert!(
        md.contains("| MUTAG | 188 |")
            && md.contains("3-fold cross-validation × 2 repeat(s)")
            && md.contains("et-paper")
            && md.contains("- MUTAG / ET: block 0")
            && md.contains("ties to the earlier epoch (`--selection metric`)")
            && md.contains("moving average of the weights (decay 0.9"),
        "{md}"
    );
    let gin = std::fs::read_to_string(
        out.path()
            .join("MUTAG/baseline-gin/repeat-1/fold-2/record.json"),
    )
    .unwrap();
    assert!(
        gin.contains("\"val_loss\"")
            && gin.contains("\"selection\": \"metric\"")
            && gin.contains("\"ema\": 0.9"),
        "{gin}"
    );
    let et = std::fs::read_to_string(out.path().join("MUTAG/ET/cv/repeat-1/fold-2/record.json"))
        .unwrap();
    assert!(et.contains("\"ema\": 0.9"), "the model averages too: {et}");
    // Each model paired with both baselines fold by fold: 3 folds × 2 repeats = 6 pairs.
    assert_eq!(paired_counts(&md, "| MUTAG | ET |"), [6, 6], "{md}");
    assert_eq!(paired_counts(&md, "| MUTAG | GIN |"), [6], "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    let rows: Vec<(String, String, u64)> = json["paired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (
                s("model"),
                s("baseline"),
                r["paired"]["pairs"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [("ET", "no-graph"), ("ET", "GIN"), ("GIN", "no-graph")];
    let want: Vec<(String, String, u64)> = want
        .iter()
        .map(|(m, b)| (m.to_string(), b.to_string(), 6))
        .collect();
    assert_eq!(rows, want);
}

/// Wins + ties + losses of each paired cell (`+1.00 ± 2.00 (w / t / l)`) of the row starting
/// with `row`.
fn paired_counts(md: &str, row: &str) -> Vec<usize> {
    let line = md.lines().find(|l| l.starts_with(row)).unwrap_or_default();
    line.split(" (")
        .skip(1)
        .map(|cell| {
            cell.split(')')
                .next()
                .unwrap_or_default()
                .split(" / ")
                .map(|n| n.trim().parse::<usize>().unwrap_or(0))
                .sum()
        })
        .collect()
}

#[test]
fn cdat_tables_quick() {
    basin_data::require_data!("tu/MUTAG");
    let out = tempfile::tempdir().unwrap();
    let md = reproduce_in(
        out.path(),
        "cdat-table1",
        &["--dataset", "MUTAG"],
        &[
            "MUTAG/CDAT/energy.png",
            "MUTAG/ET/energy.png",
            "MUTAG/loss.png",
            "MUTAG/CDAT/et-paper",
            "MUTAG/CDAT/code-cv",
        ],
    );
    // The code-terms variant runs the leak-free CV only.
    for protocol in ["et-paper", "code-cv"] {
        let p = out.path().join("MUTAG/CDAT code-terms").join(protocol);
        assert!(!p.exists(), "{} exists", p.display());
    }
    assert!(
        md.contains("K = 128 rectified memories") && md.contains("K = 128 ½relu² memories"),
        "{md}"
    );
    assert!(
        md.contains("| MUTAG | 188 | 98.8 ± 0.3 | 96.6 ± 0.2 |")
            && md.contains("- MUTAG / CDAT: block 0 E")
            && md.contains("block 0 V")
            && md.contains("ties to the lower cross-entropy"),
        "{md}"
    );
    assert_eq!(paired_counts(&md, "| MUTAG | CDAT |"), [3, 3], "{md}");
    assert_eq!(paired_counts(&md, "| MUTAG | ET |"), [3, 3], "{md}");
    assert_eq!(
        paired_counts(&md, "| MUTAG | CDAT code-terms |"),
        [3, 3],
        "{md}"
    );
    let md = reproduce("cdat-table4", &[], &[]);
    assert!(
        md.contains("| GT | 1.074 M |")
            && md.contains("| CDAT | 1.060 M |")
            && md.contains("**MUTAG**"),
        "{md}"
    );
    let md = reproduce("cdat-table11", &[], &["MUTAG/full/energy.png"]);
    assert!(
        md.contains("| (w/o) Mutual Excitation | 83.09 |") && md.contains("ours MUTAG, CV"),
        "{md}"
    );
}

#[test]
fn sfi_tables_quick() {
    let md = reproduce("sfi-table2", &[], &["pattern-gap.png", "cluster-gap.png"]);
    for row in [
        "| pattern | 40/10/10 | no graph (features → head) | – | 641 |",
        "| pattern | 40/10/10 | GPS | 86.64 ± 0.11 (GraphGPS paper 86.69 ± 0.06) |",
        "| cluster | 40/10/10 | SFi-Former | 78.28 ± 0.15 |",
        // Started from DFi: only the friction branch is new, so the parameter count is SFi's.
        "| pattern | 40/10/10 | SFi-Former+ | 86.78 ± 0.21 | 5091 |",
    ] {
        assert!(md.contains(row), "{row}\n{md}");
    }
    let md = reproduce("et-table7", &["--dataset", "pattern"], &[]);
    assert!(
        md.contains("| pattern | 40/10/10 | ET | 90.69 ± 0.01 | 13144 |")
            && md.contains("| pattern | 40/10/10 | no graph (features → head) | – | 2305 |"),
        "{md}"
    );
    let md = reproduce("sfi-params", &[], &[]);
    assert!(
        md.contains("| PascalVoc | 8 × 68 | 1250805 | 1249709 | 1096 | 1096 | yes |")
            && md.contains("| PeptidesFunc | 2 × 235 | 2929009 | 3707327 |"),
        "{md}"
    );
    basin_data::require_data!("lrgb/peptides-functional");
    let md = reproduce("sfi-table4", &[], &[]);
    assert!(
        md.contains("| Peptides-func | 15535 | 15535 | 150.94 | 150.9 | 153.7 | 307.30 | 307.3 |")
            && md.contains("| CLUSTER | 1400 | 12000 |"),
        "{md}"
    );
    let md = reproduce("sfi-table1", &[], &["gap.png"]);
    assert!(
        md.contains("| SFi-Former | 69.62 ± 0.54 | 6751 |")
            && md.contains("| SFi-Former+ | 70.24 ± 0.39 | 6751 |"),
        "{md}"
    );
}

#[test]
fn hopfield_reproductions_quick() {
    let md = reproduce("hopfield-memory", &[], &["capacity.png"]);
    assert!(
        md.contains("Never rises for any of the four memories: **true**"),
        "{md}"
    );
    basin_data::require_data!("mil");
    let md = reproduce("hopfield-mil", &[], &[]);
    assert!(
        md.contains("| elephant | 200 | 1391 |") && md.contains("| musk1 | 92 | 476 |"),
        "{md}"
    );
}

fn refused(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(args)
        .output()
        .unwrap();
    assert!(!o.status.success(), "{args:?} was accepted");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn unknown_tables_presets_and_flags_are_refused_by_name() {
    let err = refused(&["reproduce", "table99"]);
    assert!(
        err.contains("unknown table `table99`") && err.contains("et-table2"),
        "{err}"
    );
    let err = refused(&["reproduce", "table1", "--only", "hopfield"]);
    assert!(
        ["et-table1", "cdat-table1", "sfi-table1"]
            .iter()
            .all(|id| err.contains(id))
            && err.contains("--only"),
        "{err}"
    );
    let err = refused(&["reproduce", "et-table14", "--paper"]);
    assert!(err.contains("--paper") && err.contains("--cpu"), "{err}");
    let err = refused(&["reproduce", "hopfield-memory", "--epochs", "3"]);
    assert!(
        err.contains("--epochs") && err.contains("hopfield-memory"),
        "{err}"
    );
    let err = refused(&["reproduce", "et-table2", "--train-images", "10"]);
    assert!(err.contains("--train-images"), "{err}");
    let err = refused(&["reproduce", "hopfield-mil", "--repeats", "2"]);
    assert!(
        err.contains("--repeats") && err.contains("hopfield-mil"),
        "{err}"
    );
    let err = refused(&[
        "reproduce",
        "hopfield-mil",
        "--selection",
        "metric-then-loss",
    ]);
    assert!(
        err.contains("--selection") && err.contains("hopfield-mil"),
        "{err}"
    );
    let err = refused(&["reproduce", "hopfield-mil", "--ema", "0.99"]);
    assert!(
        err.contains("--ema") && err.contains("hopfield-mil"),
        "{err}"
    );
    let err = refused(&["reproduce", "et-table2", "--ema", "1"]);
    assert!(err.contains("--ema") && err.contains("[0, 1)"), "{err}");
    let err = refused(&["reproduce", "et-table2", "--selection", "latest"]);
    assert!(err.contains("metric-then-loss"), "{err}");
    let err = refused(&["reproduce", "et-table2", "--repeats", "0"]);
    assert!(err.contains("--repeats"), "{err}");
    let err = refused(&["reproduce", "et-table1", "--dataset", "MUTAG"]);
    assert!(err.contains("MUTAG") && err.contains("tolokers"), "{err}");
}

/// A data directory without the table's sets is an error that says what was looked for,
/// sharded or not (a shard writes no report to look in).
#[test]
fn a_table_with_no_dataset_found_fails_and_names_them() {
    let empty = tempfile::tempdir().unwrap();
    let out = empty.path().join("out");
    for shard in [None, Some("0/2")] {
        let data = empty.path().display().to_string();
        let out = out.display().to_string();
        let mut args = vec![
            "reproduce",
            "et-table2",
            "--quick",
            "--dataset",
            "MUTAG",
            "--data-dir",
            &data,
            "--out",
            &out,
        ];
        args.extend(shard.iter().flat_map(|s| ["--shard", s]));
        let err = refused(&args);
        assert!(
            err.contains("no dataset could be loaded") && err.contains("MUTAG:"),
            "{shard:?}: {err}"
        );
    }
}

/// `--jobs 2` trains a TU table's runs in two processes and writes the report once: every run
/// as one process at the same thread count trains it; a table that trains outside its runs is
/// refused with the tables that take the flag.
#[test]
fn jobs_train_a_tables_runs_in_processes() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "reproduce",
            "et-table2",
            "--quick",
            "--dataset",
            "MUTAG",
            "--out",
            out,
        ];
        args.extend(extra);
        crate::common::basin_one_thread(&args)
    };
    let (jobs, one) = (tmp.path().join("jobs"), tmp.path().join("one"));
    let by_jobs = run(jobs.to_str().unwrap(), &["--jobs", "2"]);
    run(one.to_str().unwrap(), &[]);
    assert!(!by_jobs.contains("shard"), "no shard hint: {by_jobs}");
    assert!(jobs.join("report.md").is_file());
    // Every record of the one-process run, with the same test metrics, and no other.
    let records = |root: &std::path::Path| {
        let mut found = std::collections::BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().is_some_and(|n| n == "record.json") {
                    let r: serde_json::Value =
                        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
                    let rel = p.strip_prefix(root).unwrap().display().to_string();
                    found.insert(rel, r["summary"]["test_accuracy"].clone());
                }
            }
        }
        found
    };
    let (a, b) = (records(&jobs), records(&one));
    assert!(a.len() > 3, "{a:?}");
    assert_eq!(a, b);
    let err = refused(&["reproduce", "hopfield-mil", "--quick", "--jobs", "2"]);
    assert!(
        err.contains("--jobs is for") && err.contains("et-table2"),
        "{err}"
    );
}

#[test]
fn the_list_is_the_registry() {
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(["reproduce", "--list"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for t in basin_repro::registry() {
        assert!(
            out.contains(t.id()),
            "{} missing from --list:\n{out}",
            t.id()
        );
    }
}

/// `reproduce table1 --quick` runs the Table 1 of every paper that has one, in the papers'
/// order, each into its own folder, and writes an index over them with their headline cells.
#[test]
fn a_table_number_runs_every_papers_table_and_indexes_them() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let stdout = crate::common::basin_one_thread(&[
        "reproduce",
        "table1",
        "--quick",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("3 tables into"), "{stdout}");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    let ids: Vec<&str> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["et-table1", "cdat-table1", "sfi-table1"]);
    for e in index.as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        assert!(e["error"].is_null(), "{id}: {}", e["error"]);
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(id).join("report.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(report["preset"], "quick", "{id}");
        assert!(report["command_seconds"].as_f64().unwrap() > 0.0, "{id}");
        assert_eq!(report["headline"], e["headline"], "{id}");
    }
    // ET's Table 1 ran on the anomaly graphs present, and its headline says so.
    let et = &index[0]["headline"];
    assert!(
        et.as_array().is_some_and(|h| !h.is_empty()),
        "no headline: {et}"
    );
    let md = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(md.contains("[report](et-table1/report.md)"), "{md}");
}

/// Without a preset flag a table runs the machine's preset, and its report says which and why.
#[test]
fn the_default_preset_follows_the_machine_and_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("params");
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args([
            "reproduce",
            "sfi-params",
            "--device",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    // sfi-params has no --cpu preset: on a CPU its first, the paper's, with the reason.
    assert_eq!(report["preset"], "paper");
    let why = report["preset_reason"].as_str().unwrap();
    assert!(
        why.contains("no CUDA device") && why.contains("no --cpu"),
        "{why}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(&format!("Preset: --paper ({why})")), "{md}");
}
