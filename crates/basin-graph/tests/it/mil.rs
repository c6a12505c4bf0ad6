//! MIL readers on the real benchmark CSVs and on malformed files.

use basin_graph::mil::{load_csv, load_prtools_zip};

#[test]
fn benchmark_csvs_have_the_published_counts() {
    let dir = basin_data::require_data!("mil");
    for (name, bags, instances, features, positive) in [
        ("musk1", 92, 476, 166, 47),
        ("elephant", 200, 1391, 230, 100),
        ("ucsb_breast_cancer", 58, 2002, 708, 26),
    ] {
        let d = load_csv(&dir.join(format!("{name}.csv"))).unwrap();
        assert_eq!(
            (d.bags.len(), d.instances(), d.features),
            (bags, instances, features),
            "{name}"
        );
        assert_eq!(
            d.labels().iter().filter(|&&l| l).count(),
            positive,
            "{name}: positive bags"
        );
        assert!(d.bags.iter().all(|b| b.features.len() == b.len * features));
    }
}

#[test]
fn prtools_mat_files_in_fte_zip_have_the_published_counts() {
    let zip = basin_data::require_data!("mil/fte.zip");
    for (member, instances) in [
        ("fox.mat", 1320),
        ("tiger.mat", 1220),
        ("elephant.mat", 1391),
    ] {
        let d = load_prtools_zip(&zip, member).unwrap();
        assert_eq!(
            (d.bags.len(), d.instances(), d.features),
            (200, instances, 230),
            "{member}"
        );
        assert_eq!(
            d.labels().iter().filter(|&&l| l).count(),
            100,
            "{member}: positive bags"
        );
    }
    // The .mat Elephant and the CSV Elephant are the same data.
    let csv = load_csv(&basin_data::require_data!("mil/elephant.csv")).unwrap();
    let mat = load_prtools_zip(&zip, "elephant.mat").unwrap();
    assert_eq!(csv.instances(), mat.instances());
    assert_eq!(
        csv.labels().iter().filter(|&&l| l).count(),
        mat.labels().iter().filter(|&&l| l).count()
    );
    let err = load_prtools_zip(&zip, "lion.mat").unwrap_err().to_string();
    assert!(err.contains("lion.mat"), "{err}");
}

#[test]
fn malformed_csvs_name_the_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bags.csv");
    let cases = [
        (
            "1,1,0.5,0.2\n0,2,0.1\n",
            "bags.csv:2",
            "3 columns, the first line has 4",
        ),
        ("1,1,0.5\n0,2,abc\n", "bags.csv:2", "column 3: `abc`"),
        ("2,1,0.5\n", "bags.csv:1", "bag label `2`"),
        ("1,x,0.5\n", "bags.csv:1", "bag id `x`"),
        ("1,1\n", "bags.csv:1", "expected label, bag id"),
    ];
    for (text, at, what) in cases {
        std::fs::write(&p, text).unwrap();
        let err = load_csv(&p).unwrap_err().to_string();
        assert!(err.contains(at) && err.contains(what), "{err}");
    }
    std::fs::write(&p, "1,7,0.5,1\n0,7,0.1,2\n0,3,0.0,0\n").unwrap();
    let d = load_csv(&p).unwrap();
    assert_eq!(d.bags.len(), 2);
    assert_eq!(
        (d.bags[1].id, d.bags[1].len, d.bags[1].label),
        (7, 2, true),
        "a bag with a positive instance is positive"
    );
    assert!(
        load_csv(&dir.path().join("missing.csv"))
            .unwrap_err()
            .to_string()
            .contains("missing.csv")
    );
}
