//! TU loader: the six real datasets against their published statistics, round trips through
//! `write_tu`, and the named errors on malformed files.

use std::path::Path;

use basin_data::DataError;
use basin_graph::tu::{load_tu, write_tu};
use basin_graph::{GraphError, Targets};

struct Published {
    name: &'static str,
    graphs: usize,
    avg_nodes: f64,
    avg_edges: f64,
    /// Class counts in class order (sorted raw label values).
    classes: &'static [usize],
    node_features: usize,
    edge_features: usize,
}

/// Published statistics (TUDataset page / shared data README), 2-decimal rounding.
const PUBLISHED: &[Published] = &[
    Published {
        name: "MUTAG",
        graphs: 188,
        avg_nodes: 17.93,
        avg_edges: 19.79,
        classes: &[63, 125], // -1, 1
        node_features: 7,
        edge_features: 4,
    },
    Published {
        name: "PROTEINS",
        graphs: 1113,
        avg_nodes: 39.06,
        avg_edges: 72.82,
        classes: &[663, 450],
        node_features: 3,
        edge_features: 0,
    },
    Published {
        name: "NCI1",
        graphs: 4110,
        avg_nodes: 29.87,
        avg_edges: 32.30,
        classes: &[2053, 2057],
        node_features: 37,
        edge_features: 0,
    },
    Published {
        name: "DD",
        graphs: 1178,
        avg_nodes: 284.32,
        avg_edges: 715.66,
        classes: &[691, 487],
        node_features: 89,
        edge_features: 0,
    },
    Published {
        name: "ENZYMES",
        graphs: 600,
        avg_nodes: 32.63,
        avg_edges: 62.14,
        classes: &[100, 100, 100, 100, 100, 100],
        node_features: 18 + 3,
        edge_features: 0,
    },
    Published {
        name: "Mutagenicity",
        graphs: 4337,
        avg_nodes: 30.32,
        avg_edges: 30.77,
        classes: &[2401, 1936],
        node_features: 14,
        edge_features: 3,
    },
];

#[test]
fn six_tu_datasets_match_published_statistics() {
    for p in PUBLISHED {
        let ds = load_tu(&basin_data::require_data!(&format!("tu/{}", p.name))).unwrap();
        ds.validate().unwrap();
        let s = ds.stats();
        assert_eq!(s.name, p.name);
        assert_eq!(s.graphs, p.graphs, "{}", p.name);
        assert!(
            (s.avg_nodes - p.avg_nodes).abs() < 0.005,
            "{}: avg nodes {} vs {}",
            p.name,
            s.avg_nodes,
            p.avg_nodes
        );
        assert!(
            (s.avg_edges - p.avg_edges).abs() < 0.005,
            "{}: avg edges {} vs {}",
            p.name,
            s.avg_edges,
            p.avg_edges
        );
        assert_eq!(s.class_counts, p.classes, "{}", p.name);
        assert_eq!(s.node_features, p.node_features, "{}", p.name);
        assert_eq!(s.edge_features, p.edge_features, "{}", p.name);
        // Every A.txt line is a stored entry; the files list both directions.
        assert_eq!(s.directed_edges, 2 * s.undirected_edges, "{}", p.name);
        for g in &ds.graphs {
            assert!(g.adjacency.is_symmetric());
            // One-hot label blocks: exactly one 1 per node.
            if p.name != "ENZYMES" {
                assert!(g.node_features.rows().into_iter().all(|r| r.sum() == 1.0));
            }
        }
    }
}

#[test]
fn mutag_details_follow_pyg() {
    let ds = load_tu(&basin_data::require_data!("tu/MUTAG")).unwrap();
    assert_eq!(ds.class_values, vec![-1, 1]);
    let Targets::Classes {
        labels,
        num_classes,
    } = &ds.targets
    else {
        panic!("MUTAG has class targets")
    };
    assert_eq!(*num_classes, 2);
    // graph_labels.txt starts 1, -1, -1.
    assert_eq!(&labels[..3], &[1, 0, 0]);
    let g = &ds.graphs[0];
    assert_eq!(g.num_nodes(), 17);
    // MUTAG_A.txt starts "2, 1" / "1, 2": node 0's row holds 1; edge labels follow the entries.
    assert!(g.adjacency.contains(0, 1) && g.adjacency.contains(1, 0));
    let ef = g.edge_features.as_ref().unwrap();
    let el = g.edge_labels.as_ref().unwrap();
    for (i, &l) in el.iter().enumerate() {
        assert_eq!(ef[[i, l as usize]], 1.0);
    }
    // Node label 0 (C) is column 0 of the one-hot features.
    let nl = g.node_labels.as_ref().unwrap();
    assert_eq!(nl[0], 0);
    assert_eq!(g.node_features[[0, 0]], 1.0);
}

#[test]
fn enzymes_features_are_attributes_then_one_hot_labels() {
    let ds = load_tu(&basin_data::require_data!("tu/ENZYMES")).unwrap();
    let f = &ds.graphs[0].node_features;
    // First line of ENZYMES_node_attributes.txt.
    assert!((f[[0, 0]] - 11.0).abs() < 1e-6 && (f[[0, 1]] - 15.887014).abs() < 1e-4);
    let label = ds.graphs[0].node_labels.as_ref().unwrap()[0];
    assert_eq!(f[[0, 18 + (label - 1) as usize]], 1.0); // labels 1..3 shift to 0..2
}

fn write(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).unwrap();
}

/// A two-graph dataset: a triangle and an edge, with node and edge labels.
fn tiny(dir: &Path) {
    write(
        dir,
        "T_A.txt",
        "1, 2\n2, 1\n2, 3\n3, 2\n1, 3\n3, 1\n4, 5\n5, 4\n",
    );
    write(dir, "T_graph_indicator.txt", "1\n1\n1\n2\n2\n");
    write(dir, "T_graph_labels.txt", "7\n3\n");
    write(dir, "T_node_labels.txt", "0\n1\n2\n1\n1\n");
    write(dir, "T_edge_labels.txt", "0\n0\n1\n1\n0\n0\n1\n1\n");
}

#[test]
fn round_trip_through_write_tu() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("T");
    std::fs::create_dir(&src).unwrap();
    tiny(&src);
    let ds = load_tu(&src).unwrap();
    assert_eq!(ds.class_values, vec![3, 7]);
    assert_eq!(ds.targets.classes().unwrap(), &[1, 0]);
    assert_eq!(ds.graphs[1].num_nodes(), 2);
    let out = tmp.path().join("T2");
    write_tu(&ds, &out).unwrap();
    let back = basin_graph::tu::load_tu_with(&out, Some("T"), &Default::default()).unwrap();
    assert_eq!(back, ds);
    // And a real dataset with edge labels.
    let mutag = load_tu(&basin_data::require_data!("tu/MUTAG")).unwrap();
    let out = tmp.path().join("MUTAG");
    write_tu(&mutag, &out).unwrap();
    assert_eq!(load_tu(&out).unwrap(), mutag);
}

#[test]
fn edge_attributes_then_one_hot_edge_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("T");
    std::fs::create_dir(&dir).unwrap();
    tiny(&dir);
    // One line per A.txt line: two attributes.
    let attrs: String = (0..8).map(|e| format!("{}.5, -{e}\n", e)).collect();
    write(&dir, "T_edge_attributes.txt", &attrs);
    write(&dir, "T_node_attributes.txt", "1\n2\n3\n4\n5\n");
    let ds = load_tu(&dir).unwrap();
    let g = &ds.graphs[0];
    let ef = g.edge_features.as_ref().unwrap();
    assert_eq!(ef.ncols(), 2 + 2);
    // CSR entry 0 of graph 0 is A.txt line 1 ("1, 2"): attributes 0.5, -0, label 0.
    assert_eq!(ef.row(0).to_vec(), vec![0.5, -0.0, 1.0, 0.0]);
    // Entry (1 → 2) is line 3: attributes 2.5, -2, label 1.
    let pos = g.adjacency.indptr()[1] + g.adjacency.row(1).binary_search(&2).unwrap();
    assert_eq!(ef.row(pos).to_vec(), vec![2.5, -2.0, 0.0, 1.0]);
    // Node features: the attribute, then the one-hot label (labels 0..2).
    assert_eq!(g.node_features.row(1).to_vec(), vec![2.0, 0.0, 1.0, 0.0]);
    // Attributes off: only the one-hot blocks.
    let opts = basin_graph::tu::TuOptions {
        node_attributes: false,
        edge_attributes: false,
        ..Default::default()
    };
    let plain = basin_graph::tu::load_tu_with(&dir, None, &opts).unwrap();
    assert_eq!(plain.graphs[0].edge_features.as_ref().unwrap().ncols(), 2);
    assert_eq!(plain.graphs[0].node_features.ncols(), 3);
    // A label range too wide for one-hot is refused.
    write(&dir, "T_node_labels.txt", "0\n1\n2\n1\n99999999\n");
    let e = load_tu(&dir).unwrap_err();
    assert!(e.to_string().contains("one-hot"), "{e}");
}

/// A set published as the TU social networks are (no node labels, no attributes) gets its
/// nodes' one-hot degree and says so; `published` refuses it, `constant` gives every node a 1.
#[test]
fn a_set_without_node_features_gets_the_one_hot_degree() {
    use basin_graph::tu::{NodeFeatures, TuOptions, load_tu_with};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("T");
    std::fs::create_dir(&dir).unwrap();
    tiny(&dir);
    std::fs::remove_file(dir.join("T_node_labels.txt")).unwrap();
    let ds = load_tu(&dir).unwrap();
    // The triangle's nodes have degree 2, the edge's 1: one-hot over 0..=2.
    assert_eq!(ds.graphs[0].node_features.ncols(), 3);
    for v in 0..3 {
        assert_eq!(
            ds.graphs[0].node_features.row(v).to_vec(),
            vec![0.0, 0.0, 1.0]
        );
    }
    assert_eq!(
        ds.graphs[1].node_features.row(0).to_vec(),
        vec![0.0, 1.0, 0.0]
    );
    let made = ds.node_features.as_deref().unwrap();
    assert!(
        made.contains("one-hot node degree (0..=2)") && made.contains("no node labels"),
        "{made}"
    );
    let with = |f: NodeFeatures| {
        let opts = TuOptions {
            node_features: f,
            ..TuOptions::default()
        };
        load_tu_with(&dir, None, &opts)
    };
    let e = with(NodeFeatures::Published).unwrap_err().to_string();
    assert!(e.contains("T node features") && e.contains("degree"), "{e}");
    let constant = with(NodeFeatures::Constant).unwrap();
    assert_eq!(constant.graphs[1].node_features.row(1).to_vec(), vec![1.0]);
    // A set with labels keeps them under `auto`; `degree` replaces them when asked.
    tiny(&dir);
    let labelled = load_tu(&dir).unwrap();
    assert!(labelled.node_features.is_none());
    assert_eq!(labelled.graphs[0].node_features.ncols(), 3);
    let degree = with(NodeFeatures::Degree).unwrap();
    assert_eq!(
        degree.node_features.as_deref(),
        Some("one-hot node degree (0..=2)")
    );
}

fn broken(edit: impl Fn(&Path)) -> GraphError {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("T");
    std::fs::create_dir(&dir).unwrap();
    tiny(&dir);
    edit(&dir);
    load_tu(&dir).unwrap_err()
}

#[test]
fn malformed_files_give_named_errors() {
    // Wrong column count in A.txt, line 3.
    let e = broken(|d| write(d, "T_A.txt", "1, 2\n2, 1\n2\n"));
    assert!(
        matches!(&e, GraphError::ColumnCount { line: 3, expected: 2, found: 1, path } if path.ends_with("T_A.txt")),
        "{e}"
    );
    assert!(e.to_string().contains("T_A.txt:3"), "{e}");
    // Node id out of range.
    let e = broken(|d| write(d, "T_A.txt", "1, 2\n2, 9\n"));
    assert!(
        matches!(
            &e,
            GraphError::OutOfRange {
                line: 2,
                value: 9,
                hi: 5,
                ..
            }
        ),
        "{e}"
    );
    // Graph id out of range (graph_labels has 2 lines).
    let e = broken(|d| write(d, "T_graph_indicator.txt", "1\n1\n1\n2\n3\n"));
    assert!(
        matches!(
            &e,
            GraphError::OutOfRange {
                line: 5,
                value: 3,
                ..
            }
        ),
        "{e}"
    );
    // Counts that disagree between files.
    let e = broken(|d| write(d, "T_node_labels.txt", "0\n1\n2\n1\n"));
    assert!(
        matches!(&e, GraphError::CountMismatch { expected: 5, found: 4, path, .. } if path.ends_with("T_node_labels.txt")),
        "{e}"
    );
    let e = broken(|d| write(d, "T_edge_labels.txt", "0\n0\n"));
    assert!(
        matches!(
            &e,
            GraphError::CountMismatch {
                expected: 8,
                found: 2,
                ..
            }
        ),
        "{e}"
    );
    // Missing mandatory file.
    let e = broken(|d| std::fs::remove_file(d.join("T_graph_labels.txt")).unwrap());
    assert!(
        matches!(&e, GraphError::Data(DataError::MissingFile { path, .. }) if path.ends_with("T_graph_labels.txt")),
        "{e}"
    );
    // Not a number.
    let e = broken(|d| write(d, "T_graph_labels.txt", "7\nx\n"));
    assert!(matches!(&e, GraphError::Parse { line: 2, .. }), "{e}");
    // A NaN or an infinity among the node attributes: refused at its file and line.
    for bad in ["nan", "NaN", "inf", "-inf", "1e40"] {
        let e = broken(|d| write(d, "T_node_attributes.txt", &format!("1\n2\n{bad}\n4\n5\n")));
        assert!(
            matches!(&e, GraphError::Parse { line: 3, path, .. } if path.ends_with("T_node_attributes.txt")),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains("T_node_attributes.txt:3"), "{e}");
    }
    // An edge joining two graphs.
    let e = broken(|d| write(d, "T_A.txt", "1, 4\n"));
    assert!(e.to_string().contains("an edge inside one graph"), "{e}");
    // No TU files at all.
    let tmp = tempfile::tempdir().unwrap();
    let e = load_tu(tmp.path()).unwrap_err();
    assert!(
        matches!(e, GraphError::Data(DataError::MissingFile { .. })),
        "{e}"
    );
}
