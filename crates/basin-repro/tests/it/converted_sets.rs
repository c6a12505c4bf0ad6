//! The anomaly sets published only as DGL binaries (T-Finance, T-Social) run once converted to
//! basin's anomaly npz: the table reads the converted file where the registry expects it, and
//! without it the reason names the converter.

use basin_graph::npz::NpzWriter;

#[test]
fn a_converted_t_finance_is_read_and_a_missing_one_names_the_converter() {
    let data = tempfile::tempdir().unwrap();
    let missing = basin_repro::anomaly::load("tfinance", data.path()).unwrap_err();
    assert!(
        missing.contains("to_basin_npz.py nodes --dgl tfinance")
            && missing.contains("t-finance.npz"),
        "{missing}"
    );
    std::fs::create_dir_all(data.path().join("anomaly")).unwrap();
    let mut w = NpzWriter::create(&data.path().join("anomaly/t-finance.npz")).unwrap();
    w.add_f32(
        "node_features",
        &[4, 2],
        &[0.0, 1.0, 1.0, 0.0, 0.5, 0.5, 2.0, 1.0],
    )
    .unwrap();
    w.add_i64("node_labels", &[4], &[0, 1, 0, 0]).unwrap();
    w.add_i64("edges", &[3, 2], &[0, 1, 1, 2, 2, 3]).unwrap();
    w.finish().unwrap();
    let ds = basin_repro::anomaly::load("tfinance", data.path())
        .unwrap()
        .unwrap();
    assert_eq!(ds.labels, [0, 1, 0, 0]);
}
