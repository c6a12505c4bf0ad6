//! Loaders other than TU: CARE-GNN `.mat` fraud graphs (fixtures written by scipy, see
//! `tests/fixtures/fraud/gen.py`), the npz anomaly graphs and Peptides-func (real data), and
//! their named errors on malformed input.

use std::path::{Path, PathBuf};

use basin_data::DataError;
use basin_graph::GraphError;
use basin_graph::lrgb::{LrgbSet, load as load_lrgb};
use basin_graph::mat::{FraudConfig, MatFile, load_fraud_mat};
use basin_graph::npz::{NodeLoadOptions, NpzWriter, SelfLoops, load_anomaly_npz};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fraud")
        .join(name)
}

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("expected.json")).unwrap()).unwrap()
}

fn edges(v: &Value) -> Vec<(u32, u32)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_u64().unwrap() as u32))
        .collect()
}

#[test]
fn yelp_layout_reads_compressed_and_not() {
    let ex = &expected()["yelp"];
    let raw = FraudConfig {
        graph: NodeLoadOptions {
            symmetrize: false,
            self_loops: SelfLoops::Keep,
        },
        ..FraudConfig::yelp()
    };
    let plain = load_fraud_mat(&fixture("yelp_small.mat"), &raw).unwrap();
    let zipped = load_fraud_mat(&fixture("yelp_small_z.mat"), &raw).unwrap();
    assert_eq!(plain.graph, zipped.graph);
    assert_eq!(plain.relations, zipped.relations);
    let d = &plain;
    assert_eq!(d.graph.num_nodes(), 60);
    let homo: Vec<(u32, u32)> = d.graph.adjacency.iter().map(|(r, c, _)| (r, c)).collect();
    assert_eq!(homo, edges(&ex["homo"]));
    assert_eq!(d.relations.len(), 3);
    for r in &d.relations {
        let got: Vec<(u32, u32)> = r.adjacency.iter().map(|(a, b, _)| (a, b)).collect();
        assert_eq!(got, edges(&ex["relations"][&r.name]), "{}", r.name);
    }
    let want: Vec<usize> = ex["label"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(d.labels, want);
    assert_eq!(d.labelled.len(), 60);
    assert_eq!(d.graph.node_features.dim(), (60, 32));
    for (i, s) in ex["features_row_sums"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let got: f32 = d.graph.node_features.row(i).sum();
        assert!((got as f64 - s.as_f64().unwrap()).abs() < 1e-4, "row {i}");
    }
    let stats = d.stats();
    assert_eq!(stats.relations.len(), 3);
    assert!(stats.anomaly_ratio.unwrap() > 0.0);
    // Default options symmetrise (a no-op here: CARE-GNN relations are symmetric).
    let sym = load_fraud_mat(&fixture("yelp_small.mat"), &FraudConfig::yelp()).unwrap();
    assert_eq!(sym.graph.adjacency, d.graph.adjacency);
}

#[test]
fn amazon_first_3305_nodes_are_unlabelled() {
    let ex = &expected()["amazon"];
    let path = fixture("Amazon.mat");
    let cfg = FraudConfig::for_path(&path);
    assert_eq!(cfg, FraudConfig::amazon());
    let d = load_fraud_mat(&path, &cfg).unwrap();
    assert_eq!(d.graph.num_nodes(), 3350);
    assert_eq!(d.labelled.len(), ex["labelled"].as_u64().unwrap() as usize);
    assert_eq!(d.labelled[0], 3305);
    assert_eq!(
        d.graph.adjacency.nnz(),
        ex["homo_nnz"].as_u64().unwrap() as usize
    );
    for r in &d.relations {
        assert_eq!(
            r.adjacency.nnz(),
            ex["relations_nnz"][&r.name].as_u64().unwrap() as usize
        );
    }
    let s = d.stats();
    assert_eq!(s.labelled_nodes, Some(45));
    let fraud = ex["fraud"].as_u64().unwrap() as usize;
    assert_eq!(s.class_counts, vec![45 - fraud, fraud]);
    assert!((s.anomaly_ratio.unwrap() - fraud as f64 / 45.0).abs() < 1e-12);
    let sum: f64 = d.graph.node_features.iter().map(|&x| x as f64).sum();
    assert!((sum - ex["features_sum"].as_f64().unwrap()).abs() < 1e-2);
    // The BWGNN split over Amazon's labelled nodes only.
    let split = basin_graph::stratified_split(
        &d.labelled,
        &d.labelled_labels(),
        &basin_graph::SplitConfig::bwgnn(0.4),
    )
    .unwrap();
    assert!(
        split
            .train
            .iter()
            .chain(&split.val)
            .chain(&split.test)
            .all(|&v| v >= 3305)
    );
    assert_eq!(split.sizes().iter().sum::<usize>(), 45);
    // Yelp's convention on the same file labels everything.
    assert_eq!(
        load_fraud_mat(&path, &FraudConfig::yelp())
            .unwrap()
            .labelled
            .len(),
        3350
    );
}

#[test]
fn malformed_mat_files_are_named_errors() {
    let good = std::fs::read(fixture("yelp_small.mat")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // Truncated in the middle of an element.
    let p = write("cut.mat", &good[..good.len() / 2]);
    let e = load_fraud_mat(&p, &FraudConfig::yelp()).unwrap_err();
    assert!(
        matches!(&e, GraphError::Data(DataError::Format { path, .. }) if path.ends_with("cut.mat")),
        "{e}"
    );
    assert!(e.to_string().contains("bytes"), "{e}");
    // Not a MAT file.
    let mut bad = good.clone();
    bad[126] = b'X';
    let e = MatFile::parse(Path::new("x.mat"), &bad).unwrap_err();
    assert!(e.to_string().contains("endian indicator"), "{e}");
    let e = MatFile::parse(Path::new("short.mat"), b"MATLAB").unwrap_err();
    assert!(e.to_string().contains("128-byte"), "{e}");
    // v7.3 (HDF5) is recognised and refused.
    let mut h5 = vec![0u8; 600];
    h5[512..516].copy_from_slice(b"\x89HDF");
    assert!(
        MatFile::parse(Path::new("h.mat"), &h5)
            .unwrap_err()
            .to_string()
            .contains("v7.3")
    );
    // A missing variable is named.
    let m = MatFile::open(&fixture("yelp_small.mat")).unwrap();
    let e = m.adjacency("net_xyz").unwrap_err();
    assert!(e.to_string().contains("`net_xyz` is missing"), "{e}");
    let e = m.adjacency("label").unwrap_err();
    assert!(e.to_string().contains("expected a sparse matrix"), "{e}");
    // Missing file.
    let e = load_fraud_mat(&tmp.path().join("nope.mat"), &FraudConfig::yelp()).unwrap_err();
    assert!(
        matches!(e, GraphError::Data(DataError::MissingFile { .. })),
        "{e}"
    );
}

#[test]
fn anomaly_npz_graphs_match_published_statistics() {
    let reddit = load_anomaly_npz(
        &basin_data::require_data!("anomaly/reddit.npz"),
        &NodeLoadOptions::default(),
    )
    .unwrap();
    let s = reddit.stats();
    assert_eq!(s.nodes, 10_984);
    // Reddit stores both directions and a self loop per node: 168,016 rows.
    assert_eq!(s.directed_edges, 168_016);
    assert_eq!(reddit.graph.adjacency.num_self_loops(), 10_984);
    assert_eq!(s.node_features, 64);
    assert!(
        (s.anomaly_ratio.unwrap() - 0.0333).abs() < 5e-5,
        "{:?}",
        s.anomaly_ratio
    );
    let tolokers = load_anomaly_npz(
        &basin_data::require_data!("anomaly/tolokers.npz"),
        &NodeLoadOptions::default(),
    )
    .unwrap();
    let s = tolokers.stats();
    assert_eq!(s.nodes, 11_758);
    // Tolokers stores each undirected edge once: 519,000 rows.
    assert_eq!(s.undirected_edges, 519_000);
    assert_eq!(s.directed_edges, 1_038_000);
    assert_eq!(s.node_features, 10);
    assert!((s.anomaly_ratio.unwrap() - 0.2182).abs() < 5e-5);
    assert_eq!(tolokers.official_splits.len(), 10);
    for sp in &tolokers.official_splits {
        sp.check_disjoint().unwrap();
        assert!(sp.train.len() > 1000 && !sp.val.is_empty() && !sp.test.is_empty());
    }
    // Unsymmetrised, the stored rows come back as they are.
    let raw = load_anomaly_npz(
        &basin_data::require_data!("anomaly/tolokers.npz"),
        &NodeLoadOptions {
            symmetrize: false,
            self_loops: SelfLoops::Keep,
        },
    )
    .unwrap();
    assert_eq!(raw.graph.adjacency.nnz(), 519_000);
    let looped = load_anomaly_npz(
        &basin_data::require_data!("anomaly/tolokers.npz"),
        &NodeLoadOptions {
            symmetrize: true,
            self_loops: SelfLoops::Add,
        },
    )
    .unwrap();
    assert_eq!(looped.graph.adjacency.nnz(), 1_038_000 + 11_758);
}

fn small_npz(dir: &Path, name: &str, edges: &[i64], labels: &[i64]) -> PathBuf {
    let p = dir.join(name);
    let mut w = NpzWriter::create(&p).unwrap();
    w.add_f32("node_features", &[4, 2], &[0.0; 8]).unwrap();
    w.add_i64("node_labels", &[labels.len()], labels).unwrap();
    w.add_i64("edges", &[edges.len() / 2, 2], edges).unwrap();
    w.finish().unwrap();
    p
}

#[test]
fn malformed_npz_are_named_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = NodeLoadOptions::default();
    let ok = small_npz(tmp.path(), "ok.npz", &[0, 1, 1, 2, 2, 3], &[0, 1, 0, 0]);
    let d = load_anomaly_npz(&ok, &opts).unwrap();
    assert_eq!(d.graph.adjacency.nnz(), 6);
    assert_eq!(d.stats().anomaly_ratio, Some(0.25));
    let p = small_npz(tmp.path(), "range.npz", &[0, 1, 1, 9], &[0, 1, 0, 0]);
    let e = load_anomaly_npz(&p, &opts).unwrap_err();
    assert!(
        matches!(
            &e,
            GraphError::OutOfRange {
                value: 9,
                line: 2,
                hi: 3,
                ..
            }
        ),
        "{e}"
    );
    let p = small_npz(tmp.path(), "count.npz", &[0, 1], &[0, 1, 0]);
    let e = load_anomaly_npz(&p, &opts).unwrap_err();
    assert!(
        matches!(
            &e,
            GraphError::CountMismatch {
                expected: 4,
                found: 3,
                ..
            }
        ),
        "{e}"
    );
    let p = tmp.path().join("missing.npz");
    let mut w = NpzWriter::create(&p).unwrap();
    w.add_f32("node_features", &[1, 1], &[0.0]).unwrap();
    w.finish().unwrap();
    let e = load_anomaly_npz(&p, &opts).unwrap_err();
    assert!(
        e.to_string().contains("array `node_labels`: missing"),
        "{e}"
    );
    let p = tmp.path().join("garbage.npz");
    std::fs::write(&p, b"not a zip").unwrap();
    let e = load_anomaly_npz(&p, &opts).unwrap_err();
    assert!(
        e.to_string().contains("garbage.npz") && e.to_string().contains("npz"),
        "{e}"
    );
}

#[test]
fn peptides_func_with_its_official_split() {
    let ds = load_lrgb(
        &basin_data::require_data!("lrgb/peptides-functional"),
        LrgbSet::PeptidesFunc,
    )
    .unwrap();
    ds.validate().unwrap();
    let s = ds.stats();
    assert_eq!(s.graphs, 15_535);
    assert_eq!(s.nodes, 2_344_859);
    assert_eq!(s.directed_edges, 4_773_974);
    assert_eq!(s.node_features, 9);
    assert_eq!(s.edge_features, 3);
    assert_eq!(s.classes, 10);
    assert!(s.multi_label);
    let split = ds.official_split.as_ref().unwrap();
    assert_eq!(split.sizes(), [10_873, 2_331, 2_331]);
    split.check_disjoint().unwrap();
    // Graph 0 has 119 nodes and 244 directed edges (node_ptr/edge_ptr start 0, 119 / 0, 244).
    assert_eq!(ds.graphs[0].num_nodes(), 119);
    assert_eq!(ds.graphs[0].adjacency.nnz(), 244);
    assert!(
        ds.graphs
            .iter()
            .take(100)
            .all(|g| g.adjacency.is_symmetric())
    );
    // A broken split file is a named error.
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s.json");
    std::fs::write(&p, r#"{"train": [0, 1], "val": [1], "test": [99]}"#).unwrap();
    let e = basin_graph::lrgb::read_split_json(&p, 10).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    std::fs::write(&p, r#"{"train": [0, 1], "val": [1], "test": [2]}"#).unwrap();
    let e = basin_graph::lrgb::read_split_json(&p, 10).unwrap_err();
    assert!(e.to_string().contains("more than one part"), "{e}");
}

#[test]
fn a_sparse_mat_header_announcing_a_huge_shape_is_refused_before_allocation() {
    // Found by the 10⁶-input fuzz run: a mutated header made `matrix` allocate 16 GiB.
    let mut vars = std::collections::BTreeMap::new();
    vars.insert(
        "features".to_owned(),
        basin_graph::mat::MatValue::Sparse {
            rows: 1 << 40,
            cols: 1,
            jc: vec![0, 0],
            ir: vec![],
            data: vec![],
        },
    );
    let file = basin_graph::mat::MatFile {
        path: "hostile.mat".into(),
        vars,
    };
    let e = file.matrix("features").unwrap_err().to_string();
    assert!(
        e.contains("hostile.mat") && e.contains("would densify"),
        "{e}"
    );
}

/// A two-graph set in the layout of `basin_graph::lrgb` (graph 0: a 3-node path, graph 1: a
/// 2-node edge), with `targets` adding the set's target arrays, and a split JSON.
fn write_lrgb(dir: &Path, set: LrgbSet, targets: impl FnOnce(&mut NpzWriter)) {
    let (f, p) = set.feature_widths();
    let mut w = NpzWriter::create(&dir.join(set.npz())).unwrap();
    let x: Vec<f32> = (0..5 * f).map(|v| v as f32).collect();
    w.add_f32("node_feat", &[5, f], &x).unwrap();
    let e: Vec<f32> = (0..6 * p).map(|v| v as f32).collect();
    w.add_f32("edge_feat", &[6, p], &e).unwrap();
    // src row then dst row; graph 0: 0-1, 1-0, 1-2, 2-1; graph 1: 0-1, 1-0 (local ids).
    w.add_i64("edge_index", &[2, 6], &[0, 1, 1, 2, 0, 1, 1, 0, 2, 1, 1, 0])
        .unwrap();
    w.add_i64("node_ptr", &[3], &[0, 3, 5]).unwrap();
    w.add_i64("edge_ptr", &[3], &[0, 4, 6]).unwrap();
    targets(&mut w);
    w.finish().unwrap();
    std::fs::write(
        dir.join(set.split_json()),
        r#"{"train": [0], "val": [1], "test": []}"#,
    )
    .unwrap();
}

#[test]
fn every_lrgb_layout_loads_from_small_files() {
    use basin_graph::Targets;
    let tmp = tempfile::tempdir().unwrap();
    let check = |set: LrgbSet, targets: &dyn Fn(&mut NpzWriter)| {
        let dir = tmp.path().join(set.name());
        std::fs::create_dir_all(&dir).unwrap();
        write_lrgb(&dir, set, targets);
        let ds = load_lrgb(&dir, set).unwrap();
        ds.validate().unwrap();
        assert_eq!(ds.name, set.name());
        assert_eq!(ds.graphs.len(), 2);
        assert_eq!(ds.graphs[0].num_nodes(), 3);
        assert_eq!(ds.graphs[0].adjacency.nnz(), 4);
        assert!(ds.graphs[0].adjacency.is_symmetric());
        assert_eq!(ds.official_split.as_ref().unwrap().sizes(), [1, 1, 0]);
        // Graph 1's nodes are rows 3 and 4 of `node_feat`.
        let f = set.feature_widths().0;
        assert_eq!(ds.graphs[1].node_features[[0, 0]], (3 * f) as f32);
        // The dataset also opens by path, as `basin data inspect` does.
        assert!(basin_graph::source::open_path(&dir).is_ok());
        ds
    };
    let func = check(LrgbSet::PeptidesFunc, &|w| {
        let mut y = vec![0.0f32; 20];
        y[3] = 1.0;
        w.add_f32("labels", &[2, 10], &y).unwrap();
    });
    assert!(matches!(&func.targets, Targets::MultiLabel(y) if y[[0, 3]] == 1.0));
    let strukt = check(LrgbSet::PeptidesStruct, &|w| {
        let y: Vec<f32> = (0..22).map(|v| v as f32 * 0.5 - 3.0).collect();
        w.add_f32("labels", &[2, 11], &y).unwrap();
    });
    assert!(matches!(&strukt.targets, Targets::Regression(y) if y[[1, 0]] == 2.5));
    // Selecting graphs keeps their targets (graph 1 first).
    let picked = strukt.select(&[1, 0]).unwrap();
    assert!(matches!(&picked.targets, Targets::Regression(y) if y[[0, 0]] == 2.5));
    assert_eq!(picked.graphs[0].num_nodes(), 2);
    for set in [LrgbSet::PascalVocSp, LrgbSet::CocoSp] {
        let ds = check(set, &|w| {
            w.add_i64("node_labels", &[5], &[0, 20, 3, 1, 2]).unwrap()
        });
        assert_eq!(ds.graphs[0].node_labels.as_deref(), Some(&[0, 20, 3][..]));
        assert_eq!(ds.graphs[1].node_labels.as_deref(), Some(&[1, 2][..]));
    }
    for set in [LrgbSet::MnistSuperpixels, LrgbSet::Cifar10Superpixels] {
        let ds = check(set, &|w| w.add_i64("labels", &[2], &[7, 2]).unwrap());
        assert_eq!(ds.targets.classes(), Some(&[7, 2][..]));
    }
    let pcqm = check(LrgbSet::PcqmContact, &|w| {
        w.add_i64("link_index", &[2, 3], &[0, 0, 1, 2, 1, 0])
            .unwrap();
        w.add_i64("link_label", &[3], &[1, 0, 1]).unwrap();
        w.add_i64("link_ptr", &[3], &[0, 2, 3]).unwrap();
    });
    let Targets::Links(links) = &pcqm.targets else {
        panic!("PCQM-Contact loads link targets")
    };
    assert_eq!(links[0].pairs, vec![[0, 2], [0, 1]]);
    assert_eq!(links[0].labels, vec![1.0, 0.0]);
    assert_eq!(links[1].pairs, vec![[1, 0]]);
    let picked = pcqm.select(&[1]).unwrap();
    picked.validate().unwrap();
    assert!(matches!(&picked.targets, Targets::Links(l) if l[0].pairs == vec![[1, 0]]));
}

#[test]
fn malformed_lrgb_targets_are_named_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let fails = |set: LrgbSet, targets: &dyn Fn(&mut NpzWriter)| {
        let dir = tmp.path().join(format!("bad-{}", set.name()));
        std::fs::create_dir_all(&dir).unwrap();
        write_lrgb(&dir, set, targets);
        let e = load_lrgb(&dir, set).unwrap_err().to_string();
        assert!(e.contains(set.npz()), "{e}");
        e
    };
    // A superpixel class beyond VOC's 21.
    let e = fails(LrgbSet::PascalVocSp, &|w| {
        w.add_i64("node_labels", &[5], &[0, 21, 3, 1, 2]).unwrap()
    });
    assert!(e.contains("node_labels") && e.contains("21"), "{e}");
    // One graph label for two graphs.
    let e = fails(LrgbSet::MnistSuperpixels, &|w| {
        w.add_i64("labels", &[1], &[7]).unwrap()
    });
    assert!(e.contains("labels") && e.contains('2'), "{e}");
    // Peptides-func's labels must be binary; Peptides-struct's must have 11 columns.
    let e = fails(LrgbSet::PeptidesFunc, &|w| {
        w.add_f32("labels", &[2, 10], &[0.5; 20]).unwrap()
    });
    assert!(e.contains("binary"), "{e}");
    let e = fails(LrgbSet::PeptidesStruct, &|w| {
        w.add_f32("labels", &[2, 10], &[0.5; 20]).unwrap()
    });
    assert!(e.contains("labels"), "{e}");
    // A contact pair naming node 2 of the 2-node graph 1.
    let e = fails(LrgbSet::PcqmContact, &|w| {
        w.add_i64("link_index", &[2, 3], &[0, 0, 1, 2, 1, 2])
            .unwrap();
        w.add_i64("link_label", &[3], &[1, 0, 1]).unwrap();
        w.add_i64("link_ptr", &[3], &[0, 2, 3]).unwrap();
    });
    assert!(e.contains("link_index") && e.contains("graph 1"), "{e}");
    // Missing target arrays are named.
    let e = fails(LrgbSet::CocoSp, &|_| {});
    assert!(e.contains("node_labels"), "{e}");
    // Superpixel features of the wrong width: CIFAR10 has 5 columns.
    let dir = tmp.path().join("wrong-width");
    std::fs::create_dir_all(&dir).unwrap();
    write_lrgb(&dir, LrgbSet::MnistSuperpixels, |w| {
        w.add_i64("labels", &[2], &[1, 2]).unwrap()
    });
    std::fs::rename(
        dir.join(LrgbSet::MnistSuperpixels.npz()),
        dir.join(LrgbSet::Cifar10Superpixels.npz()),
    )
    .unwrap();
    let e = load_lrgb(&dir, LrgbSet::Cifar10Superpixels)
        .unwrap_err()
        .to_string();
    assert!(e.contains("node_feat"), "{e}");
}

/// Every layout round-trips: a generated set written by `lrgb::save` reads back as it was
/// (graphs, features, targets, split), and a dataset whose targets are not the set's is refused.
#[test]
fn every_lrgb_layout_saves_and_loads_back() {
    let tmp = tempfile::tempdir().unwrap();
    for set in LrgbSet::ALL {
        let ds = basin_graph::synthetic::lrgb_like(set, 20, 3).unwrap();
        let dir = tmp.path().join(set.name());
        basin_graph::lrgb::save(&dir, set, &ds).unwrap();
        let back = load_lrgb(&dir, set).unwrap();
        assert_eq!(back.graphs, ds.graphs, "{set:?}");
        assert_eq!(back.targets, ds.targets, "{set:?}");
        assert_eq!(back.official_split, ds.official_split, "{set:?}");
        assert_eq!(back.official_split.as_ref().unwrap().sizes(), [14, 3, 3]);
    }
    let func = basin_graph::synthetic::lrgb_like(LrgbSet::PeptidesFunc, 4, 0).unwrap();
    let e = basin_graph::lrgb::save(tmp.path(), LrgbSet::Zinc, &func)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("zinc") && e.contains("node feature columns"),
        "{e}"
    );
}
