//! Every reproduction runs end to end in its `--quick` form on the real data and writes its
//! report (the numbers of a quick run mean nothing; the path is what is checked). The checks
//! read `report.json`, the report's form for programs, not the Markdown's phrasing.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::data_dir;

/// Runs a quick reproduction into a fresh directory; `files` must exist there afterwards.
/// Returns its `report.json`.
fn reproduce(table: &str, extra: &[&str], files: &[&str]) -> Value {
    reproduce_in(tempfile::tempdir().unwrap().path(), table, extra, files)
}

/// The `report.json` a reproduction wrote into `out`.
fn report_json(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap()
}

/// [`reproduce`] into `out`.
fn reproduce_in(out: &Path, table: &str, extra: &[&str], files: &[&str]) -> Value {
    reproduce_from(&data_dir(), out, table, extra, files)
}

/// [`reproduce_in`] with the data directory `data`.
fn reproduce_from(data: &Path, out: &Path, table: &str, extra: &[&str], files: &[&str]) -> Value {
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
        .env("BASIN_DATA_DIR", data)
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
    assert!(out.join("report.md").is_file(), "{table}: no report.md");
    report_json(out)
}

/// The array under `key` of `v`.
fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array `{key}` in {v}"))
}

/// The first of `items` whose `field` is `value`.
fn entry<'a>(items: &'a [Value], field: &str, value: &str) -> &'a Value {
    items
        .iter()
        .find(|x| x[field] == value)
        .unwrap_or_else(|| panic!("no `{field}` = {value:?} among {items:?}"))
}

/// The strings under `field` of each of `items`, in order.
fn names<'a>(items: &'a [Value], field: &str) -> Vec<&'a str> {
    items.iter().filter_map(|x| x[field].as_str()).collect()
}

/// The number at `v`, which must be finite.
fn finite(v: &Value) -> f64 {
    let x = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    assert!(x.is_finite(), "{x}");
    x
}

/// The headline cell `what` of a report: ours and the paper's.
fn headline(report: &Value, what: &str) -> (String, Option<String>) {
    let cell = entry(list(report, "headline"), "what", what);
    (
        cell["ours"].as_str().unwrap().to_owned(),
        cell["paper"].as_str().map(str::to_owned),
    )
}

/// Each paired comparison of `model` on `dataset` (`report.json`'s `paired`): the baseline and
/// the number of pairs, which the wins, ties and losses must add up to.
fn paired(report: &Value, dataset: &str, model: &str) -> Vec<(String, u64)> {
    list(report, "paired")
        .iter()
        .filter(|p| p["dataset"] == dataset && p["model"] == model)
        .map(|p| {
            let q = &p["paired"];
            let n = q["pairs"].as_u64().unwrap();
            let count = |k: &str| q[k].as_u64().unwrap();
            assert_eq!(count("wins") + count("ties") + count("losses"), n, "{q}");
            (p["baseline"].as_str().unwrap().to_owned(), n)
        })
        .collect()
}

/// `(baseline, pairs)` for each of `baselines` with `n` pairs.
fn each(baselines: &[&str], n: u64) -> Vec<(String, u64)> {
    baselines.iter().map(|b| (b.to_string(), n)).collect()
}

/// The energy curves' names of a model entry.
fn curves(model: &Value) -> Vec<&str> {
    list(model, "energy")
        .iter()
        .filter_map(|c| c[0].as_str())
        .collect()
}

#[test]
fn et_table14_quick() {
    basin_data::require_data!("images/fashion-mnist");
    // Figures 6 to 9 of the trained model, where the report says they are.
    let json = reproduce(
        "et-table14",
        &["--dataset", "fashion-mnist"],
        &[
            "fashion-mnist/full/run-0/kernels.png",
            "fashion-mnist/full/run-0/positions.png",
            "fashion-mnist/full/run-0/worst.png",
            "fashion-mnist/full/run-0/best.png",
        ],
    );
    let results = list(&json, "results");
    assert!(results.iter().all(|r| r["dataset"] == "fashion-mnist"));
    // Every ablation of the paper's table, in its order.
    assert_eq!(
        names(results, "ablation"),
        ["full", "full+self", "nohn+self", "nohn", "noatt"]
    );
    for r in results {
        finite(&r["record"]["summary"]["test_mse"]);
    }
    // Without the Hopfield module, or without attention, the block is smaller.
    let params = |a: &str| {
        entry(results, "ablation", a)["block_params"]
            .as_i64()
            .unwrap()
    };
    assert!(params("nohn") < params("full") && params("noatt") < params("full"));
}

/// ET Table 16: ET and a ViT of about its size on the same draw, the ViT's weights in place of
/// the block, both scored and drawn; the ViT has no energy to plot.
#[test]
fn et_table16_quick() {
    basin_data::require_data!("images/fashion-mnist");
    let json = reproduce(
        "et-table16",
        &["--dataset", "fashion-mnist"],
        &[
            "fashion-mnist/ViT/run-0/worst.png",
            "fashion-mnist/ET/run-0/best.png",
            "fashion-mnist/ET/run-0/energy.png",
        ],
    );
    let results = list(&json, "results");
    assert_eq!(names(results, "ablation"), ["ViT", "ET"]);
    let params = |m: &str| entry(results, "ablation", m)["params"].as_i64().unwrap();
    let ratio = params("ViT") as f64 / params("ET") as f64;
    assert!((1.1..1.5).contains(&ratio), "ViT / ET parameters {ratio}");
    for r in results {
        finite(&r["record"]["summary"]["test_psnr"]);
    }
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
    let first = table1();
    let at = |json: &Value, ratio: f64| -> Value {
        list(json, "results")
            .iter()
            .find(|r| r["dataset"] == "reddit" && r["ratio"].as_f64() == Some(ratio))
            .unwrap_or_else(|| panic!("no reddit row at {ratio}"))
            .clone()
    };
    for ratio in [0.01, 0.4] {
        let row = at(&first, ratio);
        let et = entry(list(&row, "models"), "model", "ET");
        assert_eq!(curves(et), ["homogeneous"]);
        finite(&et["report"]["aggregate"]["test_auc"][0]);
        finite(&row["floor"]["aggregate"]["test_auc"][0]);
    }
    let (ours, paper) = headline(&first, "reddit 40 % ET AUC");
    // One run (--quick): its value, no spread of zero.
    assert!(!ours.contains(" ± ") && paper.is_none(), "{ours} {paper:?}");
    // Run again into the same directory (as the report pass of `--jobs` does), the ET runs are
    // read back, and each row's wall time is still the runs' own training time, as their
    // records keep it, not the time of reading them back.
    let again = table1();
    let walls = |row: &Value| -> Vec<f64> {
        list(row, "models")
            .iter()
            .map(|m| &m["report"])
            .chain([&row["floor"]])
            .flat_map(|r| list(r, "runs"))
            .map(|run| run["wall_seconds"].as_f64().unwrap())
            .collect()
    };
    for (a, b) in list(&first, "results").iter().zip(list(&again, "results")) {
        // Read back: the same epochs and scores, and a record's time still covers the epochs
        // it trained (it also counts the retest, so it need not equal the first pass's).
        let et_runs = |row: &Value| row["models"][0]["report"]["runs"].clone();
        for (x, y) in et_runs(a)
            .as_array()
            .unwrap()
            .iter()
            .zip(et_runs(b).as_array().unwrap())
        {
            assert_eq!(x["epochs"], y["epochs"]);
            assert_eq!(x["summary"], y["summary"]);
            let trained: f64 = list(y, "epochs")
                .iter()
                .map(|e| e["seconds"].as_f64().unwrap())
                .sum();
            let wall = y["wall_seconds"].as_f64().unwrap();
            assert!(trained > 0.0 && wall >= trained, "{wall} against {trained}");
        }
        let (seconds, runs) = (b["seconds"].as_f64().unwrap(), walls(b));
        let sum: f64 = runs.iter().sum();
        assert!((seconds - sum).abs() < 1e-6, "{seconds} against {runs:?}");
    }
    let json = reproduce(
        "cdat-table2",
        &["--dataset", "reddit"],
        &[
            "reddit-40pct/CDAT/energy.png",
            "reddit-40pct/CDAT-code/run-0/record.json",
        ],
    );
    let row = list(&json, "results")
        .iter()
        .find(|r| r["dataset"] == "reddit" && r["ratio"].as_f64() == Some(0.4))
        .unwrap();
    let models = list(row, "models");
    assert_eq!(names(models, "model"), ["CDAT", "CDAT-code", "ET"]);
    for m in ["CDAT", "CDAT-code"] {
        let m = entry(models, "model", m);
        assert_eq!(curves(m), ["homogeneous", "homogeneous V"]);
        finite(&m["report"]["aggregate"]["test_auc"][0]);
    }
}

/// ET Table 13: the three models of the ablation on the same split and runs, each with the
/// modules its name says (one term without the other module, two for the full model).
#[test]
fn et_table13_quick() {
    basin_data::require_data!("anomaly/reddit.npz");
    let json = reproduce(
        "et-table13",
        &["--dataset", "reddit"],
        &[
            "reddit-40pct/HN-only/energy.png",
            "reddit-1pct/ATT-only/energy.png",
        ],
    );
    for row in list(&json, "results") {
        let models = list(row, "models");
        assert_eq!(names(models, "model"), ["ATT-only", "HN-only", "ET"]);
        let terms = |m: &str| list(&entry(models, "model", m)["config"]["block"], "terms").len();
        assert_eq!(
            (terms("ATT-only"), terms("HN-only"), terms("ET")),
            (1, 1, 2)
        );
        for m in models {
            finite(&m["report"]["aggregate"]["test_auc"][0]);
        }
        finite(&row["floor"]["aggregate"]["test_auc"][0]);
    }
}

/// CDAT Table 12: the three CDAT variants and ET on the same split and runs, each variant with
/// the control term its name says switched off, and the storage functional V recorded for the
/// CDAT rows.
#[test]
fn cdat_table12_quick() {
    basin_data::require_data!("anomaly/reddit.npz");
    let json = reproduce(
        "cdat-table12",
        &["--dataset", "reddit"],
        &[
            "reddit-40pct/SUPP/energy.png",
            "reddit-40pct/Wx/run-0/record.json",
        ],
    );
    let row = list(&json, "results")
        .iter()
        .find(|r| r["dataset"] == "reddit")
        .unwrap();
    let models = list(row, "models");
    assert_eq!(names(models, "model"), ["CDAT", "SUPP", "Wx", "ET"]);
    let dynamics = |m: &str| entry(models, "model", m)["config"]["block"]["dynamics"].clone();
    assert_eq!(dynamics("SUPP")["coupling"]["rank"], 0);
    assert_eq!(dynamics("SUPP")["inhibition"], true);
    assert_eq!(dynamics("Wx")["inhibition"], false);
    assert_eq!(
        dynamics("Wx")["coupling"]["rank"],
        dynamics("CDAT")["coupling"]["rank"]
    );
    for m in ["CDAT", "SUPP", "Wx"] {
        assert_eq!(
            curves(entry(models, "model", m)),
            ["homogeneous", "homogeneous V"]
        );
    }
    for m in models {
        finite(&m["report"]["aggregate"]["test_auc"][0]);
    }
    finite(&row["floor"]["aggregate"]["test_auc"][0]);
}

/// ET Table 12 on a CARE-GNN-layout Amazon (basin-graph's scipy-written fixture, three
/// relations) in a data directory of its own: both aggregations and the homogeneous ET run on
/// the same split, one energy curve per relation for the per-relation models.
#[test]
fn et_table12_quick() {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("anomaly")).unwrap();
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../basin-graph/tests/fixtures/fraud/Amazon.mat"
        ),
        data.path().join("anomaly/Amazon.mat"),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args([
            "reproduce",
            "et-table12",
            "--quick",
            "--dataset",
            "amazon",
            "--out",
        ])
        .arg(out.path())
        .env("BASIN_DEVICE", "cpu")
        .env("BASIN_DATA_DIR", data.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = report_json(out.path());
    let results = list(&json, "results");
    assert!(!results.is_empty());
    for row in results {
        let models = list(row, "models");
        assert_eq!(names(models, "model"), ["MaxPool", "Concatenation", "ET"]);
        for m in ["MaxPool", "Concatenation"] {
            let m = entry(models, "model", m);
            assert_eq!(curves(m), ["net_upu", "net_usu", "net_uvu"]);
            finite(&m["report"]["aggregate"]["test_auc"][0]);
        }
        assert_eq!(curves(entry(models, "model", "ET")), ["homogeneous"]);
    }
}

/// CDAT Tables 13 and 14: the reference models built and counted, every printed cell matched.
#[test]
fn cdat_params_counts() {
    let json = reproduce("cdat-params", &[], &[]);
    let total = |table: &str, m: &str| {
        entry(list(&json, table), "model", m)["total"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(total("anomaly", "CDAT"), 4_294_839);
    assert_eq!(total("graph", "ET"), 1_058_306);
    assert_eq!(json["matched"], json["cells"]);
}

/// ET Table 15: the built counts, without biases, and the cells that match the paper's.
#[test]
fn et_table15_counts() {
    let json = reproduce("et-table15", &[], &[]);
    let rows = list(&json, "rows");
    let total = |m: &str| entry(rows, "model", m)["total"].as_i64().unwrap();
    assert_eq!(total("ET"), 4_872_193);
    assert_eq!(total("ALBERT ViT-Base"), 8_412_672);
    assert_eq!(total("ViT-Base"), 86_286_336);
    let (ours, paper) = headline(&json, "ET parameters, no biases");
    assert_eq!((ours.as_str(), paper.as_deref()), ("4.87M", Some("4.87M")));
}

#[test]
fn et_table2_quick() {
    basin_data::require_data!("tu/MUTAG");
    // `--repeats` repeats the model's folds and the baselines' alike; so do `--selection` and
    // `--ema`.
    let out = tempfile::tempdir().unwrap();
    let json = reproduce_in(
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
    let options = &json["options"];
    assert_eq!(
        (
            &options["folds"],
            &options["repeats"],
            &options["selection"]
        ),
        (&Value::from(3), &Value::from(2), &Value::from("metric"))
    );
    let row = entry(list(&json, "results"), "dataset", "MUTAG");
    assert_eq!(row["graphs"], 188);
    let et = entry(list(row, "models"), "model", "ET");
    assert_eq!(list(&et["cv"], "runs").len(), 6, "3 folds × 2 repeats");
    assert_eq!(et["et_paper"]["protocol"], "et-paper");
    assert_eq!(curves(et), ["block 0 E", "block 1 E"]);
    for part in [&et["cv"], &row["gin"], &row["pooled"]] {
        finite(&part["aggregate"]["test_accuracy"][0]);
    }
    let record = |dir: &str| -> Value {
        let path = out.path().join(dir).join("repeat-1/fold-2/record.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let gin = record("MUTAG/baseline-gin");
    let gin = gin.to_string();
    for field in ["\"val_loss\"", "\"selection\":\"metric\"", "\"ema\":0.9"] {
        assert!(gin.contains(field), "{field}: {gin}");
    }
    let et_record = record("MUTAG/ET/cv");
    assert!(
        et_record.to_string().contains("\"ema\":0.9"),
        "the model averages too: {et_record}"
    );
    // Each model paired with both baselines fold by fold: 3 folds × 2 repeats = 6 pairs.
    assert_eq!(paired(&json, "MUTAG", "ET"), each(&["no-graph", "GIN"], 6));
    assert_eq!(paired(&json, "MUTAG", "GIN"), each(&["no-graph"], 6));
    assert_eq!(list(&json, "paired").len(), 3);
}

#[test]
fn cdat_tables_quick() {
    basin_data::require_data!("tu/MUTAG");
    let out = tempfile::tempdir().unwrap();
    let json = reproduce_in(
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
    // CDAT's memory is the rectified Hopfield term; the code-terms variant's is ET's ½relu².
    let memory = |model: &str| -> Value {
        let m = entry(list(&json["options"], "models"), "name", model);
        list(&m["config"]["block"], "terms")
            .iter()
            .find(|t| t["kind"] == "hopfield-memory")
            .unwrap()
            .clone()
    };
    assert_eq!(
        (&memory("CDAT")["activation"], &memory("CDAT")["memories"]),
        (&Value::from("rectified"), &Value::from(128))
    );
    assert_eq!(memory("CDAT code-terms")["activation"], "relu");
    let row = entry(list(&json, "results"), "dataset", "MUTAG");
    assert_eq!(row["graphs"], 188);
    let models = list(row, "models");
    let cdat = entry(models, "model", "CDAT");
    assert_eq!(
        curves(cdat),
        ["block 0 E", "block 0 V", "block 1 E", "block 1 V"]
    );
    assert_eq!(json["options"]["selection"], "metric-then-loss");
    // The paper's numbers beside ours: CDAT 98.8 and ET 96.6 on MUTAG.
    for (model, paper) in [("CDAT", "98.8"), ("ET", "96.6")] {
        let (_, published) = headline(&json, &format!("MUTAG {model} CV accuracy"));
        assert!(
            published.as_deref().is_some_and(|p| p.starts_with(paper)),
            "{model}: {published:?}"
        );
    }
    for model in ["CDAT", "ET", "CDAT code-terms"] {
        assert_eq!(
            paired(&json, "MUTAG", model),
            each(&["no-graph", "GIN"], 3),
            "{model}"
        );
    }
    let json = reproduce("cdat-table4", &[], &[]);
    assert_eq!(json["dataset"], "MUTAG");
    let costs = list(&json, "costs");
    assert_eq!(names(costs, "model"), ["GT", "ET", "CDAT"]);
    for c in costs {
        assert!(c["params"].as_i64().unwrap() > 0, "{c}");
        finite(&c["inference_ms"][0]);
        finite(&c["train_s_per_epoch"][0]);
    }
    let json = reproduce("cdat-table11", &[], &["MUTAG/full/energy.png"]);
    let row = entry(list(&json, "results"), "dataset", "MUTAG");
    let models = list(row, "models");
    assert_eq!(
        names(models, "model"),
        ["no-excitation", "no-inhibition", "full", "full+prior"]
    );
    for m in models {
        finite(&m["cv"]["aggregate"]["test_accuracy"][0]);
    }
    // The extra row is the full model with eq. 3's prior, and nothing else changed.
    let configs = list(&json["options"], "models");
    let coupling =
        |m: &str| entry(configs, "name", m)["config"]["block"]["dynamics"]["coupling"].clone();
    assert_eq!(coupling("full+prior")["prior"]["distance"], "ring");
    assert_eq!(coupling("full")["prior"]["distance"], "none");
    assert_eq!(coupling("full+prior")["rank"], coupling("full")["rank"]);
}

#[test]
fn sfi_tables_quick() {
    let json = reproduce("sfi-table2", &[], &["pattern-gap.png", "cluster-gap.png"]);
    let models = [
        "no graph (features → head)",
        "GatedGCN",
        "GPS",
        "DFi-Former",
        "SFi-Former",
        "SFi-Former+",
    ];
    let parameters = |dataset: &str, model: &str| -> i64 {
        let d = entry(list(&json, "datasets"), "dataset", dataset);
        assert_eq!(names(list(d, "results"), "model"), models);
        entry(list(d, "results"), "model", model)["parameters"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(parameters("pattern", "no graph (features → head)"), 641);
    // Started from DFi: only the friction branch is new, so the parameter count is SFi's.
    assert_eq!(parameters("pattern", "SFi-Former+"), 5091);
    assert_eq!(
        parameters("pattern", "SFi-Former+"),
        parameters("pattern", "SFi-Former")
    );
    assert_eq!(
        parameters("cluster", "SFi-Former+"),
        parameters("cluster", "SFi-Former")
    );
    // The superpixel sets are not in the shared data: their rows say so.
    let mnist = entry(list(&json, "datasets"), "dataset", "mnist-superpixels");
    assert_eq!(mnist["absent"], true);
    assert!(
        list(&json, "missing")
            .iter()
            .any(|m| m.as_str().unwrap().starts_with("mnist-superpixels")),
        "{}",
        json["missing"]
    );
    let json = reproduce("et-table7", &["--dataset", "pattern"], &[]);
    let d = entry(list(&json, "datasets"), "dataset", "pattern");
    finite(&d["et"]["aggregate"]["test_accuracy_sbm"][0]);
    let no_graph = entry(list(d, "baselines"), "model", "no graph (features → head)");
    assert_eq!(no_graph["parameters"], 2305);
    let json = reproduce("sfi-params", &[], &[]);
    let rows = list(&json, "rows");
    let row = |m: &str| -> (Value, Value, Value) {
        let r = entry(rows, "model", m);
        (
            r["paper"].clone(),
            r["built"].clone(),
            r["unidentified"].clone(),
        )
    };
    assert_eq!(
        row("pascalvoc-sp"),
        (1250805.into(), 1249709.into(), 1096.into())
    );
    // PCQM-Contact with its edge head (a Linear(d, d) whose node outputs are dotted per pair).
    assert_eq!(
        row("pcqm-contact"),
        (978526.into(), 977623.into(), 903.into())
    );
    assert_eq!(
        (row("peptides-func").0, row("peptides-func").1),
        (2929009.into(), 3707327.into())
    );
    basin_data::require_data!("lrgb/peptides-functional");
    let json = reproduce("sfi-table4", &[], &[]);
    let stats = list(&json, "stats");
    let peptides = entry(stats, "name", "peptides-func");
    assert_eq!(peptides["graphs"], 15535);
    assert!((finite(&peptides["avg_nodes"]) - 150.94).abs() < 0.01);
    assert!((2.0 * finite(&peptides["avg_edges"]) - 307.30).abs() < 0.01);
    assert_eq!(entry(stats, "name", "CLUSTER")["graphs"], 1400);
    let json = reproduce("sfi-table1", &[], &["peptides-func-gap.png"]);
    let d = entry(list(&json, "datasets"), "dataset", "peptides-func");
    let results = list(d, "results");
    for (model, paper) in [("SFi-Former", "69.62"), ("SFi-Former+", "70.24")] {
        assert_eq!(entry(results, "model", model)["parameters"], 6751);
        let (_, published) = headline(&json, &format!("peptides-func {model} AP ×100"));
        assert_eq!(published.as_deref(), Some(paper));
    }
}

/// `et-table14` reads ImageNet-1k from a folder of the user's (`images/imagenet/{train,val}`)
/// and streams it: images of mixed sizes and formats, each cropped to the model's side.
#[test]
fn et_table14_streams_an_imagenet_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let root = basin_data::registry::get("imagenet-1k")
        .unwrap()
        .location(&data);
    basin_image::synthetic::write_folder(&root.join("train"), 40, 0).unwrap();
    basin_image::synthetic::write_folder(&root.join("val"), 8, 100).unwrap();
    let out = tmp.path().join("out");
    let args = ["--dataset", "imagenet-1k", "--epochs", "1"];
    let json = reproduce_from(&data, &out, "et-table14", &args, &[]);
    let results = list(&json, "results");
    assert_eq!(names(results, "dataset"), ["imagenet-1k"; 5]);
    for r in results {
        finite(&r["record"]["summary"]["test_mse"]);
    }
    assert_eq!(json["options"]["datasets"][0], "imagenet-1k");
}

/// ET Table 7's read sets run through it when their files are in the data directory
/// (generated in their layouts): the superpixel models with the edge reconstruction, ZINC's
/// by the L1 loss and scored by MAE, each beside its baselines.
#[test]
fn et_table7_runs_the_read_sets_on_generated_files() {
    use basin_graph::lrgb::LrgbSet;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    for set in [
        LrgbSet::MnistSuperpixels,
        LrgbSet::Cifar10Superpixels,
        LrgbSet::Zinc,
    ] {
        let dir = basin_data::registry::get(set.name())
            .unwrap()
            .location(&data);
        let ds = basin_graph::synthetic::lrgb_like(set, 60, 2).unwrap();
        basin_graph::lrgb::save(&dir, set, &ds).unwrap();
    }
    let args = [
        "--dataset",
        "mnist-superpixels",
        "--dataset",
        "cifar10-superpixels",
        "--dataset",
        "zinc",
    ];
    let json = reproduce_from(&data, &tmp.path().join("out"), "et-table7", &args, &[]);
    for (set, key, reconstruction) in [
        ("mnist-superpixels", "accuracy", 1.0),
        ("cifar10-superpixels", "accuracy", 1.0),
        ("zinc", "mae", 0.0),
    ] {
        let d = entry(list(&json, "datasets"), "dataset", set);
        finite(&d["et"]["aggregate"][format!("test_{key}")][0]);
        for b in list(d, "baselines") {
            finite(&b["report"]["aggregate"][format!("test_{key}")][0]);
        }
        assert_eq!(
            d["et_config"]["edge_reconstruction"], reconstruction,
            "{set}"
        );
    }
    assert_eq!(list(&json, "missing").len(), 0, "{}", json["missing"]);
}

/// Every dataset of SFi Tables 1–3 runs through its table when its files are in the data
/// directory: small generated sets in each layout (`basin_graph::synthetic`) stand in for the
/// real ones, each where the registry expects it, and every model scores every set.
#[test]
fn every_sfi_dataset_runs_through_its_tables() {
    use basin_graph::lrgb::LrgbSet;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    for set in LrgbSet::ALL {
        let dir = basin_data::registry::get(set.name())
            .unwrap()
            .location(&data);
        let ds = basin_graph::synthetic::lrgb_like(set, 60, 1).unwrap();
        basin_graph::lrgb::save(&dir, set, &ds).unwrap();
    }
    let finite_everywhere = |json: &Value, sets: &[&str], key: &str| {
        for set in sets {
            let d = entry(list(json, "datasets"), "dataset", set);
            for r in list(d, "results") {
                let m = &r["report"]["aggregate"][format!("test_{key}")][0];
                assert!(
                    m.as_f64().is_some_and(f64::is_finite),
                    "{set} {}: {m}",
                    r["model"]
                );
            }
        }
    };
    let out = tmp.path().join("t1");
    let json = reproduce_from(&data, &out, "sfi-table1", &[], &["pascalvoc-sp-gap.png"]);
    assert_eq!(list(&json, "missing").len(), 0, "{}", json["missing"]);
    for (set, key) in [
        ("coco-sp", "macro_f1"),
        ("pascalvoc-sp", "macro_f1"),
        ("peptides-func", "ap"),
        ("peptides-struct", "mae"),
        ("pcqm-contact", "mrr"),
    ] {
        finite_everywhere(&json, &[set], key);
    }
    let out = tmp.path().join("t2");
    let args = [
        "--dataset",
        "mnist-superpixels",
        "--dataset",
        "cifar10-superpixels",
    ];
    let json = reproduce_from(&data, &out, "sfi-table2", &args, &[]);
    finite_everywhere(
        &json,
        &["mnist-superpixels", "cifar10-superpixels"],
        "accuracy",
    );
    let out = tmp.path().join("t3");
    let args = ["--dataset", "pascalvoc-sp", "--dataset", "peptides-struct"];
    let json = reproduce_from(&data, &out, "sfi-table3", &args, &[]);
    finite_everywhere(&json, &["pascalvoc-sp"], "macro_f1");
    finite_everywhere(&json, &["peptides-struct"], "mae");
    assert_eq!(list(&json, "datasets").len(), 2);
}

#[test]
fn hopfield_reproductions_quick() {
    let json = reproduce("hopfield-memory", &[], &["capacity.png"]);
    assert_eq!(json["energy_monotone"], true);
    for setting in list(&json, "capacity_theorem") {
        assert_eq!(setting["holds"], true);
    }
    if basin_data::datadir::test_data("images/fashion-mnist").is_some() {
        let modern = list(&json["images"], "modern");
        // β = 8 retrieves one image per query; β = 0.5 averages more of them.
        assert!(finite(&modern[0]["max_weight"]) > finite(&modern[1]["max_weight"]));
        assert_eq!(json["images"]["classical_random"]["exact"], 1.0);
    }
    basin_data::require_data!("mil");
    let out = tempfile::tempdir().unwrap();
    let json = reproduce_in(out.path(), "hopfield-mil", &[], &[]);
    let results = list(&json, "results");
    assert_eq!(
        names(results, "name"),
        ["elephant", "ucsb_breast_cancer", "musk1"]
    );
    for r in results {
        assert_eq!(r["protocol"], "nested-cross-validation");
        finite(&r["aggregate"]["test_auc"][0]);
    }
    // The bag and instance counts of the data read (only the Markdown table states them).
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
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
    let err = refused(&["reproduce", "hopfield-memory", "--paper"]);
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

/// In an empty data directory a folder the user provides is missing (with where it goes) and
/// nothing that must be fetched is called present.
#[test]
fn the_list_says_what_an_empty_data_directory_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args([
            "reproduce",
            "--list",
            "--data-dir",
            tmp.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let present: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("datasets present:"))
        .collect();
    assert!(
        present
            .iter()
            .all(|l| !l.contains("imagenet") && !l.contains("tolokers") && !l.contains("MUTAG")),
        "{out}"
    );
    assert!(
        out.contains(
            "imagenet-1k (a folder you provide: images/imagenet/train and images/imagenet/val)"
        ),
        "{out}"
    );
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
