//! The whole GPS-family model: exact parameter counts of the presets (the only hard evidence
//! about the published models, SFi-Former Tables 5 and 6), the GraphGym head, node
//! outputs that follow a relabelling of the nodes and graph outputs that ignore it, and a
//! graph's outputs independent of the graphs batched with it.

use std::sync::Arc;

use basin_core::testing::lock_generator;
use basin_graph::{Csr, Graph, GraphDataset, Targets};
use basin_sfi::attention::LambdaNorm;
use basin_sfi::encoders::PeModel;
use basin_sfi::learner::{GpsData, GpsLearner};
use basin_sfi::model::{EdgeEncoder, GpsModel, GpsModelConfig, Level, NodeEncoder, PosEnc};
use basin_sfi::presets::{Dataset, Variant, cpu, gps_es, paper};
use basin_train::runner::Learner;
use ndarray::Array2;
use rand::SeedableRng;
use tch::nn::OptimizerConfig;
use tch::{Device, Tensor, nn};

fn count(cfg: &GpsModelConfig, out: i64) -> i64 {
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = GpsModel::new(&vs.root(), cfg, out).unwrap();
    vs.trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum()
}

#[test]
fn graphgps_presets_have_the_published_parameter_counts() {
    let _g = lock_generator();
    assert_eq!(
        count(&paper(Dataset::PeptidesFunc, Variant::Gps), 10),
        504_442
    );
    assert_eq!(count(&paper(Dataset::Pattern, Variant::Gps), 1), 337_201);
    assert_eq!(count(&paper(Dataset::Cluster, Variant::Gps), 6), 502_054);
    assert_eq!(count(&gps_es(Dataset::Pattern), 1), 91_165);
    assert_eq!(count(&gps_es(Dataset::Cluster), 6), 285_210);
}

#[test]
fn dfi_and_the_mpnn_alone_drop_exactly_their_missing_branches() {
    let _g = lock_generator();
    // DFi has no friction branch (2H d² + 2H d fewer); the MPNN alone (GPS's PATTERN config
    // without its Transformer) lacks the attention, 4d² + 4d, and its BatchNorm, 2d, per layer.
    let sfi = count(&paper(Dataset::Pattern, Variant::Sfi), 1);
    let dfi = count(&paper(Dataset::Pattern, Variant::Dfi), 1);
    assert_eq!(sfi - dfi, 4 * (2 * 4 * 40 * 40 + 2 * 4 * 40));
    let gps = count(&paper(Dataset::Pattern, Variant::Gps), 1);
    let mpnn = count(&paper(Dataset::Pattern, Variant::GatedGcn), 1);
    assert_eq!(gps - mpnn, 6 * (4 * 64 * 64 + 4 * 64 + 2 * 64));
}

#[test]
fn every_table_5_6_model_counts_the_papers_parameters_less_the_unidentified_ones() {
    let _g = lock_generator();
    // Tables 5 and 6, paper − L(2d + 1) (Peptides-func as in the test above, its printed count
    // fits no configuration).
    let expected = [
        (Dataset::Mnist, 275_465 - 5 * 81),
        (Dataset::Cifar10, 275_545 - 5 * 81),
        (Dataset::Pattern, 222_213 - 4 * 81),
        (Dataset::Cluster, 1_211_330 - 20 * 65),
        (Dataset::PascalVocSp, 1_250_805 - 8 * 137),
        (Dataset::CocoSp, 1_249_869 - 8 * 137),
        (Dataset::PeptidesStruct, 3_819_425 - 2 * 471),
        (Dataset::PcqmContact, 978_526 - 7 * 129),
        (Dataset::PeptidesFunc, 3_707_327),
    ];
    for (d, count_expected) in expected {
        let cfg = paper(d, Variant::Sfi);
        let out = d.task().outputs(cfg.dim());
        assert_eq!(count(&cfg, out), count_expected, "{d:?}");
    }
}

#[test]
fn a_superpixel_like_set_with_real_features_trains() {
    let _g = lock_generator();
    tch::manual_seed(7);
    // 12 small graphs, 3 real node columns and 1 real edge column; class = whether the mean
    // of column 0 is positive.
    let graphs: Vec<Graph> = (0..12)
        .map(|i| {
            let n = 4 + i % 3;
            let edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|v| (v, v + 1)).collect();
            let adj = Csr::from_undirected(n, &edges).unwrap();
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            let x = Array2::from_shape_fn((n, 3), |(v, c)| {
                sign * (1.0 + v as f32 * 0.1) + c as f32 * 0.01
            });
            let mut g = Graph::new(adj.clone(), x).unwrap();
            g.edge_features = Some(Array2::from_elem((adj.nnz(), 1), 0.5));
            g
        })
        .collect();
    let data = Arc::new(GraphDataset {
        name: "superpixel-like".into(),
        graphs,
        targets: Targets::Classes {
            labels: (0..12).map(|i| i % 2).collect(),
            num_classes: 2,
        },
        class_values: vec![0, 1],
        official_split: None,
        node_features: None,
    });
    let mut cfg = paper(Dataset::Mnist, Variant::Sfi);
    cfg.layers = 1;
    cfg.layer.attention.dim = 16;
    cfg.layer.attention.heads = 2;
    cfg.layer.attention.head_dim = 8;
    cfg.pe = PosEnc::EsLapPe { k: 2 };
    cfg.head_layers = 1;
    cfg.batch = 4;
    let gd = Arc::new(GpsData::new(data, 2, 0).unwrap());
    let mut learner = GpsLearner::new(gd, &cfg, 0, Device::Cpu).unwrap();
    let mut opt = nn::Adam::default().build(learner.vars(), 1e-2).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let ids: Vec<usize> = (0..12).collect();
    let mut losses = Vec::new();
    for _ in 0..40 {
        let out = learner.train_step(&ids, &mut rng).unwrap();
        losses.push(out.loss.double_value(&[]));
        opt.backward_step(&out.loss);
    }
    let scores = learner.predict(&ids).unwrap();
    let correct = scores
        .0
        .iter()
        .enumerate()
        .filter(|(i, r)| (r[1] > r[0]) == (i % 2 == 1))
        .count();
    assert!(
        losses[39] < 0.5 * losses[0] && correct == 12,
        "loss {} → {}, {correct}/12 correct",
        losses[0],
        losses[39]
    );
}

#[test]
fn real_valued_graph_targets_train_with_the_l1_loss_and_score_by_mae() {
    use basin_train::protocol::Metric;
    let _g = lock_generator();
    tch::manual_seed(11);
    // 16 paths and cycles of 3..10 nodes, three real node columns; two targets per graph (as
    // Peptides-struct's 11): the size and whether the graph closes into a cycle.
    let graphs: Vec<Graph> = (0..16)
        .map(|i| {
            let n = 3 + i % 8;
            let mut edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|v| (v, v + 1)).collect();
            if i % 2 == 1 {
                edges.push((n as u32 - 1, 0));
            }
            let adj = Csr::from_undirected(n, &edges).unwrap();
            let mut g = Graph::new(
                adj.clone(),
                Array2::from_shape_fn((n, 3), |(v, c)| (v + c) as f32 * 0.1),
            )
            .unwrap();
            g.edge_features = Some(Array2::from_elem((adj.nnz(), 1), 0.5));
            g
        })
        .collect();
    let y = Array2::from_shape_fn((16, 2), |(i, t)| {
        if t == 0 {
            (3 + i % 8) as f32 / 5.0
        } else {
            (i % 2) as f32
        }
    });
    let data = Arc::new(GraphDataset {
        name: "struct-like".into(),
        graphs,
        targets: Targets::Regression(y.clone()),
        class_values: vec![],
        official_split: None,
        node_features: None,
    });
    let mut cfg = paper(Dataset::Mnist, Variant::Sfi);
    cfg.layers = 2;
    cfg.layer.attention.dim = 16;
    cfg.layer.attention.heads = 2;
    cfg.layer.attention.head_dim = 8;
    cfg.pe = PosEnc::Rwse { steps: 8, dim: 4 };
    cfg.head_layers = 1;
    cfg.batch = 8;
    let gd = Arc::new(GpsData::new(data, 0, 8).unwrap());
    let mut learner = GpsLearner::new(gd.clone(), &cfg, 0, Device::Cpu).unwrap();
    assert_eq!(learner.model().config().level, Level::Graph);
    let mut opt = nn::Adam::default().build(learner.vars(), 1e-2).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let ids: Vec<usize> = (0..16).collect();
    let mut losses = Vec::new();
    for _ in 0..150 {
        let out = learner.train_step(&ids, &mut rng).unwrap();
        losses.push(out.loss.double_value(&[]));
        opt.backward_step(&out.loss);
    }
    let scores = learner.predict(&ids).unwrap();
    assert!(
        scores.0.iter().all(|r| r.len() == 2),
        "one row of two values per graph"
    );
    let mae = Metric::Mae.score(&scores, gd.targets(), &ids).unwrap();
    // By hand: the mean of |prediction − target| over every entry.
    let mut by_hand = 0.0;
    for (i, r) in scores.0.iter().enumerate() {
        for (t, p) in r.iter().enumerate() {
            by_hand += (p - f64::from(y[(i, t)])).abs() / 32.0;
        }
    }
    assert!((mae - by_hand).abs() < 1e-12);
    // The best constant under L1 (the column medians) does worse than the trained model.
    let median_mae = (0..2)
        .map(|t| {
            let mut col: Vec<f64> = (0..16).map(|i| f64::from(y[(i, t)])).collect();
            col.sort_by(f64::total_cmp);
            let m = 0.5 * (col[7] + col[8]);
            col.iter().map(|v| (v - m).abs()).sum::<f64>() / 16.0
        })
        .sum::<f64>()
        / 2.0;
    assert!(
        mae < 0.5 * median_mae && losses[149] < 0.5 * losses[0],
        "MAE {mae} vs the best constant's {median_mae}; loss {} → {}",
        losses[0],
        losses[149]
    );
}

#[test]
fn links_are_scored_by_dot_products_trained_by_bce_and_ranked_by_mrr() {
    use basin_graph::LinkTargets;
    use basin_train::protocol::Metric;
    let _g = lock_generator();
    tch::manual_seed(3);
    // 12 cycles of 6..9 nodes, each node coloured 0, 1 or 2 (a one-hot feature); the labelled
    // pairs join nodes of one colour (positive) and of two colours (negative), as contacts.
    let (mut graphs, mut links) = (Vec::new(), Vec::new());
    for i in 0..12usize {
        let n = 6 + i % 4;
        let colour = |v: usize| (v * (i + 1) + v / 2) % 3;
        let edges: Vec<(u32, u32)> = (0..n as u32).map(|v| (v, (v + 1) % n as u32)).collect();
        let x = Array2::from_shape_fn((n, 1), |(v, _)| colour(v) as f32);
        graphs.push(Graph::new(Csr::from_undirected(n, &edges).unwrap(), x).unwrap());
        let mut l = LinkTargets::default();
        for a in 0..n {
            for b in 0..n {
                if a != b && (a + b) % 2 == 0 {
                    l.pairs.push([a as u32, b as u32]);
                    l.labels
                        .push(if colour(a) == colour(b) { 1.0 } else { 0.0 });
                }
            }
        }
        links.push(l);
    }
    let data = Arc::new(GraphDataset {
        name: "contact-like".into(),
        graphs,
        targets: Targets::Links(links.clone()),
        class_values: vec![],
        official_split: None,
        node_features: None,
    });
    let mut cfg = toy_config(Level::Node, Variant::Gps);
    cfg.head_layers = 1;
    let gd = Arc::new(GpsData::new(data, 0, 4).unwrap());
    // The head must be node level: pairs are read from node outputs.
    let graph_level = toy_config(Level::Graph, Variant::Gps);
    let err = GpsLearner::new(gd.clone(), &graph_level, 0, Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("architecture.level"), "{err}");
    let mut learner = GpsLearner::new(gd.clone(), &cfg, 0, Device::Cpu).unwrap();
    let ids: Vec<usize> = (0..12).collect();
    let positives: usize = links
        .iter()
        .map(|l| l.labels.iter().filter(|&&y| y == 1.0).count())
        .sum();
    let before = learner.predict(&ids).unwrap();
    // One row per positive link, as long as its graph has nodes (the link, then n − 1 others).
    assert_eq!(before.0.len(), positives);
    assert_eq!(before.0[0].len(), 6);
    // The first row's first entry is the dot product of the first positive pair's outputs.
    let (first, _) = links[0]
        .pairs
        .iter()
        .zip(&links[0].labels)
        .find(|(_, y)| **y == 1.0)
        .unwrap();
    let h = outputs(&learner, &gd, &[0]).to_kind(tch::Kind::Double);
    let dot = (h.get(i64::from(first[0])) * h.get(i64::from(first[1]))).sum(tch::Kind::Double);
    assert!((before.0[0][0] - dot.double_value(&[])).abs() < 1e-5);
    let mrr_before = Metric::Mrr.score(&before, gd.targets(), &ids).unwrap();
    assert!(mrr_before > 0.0 && mrr_before <= 1.0, "MRR {mrr_before}");
    // The ROC-AUC of the labelled pairs' dot products (evaluation mode): what BCE trains.
    let pair_auc = |learner: &GpsLearner| {
        let (mut truth, mut dots) = (Vec::new(), Vec::new());
        for (i, l) in links.iter().enumerate() {
            let h = outputs(learner, &gd, &[i]).to_kind(tch::Kind::Double);
            let s = h.matmul(&h.tr());
            for (p, y) in l.pairs.iter().zip(&l.labels) {
                truth.push(*y > 0.5);
                dots.push(s.double_value(&[i64::from(p[0]), i64::from(p[1])]));
            }
        }
        basin_train::metrics::roc_auc(&truth, &dots).unwrap()
    };
    let auc_before = pair_auc(&learner);
    let mut opt = nn::Adam::default().build(learner.vars(), 1e-2).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let mut losses = Vec::new();
    for _ in 0..60 {
        let out = learner.train_step(&ids, &mut rng).unwrap();
        losses.push(out.loss.double_value(&[]));
        opt.backward_step(&out.loss);
    }
    let auc_after = pair_auc(&learner);
    // MRR ranks each positive against every other node, its own source and the unlabelled
    // pairs included, so on this toy it need not follow the loss; it is only checked to score.
    let mrr_after = Metric::Mrr
        .score(&learner.predict(&ids).unwrap(), gd.targets(), &ids)
        .unwrap();
    assert!(mrr_after > 0.0 && mrr_after <= 1.0, "MRR {mrr_after}");
    assert!(
        losses[59] < 0.5 * losses[0] && auc_after > 0.95 && auc_after > auc_before + 0.1,
        "loss {} → {}, pair AUC {auc_before} → {auc_after}",
        losses[0],
        losses[59]
    );
}

/// A small node-classification dataset: a 6-cycle with a pendant, a path and a triangle with a
/// tail, integer features 0..3.
fn toy() -> Arc<GraphDataset> {
    let graphs: Vec<(usize, Vec<(u32, u32)>)> = vec![
        (
            7,
            vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (2, 6)],
        ),
        (4, vec![(0, 1), (1, 2), (2, 3)]),
        (5, vec![(0, 1), (1, 2), (2, 0), (2, 3), (3, 4)]),
    ];
    let graphs = graphs
        .into_iter()
        .map(|(n, edges)| {
            let adj = Csr::from_undirected(n, &edges).unwrap();
            let x = Array2::from_shape_fn((n, 1), |(i, _)| ((i * 7 + n) % 3) as f32);
            let mut g = Graph::new(adj, x).unwrap();
            g.node_labels = Some((0..n).map(|i| (i % 2) as i64).collect());
            g
        })
        .collect();
    Arc::new(GraphDataset {
        name: "toy".into(),
        graphs,
        targets: Targets::NodeClasses { num_classes: 2 },
        class_values: vec![0, 1],
        official_split: None,
        node_features: None,
    })
}

/// `g` with node `i` renamed `perm[i]`.
fn permuted(g: &Graph, perm: &[usize]) -> Graph {
    let n = perm.len();
    let mut edges = Vec::new();
    for r in 0..n {
        for &c in g.adjacency.row(r) {
            if (r as u32) < c {
                edges.push((perm[r] as u32, perm[c as usize] as u32));
            }
        }
    }
    let mut x = Array2::zeros((n, 1));
    let mut labels = vec![0; n];
    for i in 0..n {
        x[(perm[i], 0)] = g.node_features[(i, 0)];
        labels[perm[i]] = g.node_labels.as_ref().unwrap()[i];
    }
    let mut p = Graph::new(Csr::from_undirected(n, &edges).unwrap(), x).unwrap();
    p.node_labels = Some(labels);
    p
}

fn toy_config(level: Level, variant: Variant) -> GpsModelConfig {
    let mut cfg = cpu(Dataset::Pattern, variant);
    cfg.node = NodeEncoder::OneHot { classes: 3 };
    cfg.edge = EdgeEncoder::Dummy;
    cfg.pe = PosEnc::Rwse { steps: 4, dim: 4 };
    cfg.level = level;
    cfg.layer.attention.dim = 12;
    cfg.layer.attention.head_dim = 6;
    cfg.layer.attention.lambda_norm = LambdaNorm::PerGraph;
    cfg.layer.attention.attn_dropout = 0.0;
    cfg
}

fn outputs(learner: &GpsLearner, data: &GpsData, ids: &[usize]) -> Tensor {
    let b = data
        .inputs(learner.model().config(), ids, Device::Cpu)
        .unwrap();
    tch::no_grad(|| learner.model().forward(&b, false)).unwrap()
}

#[test]
fn node_outputs_follow_a_relabelling_and_graph_outputs_ignore_it() {
    let _g = lock_generator();
    let base = toy();
    let perm = [3, 0, 6, 1, 5, 2, 4];
    let mut graphs = base.graphs.clone();
    graphs.push(permuted(&base.graphs[0], &perm));
    let ds = Arc::new(GraphDataset {
        graphs,
        ..(*base).clone()
    });
    let data = Arc::new(GpsData::new(ds, 0, 4).unwrap());
    for variant in [Variant::Sfi, Variant::Dfi, Variant::Gps] {
        let node = GpsLearner::new(
            data.clone(),
            &toy_config(Level::Node, variant),
            1,
            Device::Cpu,
        )
        .unwrap();
        let (a, b) = (outputs(&node, &data, &[0]), outputs(&node, &data, &[3]));
        let index = Tensor::from_slice(&perm.map(|p| p as i64));
        let diff = (a - b.index_select(0, &index))
            .abs()
            .max()
            .double_value(&[]);
        assert!(diff < 1e-4, "{variant:?}: node outputs differ by {diff}");
        let graph = GpsLearner::new(
            data.clone(),
            &toy_config(Level::Graph, variant),
            1,
            Device::Cpu,
        )
        .unwrap();
        let (a, b) = (outputs(&graph, &data, &[0]), outputs(&graph, &data, &[3]));
        let diff = (a - b).abs().max().double_value(&[]);
        assert!(diff < 1e-4, "{variant:?}: graph outputs differ by {diff}");
    }
}

#[test]
fn a_graphs_outputs_do_not_depend_on_its_batch() {
    let _g = lock_generator();
    let data = Arc::new(GpsData::new(toy(), 0, 4).unwrap());
    let learner = GpsLearner::new(
        data.clone(),
        &toy_config(Level::Node, Variant::Sfi),
        2,
        Device::Cpu,
    )
    .unwrap();
    let alone = outputs(&learner, &data, &[1]);
    let batched = outputs(&learner, &data, &[0, 1, 2]).narrow(0, 7, 4);
    let diff = (alone - batched).abs().max().double_value(&[]);
    assert!(diff < 1e-4, "outputs differ by {diff}");
}

#[test]
fn the_graphgym_head_normalises_its_hidden_rows_and_binary_tasks_have_one_output() {
    let _g = lock_generator();
    let data = Arc::new(GpsData::new(toy(), 0, 4).unwrap());
    for l2norm in [true, false] {
        let mut cfg = toy_config(Level::Node, Variant::Gps);
        cfg.head_layers = 3;
        cfg.head_l2norm = l2norm;
        let mut learner = GpsLearner::new(data.clone(), &cfg, 3, Device::Cpu).unwrap();
        let before = outputs(&learner, &data, &[0]);
        assert_eq!(before.size(), [7, 1]);
        // ReLU is positively homogeneous: scaling the first head layer by 10 scales its rows,
        // which the L2 normalisation undoes; without it the output changes.
        let vars = learner.vars().variables();
        tch::no_grad(|| {
            for name in ["head0.weight", "head0.bias"] {
                let _ = vars[name].shallow_clone().g_mul_scalar_(10.0);
            }
        });
        let diff = (outputs(&learner, &data, &[0]) - &before)
            .abs()
            .max()
            .double_value(&[]);
        assert_eq!(
            diff < 1e-4,
            l2norm,
            "l2norm {l2norm}: outputs moved by {diff}"
        );
        let scores = learner.predict(&[0, 1]).unwrap();
        assert_eq!(scores.0.len(), 11);
        assert!(scores.0.iter().all(|r| (r[0] + r[1] - 1.0).abs() < 1e-6));
    }
}

#[test]
fn a_config_that_cannot_run_names_its_field() {
    let mut cfg = toy_config(Level::Node, Variant::Sfi);
    cfg.pe = PosEnc::LapPe {
        k: 4,
        dim: 12,
        model: Default::default(),
        sign_flip: Default::default(),
    };
    let vs = nn::VarStore::new(Device::Cpu);
    let e = GpsModel::new(&vs.root(), &cfg, 1).unwrap_err().to_string();
    assert!(e.contains("pe.dim"), "{e}");
    let mut cfg = toy_config(Level::Node, Variant::Sfi);
    cfg.batch = 0;
    let e = GpsModel::new(&vs.root(), &cfg, 1).unwrap_err().to_string();
    assert!(e.contains("batch"), "{e}");
    // A Transformer LapPE whose heads do not divide its width.
    let mut cfg = toy_config(Level::Node, Variant::Sfi);
    cfg.pe = PosEnc::LapPe {
        k: 4,
        dim: 4,
        model: PeModel::Transformer {
            layers: 1,
            heads: 3,
        },
        sign_flip: Default::default(),
    };
    let e = GpsModel::new(&vs.root(), &cfg, 1).unwrap_err().to_string();
    assert!(e.contains("pe.model") && e.contains("3 head"), "{e}");
    // Multi-head attention's start for a branch without queries or keys.
    let mut cfg = toy_config(Level::Node, Variant::Sfi);
    cfg.layer.attention.adjacency = basin_sfi::attention::Adjacency::Only;
    cfg.layer.attention.multihead_init = true;
    let e = GpsModel::new(&vs.root(), &cfg, 1).unwrap_err().to_string();
    assert!(e.contains("multihead_init"), "{e}");
}

/// GraphGPS's Transformer branch starts as `nn.MultiheadAttention` (Xavier-uniform over the
/// joint input projection, zero biases); SFi-Former's maps start as `nn.Linear`.
#[test]
fn the_transformer_branch_starts_as_multihead_attention() {
    let _g = lock_generator();
    let maps = |cfg: &GpsModelConfig| {
        let vs = nn::VarStore::new(Device::Cpu);
        let _model = GpsModel::new(&vs.root(), cfg, 1).unwrap();
        let mut out: Vec<(String, f64)> = vs
            .variables()
            .into_iter()
            .filter(|(n, _)| n.contains("attention.") && !n.contains("friction"))
            .map(|(n, t)| (n, t.abs().max().double_value(&[])))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    let gps = paper(Dataset::Pattern, Variant::Gps);
    let d = gps.dim();
    let xavier = (6.0 / (4 * d) as f64).sqrt();
    let gps_maps = maps(&gps);
    assert_eq!(gps_maps.len(), 6 * 8, "{gps_maps:?}");
    for (name, max) in &gps_maps {
        let want = if name.ends_with(".bias") {
            0.0
        } else if name.contains(".o.") {
            1.0 / (d as f64).sqrt()
        } else {
            xavier
        };
        assert!(
            *max <= want && *max >= 0.9 * want,
            "{name}: max {max}, bound {want}"
        );
    }
    // SFi's query bias is drawn as nn.Linear's.
    let sfi_maps = maps(&paper(Dataset::Pattern, Variant::Sfi));
    let (name, max) = sfi_maps
        .iter()
        .find(|(n, _)| n.ends_with("attention.q.bias"))
        .unwrap();
    assert!(*max > 0.0, "{name}");
}

#[test]
fn the_lappe_model_reads_from_a_run_file_and_defaults_to_the_deepset() {
    #[derive(serde::Deserialize)]
    struct File {
        pe: PosEnc,
    }
    let read = |text: &str| toml::from_str::<File>(text).unwrap().pe;
    assert_eq!(
        read("pe = { kind = \"lap-pe\", k = 10, dim = 16 }"),
        PosEnc::LapPe {
            k: 10,
            dim: 16,
            model: PeModel::DeepSet,
            sign_flip: Default::default(),
        }
    );
    assert_eq!(
        read(
            "pe = { kind = \"lap-pe\", k = 8, dim = 16, model = { kind = \"transformer\", layers = 2, heads = 4 } }"
        ),
        PosEnc::LapPe {
            k: 8,
            dim: 16,
            model: PeModel::Transformer {
                layers: 2,
                heads: 4
            },
            sign_flip: Default::default(),
        }
    );
}
