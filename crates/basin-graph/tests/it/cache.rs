//! Dataset encodings on disk (both npz layouts), the fingerprinted cache of every encoding kind,
//! and opening datasets
//! by name or path.

use basin_data::DataError;
use basin_graph::cache::{DatasetPe, EncodingCache, PeLayout, fingerprint};
use basin_graph::laplacian::{PeConfig, laplacian_pe_many};
use basin_graph::posenc::{GpsLaplacian, gps_laplacian_many, rwse_many};
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
    let (pe, _) = DatasetPe::compute(&refs, &PeConfig::et_graph(), &EncodingCache::off()).unwrap();
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
    let cache = EncodingCache::new(tmp.path().join("pe"));
    let cfg = PeConfig::et_graph();
    let (a, hit) = cache.laplacian_pe(&refs, &cfg).unwrap();
    assert!(!hit);
    let (b, hit) = cache.laplacian_pe(&refs, &cfg).unwrap();
    assert!(hit);
    assert_eq!(a, b);
    assert_eq!(a, laplacian_pe_many(&refs, &cfg).unwrap());
    // Other settings, other graphs or another kind: another key.
    let other = PeConfig::plain(4);
    let key = fingerprint(&refs, "laplacian-pe", &cfg);
    assert_ne!(key, fingerprint(&refs, "laplacian-pe", &other));
    assert_ne!(key, fingerprint(&refs[1..], "laplacian-pe", &cfg));
    assert_ne!(key, fingerprint(&refs, "rwse", &cfg));
    let (c, hit) = cache.laplacian_pe(&refs, &other).unwrap();
    assert!(!hit && c[0].vectors.ncols() == 4);
    // A corrupt cache file is recomputed, not trusted, and replaced.
    let path = cache.path_for("laplacian-pe", &key).unwrap();
    std::fs::write(&path, b"garbage").unwrap();
    let (d, hit) = cache.laplacian_pe(&refs, &cfg).unwrap();
    assert!(!hit);
    assert_eq!(d, a);
    assert!(cache.laplacian_pe(&refs, &cfg).unwrap().1);
    // No temporary file is left behind.
    for entry in std::fs::read_dir(cache.dir().unwrap()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.ends_with(".npz"), "{name}");
    }
}

#[test]
fn gps_statistics_and_random_walks_come_back_bit_for_bit() {
    let gs = graphs();
    let refs: Vec<&Csr> = gs.iter().collect();
    let tmp = tempfile::tempdir().unwrap();
    let cache = EncodingCache::new(tmp.path());
    let (lap, hit) = cache.gps_laplacian(&refs, 6).unwrap();
    assert!(!hit);
    let (again, hit) = cache.gps_laplacian(&refs, 6).unwrap();
    assert!(hit);
    // NaN-padded eigenvalues (a 3-node graph has 3 of the 6): compare bits.
    let bits = |v: &[GpsLaplacian]| -> Vec<Vec<u32>> {
        v.iter()
            .map(|l| {
                l.values
                    .iter()
                    .chain(l.vectors.iter())
                    .map(|x| x.to_bits())
                    .collect()
            })
            .collect()
    };
    assert_eq!(bits(&lap), bits(&again));
    assert_eq!(bits(&lap), bits(&gps_laplacian_many(&refs, 6).unwrap()));
    let (walks, _) = cache.rwse(&refs, 5).unwrap();
    let (again, hit) = cache.rwse(&refs, 5).unwrap();
    assert!(hit);
    assert_eq!(walks, again);
    assert_eq!(walks, rwse_many(&refs, 5));
}

#[test]
fn a_cache_that_cannot_be_written_still_gives_the_encodings() {
    let gs = graphs();
    let refs: Vec<&Csr> = gs.iter().collect();
    let tmp = tempfile::tempdir().unwrap();
    // A file where the folder should be: nothing can be written under it.
    let blocked = tmp.path().join("file");
    std::fs::write(&blocked, b"").unwrap();
    let cache = EncodingCache::new(blocked.join("pe"));
    let (a, hit) = cache.rwse(&refs, 3).unwrap();
    assert!(!hit);
    assert_eq!(a, rwse_many(&refs, 3));
    assert!(!cache.rwse(&refs, 3).unwrap().1);
    let (off, hit) = EncodingCache::off().rwse(&refs, 3).unwrap();
    assert!(!hit && off == a);
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
        matches!(e, GraphError::Data(DataError::MissingFile { .. }))
            && e.to_string().contains("basin data list"),
        "{e}"
    );
}
