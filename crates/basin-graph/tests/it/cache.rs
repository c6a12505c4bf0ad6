//! Dataset encodings on disk (both npz layouts), the fingerprinted cache, and opening datasets
//! by name or path.

use basin_graph::cache::{DatasetPe, PeCache, PeLayout, fingerprint};
use basin_graph::laplacian::PeConfig;
use basin_graph::source::{Dataset, open};
use basin_graph::{Csr, GraphError};

fn graphs() -> Vec<Csr> {
    (3..12u32)
        .map(|n| {
            let e: Vec<(u32, u32)> = (0..n).map(|i| (i, (i * 3 + 1) % n)).collect();
            Csr::from_undirected(n as usize, &e).unwrap()
        })
        .collect()
}

#[test]
fn npz_layouts_round_trip() {
    let gs = graphs();
    let refs: Vec<&Csr> = gs.iter().collect();
    let pe = DatasetPe::compute(&refs, &PeConfig::et_graph()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for layout in [PeLayout::Packed, PeLayout::PerGraph] {
        let p = tmp.path().join(format!("{layout:?}.npz"));
        pe.write_npz(&p, layout).unwrap();
        assert_eq!(DatasetPe::read_npz(&p).unwrap(), pe, "{layout:?}");
    }
    // The packed file's documented arrays.
    let mut z = basin_graph::npz::NpzReader::open(&tmp.path().join("Packed.npz")).unwrap();
    let off = z.read1::<i64>("offsets").unwrap();
    assert_eq!(off.len(), gs.len() + 1);
    assert_eq!(off[1], 4); // 3 nodes + CLS
    let eig = z.read2::<f64>("eigenvalues", Some(15)).unwrap();
    assert!(eig[[0, 2]].is_finite() && eig[[0, 3]].is_nan());
}

#[test]
fn cache_hits_misses_and_repairs() {
    let gs = graphs();
    let refs: Vec<&Csr> = gs.iter().collect();
    let tmp = tempfile::tempdir().unwrap();
    let cache = PeCache::new(tmp.path().join("pe"));
    let cfg = PeConfig::et_graph();
    let (a, hit) = cache.load_or_compute(&refs, &cfg).unwrap();
    assert!(!hit);
    let (b, hit) = cache.load_or_compute(&refs, &cfg).unwrap();
    assert!(hit);
    assert_eq!(a, b);
    // Other settings or other graphs: another key.
    let other = PeConfig::plain(4);
    assert_ne!(fingerprint(&refs, &cfg), fingerprint(&refs, &other));
    assert_ne!(fingerprint(&refs, &cfg), fingerprint(&refs[1..], &cfg));
    let (c, hit) = cache.load_or_compute(&refs, &other).unwrap();
    assert!(!hit && c.k == 4 && !c.cls);
    // A corrupt cache file is recomputed, not trusted.
    let path = cache.path_for(&fingerprint(&refs, &cfg));
    std::fs::write(&path, b"garbage").unwrap();
    let (d, hit) = cache.load_or_compute(&refs, &cfg).unwrap();
    assert!(!hit);
    assert_eq!(d, a);
    assert!(cache.load_or_compute(&refs, &cfg).unwrap().1);
}

#[test]
fn open_by_name_and_path() {
    basin_data::require_data!("tu/MUTAG");
    basin_data::require_data!("tu/ENZYMES");
    basin_data::require_data!("anomaly/reddit.npz");
    let dir = basin_data::datadir::test_data_dir();
    let Dataset::Graphs(m) = open("mutag", Some(&dir)).unwrap() else {
        panic!("MUTAG is a graph dataset")
    };
    assert_eq!(m.graphs.len(), 188);
    let Dataset::Nodes(r) = open("reddit", Some(&dir)).unwrap() else {
        panic!("reddit is a node dataset")
    };
    assert_eq!(r.graph.num_nodes(), 10_984);
    let by_path = open(dir.join("tu/ENZYMES").to_str().unwrap(), None).unwrap();
    assert_eq!(by_path.stats().graphs, 600);
    let Dataset::Nodes(p) = open("planted", None).unwrap() else {
        panic!("planted is a node dataset")
    };
    assert_eq!(p.graph.num_nodes(), 2000);
    let e = open("no-such-set", Some(&dir)).unwrap_err();
    assert!(
        matches!(e, GraphError::MissingFile { .. }) && e.to_string().contains("basin data list"),
        "{e}"
    );
}
