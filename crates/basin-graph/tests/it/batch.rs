//! Batching (CLS, padding cap and truncation, masked vs sink padding, masks and lengths,
//! encodings), size buckets, neighbour CSR, and subgraph / neighbour sampling.

use basin_graph::batch::{
    BatchConfig, PaddingMode, SizeBuckets, Truncation, batch_indices, make_batch, neighbour_csr,
    size_buckets,
};
use basin_graph::laplacian::{
    PeConfig, SignFlip, laplacian_pe, laplacian_pe_many, reference_sink_pe,
};
use basin_graph::sample::{
    NeighbourConfig, induced_by_ratio, reference_subsample, sample_neighbours,
};
use basin_graph::{Csr, Graph, GraphDataset, Targets};
use ndarray::{Array2, s};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn cycle(n: u32) -> Csr {
    let e: Vec<(u32, u32)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
    Csr::from_undirected(n as usize, &e).unwrap()
}

fn dataset(sizes: &[u32]) -> GraphDataset {
    let graphs: Vec<Graph> = sizes
        .iter()
        .map(|&n| {
            let a = cycle(n);
            let x = Array2::from_shape_fn((n as usize, 2), |(i, j)| (i * 10 + j) as f32 + 1.0);
            let mut g = Graph::new(a.clone(), x).unwrap();
            g.edge_features = Some(Array2::from_elem((a.nnz(), 1), 7.0));
            g
        })
        .collect();
    GraphDataset {
        name: "cycles".into(),
        targets: Targets::Classes {
            labels: vec![0; sizes.len()],
            num_classes: 1,
        },
        graphs,
        class_values: vec![0],
        official_split: None,
        node_features: None,
    }
}

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(7)
}

#[test]
fn masked_batch_layout() {
    let ds = dataset(&[5, 8, 3]);
    let mut cfg = BatchConfig::et_graph();
    cfg.dense_edge_features = true;
    // Evaluation keeps the encodings' signs; training flips them (below).
    cfg.sign_flip = SignFlip::None;
    let b = make_batch(&ds, &[0, 1, 2], &cfg, None, &mut rng()).unwrap();
    assert_eq!(b.tokens(), 9);
    assert_eq!(b.lengths, vec![6, 9, 4]);
    assert_eq!(b.features.dim(), (3, 9, 2));
    assert_eq!(b.truncated, vec![0, 0, 0]);
    // Features start after CLS; CLS and padding rows are zero.
    assert_eq!(b.features[[0, 1, 0]], 1.0);
    assert_eq!(b.features[[0, 5, 1]], 42.0);
    assert!(b.features.slice(s![0, 0, ..]).iter().all(|&x| x == 0.0));
    assert!(b.features.slice(s![0, 6.., ..]).iter().all(|&x| x == 0.0));
    for (g, &len) in b.lengths.iter().enumerate() {
        for t in 0..9 {
            assert_eq!(b.padding[[g, t]], t < len);
            for k in 0..9 {
                let m = b.mask[[g, t, k]];
                if t >= len || k >= len {
                    assert!(!m, "padded tokens are masked out");
                } else if t == 0 || k == 0 {
                    assert!(m, "CLS attends every real node and itself, and back");
                } else {
                    let a = &ds.graphs[g].adjacency;
                    assert_eq!(m, a.contains(t - 1, (k - 1) as u32), "graph {g} ({t},{k})");
                }
            }
        }
    }
    // Encodings per graph, independent of the batch's padding (so they can be cached).
    let pe = b.pe.as_ref().unwrap();
    assert_eq!(pe.dim(), (3, 9, 15));
    for g in 0..3 {
        let own = laplacian_pe(&ds.graphs[g].adjacency, &PeConfig::et_graph()).unwrap();
        let len = b.lengths[g];
        assert_eq!(pe.slice(s![g, ..len, ..]), own.vectors);
        assert!(pe.slice(s![g, len.., ..]).iter().all(|&x| x == 0.0));
    }
    let cache = laplacian_pe_many(
        &ds.graphs.iter().map(|g| &g.adjacency).collect::<Vec<_>>(),
        &PeConfig::et_graph(),
    )
    .unwrap();
    let cached = make_batch(&ds, &[0, 1, 2], &cfg, Some(&cache), &mut rng()).unwrap();
    assert_eq!(cached, b);
    // Dense edge features: real entries, CLS row/column set to 1.
    let ef = b.edge_features.as_ref().unwrap();
    assert_eq!(ef[[0, 1, 2, 0]], 7.0);
    assert_eq!(ef[[0, 0, 3, 0]], 1.0);
    assert_eq!(ef[[0, 1, 3, 0]], 0.0);
    assert_eq!(ef[[0, 7, 0, 0]], 0.0);
    // The sparse form of the mask holds the same pairs.
    let csr = b.mask_csr();
    assert_eq!(csr.nnz(), b.mask.iter().filter(|&&m| m).count());
    assert!(csr.contains(9 + 1, 9)); // graph 1, node 0 attends its CLS

    // The paper's training batches flip each eigenvector's sign at random (ET Appendix D):
    // every column is ± its evaluation column, and some flip.
    let train = make_batch(&ds, &[0, 1, 2], &BatchConfig::et_graph(), None, &mut rng()).unwrap();
    let flipped = train.pe.as_ref().unwrap();
    let mut signs = Vec::new();
    for g in 0..3 {
        for j in 0..15 {
            let (a, b) = (flipped.slice(s![g, .., j]), pe.slice(s![g, .., j]));
            if b.iter().all(|&x| x == 0.0) {
                continue;
            }
            let sign = if a == b { 1 } else { -1 };
            assert!(
                a.iter().zip(b).all(|(&x, &y)| x == sign as f32 * y),
                "({g}, {j})"
            );
            signs.push(sign);
        }
    }
    assert!(signs.contains(&1) && signs.contains(&-1), "{signs:?}");
}

#[test]
fn sink_padding_follows_the_reference() {
    let ds = dataset(&[5, 8]);
    let cfg = BatchConfig {
        sign_flip: basin_graph::laplacian::SignFlip::None,
        ..BatchConfig::et_graph_reference()
    };
    assert_eq!(cfg.padding, PaddingMode::Sink);
    let b = make_batch(&ds, &[0, 1], &cfg, None, &mut rng()).unwrap();
    // Graph 0: real tokens 0..6, sinks 6..9.
    for q in 6..9 {
        assert!(!b.padding[[0, q]]);
        for k in 0..9 {
            assert_eq!(
                b.mask[[0, q, k]],
                k < 6,
                "sink rows attend CLS and real nodes"
            );
        }
    }
    for q in 1..6 {
        assert!(
            (6..9).all(|k| !b.mask[[0, q, k]]),
            "real nodes never attend sinks"
        );
    }
    assert!((0..9).all(|k| b.mask[[0, 0, k]]), "the CLS row is all ones");
    let pe = b.pe.as_ref().unwrap();
    let want = reference_sink_pe(&ds.graphs[0].adjacency, 8, 15).unwrap();
    assert_eq!(pe.slice(s![0, .., ..]), want.vectors);
    // Sink mode needs CLS.
    let bad = BatchConfig {
        cls: false,
        pe: None,
        ..BatchConfig::et_graph_reference()
    };
    assert!(make_batch(&ds, &[0], &bad, None, &mut rng()).is_err());
    // Per-entry sign flips change signs, not magnitudes, and are seeded.
    let flip = BatchConfig::et_graph_reference();
    let f1 = make_batch(&ds, &[0, 1], &flip, None, &mut rng()).unwrap();
    let f2 = make_batch(&ds, &[0, 1], &flip, None, &mut rng()).unwrap();
    assert_eq!(f1, f2);
    let p1 = f1.pe.unwrap();
    assert_ne!(p1, *pe);
    assert_eq!(p1.mapv(f32::abs), pe.mapv(f32::abs));
}

#[test]
fn cap_and_truncation_policy() {
    let ds = dataset(&[12, 4]);
    let cfg = BatchConfig {
        max_nodes: 10,
        sign_flip: SignFlip::None,
        ..BatchConfig::et_graph()
    };
    let b = make_batch(&ds, &[0, 1], &cfg, None, &mut rng()).unwrap();
    assert_eq!(b.tokens(), 11);
    assert_eq!(b.truncated, vec![2, 0]);
    assert_eq!(b.lengths, vec![11, 5]);
    // The cycle is cut into a path: node 9 no longer reaches node 0 (slots 10 and 1).
    assert!(!b.mask[[0, 10, 1]] && b.mask[[0, 10, 9]]);
    // The truncated graph's encoding is computed on the truncated graph.
    let own = laplacian_pe(&ds.graphs[0].truncated(10).adjacency, &PeConfig::et_graph()).unwrap();
    assert_eq!(b.pe.as_ref().unwrap().slice(s![0, .., ..]), own.vectors);
    // A cache of the full graph's encoding does not fit the cut graph and is not used; one
    // computed on the cut graph is (a marked copy shows it is read, not recomputed).
    let full = laplacian_pe_many(
        &ds.graphs.iter().map(|g| &g.adjacency).collect::<Vec<_>>(),
        &PeConfig::et_graph(),
    )
    .unwrap();
    let from_full = make_batch(&ds, &[0, 1], &cfg, Some(&full), &mut rng()).unwrap();
    assert_eq!(from_full.pe, b.pe);
    let mut cut = full.clone();
    cut[0] = own.clone();
    let from_cut = make_batch(&ds, &[0, 1], &cfg, Some(&cut), &mut rng()).unwrap();
    assert_eq!(from_cut.pe, b.pe);
    cut[0].vectors.mapv_inplace(|v| v + 1.0);
    let marked = make_batch(&ds, &[0, 1], &cfg, Some(&cut), &mut rng()).unwrap();
    assert_eq!(
        marked.pe.unwrap().slice(s![0, .., ..]),
        own.vectors.mapv(|v| v + 1.0)
    );
    let strict = BatchConfig {
        truncation: Truncation::Error,
        ..cfg
    };
    let e = make_batch(&ds, &[0, 1], &strict, None, &mut rng()).unwrap_err();
    assert!(e.to_string().contains("exceed the cap of 10"), "{e}");
    assert!(make_batch(&ds, &[5], &BatchConfig::default(), None, &mut rng()).is_err());
}

#[test]
fn batch_indices_cover_everything() {
    let ids: Vec<usize> = (0..10).collect();
    let b = batch_indices(&ids, 4, false, Some(&mut rng())).unwrap();
    assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 4, 2]);
    let mut all: Vec<usize> = b.concat();
    all.sort_unstable();
    assert_eq!(all, ids);
    assert_eq!(
        batch_indices::<ChaCha8Rng>(&ids, 4, true, None)
            .unwrap()
            .len(),
        2
    );
    assert!(batch_indices::<ChaCha8Rng>(&ids, 0, true, None).is_err());
}

#[test]
fn neighbour_csr_hops_self_loops_cls() {
    let path = Csr::from_undirected(5, &[(0, 1), (1, 2), (2, 3), (3, 4)]).unwrap();
    let one = neighbour_csr(&path, 1, false, false).unwrap();
    assert_eq!(one, path);
    let one_loops = neighbour_csr(&path, 1, true, false).unwrap();
    assert_eq!(one_loops.num_self_loops(), 5);
    let two = neighbour_csr(&path, 2, false, false).unwrap();
    assert_eq!(two.row(2), &[0, 1, 3, 4]);
    assert_eq!(two.row(0), &[1, 2]);
    let cls = neighbour_csr(&path, 1, false, true).unwrap();
    assert_eq!(cls.num_nodes(), 6);
    assert_eq!(cls.row(0), &[0, 1, 2, 3, 4, 5]);
    assert_eq!(cls.row(1), &[0, 2]);
    assert!(cls.is_symmetric());
    assert!(neighbour_csr(&path, 0, false, false).is_err());
}

#[test]
fn induced_sampling_by_ratio() {
    let a = cycle(100);
    let g = Graph::new(
        a.clone(),
        Array2::from_shape_fn((100, 1), |(i, _)| i as f32),
    )
    .unwrap();
    let pool: Vec<u32> = (20..100).collect();
    let s = induced_by_ratio(&g, Some(&pool), 0.05, true, &mut rng()).unwrap();
    assert_eq!(s.nodes.len(), 4); // ⌈0.05 · 80⌉
    assert!(s.nodes.windows(2).all(|w| w[0] < w[1]));
    assert!(s.nodes.iter().all(|v| pool.contains(v)));
    assert_eq!(s.graph.adjacency.num_self_loops(), 4);
    for (i, &u) in s.nodes.iter().enumerate() {
        assert_eq!(s.graph.node_features[[i, 0]], u as f32);
        for (j, &v) in s.nodes.iter().enumerate() {
            if i != j {
                assert_eq!(
                    s.graph.adjacency.contains(i, j as u32),
                    a.contains(u as usize, v)
                );
            }
        }
    }
    assert_eq!(
        induced_by_ratio(&g, Some(&pool), 0.05, true, &mut rng()).unwrap(),
        s
    );
    assert!(induced_by_ratio(&g, None, 0.0, false, &mut rng()).is_err());
    assert_eq!(
        induced_by_ratio(&g, None, 1.0, false, &mut rng())
            .unwrap()
            .graph,
        g
    );
}

#[test]
fn the_reference_subsample_takes_each_part_in_order() {
    // A dense little graph (a cycle with chords) so that samples share edges.
    let mut edges: Vec<(u32, u32)> = (0..60u32).map(|v| (v, (v + 1) % 60)).collect();
    edges.extend((0..60u32).map(|v| (v, (v + 7) % 60)));
    let a = Csr::from_undirected(60, &edges).unwrap();
    let g = Graph::new(a.clone(), Array2::from_shape_fn((60, 1), |(i, _)| i as f32)).unwrap();
    let (train, val, test): (Vec<u32>, Vec<u32>, Vec<u32>) =
        ((0..30).collect(), (30..42).collect(), (42..60).collect());
    let (s, counts) = reference_subsample(&g, &[&train, &val, &test], 0.25, &mut rng()).unwrap();
    // ⌊0.25 · 30⌋, ⌊0.25 · 12⌋, ⌊0.25 · 18⌋.
    assert_eq!(counts, vec![7, 3, 4]);
    assert_eq!(s.nodes.len(), 14);
    assert!(s.nodes[..7].iter().all(|v| train.contains(v)));
    assert!(s.nodes[7..10].iter().all(|v| val.contains(v)));
    assert!(s.nodes[10..].iter().all(|v| test.contains(v)));
    let mut distinct = s.nodes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 14);
    assert_eq!(s.graph.adjacency.num_self_loops(), 14);
    for (i, &u) in s.nodes.iter().enumerate() {
        assert_eq!(s.graph.node_features[[i, 0]], u as f32);
        for (j, &v) in s.nodes.iter().enumerate() {
            if i != j {
                assert_eq!(
                    s.graph.adjacency.contains(i, j as u32),
                    a.contains(u as usize, v)
                );
            }
        }
    }
    // At least one node of a small part; an empty part gives none.
    let (_, c) = reference_subsample(&g, &[&train, &[], &val[..2]], 0.05, &mut rng()).unwrap();
    assert_eq!(c, vec![1, 0, 1]);
    assert!(reference_subsample(&g, &[&train], 1.5, &mut rng()).is_err());
}

#[test]
fn neighbour_sampling_respects_fanouts() {
    // A star of stars: hub 0 with 20 leaves, each leaf with 5 children.
    let mut e = vec![];
    let mut next = 21u32;
    for leaf in 1..=20u32 {
        e.push((0, leaf));
        for _ in 0..5 {
            e.push((leaf, next));
            next += 1;
        }
    }
    let a = Csr::from_undirected(next as usize, &e).unwrap();
    let cfg = NeighbourConfig {
        fanouts: vec![4, 3],
    };
    let s = sample_neighbours(&a, &[0], &cfg, &mut rng()).unwrap();
    assert_eq!(s.num_seeds(), 1);
    assert_eq!(s.nodes[0], 0);
    assert_eq!(s.hop.iter().filter(|&&h| h == 1).count(), 4);
    assert!(s.hop.iter().filter(|&&h| h == 2).count() <= 4 * 3);
    for u in 0..s.nodes.len() {
        assert!(s.sampled.degree(u) <= if s.hop[u] == 0 { 4 } else { 3 });
        for &v in s.sampled.row(u) {
            assert!(
                a.contains(s.nodes[u] as usize, s.nodes[v as usize]),
                "sampled edges exist"
            );
        }
    }
    assert_eq!(sample_neighbours(&a, &[0], &cfg, &mut rng()).unwrap(), s);
    // Fan-outs above the degree take every neighbour.
    let all = sample_neighbours(
        &a,
        &[0],
        &NeighbourConfig {
            fanouts: vec![usize::MAX],
        },
        &mut rng(),
    )
    .unwrap();
    assert_eq!(all.nodes.len(), 21);
    let sub = all.induced(&Graph::structure_only(a.clone())).unwrap();
    assert_eq!(sub.adjacency.nnz(), 40);
    assert!(sample_neighbours(&a, &[0, 0], &cfg, &mut rng()).is_err());
    assert!(sample_neighbours(&a, &[9999], &cfg, &mut rng()).is_err());
}

/// Σ (b·n² + overhead) of a bucket layout.
fn layout_cost(sizes: &[i64], buckets: &[Vec<usize>], overhead: i64) -> i64 {
    buckets
        .iter()
        .map(|b| {
            let n = b.iter().map(|&g| sizes[g]).max().unwrap_or(0);
            b.len() as i64 * n * n + overhead
        })
        .sum()
}

#[test]
fn size_buckets_are_the_cheapest_partition_of_the_sorted_sizes() {
    let sizes = [7i64, 3, 12, 3, 9, 30, 4, 11, 8];
    for overhead in [0, 10, 100, 1_000, 1_000_000] {
        let buckets = size_buckets(&sizes, overhead);
        // Every graph once, each bucket ascending by size, buckets in size order.
        let mut all: Vec<usize> = buckets.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..sizes.len()).collect::<Vec<_>>());
        let flat: Vec<i64> = buckets.iter().flatten().map(|&g| sizes[g]).collect();
        assert!(flat.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        // Brute force over every cut of the sorted order.
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&g| (sizes[g], g));
        let best = (0u32..1 << (sizes.len() - 1))
            .map(|cuts| {
                let mut layout = vec![vec![order[0]]];
                for (i, &g) in order.iter().enumerate().skip(1) {
                    if cuts & (1 << (i - 1)) != 0 {
                        layout.push(Vec::new());
                    }
                    if let Some(b) = layout.last_mut() {
                        b.push(g);
                    }
                }
                layout_cost(&sizes, &layout, overhead)
            })
            .min();
        assert_eq!(Some(layout_cost(&sizes, &buckets, overhead)), best);
    }
    assert_eq!(size_buckets(&sizes, i64::MAX).len(), 1);
    // Free buckets: one per distinct size.
    assert_eq!(size_buckets(&sizes, 0).len(), 8);
    assert!(size_buckets(&[], 5).is_empty());
}

#[test]
fn a_batch_runs_in_size_buckets_only_with_masked_padding() {
    let ds = dataset(&[4, 300, 5, 280, 6]);
    let ids = [0, 1, 2, 3, 4];
    let masked = BatchConfig::et_graph();
    // `auto`: buckets for dense attention, one batch over the edge list.
    assert_eq!(masked.size_buckets, SizeBuckets::Auto);
    assert_eq!(
        masked.buckets(&ds, &ids, true),
        vec![vec![0, 2, 4], vec![3, 1]]
    );
    assert_eq!(masked.buckets(&ds, &ids, false), vec![ids.to_vec()]);
    let on = BatchConfig {
        size_buckets: SizeBuckets::On,
        ..BatchConfig::et_graph()
    };
    assert_eq!(on.buckets(&ds, &ids, false).len(), 2);
    // The node cap bounds a graph's tokens: capped at 5, every graph is alike.
    let capped = BatchConfig {
        max_nodes: 5,
        ..BatchConfig::et_graph()
    };
    assert_eq!(capped.buckets(&ds, &ids, true).len(), 1);
    let off = BatchConfig {
        size_buckets: SizeBuckets::Off,
        ..BatchConfig::et_graph()
    };
    assert_eq!(off.buckets(&ds, &ids, true), vec![ids.to_vec()]);
    // Sink padding's encodings depend on the whole batch: never bucketed.
    let sink = BatchConfig {
        size_buckets: SizeBuckets::On,
        ..BatchConfig::et_graph_reference()
    };
    assert_eq!(sink.buckets(&ds, &ids, true), vec![ids.to_vec()]);
}

/// `size_buckets` reads `true`, `false` and `"auto"` and writes them back; anything else is
/// refused with the field's values.
#[test]
fn size_buckets_read_and_write_all_three_settings() {
    for (text, want) in [
        ("size_buckets = true", SizeBuckets::On),
        ("size_buckets = false", SizeBuckets::Off),
        ("size_buckets = \"auto\"", SizeBuckets::Auto),
    ] {
        let cfg: BatchConfig = toml::from_str(text).unwrap();
        assert_eq!(cfg.size_buckets, want, "{text}");
        let back: BatchConfig = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back.size_buckets, want);
    }
    let err = toml::from_str::<BatchConfig>("size_buckets = \"sometimes\"").unwrap_err();
    assert!(err.to_string().contains("true, false or \"auto\""), "{err}");
}

/// A run file can switch the encodings off (`pe = false`; TOML has no null) and read back what
/// it wrote; a missing `pe` is the default encodings; an error inside the table keeps its name.
#[test]
fn encodings_switch_off_in_a_run_file_and_round_trip() {
    let off: BatchConfig = toml::from_str("pe = false").unwrap();
    assert_eq!(off.pe, None);
    let written = toml::to_string(&off).unwrap();
    assert!(written.contains("pe = false"), "{written}");
    assert_eq!(toml::from_str::<BatchConfig>(&written).unwrap(), off);
    let json = serde_json::to_string(&off).unwrap();
    assert_eq!(serde_json::from_str::<BatchConfig>(&json).unwrap(), off);
    assert_eq!(
        serde_json::from_str::<BatchConfig>(r#"{"pe": null}"#)
            .unwrap()
            .pe,
        None
    );

    let default: BatchConfig = toml::from_str("cls = true").unwrap();
    assert_eq!(default.pe, Some(PeConfig::et_graph()));
    let on = BatchConfig::et_graph();
    let written = toml::to_string(&on).unwrap();
    assert_eq!(toml::from_str::<BatchConfig>(&written).unwrap(), on);
    let k3: BatchConfig = toml::from_str("[pe]\nk = 3").unwrap();
    assert_eq!(k3.pe.map(|p| p.k), Some(3));

    let typo = toml::from_str::<BatchConfig>("[pe]\nkk = 3")
        .unwrap_err()
        .to_string();
    assert!(typo.contains("kk"), "{typo}");
    let bare = toml::from_str::<BatchConfig>("pe = true")
        .unwrap_err()
        .to_string();
    assert!(bare.contains("false"), "{bare}");
}
