//! The readers under test and their seed corpora.
//!
//! Seeds are small files written here in each reader's layout (so the corpus exists on a clone
//! without data), a few hostile headers, and the real files from the data directory when they
//! are there and small enough to read thousands of times (`large` adds the bigger ones).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;

use basin_graph::lrgb::{LrgbSet, LrgbTask};
use basin_graph::npz::NpzWriter;

use crate::{Input, Target};

const FRAUD_FIXTURES: [(&str, &[u8]); 3] = [
    (
        "yelp_small.mat",
        include_bytes!("../../basin-graph/tests/fixtures/fraud/yelp_small.mat"),
    ),
    (
        "yelp_small_z.mat",
        include_bytes!("../../basin-graph/tests/fixtures/fraud/yelp_small_z.mat"),
    ),
    (
        "Amazon.mat",
        include_bytes!("../../basin-graph/tests/fixtures/fraud/Amazon.mat"),
    ),
];

/// Every target. `data` is the benchmark data directory (real seeds are added from it when its
/// files exist); `large` also adds the real files of more than a few hundred kilobytes.
pub fn all(data: Option<&Path>, large: bool) -> Vec<Target> {
    vec![
        tu(data),
        anomaly_npz(data, large),
        pe_cache(),
        mat(),
        lrgb(data, large),
        lrgb_split(data),
        idx(data),
        image_folder(),
        streamed_folder(),
        image_tar(),
        mil_csv(data, large),
        mil_prtools(data),
        checkpoint(),
        run_toml(),
        block_toml(),
    ]
}

fn one(name: &str, bytes: Vec<u8>) -> Input {
    vec![(name.to_string(), bytes)]
}

/// The files `paths` (relative to the data directory) that can be read, each a seed of one file
/// named `name`.
fn real_seeds(data: Option<&Path>, paths: &[&str], name: &str) -> Vec<Input> {
    paths
        .iter()
        .filter_map(|p| Some(one(name, std::fs::read(data?.join(p)).ok()?)))
        .collect()
}

/// Writes with `write` into a temporary file and returns its bytes.
fn bytes_of(write: impl FnOnce(&Path) -> Result<(), String>) -> Vec<u8> {
    let Ok(dir) = tempfile::tempdir() else {
        return Vec::new();
    };
    let path = dir.path().join("f");
    match write(&path) {
        Ok(()) => std::fs::read(&path).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// ---- TU text ---------------------------------------------------------------------------------

fn tu(data: Option<&Path>) -> Target {
    let mut seeds = vec![vec![
        (
            "t_A.txt".into(),
            b"1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5, 4\n".to_vec(),
        ),
        ("t_graph_indicator.txt".into(), b"1\n1\n1\n2\n2\n".to_vec()),
        ("t_graph_labels.txt".into(), b"1\n-1\n".to_vec()),
        ("t_node_labels.txt".into(), b"0\n1\n2\n0\n1\n".to_vec()),
        (
            "t_node_attributes.txt".into(),
            b"0.5, 1.0\n-2.0, 3.5\n1e3, 0\n7, 8\n9, 10\n".to_vec(),
        ),
        ("t_edge_labels.txt".into(), b"0\n0\n1\n1\n2\n2\n".to_vec()),
    ]];
    if let Some(dir) = data.map(|d| d.join("tu").join("MUTAG")) {
        let files: Input = [
            "A",
            "graph_indicator",
            "graph_labels",
            "node_labels",
            "edge_labels",
        ]
        .iter()
        .filter_map(|part| {
            let bytes = std::fs::read(dir.join(format!("MUTAG_{part}.txt"))).ok()?;
            Some((format!("t_{part}.txt"), bytes))
        })
        .collect();
        if files.len() == 5 {
            seeds.push(files);
        }
    }
    Target {
        name: "tu-text",
        seeds,
        text: true,
        read: |dir| basin_graph::tu::load_tu(dir).map(drop).map_err(err),
    }
}

// ---- npz ---------------------------------------------------------------------------------------

/// The anomaly layout (reddit / tolokers), `n` nodes.
fn anomaly_npz_bytes(n: usize, masks: bool) -> Vec<u8> {
    bytes_of(|p| {
        let mut w = NpzWriter::create(p).map_err(err)?;
        let x: Vec<f32> = (0..n * 3).map(|i| i as f32 * 0.5 - 2.0).collect();
        w.add_f32("node_features", &[n, 3], &x).map_err(err)?;
        let y: Vec<i64> = (0..n).map(|i| (i % 4 == 0) as i64).collect();
        w.add_i64("node_labels", &[n], &y).map_err(err)?;
        let e: Vec<i64> = (0..n)
            .flat_map(|i| [i as i64, ((i + 1) % n) as i64])
            .collect();
        w.add_i64("edges", &[n, 2], &e).map_err(err)?;
        if masks {
            let m = |r: usize| -> Vec<bool> { (0..n).map(|i| i % 3 == r).collect() };
            w.add_bool("train_masks", &[1, n], &m(0)).map_err(err)?;
            w.add_bool("val_masks", &[1, n], &m(1)).map_err(err)?;
            w.add_bool("test_masks", &[1, n], &m(2)).map_err(err)?;
        }
        w.finish().map_err(err)
    })
}

/// A stored (uncompressed) zip with one `.npy` member whose header is `header`.
fn hostile_npz(member: &str, header: &str, data: &[u8]) -> Vec<u8> {
    let mut dict = header.to_string();
    // Magic, version 1.0, u16 header length; the header ends in '\n', the total is a
    // multiple of 64.
    while !(10 + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    npy.extend_from_slice(dict.as_bytes());
    npy.extend_from_slice(data);
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
        if z.start_file(member, opts).is_err() || z.write_all(&npy).is_err() || z.finish().is_err()
        {
            return Vec::new();
        }
    }
    buf.into_inner()
}

fn anomaly_npz(data: Option<&Path>, large: bool) -> Target {
    let mut seeds = vec![
        one("g.npz", anomaly_npz_bytes(12, false)),
        one("g.npz", anomaly_npz_bytes(9, true)),
        // A header announcing 10²⁰ elements over 8 bytes of data.
        one(
            "g.npz",
            hostile_npz(
                "node_features.npy",
                "{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000, 10000000000), }",
                &[0; 8],
            ),
        ),
    ];
    if large {
        let real = ["anomaly/reddit.npz", "anomaly/tolokers.npz"];
        seeds.extend(real_seeds(data, &real, "g.npz"));
    }
    Target {
        name: "anomaly-npz",
        seeds,
        text: false,
        read: |dir| {
            basin_graph::npz::load_anomaly_npz(&dir.join("g.npz"), &Default::default())
                .map(drop)
                .map_err(err)
        },
    }
}

fn pe_cache() -> Target {
    use basin_graph::Csr;
    use basin_graph::cache::{DatasetPe, EncodingCache, PeLayout};
    use basin_graph::laplacian::PeConfig;
    let path_graph = |n: usize| {
        let edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|i| (i, i + 1)).collect();
        Csr::from_undirected(n, &edges)
    };
    let graphs: Vec<Csr> = [4usize, 6, 3]
        .iter()
        .filter_map(|&n| path_graph(n).ok())
        .collect();
    let refs: Vec<&Csr> = graphs.iter().collect();
    let cfg = PeConfig {
        k: 2,
        ..PeConfig::default()
    };
    let mut seeds = Vec::new();
    if let Ok((pe, _)) = DatasetPe::compute(&refs, &cfg, &EncodingCache::off()) {
        for layout in [PeLayout::Packed, PeLayout::PerGraph] {
            seeds.push(one(
                "pe.npz",
                bytes_of(|p| pe.write_npz(p, layout).map_err(err)),
            ));
        }
    }
    Target {
        name: "pe-cache-npz",
        seeds,
        text: false,
        read: |dir| {
            DatasetPe::read_npz(&dir.join("pe.npz"))
                .map(drop)
                .map_err(err)
        },
    }
}

// ---- MAT v5 --------------------------------------------------------------------------------

fn mat() -> Target {
    Target {
        name: "mat-v5",
        seeds: FRAUD_FIXTURES
            .iter()
            .map(|(_, b)| one("f.mat", b.to_vec()))
            .collect(),
        text: false,
        read: |dir| {
            let p = dir.join("f.mat");
            basin_graph::mat::load_fraud_mat(&p, &basin_graph::mat::FraudConfig::yelp())
                .map(drop)
                .map_err(err)?;
            Ok(())
        },
    }
}

// ---- LRGB --------------------------------------------------------------------------------------

/// A two-graph file (3 and 2 nodes) of `set`'s layout, with its targets.
fn lrgb_bytes(set: LrgbSet) -> Vec<u8> {
    bytes_of(|p| {
        let (f, e) = set.feature_widths();
        let mut w = NpzWriter::create(p).map_err(err)?;
        let x: Vec<f32> = (0..5 * f).map(|i| (i % 7) as f32).collect();
        w.add_f32("node_feat", &[5, f], &x).map_err(err)?;
        w.add_f32("edge_feat", &[6, e], &vec![1.0; 6 * e])
            .map_err(err)?;
        w.add_i64("edge_index", &[2, 6], &[0, 1, 1, 2, 0, 1, 1, 0, 2, 1, 1, 0])
            .map_err(err)?;
        w.add_i64("node_ptr", &[3], &[0, 3, 5]).map_err(err)?;
        w.add_i64("edge_ptr", &[3], &[0, 4, 6]).map_err(err)?;
        match set.task() {
            LrgbTask::MultiLabel(t) | LrgbTask::Regression(t) => {
                let y: Vec<f32> = (0..2 * t).map(|i| (i % 3 == 0) as i32 as f32).collect();
                w.add_f32("labels", &[2, t], &y).map_err(err)?;
            }
            LrgbTask::GraphClasses(_) => w.add_i64("labels", &[2], &[3, 1]).map_err(err)?,
            LrgbTask::NodeClasses(_) => w
                .add_i64("node_labels", &[5], &[0, 4, 2, 1, 0])
                .map_err(err)?,
            LrgbTask::Links => {
                w.add_i64("link_index", &[2, 3], &[0, 0, 1, 2, 1, 0])
                    .map_err(err)?;
                w.add_i64("link_label", &[3], &[1, 0, 1]).map_err(err)?;
                w.add_i64("link_ptr", &[3], &[0, 2, 3]).map_err(err)?;
            }
        }
        w.finish().map_err(err)
    })
}

fn lrgb(data: Option<&Path>, large: bool) -> Target {
    let mut seeds: Vec<Input> = LrgbSet::ALL
        .into_iter()
        .map(|set| one(set.npz(), lrgb_bytes(set)))
        .collect();
    let name = basin_graph::lrgb::PEPTIDES_FUNC_NPZ;
    if large {
        let real = format!("lrgb/peptides-functional/{name}");
        seeds.extend(real_seeds(data, &[&real], name));
    }
    Target {
        name: "lrgb-npz",
        seeds,
        text: false,
        read: |dir| {
            let set = LrgbSet::ALL
                .into_iter()
                .find(|s| dir.join(s.npz()).is_file())
                .ok_or_else(|| "no LRGB npz in the input".to_string())?;
            basin_graph::lrgb::load(dir, set).map(drop).map_err(err)
        },
    }
}

fn lrgb_split(data: Option<&Path>) -> Target {
    let mut seeds = vec![one(
        "split.json",
        br#"{"train": [0, 1, 2], "val": [3], "test": [4, 5]}"#.to_vec(),
    )];
    let real = "lrgb/peptides-functional/splits_random_stratified_peptide.json";
    seeds.extend(real_seeds(data, &[real], "split.json"));
    Target {
        name: "lrgb-split-json",
        seeds,
        text: true,
        read: |dir| {
            basin_graph::lrgb::read_split_json(&dir.join("split.json"), 16_000)
                .map(drop)
                .map_err(err)
        },
    }
}

// ---- images --------------------------------------------------------------------------------

fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    if e.write_all(bytes).is_err() {
        return Vec::new();
    }
    e.finish().unwrap_or_default()
}

fn idx(data: Option<&Path>) -> Target {
    let images = idx_bytes(
        &[3, 4, 4],
        &(0..48).map(|i| (i * 5) as u8).collect::<Vec<_>>(),
    );
    let labels = idx_bytes(&[3], &[0, 9, 4]);
    let mut seeds = vec![
        vec![
            ("images".into(), images.clone()),
            ("labels".into(), labels.clone()),
        ],
        vec![
            ("images".into(), gz(&images)),
            ("labels".into(), gz(&labels)),
        ],
        // 2³¹ × 2³¹ images announced over 48 bytes.
        vec![
            (
                "images".into(),
                idx_bytes(&[3, 0x8000_0000, 0x8000_0000], &[0; 48]),
            ),
            ("labels".into(), labels),
        ],
    ];
    if let Some(d) = data
        && let Ok(l) = std::fs::read(d.join("images/fashion-mnist/t10k-labels-idx1-ubyte.gz"))
    {
        // The real labels beside as many synthetic 2×2 images.
        let n = 10_000u32;
        seeds.push(vec![
            (
                "images".into(),
                gz(&idx_bytes(&[n, 2, 2], &vec![7; 4 * n as usize])),
            ),
            ("labels".into(), l),
        ]);
    }
    Target {
        name: "idx",
        seeds,
        text: false,
        read: |dir| {
            basin_image::idx::load_idx(
                &dir.join("images"),
                &dir.join("labels"),
                basin_image::idx::fashion_mnist_classes(),
            )
            .map(drop)
            .map_err(err)
        },
    }
}

fn png(w: u32, h: u32, seed: u8) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([seed.wrapping_mul(x as u8), (y as u8).wrapping_mul(40), 200])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    match img.write_to(&mut out, image::ImageFormat::Png) {
        Ok(()) => out.into_inner(),
        Err(_) => Vec::new(),
    }
}

/// A folder of two classes, `cat/0.png` and `cat/1.png`, `dog/0.png`, of the given sizes.
fn class_folder(sizes: [(u32, u32); 3]) -> Input {
    let names = ["cat/0.png", "cat/1.png", "dog/0.png"];
    names
        .iter()
        .zip(sizes)
        .zip([3, 5, 7])
        .map(|((name, (w, h)), seed)| (name.to_string(), png(w, h, seed)))
        .collect()
}

fn image_folder() -> Target {
    Target {
        name: "image-folder",
        seeds: vec![class_folder([(4, 4), (4, 4), (4, 4)])],
        text: false,
        read: |dir| {
            basin_image::folder::load_folder(dir, false)
                .map(drop)
                .map_err(err)
        },
    }
}

/// The streamed folder of ImageNet's layout: opened (headers read, a broken file skipped and
/// counted), then every image decoded and brought to one shape in a batch.
fn streamed_folder() -> Target {
    Target {
        name: "streamed-image-folder",
        seeds: vec![class_folder([(5, 3), (2, 9), (4, 4)])],
        text: false,
        read: |dir| {
            use basin_image::stream::{ImageFolder, OnCorrupt};
            let f = ImageFolder::open(dir, 4, false, OnCorrupt::Skip).map_err(err)?;
            let pipe = basin_image::Pipeline {
                patch: 2,
                augment: basin_image::Augment::et_table4(),
                normalize: basin_image::Normalize {
                    mean: vec![0.5; 3],
                    std: vec![0.25; 3],
                },
                mask: basin_image::MaskStrategy::et_mix(4),
            };
            let items: Vec<usize> = (0..basin_image::Images::len(&f)).collect();
            pipe.batch(&f, &items, 0).map(drop).map_err(err)
        },
    }
}

fn tar_bytes(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, bytes) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        if b.append_data(&mut h, name, bytes.as_slice()).is_err() {
            return Vec::new();
        }
    }
    b.into_inner().unwrap_or_default()
}

fn image_tar() -> Target {
    Target {
        name: "image-tar",
        seeds: vec![one(
            "images.tar",
            tar_bytes(&[
                ("train/cat/0.png", png(4, 4, 3)),
                ("train/dog/1.png", png(4, 4, 9)),
                ("test/cat/2.png", png(4, 4, 11)),
            ]),
        )],
        text: false,
        read: |dir| {
            basin_image::folder::load_tar(&dir.join("images.tar"), "train", false)
                .map(drop)
                .map_err(err)
        },
    }
}

// ---- MIL -----------------------------------------------------------------------------------

fn mil_csv(data: Option<&Path>, large: bool) -> Target {
    let mut seeds = vec![one(
        "musk.csv",
        b"1,1,0.5,2,3\n1,1,0.1,0.2,0.3\n0,2,4,5,6\n0,3,-1,0,1e2\n".to_vec(),
    )];
    let real: &[&str] = if large {
        &["mil/musk1.csv", "mil/elephant.csv"]
    } else {
        &["mil/musk1.csv"]
    };
    seeds.extend(real_seeds(data, real, "musk.csv"));
    Target {
        name: "mil-csv",
        seeds,
        text: true,
        read: |dir| {
            basin_graph::mil::load_csv(&dir.join("musk.csv"))
                .map(drop)
                .map_err(err)
        },
    }
}

fn mil_prtools(data: Option<&Path>) -> Target {
    let mut seeds = Vec::new();
    if let Some(zip_path) = data.map(|d| d.join("mil").join("fte.zip"))
        && let Ok(f) = std::fs::File::open(&zip_path)
        && let Ok(mut z) = zip::ZipArchive::new(f)
    {
        for member in ["fox.mat", "tiger.mat", "elephant.mat"] {
            if let Ok(mut m) = z.by_name(member) {
                let mut b = Vec::new();
                if std::io::Read::read_to_end(&mut m, &mut b).is_ok() {
                    seeds.push(one("bags.mat", b));
                }
            }
        }
    }
    Target {
        name: "mil-prtools-mat",
        seeds,
        text: false,
        read: |dir| {
            let p = dir.join("bags.mat");
            let bytes = std::fs::read(&p).map_err(err)?;
            basin_graph::mil::load_prtools_mat("bags", &p, &bytes)
                .map(drop)
                .map_err(err)
        },
    }
}

// ---- checkpoints and config files ----------------------------------------------------------

fn checkpoint() -> Target {
    let tensors = vec![
        (
            "best.w".to_string(),
            tch::Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).view([3, 2]),
        ),
        (
            "model.w".to_string(),
            tch::Tensor::from_slice(&[0.5f32; 6]).view([3, 2]),
        ),
    ];
    let best =
        serde_json::to_string(&basin_train::runner::Validation::default()).unwrap_or_default();
    let meta = HashMap::from([("best".to_string(), best), ("record".into(), "{}".into())]);
    let good =
        bytes_of(|p| basin_core::checkpoint::write_tensors(p, &tensors, Some(meta)).map_err(err));
    // Headers announcing 10¹⁹ bytes and a 2³¹ × 2³¹ tensor over 24 bytes.
    let hostile_len = {
        let mut b = u64::MAX.to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        b
    };
    let huge_shape = {
        let h =
            br#"{"best.w":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,24]}}"#;
        let mut b = (h.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(h);
        b.extend_from_slice(&[0; 24]);
        b
    };
    Target {
        name: "checkpoint",
        seeds: vec![
            one("c.safetensors", good),
            one("c.safetensors", hostile_len),
            one("c.safetensors", huge_shape),
        ],
        text: false,
        read: |dir| {
            let vs = tch::nn::VarStore::new(tch::Device::Cpu);
            let _w = vs.root().zeros("w", &[3, 2]);
            basin_train::runner::load_best(&dir.join("c.safetensors"), &vs)
                .map(drop)
                .map_err(err)
        },
    }
}

fn run_toml() -> Target {
    let seeds = basin_repro::examples::EXAMPLES
        .iter()
        .filter_map(|(name, _)| basin_repro::examples::example(name).ok())
        .map(|t| one("run.toml", t.into_bytes()))
        .collect();
    Target {
        name: "run-toml",
        seeds,
        text: true,
        read: |dir| {
            let p = dir.join("run.toml");
            let text = std::fs::read_to_string(&p).map_err(err)?;
            basin_tasks::run_file::RunSpec::parse(&text, "run.toml")
                .map(drop)
                .map_err(err)
        },
    }
}

fn block_toml() -> Target {
    let blocks = [
        basin_et::graph::tu_cpu().block,
        basin_cdat::graph::tu_cpu().block,
        basin_et::anomaly::default_model().block,
    ];
    let seeds = blocks
        .iter()
        .filter_map(|b| toml::to_string(b).ok())
        .map(|t| one("block.toml", t.into_bytes()))
        .collect();
    Target {
        name: "block-toml",
        seeds,
        text: true,
        read: |dir| {
            let text = std::fs::read_to_string(dir.join("block.toml")).map_err(err)?;
            let cfg = basin_core::BlockConfig::from_toml(&text).map_err(err)?;
            cfg.validate().map_err(err)
        },
    }
}
