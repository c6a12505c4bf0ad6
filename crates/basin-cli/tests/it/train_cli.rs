//! `basin train` / `basin eval` / `basin compare` end to end: both models on small real or
//! generated data, the re-evaluation from disk equals what training measured, two models'
//! records paired fold by fold, and bad input is a named error.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::data_dir;

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
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "et-graph",
        &[("folds = 10", "folds = 3"), ("epochs = 100", "epochs = 2")],
    );
    train_then_eval(&run, &tmp.path().join("out"), 3);
    let report = std::fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(report.contains("MUTAG/repeat-0/fold-2"), "{report}");
    assert!(
        report.contains(
            "Model: D = 32, energy attention 4 × 8 over the edges, K = 128 ½relu² memories"
        ),
        "{report}"
    );
}

/// A TU folder published without node labels or attributes (as the social-network sets are)
/// trains end to end in `basin train` and in `reproduce et-table2 --dataset PATH` with its
/// baselines, on its nodes' one-hot degree, and both reports say so.
#[test]
fn a_tu_set_without_node_features_trains_on_the_degree() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("RINGS");
    std::fs::create_dir(&dir).unwrap();
    // 40 graphs: rings (class 0) and stars (class 1) of 5 to 8 nodes.
    let (mut a, mut indicator, mut labels, mut next) =
        (String::new(), String::new(), String::new(), 1);
    for g in 0..40 {
        let n = 5 + g % 4;
        let star = g % 2 == 1;
        for v in 0..n {
            indicator.push_str(&format!("{}\n", g + 1));
            let (s, t) = if star { (0, v) } else { (v, (v + 1) % n) };
            if s != t {
                a.push_str(&format!(
                    "{}, {}\n{}, {}\n",
                    next + s,
                    next + t,
                    next + t,
                    next + s
                ));
            }
        }
        labels.push_str(&format!("{}\n", u8::from(star)));
        next += n;
    }
    std::fs::write(dir.join("RINGS_A.txt"), a).unwrap();
    std::fs::write(dir.join("RINGS_graph_indicator.txt"), indicator).unwrap();
    std::fs::write(dir.join("RINGS_graph_labels.txt"), labels).unwrap();
    let data = dir.to_str().unwrap().to_owned();
    let run = tiny_run(
        tmp.path(),
        "et-graph",
        &[
            ("data = \"MUTAG\"", &format!("data = \"{data}\"")),
            ("folds = 10", "folds = 2"),
            ("epochs = 100", "epochs = 1"),
        ],
    );
    let out = tmp.path().join("out");
    let (ok, _, err) = basin(&[
        "train",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("Data: node features: one-hot node degree (0..=7)"),
        "{report}"
    );
    let table = tmp.path().join("table");
    let (ok, _, err) = basin(&[
        "reproduce",
        "et-table2",
        "--quick",
        "--dataset",
        &data,
        "--out",
        table.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let report = std::fs::read_to_string(table.join("report.md")).unwrap();
    assert!(
        report.contains("**RINGS** node features (every model and baseline): one-hot node degree"),
        "{report}"
    );
    for baseline in ["GIN", "no-graph"] {
        assert!(report.contains(baseline), "{baseline} missing:\n{report}");
    }
}

/// `--jobs 2` trains the folds in two processes and writes one report: the same runs, metric for
/// metric, as one process at the same thread count, each listed once.
#[test]
fn jobs_train_the_folds_in_processes_and_write_the_report_once() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let edits = [("folds = 10", "folds = 3"), ("epochs = 100", "epochs = 2")];
    let run = tiny_run(tmp.path(), "et-graph", &edits);
    let train = |out: &str, extra: &[&str]| {
        let mut args = vec!["train", run.to_str().unwrap(), "--out", out];
        args.extend(extra);
        crate::common::basin_one_thread(&args)
    };
    let (jobs, one) = (tmp.path().join("jobs"), tmp.path().join("one"));
    let by_jobs = train(jobs.to_str().unwrap(), &["--jobs", "2"]);
    let by_one = train(one.to_str().unwrap(), &[]);
    let runs = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.contains("test_accuracy"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(runs(&by_jobs).len(), 3, "{by_jobs}");
    assert_eq!(runs(&by_jobs), runs(&by_one));
    assert!(!by_jobs.contains("shard"), "no shard hint: {by_jobs}");
    assert!(jobs.join("report.md").is_file());
    for f in 0..3 {
        assert!(
            jobs.join(format!("repeat-0/fold-{f}/record.json"))
                .is_file()
        );
    }
    let (ok, _, err) = basin(&[
        "train",
        run.to_str().unwrap(),
        "--jobs",
        "2",
        "--shard",
        "0/2",
    ]);
    assert!(!ok && err.contains("--shard"), "{err}");
}

#[test]
fn a_graph_run_grows_by_repeats_without_training_its_finished_folds_again() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let edits = [("folds = 10", "folds = 2"), ("epochs = 100", "epochs = 1")];
    let one = tiny_run(tmp.path(), "et-graph", &edits);
    let out = tmp.path().join("out");
    let out_s = out.to_str().unwrap();
    let (ok, _, err) = basin(&["train", one.to_str().unwrap(), "--out", out_s]);
    assert!(ok, "{err}");
    // A fold trained again rewrites its checkpoint.
    let started = |r: usize, f: usize| {
        let p = out.join(format!("repeat-{r}/fold-{f}/checkpoint.safetensors"));
        std::fs::metadata(p).unwrap().modified().unwrap()
    };
    let before = [started(0, 0), started(0, 1)];
    // The file unchanged, the count from the command line (`run.toml` records it).
    let one_s = one.to_str().unwrap();
    let (ok, trained, err) = basin(&[
        "train",
        one_s,
        "--out",
        out_s,
        "--set",
        "protocol.repeats=2",
    ]);
    assert!(ok, "{err}");
    let recorded = std::fs::read_to_string(out.join("run.toml")).unwrap();
    assert!(recorded.contains("repeats = 2"), "{recorded}");
    assert_eq!(
        [started(0, 0), started(0, 1)],
        before,
        "repeat 0 trained again"
    );
    assert!(out.join("repeat-1/fold-1/record.json").is_file());
    assert!(
        trained.contains("repeat-1/fold-1: test_accuracy"),
        "{trained}"
    );
    // Anything else changed is another run, from the file or the command line.
    let text = std::fs::read_to_string(&one).unwrap();
    std::fs::write(&one, text.replacen("repeats = 1", "repeats = 2", 1)).unwrap();
    let (ok, _, err) = basin(&["train", one_s, "--out", out_s]);
    assert!(ok, "the file saying what --set said is the same run: {err}");
    let (ok, _, err) = basin(&[
        "train",
        one_s,
        "--out",
        out_s,
        "--set",
        "protocol.train.epochs=2",
    ]);
    assert!(!ok && err.contains("holds another run"), "{err}");
    std::fs::write(&one, text.replacen("epochs = 1", "epochs = 2", 1)).unwrap();
    let (ok, _, err) = basin(&["train", one_s, "--out", out_s]);
    assert!(!ok && err.contains("holds another run"), "{err}");
    // A bad override is refused by name before anything is read or written.
    let fresh = tmp.path().join("fresh");
    let (ok, _, err) = basin(&[
        "train",
        one_s,
        "--out",
        fresh.to_str().unwrap(),
        "--set",
        "protocol.folds.fold=3",
    ]);
    assert!(
        !ok && err.contains("--set protocol.folds.fold=3") && err.contains("unknown field `fold`"),
        "{err}"
    );
    assert!(!fresh.join("run.toml").exists());
}

#[test]
fn sfi_trains_and_evaluates_on_a_pattern_subset() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "sfi-pattern",
        &[
            ("subset = [1000, 200, 200]", "subset = [60, 20, 20]"),
            ("epochs = 10", "epochs = 2"),
            ("total = 10", "total = 2"),
        ],
    );
    train_then_eval(&run, &tmp.path().join("out"), 1);
}

/// A file of `set` in `basin_graph::lrgb`'s layout: 30 paths and cycles of 3..8 nodes (node
/// columns cycling 0, 1, 2), split 20/5/5; `targets` adds the set's target arrays given the
/// graph sizes.
fn write_lrgb(
    dir: &Path,
    set: basin_graph::lrgb::LrgbSet,
    targets: impl FnOnce(&mut basin_graph::npz::NpzWriter, &[usize]),
) {
    let (f, p) = set.feature_widths();
    let (mut x, mut e, mut index, mut node_ptr, mut edge_ptr) = (
        Vec::new(),
        Vec::new(),
        [Vec::new(), Vec::new()],
        vec![0i64],
        vec![0i64],
    );
    let sizes: Vec<usize> = (0..30).map(|g| 3 + g % 6).collect();
    for (g, &n) in sizes.iter().enumerate() {
        x.extend((0..n * f).map(|i| (i % 3) as f32));
        let mut pairs: Vec<(usize, usize)> = (0..n - 1).map(|v| (v, v + 1)).collect();
        if g % 2 == 1 {
            pairs.push((n - 1, 0));
        }
        for &(a, b) in &pairs {
            index[0].extend([a as i64, b as i64]);
            index[1].extend([b as i64, a as i64]);
        }
        e.extend(std::iter::repeat_n(0.0f32, 2 * pairs.len() * p));
        node_ptr.push(node_ptr[g] + n as i64);
        edge_ptr.push(edge_ptr[g] + 2 * pairs.len() as i64);
    }
    let (nodes, edges) = (x.len() / f, e.len() / p);
    let mut w = basin_graph::npz::NpzWriter::create(&dir.join(set.npz())).unwrap();
    w.add_f32("node_feat", &[nodes, f], &x).unwrap();
    w.add_f32("edge_feat", &[edges, p], &e).unwrap();
    let flat: Vec<i64> = index.concat();
    w.add_i64("edge_index", &[2, edges], &flat).unwrap();
    w.add_i64("node_ptr", &[31], &node_ptr).unwrap();
    w.add_i64("edge_ptr", &[31], &edge_ptr).unwrap();
    targets(&mut w, &sizes);
    w.finish().unwrap();
    let ids = |r: std::ops::Range<usize>| r.map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    std::fs::write(
        dir.join(set.split_json()),
        format!(
            r#"{{"train": [{}], "val": [{}], "test": [{}]}}"#,
            ids(0..20),
            ids(20..25),
            ids(25..30)
        ),
    )
    .unwrap();
}

/// Trains and re-evaluates the PATTERN example edited into a two-epoch run on the LRGB-layout
/// file at `data` (and by `edits`); returns the report.
fn gps_run_on(tmp: &Path, data: &Path, edits: &[(&str, &str)]) -> String {
    let data_line = format!("data = \"{}\"", data.display());
    let mut all = vec![
        ("data = \"pattern\"", data_line.as_str()),
        ("subset = [1000, 200, 200]", ""),
        ("epochs = 10", "epochs = 2"),
        ("total = 10", "total = 2"),
    ];
    all.extend_from_slice(edits);
    let run = tiny_run(tmp, "sfi-pattern", &all);
    let out = tmp.join("out");
    train_then_eval(&run, &out, 1);
    std::fs::read_to_string(out.join("report.md")).unwrap()
}

#[test]
fn a_gps_model_trains_on_real_valued_targets_and_is_scored_by_mae() {
    use basin_graph::lrgb::LrgbSet;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("peptides-struct");
    std::fs::create_dir_all(&data).unwrap();
    // 11 real targets per graph, linear in its size.
    write_lrgb(&data, LrgbSet::PeptidesStruct, |w, sizes| {
        let y: Vec<f32> = sizes
            .iter()
            .flat_map(|&n| (0..11).map(move |t| (n as f32 - 5.0) * 0.3 + t as f32 * 0.1))
            .collect();
        w.add_f32("labels", &[sizes.len(), 11], &y).unwrap();
    });
    let report = gps_run_on(
        tmp.path(),
        &data,
        &[
            ("level = \"node\"", "level = \"graph\""),
            ("metric = \"accuracy-sbm\"", "metric = \"mae\""),
        ],
    );
    assert!(report.contains("test_mae"), "{report}");
}

#[test]
fn a_gps_model_ranks_links_and_is_scored_by_mrr() {
    use basin_graph::lrgb::LrgbSet;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("pcqm-contact");
    std::fs::create_dir_all(&data).unwrap();
    // Per graph: node 0 with every other node, positive when the other node is odd.
    write_lrgb(&data, LrgbSet::PcqmContact, |w, sizes| {
        let (mut a, mut b, mut y, mut ptr) = (Vec::new(), Vec::new(), Vec::new(), vec![0i64]);
        for &n in sizes {
            for v in 1..n as i64 {
                a.push(0);
                b.push(v);
                y.push(v % 2);
            }
            ptr.push(ptr[ptr.len() - 1] + n as i64 - 1);
        }
        let links = a.len();
        a.extend(b);
        w.add_i64("link_index", &[2, links], &a).unwrap();
        w.add_i64("link_label", &[links], &y).unwrap();
        w.add_i64("link_ptr", &[sizes.len() + 1], &ptr).unwrap();
    });
    let report = gps_run_on(
        tmp.path(),
        &data,
        &[
            ("head_layers = 3", "head_layers = 1"),
            ("metric = \"accuracy-sbm\"", "metric = \"mrr\""),
        ],
    );
    assert!(report.contains("test_mrr"), "{report}");
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

/// A record names the revision the binary was built from, even when the binary runs in a
/// directory outside any repository (there git would answer `unknown`, or another project's).
#[test]
fn records_name_the_revision_the_binary_was_built_from() {
    let Some(built) = option_env!("BASIN_GIT_REVISION") else {
        return; // built outside a git checkout: nothing to name
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "et-anomaly",
        &[
            ("data = \"tolokers\"", "data = \"planted\""),
            ("epochs = 100", "epochs = 1"),
        ],
    );
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(["train", run.to_str().unwrap(), "--out", "out", "--quiet"])
        .current_dir(tmp.path())
        .env("BASIN_DEVICE", "cpu")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let record = walk(&tmp.path().join("out"))
        .into_iter()
        .find(|p| p.ends_with("record.json"))
        .unwrap();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    assert_eq!(record["git_revision"], built);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files.extend(walk(&p));
        } else {
            files.push(p);
        }
    }
    files
}

#[test]
fn every_example_parses_and_cdat_trains_and_evaluates_on_a_planted_graph() {
    let (ok, list, err) = basin(&["train", "--example", "list"]);
    assert!(ok, "{err}");
    for name in [
        "et-graph",
        "et-anomaly",
        "cdat-graph",
        "cdat-anomaly",
        "et-image",
        "et-image-implicit",
        "sfi-pattern",
    ] {
        assert!(list.contains(name), "{list}");
        let (ok, text, err) = basin(&["train", "--example", name]);
        assert!(ok && text.contains("task = "), "{name}: {err}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "cdat-anomaly",
        &[
            ("data = \"tolokers\"", "data = \"planted\""),
            ("epochs = 100", "epochs = 2"),
        ],
    );
    train_then_eval(&run, &tmp.path().join("out"), 1);
}

#[test]
fn a_batch_beyond_the_machines_memory_is_refused_before_work() {
    basin_data::require_data!("tu/DD");
    let tmp = tempfile::tempdir().unwrap();
    // DD's largest graph has 5,748 nodes: uncapped, 1,000 graphs per batch need terabytes.
    let run = tiny_run(
        tmp.path(),
        "et-graph",
        &[
            ("data = \"MUTAG\"", "data = \"DD\""),
            ("max_nodes = 500", "max_nodes = 100000"),
            ("batch = 32", "batch = 1000"),
        ],
    );
    let out = tmp.path().join("out");
    let (ok, _, err) = basin(&[
        "train",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok, "a terabyte batch was accepted");
    assert!(
        err.contains(".toml: architecture") && err.contains("GiB") && err.contains("batch"),
        "{err}"
    );
    assert!(
        !out.join("run.toml").exists(),
        "the refused run wrote its run file"
    );
}

#[test]
fn et_image_trains_and_evaluates_on_fashion_mnist_beside_its_baselines() {
    basin_data::require_data!("images/fashion-mnist");
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "et-image",
        &[
            ("train_images = 2000", "train_images = 96"),
            ("val_images = 250", "val_images = 16"),
            ("test_images = 500", "test_images = 16"),
            ("epochs = 3", "epochs = 1"),
            ("mask_seeds = 4", "mask_seeds = 1"),
        ],
    );
    let out = tmp.path().join("out");
    train_then_eval(&run, &out, 1);
    for f in [
        "reconstructions.png",
        "dynamics.png",
        "descent.png",
        "descent.gif",
        "updates.png",
        "record.csv",
    ] {
        assert!(out.join("run-0").join(f).is_file(), "{f} missing");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("test_mse_mean_predictor"), "{report}");
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
    basin_data::require_data!("tu/MUTAG");
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
        ("k = 8", "k = 100000", "batching.pe.k"),
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

/// One bad value per field of the example run files: each is refused before any training,
/// naming the file and the field.
#[test]
fn one_bad_value_per_field_is_refused_naming_the_field() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    // Tiny budgets: a value that slips through trains for seconds, not minutes.
    let (_, graph, _) = basin(&["train", "--example", "et-graph"]);
    let graph =
        graph
            .replacen("epochs = 100", "epochs = 1", 1)
            .replacen("folds = 10", "folds = 2", 1);
    let (_, anomaly, _) = basin(&["train", "--example", "et-anomaly"]);
    let anomaly = anomaly
        .replacen("data = \"tolokers\"", "data = \"planted\"", 1)
        .replacen("epochs = 100", "epochs = 1", 1);
    let cases: &[(&str, &str, &str, &str)] = &[
        // (example, from, to, field named in the error)
        ("graph", "blocks = 2", "blocks = 0", "blocks"),
        ("graph", "conv_kernel = 3", "conv_kernel = 2", "conv_kernel"),
        (
            "graph",
            "label_smoothing = 0.05",
            "label_smoothing = 1.5",
            "label_smoothing",
        ),
        ("graph", "batch = 32", "batch = 0", "batch"),
        (
            "graph",
            "readout_dropout = 0.0",
            "readout_dropout = 1.0",
            "readout_dropout",
        ),
        (
            "graph",
            "readout_dropout = 0.0",
            "readout_dropout = 0.0\nreadout_hidden = 0",
            "readout_hidden",
        ),
        (
            "graph",
            "readout_init_gain = 0.1",
            "readout_init_gain = -1.0",
            "readout_init_gain",
        ),
        (
            "graph",
            "readout_init_gain = 0.1",
            "readout_init_gain = nan",
            "readout_init_gain",
        ),
        (
            "graph",
            "readout_init_gain = 0.1",
            "readout_init_gain = 0.1\ndegree_encoding = 0",
            "degree_encoding",
        ),
        ("graph", "dim = 32", "dim = -5", "dim"),
        ("graph", "steps = 2", "steps = 0", "steps"),
        ("graph", "head_dim = 8", "head_dim = 0", "head_dim"),
        ("graph", "heads = 4", "heads = 0", "heads"),
        ("graph", "memories = 128", "memories = 0", "memories"),
        ("graph", "alpha = 0.1", "alpha = -1.0", "alpha"),
        ("graph", "sigma = 0.02", "sigma = -0.02", "sigma"),
        ("graph", "eps = 0.00001", "eps = 0.0", "eps"),
        ("graph", "max_nodes = 500", "max_nodes = 0", "max_nodes"),
        ("graph", "k = 8", "k = 0", "k"),
        ("graph", "folds = 2", "folds = 1", "folds"),
        ("graph", "folds = 2", "folds = 100", "folds"),
        (
            "graph",
            "val_ratio = 0.1111111111111111",
            "val_ratio = 1.5",
            "val_ratio",
        ),
        ("graph", "repeats = 1", "repeats = 0", "repeats"),
        ("graph", "epochs = 1", "epochs = 0", "epochs"),
        ("graph", "lr = 0.003", "lr = nan", "lr"),
        ("graph", "beta1 = 0.9", "beta1 = 1.5", "beta1"),
        ("graph", "beta2 = 0.99", "beta2 = -0.1", "beta2"),
        ("graph", "warmup = 17", "warmup = 1000", "warmup"),
        (
            "graph",
            "weight_decay = 0.05",
            "weight_decay = -1.0",
            "weight_decay",
        ),
        (
            "anomaly",
            "readout_hidden = 64",
            "readout_hidden = 0",
            "readout_hidden",
        ),
        ("anomaly", "runs = 1", "runs = 0", "runs"),
        (
            "anomaly",
            "train_ratio = 0.4",
            "train_ratio = 1.2",
            "train_ratio",
        ),
        (
            "anomaly",
            "test_fraction_of_rest = 0.67",
            "test_fraction_of_rest = 0.0",
            "test_fraction_of_rest",
        ),
    ];
    let (_, image, _) = basin(&["train", "--example", "et-image"]);
    let cases = [
        cases,
        &[
            (
                "image",
                "train_images = 2000",
                "train_images = 0",
                "train_images",
            ),
            ("image", "epochs = 3", "epochs = 0", "epochs"),
            ("image", "batch = 64", "batch = 0", "batch"),
            ("image", "mask_seeds = 4", "mask_seeds = 0", "mask_seeds"),
            ("image", "lr = 0.002", "lr = -1.0", "lr"),
            (
                "image",
                "data = \"fashion-mnist\"",
                "data = \"MUTAG\"",
                "MUTAG",
            ),
        ],
    ]
    .concat();
    let mut missed = Vec::new();
    for (i, (example, from, to, field)) in cases.iter().enumerate() {
        let text = match *example {
            "graph" => &graph,
            "image" => &image,
            _ => &anomaly,
        };
        assert!(text.contains(from), "`{from}` not in the {example} example");
        std::fs::write(&bad, text.replacen(from, to, 1)).unwrap();
        let out = tmp.path().join(format!("never-{i}"));
        let (ok, _, err) = basin(&[
            "train",
            bad.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let named = err.contains("bad.toml") && err.contains(field);
        if ok || !named || out.join("run-0").exists() || out.join("MUTAG").exists() {
            missed.push(format!("{to}: ok = {ok}, error: {}", err.trim()));
        }
    }
    assert!(
        missed.is_empty(),
        "not refused by name:\n{}",
        missed.join("\n")
    );
}

/// One finished run per fold under `dir/repeat-0/fold-i`, the test split named by `split`.
fn write_runs(dir: &Path, split: &str, accuracies: &[f64]) {
    for (i, &acc) in accuracies.iter().enumerate() {
        let mut r = basin_train::record::RunRecord::new(
            format!("fold-{i}"),
            serde_json::Value::Null,
            i as u64,
            "cpu".into(),
        );
        r.split_hashes.insert("test".into(), format!("{split}{i}"));
        r.summary.insert("test_accuracy".into(), acc);
        r.summary.insert("selected_val_accuracy".into(), 0.5);
        r.status = basin_train::record::RunStatus::Finished;
        let d = dir.join("repeat-0").join(format!("fold-{i}"));
        std::fs::create_dir_all(&d).unwrap();
        r.write(&d.join("record.json")).unwrap();
    }
}

#[test]
fn compare_pairs_two_models_fold_by_fold() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, other, empty) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("other"),
        tmp.path().join("empty"),
    );
    write_runs(&a, "fold", &[0.80, 0.70, 0.90, 0.60]);
    write_runs(&b, "fold", &[0.80, 0.60, 0.85, 0.65]);
    write_runs(&other, "elsewhere", &[0.5, 0.5]);
    std::fs::create_dir_all(&empty).unwrap();
    let (a, b, other, empty) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        other.to_str().unwrap(),
        empty.to_str().unwrap(),
    );

    // Differences 0, +10, +5, −5 points: mean +2.50, standard error 3.23.
    let (ok, out, err) = basin(&["compare", a, b]);
    assert!(ok, "{err}");
    assert!(
        out.contains("| test_accuracy (%) | 4 | 75.00 | 72.50 | +2.50 ± 3.23 (2 / 1 / 1) |"),
        "{out}"
    );
    assert!(
        !out.contains("selected_val"),
        "only test metrics by default:\n{out}"
    );

    let (ok, out, err) = basin(&["compare", b, a, "--json", "--metric", "test_accuracy"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["pairs"], 4);
    assert_eq!(
        (v[0]["wins"].clone(), v[0]["losses"].clone()),
        (1.into(), 2.into())
    );
    assert!((v[0]["difference"].as_f64().unwrap() + 0.025).abs() < 1e-12);

    let (ok, _, err) = basin(&["compare", a, other]);
    assert!(!ok && err.contains("not run on the same folds"), "{err}");
    let (ok, _, err) = basin(&["compare", a, empty]);
    assert!(!ok && err.contains("no record.json"), "{err}");
    let (ok, _, err) = basin(&["compare", a, b, "--metric", "test_auc"]);
    assert!(!ok && err.contains("metric `test_auc`"), "{err}");
}

#[test]
fn select_chooses_per_fold_by_validation_and_its_runs_compare_as_one_model() {
    let tmp = tempfile::tempdir().unwrap();
    // (validation accuracy, test accuracy) per fold; the loss the same everywhere.
    let write = |name: &str, folds: &[(f64, f64)]| {
        let dir = tmp.path().join(name);
        for (i, &(val, test)) in folds.iter().enumerate() {
            let config =
                serde_json::json!({ "metric": "accuracy", "selection": "metric-then-loss" });
            let mut r = basin_train::record::RunRecord::new(
                format!("{name} fold-{i}"),
                config,
                0,
                "cpu".into(),
            );
            r.split_hashes.insert("test".into(), format!("fold{i}"));
            r.summary.insert("selected_val_accuracy".into(), val);
            r.summary.insert("selected_val_loss".into(), 0.5);
            r.summary.insert("test_accuracy".into(), test);
            let d = dir.join("repeat-0").join(format!("fold-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            r.write(&d.join("record.json")).unwrap();
        }
        dir.to_str().unwrap().to_owned()
    };
    let a = write("a", &[(0.5, 0.80), (0.5, 0.70), (0.5, 0.90), (0.5, 0.60)]);
    // b is better on the test folds where it is worse on validation, and the other way round.
    let b = write("b", &[(0.6, 0.70), (0.4, 0.90), (0.6, 0.95), (0.5, 0.99)]);
    let out = tmp.path().join("selected");
    let (ok, md, err) = basin(&["select", &a, &b, "--out", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    // Folds 0 and 2 take b (higher validation), 1 takes a, 3 ties and keeps the first: a.
    assert!(md.contains("| **selected** | 4 | **73.75** |"), "{md}");
    assert!(md.contains(&format!("| {b} | 2 | 88.50 |")), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("selection.json")).unwrap())
            .unwrap();
    let chosen: Vec<u64> = json["selected"]["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["candidate"].as_u64().unwrap())
        .collect();
    assert_eq!(chosen, [1, 0, 1, 0]);
    // The selection's runs pair with a's fold by fold: −10, 0, +5, 0 points.
    let (ok, cmp, err) = basin(&["compare", out.to_str().unwrap(), &a]);
    assert!(ok, "{err}");
    assert!(
        cmp.contains("| test_accuracy (%) | 4 | 73.75 | 75.00 | -1.25 ± 3.15 (1 / 2 / 1) |"),
        "{cmp}"
    );
    // Nothing is written over an earlier selection.
    let (ok, _, err) = basin(&["select", &a, &b, "--out", out.to_str().unwrap()]);
    assert!(!ok && err.contains("not empty"), "{err}");
    let (ok, _, err) = basin(&["select", &a]);
    assert!(!ok, "one candidate is refused: {err}");
}

/// Two trainings into one directory: the second is refused at once, naming the first's pid;
/// once the first is killed (its hold left behind), the same command takes the hold over and
/// finishes the run.
#[test]
fn a_second_process_into_one_directory_is_refused_and_a_dead_holder_taken_over() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let run = tiny_run(
        tmp.path(),
        "et-graph",
        &[("folds = 10", "folds = 3"), ("epochs = 100", "epochs = 30")],
    );
    let out = tmp.path().join("out");
    let args = [
        "train",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let mut first = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(args)
        .env("BASIN_DEVICE", "cpu")
        .env("BASIN_DATA_DIR", data_dir())
        .env("OMP_NUM_THREADS", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let hold = out.join(".basin-lock").join("all");
    let t0 = std::time::Instant::now();
    while !hold.exists() && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(hold.exists(), "the first process took no hold");
    let (ok, _, err) = basin(&args);
    assert!(!ok, "the second process was let in");
    assert!(
        err.contains("another process is writing this directory")
            && err.contains(&format!("pid {}", first.id())),
        "{err}"
    );
    // A directory in use is not a config field.
    assert!(!err.contains("config field"), "{err}");
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(hold.exists(), "a killed process leaves its hold behind");
    let (ok, _, err) = basin(&args);
    assert!(ok, "{err}");
    assert!(err.contains("taking over the hold"), "{err}");
    assert!(!hold.exists(), "the hold outlived its command");
    assert!(out.join("report.md").is_file());
}

/// `gradient = "implicit"` in a run file's block trains ET and CDAT at their attractors: the
/// epoch records carry the settling steps and the adjoint residual, evaluation from disk
/// reproduces the test metrics, and a noisy descent is refused naming the field.
#[test]
fn implicit_gradients_train_et_and_cdat_from_a_run_file() {
    basin_data::require_data!("tu/MUTAG");
    let tmp = tempfile::tempdir().unwrap();
    let implicit = (
        "steps = 2\n",
        "steps = 2\ngradient = { mode = \"implicit\", max_steps = 40 }\n",
    );
    let small = [("folds = 10", "folds = 2"), ("epochs = 100", "epochs = 2")];
    let noisy = tiny_run(tmp.path(), "cdat-graph", &[small[0], small[1], implicit]);
    let refused = tmp.path().join("refused");
    let (ok, _, err) = basin(&[
        "train",
        noisy.to_str().unwrap(),
        "--out",
        refused.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("block.dynamics.sigma"), "{err}");
    for (model, quiet) in [
        ("et-graph", ("sigma = 0.02", "sigma = 0.0")),
        ("cdat-graph", ("sigma = 0.02", "sigma = 0.0")),
    ] {
        let dir = tmp.path().join(model);
        std::fs::create_dir_all(&dir).unwrap();
        let run = tiny_run(&dir, model, &[small[0], small[1], implicit, quiet]);
        let out = dir.join("out");
        train_then_eval(&run, &out, 2);
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("repeat-0/fold-0/record.json")).unwrap(),
        )
        .unwrap();
        let metrics = &record["epochs"][0]["metrics"];
        let steps = metrics["settle_steps"].as_f64().unwrap_or_default();
        assert!((1.0..=40.0).contains(&steps), "{model}: {metrics}");
        assert!(
            metrics["adjoint_residual"].as_f64().is_some()
                && metrics["spectral_radius"].as_f64().is_some(),
            "{model}: {metrics}"
        );
        // The report says how many settles converged, counted from every fold's record.
        // The training forwards are counted apart from the validation ones.
        let (mut forwards, mut training) = (0.0, 0.0);
        for fold in std::fs::read_dir(out.join("repeat-0")).unwrap() {
            let path = fold.unwrap().path().join("record.json");
            let record: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            for epoch in record["epochs"].as_array().unwrap() {
                forwards += epoch["metrics"]["settle_forwards"].as_f64().unwrap();
                training += epoch["metrics"]["settle_train_forwards"].as_f64().unwrap();
            }
        }
        assert!(
            0.0 < training && training < forwards,
            "{model}: {training} of {forwards}"
        );
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(
            report.contains(&format!(" of {forwards:.0} settling forwards ("))
                && report.contains(&format!(" of {training:.0} training forwards (")),
            "{model}: {report}"
        );
    }
    // A curriculum: the first epoch unrolled (no settling), the second at the attractor.
    let dir = tmp.path().join("warm-up");
    std::fs::create_dir_all(&dir).unwrap();
    let warm = ("epochs = 100", "epochs = 2\nimplicit_warmup = 1");
    let quiet = ("sigma = 0.02", "sigma = 0.0");
    let run = tiny_run(&dir, "et-graph", &[small[0], warm, implicit, quiet]);
    let out = dir.join("out");
    train_then_eval(&run, &out, 2);
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("repeat-0/fold-0/record.json")).unwrap(),
    )
    .unwrap();
    let (first, second) = (
        &record["epochs"][0]["metrics"],
        &record["epochs"][1]["metrics"],
    );
    assert!(first.get("settle_steps").is_none(), "{first}");
    assert!(second["settle_steps"].as_f64().is_some(), "{second}");
}

/// A folder of images of mixed sizes and formats (ImageNet-1k's layout) trains an image run
/// streamed, each image resized and cropped to the model's 28² grey; its unreadable file is
/// refused by name, or left out with `on_corrupt = "skip"`.
#[test]
fn an_image_folder_of_mixed_sizes_trains_streamed() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("imagenet-like");
    basin_image::synthetic::write_folder(&folder.join("train"), 12, 0).unwrap();
    basin_image::synthetic::write_folder(&folder.join("val"), 4, 100).unwrap();
    std::fs::write(folder.join("train/checker/broken.jpg"), b"no image").unwrap();
    let data = format!("data = \"{}\"", folder.display());
    let edits = [
        ("data = \"fashion-mnist\"", data.as_str()),
        ("train_images = 2000", "train_images = 24"),
        ("val_images = 250", "val_images = 8"),
        ("test_images = 500", "test_images = 12"),
        ("epochs = 3", "epochs = 1"),
        ("mask_seeds = 4", "mask_seeds = 1"),
    ];
    let run = tiny_run(tmp.path(), "et-image", &edits);
    let out = tmp.path().join("out");
    let (ok, _, err) = basin(&[
        "train",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!ok && err.contains("broken.jpg"), "{err}");
    let text = std::fs::read_to_string(&run).unwrap();
    assert!(text.contains("on_corrupt = \"error\""), "{text}");
    std::fs::write(
        &run,
        text.replace("on_corrupt = \"error\"", "on_corrupt = \"skip\""),
    )
    .unwrap();
    train_then_eval(&run, &out, 1);
    assert!(out.join("run-0").join("reconstructions.png").is_file());
}

/// A run directory `basin train` wrote before the crates were reorganised (its run file names
/// the memory energy by its old kind, `hopfield`): `basin eval` reads its run file and
/// checkpoints and scores each fold as training did, and `basin train` on the same file resumes
/// it, training nothing again.
#[test]
fn a_run_written_before_the_reorganisation_still_loads() {
    basin_data::require_data!("tu/MUTAG");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-written-at-1618e95");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    copy_dir(&fixture, &out);
    let run_file = std::fs::read_to_string(out.join("run.toml")).unwrap();
    assert!(run_file.contains("kind = \"hopfield\"\n"), "{run_file}");
    let recorded = |fold: usize| -> f64 {
        let record: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(format!("repeat-0/fold-{fold}/record.json")))
                .unwrap(),
        )
        .unwrap();
        record["summary"]["test_accuracy"].as_f64().unwrap()
    };
    let (ok, evaluated, err) = basin(&["eval", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    for fold in 0..2 {
        let line = format!("repeat-0/fold-{fold}: test_accuracy {:.4}", recorded(fold));
        assert!(evaluated.contains(&line), "`{line}` not in:\n{evaluated}");
    }
    let before = std::fs::read(out.join("repeat-0/fold-0/checkpoint.safetensors")).unwrap();
    let (ok, trained, err) = basin(&[
        "train",
        out.join("run.toml").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    for fold in 0..2 {
        let line = format!("repeat-0/fold-{fold}: test_accuracy {:.4}", recorded(fold));
        assert!(trained.contains(&line), "`{line}` not in:\n{trained}");
    }
    let after = std::fs::read(out.join("repeat-0/fold-0/checkpoint.safetensors")).unwrap();
    assert_eq!(before, after, "a finished fold was trained again");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
