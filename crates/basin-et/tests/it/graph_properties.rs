//! Properties of the graph tasks with ET blocks that must hold for any weights: node anomaly
//! detection is permutation equivariant, ignores isolated padding nodes and gives the same
//! answer with sparse and dense attention; the graph classifier's CLS output ignores padding,
//! its A′ projects the edge features where there are some (eq. 24), non-edges carry exactly
//! zero attention weight under the default (eq. 25) switch, and each block's energy does not
//! rise along its steps without noise; without encodings and with a 1 × 1 kernel it ignores
//! the order of a graph's nodes.

use std::sync::Arc;

use basin_core::testing::lock_generator;
use basin_core::{DynamicsConfig, Structure};
use basin_et::anomaly::{Table6Row, table6};
use basin_graph::anomaly::{PlantedConfig, generate_planted};
use basin_graph::batch::make_batch;
use basin_graph::{Csr, Graph, GraphDataset, Targets};
use basin_tasks::graph_classification::{
    AdjacencyMode, Gram, GraphBatchOnDevice, GraphClassifier, GraphClassifierConfig, InputWidths,
    Readout, dataset_pe,
};
use basin_tasks::node_anomaly::{NodeAnomaly, NodeAnomalyConfig, neighbour_structure};
use rand::SeedableRng;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn edges(adj: &Csr) -> (Vec<u32>, Vec<u32>) {
    let mut src = Vec::new();
    for (i, w) in adj.indptr().windows(2).enumerate() {
        src.extend(std::iter::repeat_n(i as u32, w[1] - w[0]));
    }
    (src, adj.indices().to_vec())
}

/// A 40-node planted graph, an ET anomaly model on it in float64 (no positional embeddings: those are
/// per node id, so equivariance holds only without them), and its features.
fn anomaly_fixture(extra_nodes: i64) -> (VarStore, NodeAnomaly, Csr, Tensor) {
    let data = generate_planted(&PlantedConfig {
        nodes: 40,
        cliques: 1,
        clique_size: 5,
        contextual: 3,
        candidates: 10,
        ..PlantedConfig::default()
    })
    .unwrap();
    let adj = data.graph.adjacency.clone();
    let x = &data.graph.node_features;
    let (n, f) = (x.nrows() as i64, x.ncols() as i64);
    let feats =
        Tensor::from_slice(&x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>()).view([n, f]);
    tch::manual_seed(3);
    let cfg = NodeAnomalyConfig {
        positional: false,
        ..table6(Table6Row {
            y: 16,
            k: 32,
            t: 3,
            h: 2,
        })
    };
    let mut vs = VarStore::new(Device::Cpu);
    let model = NodeAnomaly::new(&vs.root(), &cfg, f, n + extra_nodes, 1).unwrap();
    vs.double();
    (vs, model, adj, feats)
}

fn logits(model: &NodeAnomaly, adj: &Csr, feats: &Tensor) -> Tensor {
    let s = neighbour_structure(adj, false, Device::Cpu).unwrap();
    tch::no_grad(|| model.forward(feats, &[s], false))
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

#[test]
fn et_anomaly_is_permutation_equivariant() {
    let _s = lock_generator();
    let (_vs, model, adj, feats) = anomaly_fixture(0);
    let n = adj.num_nodes();
    let base = logits(&model, &adj, &feats);
    // New node k is old node perm[k].
    let perm: Vec<usize> = (0..n).map(|k| (k * 7 + 3) % n).collect();
    let mut inv = vec![0u32; n];
    for (k, &old) in perm.iter().enumerate() {
        inv[old] = k as u32;
    }
    let (src, dst) = edges(&adj);
    let src: Vec<u32> = src.iter().map(|&i| inv[i as usize]).collect();
    let dst: Vec<u32> = dst.iter().map(|&j| inv[j as usize]).collect();
    let (padj, _) = Csr::from_edges(n, &src, &dst).unwrap();
    let idx = Tensor::from_slice(&perm.iter().map(|&p| p as i64).collect::<Vec<_>>());
    let permuted = logits(&model, &padj, &feats.index_select(0, &idx));
    let d = max_diff(&permuted, &base.index_select(0, &idx));
    assert!(d < 1e-10, "permuted predictions differ by {d}");
    // Control: the graph matters (a permuted graph under the old order gives other logits).
    let wrong = logits(&model, &padj, &feats);
    assert!(max_diff(&wrong, &base) > 1e-4);
}

#[test]
fn et_anomaly_ignores_isolated_padding_nodes() {
    let _s = lock_generator();
    let extra = 6;
    let (_vs, model, adj, feats) = anomaly_fixture(extra);
    let n = adj.num_nodes();
    let base = logits(&model, &adj, &feats);
    let (src, dst) = edges(&adj);
    let (padded, _) = Csr::from_edges(n + extra as usize, &src, &dst).unwrap();
    let more = Tensor::cat(
        &[
            feats.shallow_clone(),
            Tensor::randn([extra, feats.size()[1]], (Kind::Double, Device::Cpu)) * 5.0,
        ],
        0,
    );
    let out = logits(&model, &padded, &more).narrow(0, 0, n as i64);
    let d = max_diff(&out, &base);
    assert!(d < 1e-10, "real nodes changed by {d}");
}

#[test]
fn et_anomaly_sparse_and_dense_attention_agree() {
    let _s = lock_generator();
    let (_vs, model, adj, feats) = anomaly_fixture(0);
    let n = adj.num_nodes() as i64;
    let sparse = logits(&model, &adj, &feats);
    let (src, dst) = edges(&adj);
    let mask = Tensor::zeros([n * n], (Kind::Bool, Device::Cpu));
    let flat: Vec<i64> = src
        .iter()
        .zip(&dst)
        .map(|(&i, &j)| i64::from(i) * n + i64::from(j))
        .collect();
    let mask = mask
        .index_fill(0, &Tensor::from_slice(&flat), 1)
        .view([1, n, n]);
    let dense = Structure::mask(mask).unwrap().with_self_attention(false);
    let out = tch::no_grad(|| model.forward(&feats, &[dense], false));
    let d = max_diff(&out, &sparse);
    assert!(d < 1e-10, "sparse and dense differ by {d}");
}

/// Rings and stars of 5–13 nodes with two node features.
fn graphs() -> Arc<GraphDataset> {
    let mut gs = Vec::new();
    let mut labels = Vec::new();
    for i in 0..6usize {
        let n = 5 + 2 * i as u32;
        let (src, dst): (Vec<u32>, Vec<u32>) = if i % 2 == 0 {
            (0..n)
                .flat_map(|a| [(a, (a + 1) % n), ((a + 1) % n, a)])
                .unzip()
        } else {
            (1..n).flat_map(|a| [(0, a), (a, 0)]).unzip()
        };
        let (adj, _) = Csr::from_edges(n as usize, &src, &dst).unwrap();
        let feats = ndarray::Array2::from_shape_fn((n as usize, 2), |(r, c)| {
            ((r * 3 + c) % 5) as f32 * 0.3
        });
        gs.push(Graph::new(adj, feats).unwrap());
        labels.push(i % 2);
    }
    Arc::new(GraphDataset {
        name: "shapes".into(),
        graphs: gs,
        targets: Targets::Classes {
            labels,
            num_classes: 2,
        },
        class_values: vec![0, 1],
        official_split: None,
        node_features: None,
    })
}

fn classifier(cfg: &GraphClassifierConfig) -> (VarStore, GraphClassifier) {
    tch::manual_seed(11);
    let mut vs = VarStore::new(Device::Cpu);
    let model = GraphClassifier::new(&vs.root(), cfg, 2, 2).unwrap();
    vs.double();
    // Larger weights than the initialisation, so that every term matters.
    tch::no_grad(|| {
        for (_, v) in basin_core::testing::variables_by_name(&vs) {
            v.shallow_clone().copy_(&(&v + v.randn_like() * 0.1));
        }
    });
    (vs, model)
}

fn batch(data: &GraphDataset, cfg: &GraphClassifierConfig, ids: &[usize]) -> GraphBatchOnDevice {
    let pe = dataset_pe(data, &cfg.batching).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let b = make_batch(data, ids, &cfg.batching, pe.as_deref(), &mut rng).unwrap();
    GraphBatchOnDevice::new(&b, Device::Cpu)
        .unwrap()
        .to_kind(Kind::Double)
}

/// The CPU preset with 4 noiseless steps per block and k = 3 encodings whose signs stay fixed
/// (the batches here are evaluation batches), in the dense form whose Â the tests read as a
/// `[B, H, N', N']` scale (the preset's edge list: [`sparse_attention_gives_the_dense_classifier`]
/// and the padding and node-order tests, which run both).
fn small_cfg() -> GraphClassifierConfig {
    let mut cfg = basin_et::graph::tu_cpu();
    cfg.sparse_attention = false;
    cfg.block.steps = 4;
    cfg.block.dynamics = DynamicsConfig::gradient_flow(0.01);
    cfg.batching.sign_flip = basin_graph::laplacian::SignFlip::None;
    if let Some(pe) = cfg.batching.pe.as_mut() {
        pe.k = 3;
    }
    cfg
}

#[test]
fn et_graph_cls_output_ignores_padding() {
    let _s = lock_generator();
    let data = graphs();
    for (adjacency, readout, readout_hidden, degree_encoding, readout_initial) in [
        (AdjacencyMode::Masked, Readout::ClsMean, None, None, false),
        (
            AdjacencyMode::Masked,
            Readout::ClsMeanSize,
            None,
            None,
            false,
        ),
        (
            AdjacencyMode::Masked,
            Readout::ClsMeanSize,
            Some(16),
            None,
            false,
        ),
        (
            AdjacencyMode::Masked,
            Readout::ClsMeanSize,
            Some(16),
            Some(3),
            false,
        ),
        (
            AdjacencyMode::Masked,
            Readout::ClsMeanSize,
            Some(16),
            None,
            true,
        ),
        (
            AdjacencyMode::Masked,
            Readout::ClsMoments,
            Some(16),
            None,
            true,
        ),
        (AdjacencyMode::Masked, Readout::Cls, None, None, false),
        // `readout_degrees` below with this row (ClsMoments, no hidden layer).
        (
            AdjacencyMode::Masked,
            Readout::ClsMoments,
            None,
            None,
            false,
        ),
        (
            AdjacencyMode::ReferenceMultiply,
            Readout::ClsMean,
            None,
            None,
            false,
        ),
    ] {
        let forms = [false, true]
            .into_iter()
            .filter(|&sparse| !sparse || adjacency != AdjacencyMode::ReferenceMultiply);
        for (gram, sparse_attention) in [Gram::Dot, Gram::Cosine]
            .into_iter()
            .flat_map(|g| forms.clone().map(move |s| (g, s)))
        {
            let cfg = GraphClassifierConfig {
                adjacency,
                readout,
                readout_hidden,
                gram,
                degree_encoding,
                readout_initial,
                readout_degrees: readout == Readout::ClsMoments && readout_hidden.is_none(),
                sparse_attention,
                ..small_cfg()
            };
            let (_vs, model) = classifier(&cfg);
            let alone = tch::no_grad(|| model.forward(&batch(&data, &cfg, &[0]), false).unwrap());
            // Graph 5 has 15 nodes: graph 0 (5 nodes) is padded to 16 tokens with it.
            let padded =
                tch::no_grad(|| model.forward(&batch(&data, &cfg, &[0, 5]), false).unwrap());
            let d = max_diff(&padded.narrow(0, 0, 1), &alone);
            assert!(
                d < 1e-10,
                "{adjacency:?}, {readout:?}, {readout_hidden:?}, {gram:?}, initial {readout_initial}, degrees {}, sparse {sparse_attention}: padding changed the output by {d}",
                cfg.readout_degrees
            );
        }
    }
}

/// `data` with the nodes of every graph relabelled: old node i becomes node `(2 i + 3) mod n`, a
/// bijection because every n here is odd.
fn relabelled(data: &GraphDataset) -> GraphDataset {
    let mut out = data.clone();
    for g in &mut out.graphs {
        let n = g.node_features.nrows();
        let to = |i: usize| (2 * i + 3) % n;
        let (src, dst) = edges(&g.adjacency);
        let src: Vec<u32> = src.iter().map(|&a| to(a as usize) as u32).collect();
        let dst: Vec<u32> = dst.iter().map(|&a| to(a as usize) as u32).collect();
        let (adj, _) = Csr::from_edges(n, &src, &dst).unwrap();
        let mut feats = g.node_features.clone();
        for i in 0..n {
            feats.row_mut(to(i)).assign(&g.node_features.row(i));
        }
        *g = Graph::new(adj, feats).unwrap();
    }
    out
}

/// The classifier is invariant to the order of a graph's nodes once nothing reads that order:
/// no Laplacian encodings (an eigenvector's sign and a degenerate eigenspace's basis depend on
/// the order) and a 1 × 1 kernel on X ⊗ X. The paper's 3 × 3 kernel slides over the node-index
/// grid (the public ET graph code's `Conv2D` on X ⊗ X), so with it the output moves: the control.
#[test]
fn et_graph_output_ignores_node_order_with_a_one_by_one_kernel() {
    let _s = lock_generator();
    let data = graphs();
    let shuffled = relabelled(&data);
    for (kernel, readout, readout_degrees, sparse_attention) in [
        (1, Readout::ClsMoments, false, false),
        (1, Readout::ClsMoments, false, true),
        (1, Readout::ClsMoments, true, false),
        (1, Readout::ClsMeanSize, false, false),
        (3, Readout::ClsMoments, false, false),
        (3, Readout::ClsMoments, false, true),
    ] {
        let mut cfg = GraphClassifierConfig {
            conv_kernel: kernel,
            readout,
            readout_degrees,
            sparse_attention,
            ..small_cfg()
        };
        cfg.batching.pe = None;
        let (_vs, model) = classifier(&cfg);
        let ids = [1, 4, 5];
        let before = tch::no_grad(|| model.forward(&batch(&data, &cfg, &ids), false).unwrap());
        let after = tch::no_grad(|| model.forward(&batch(&shuffled, &cfg, &ids), false).unwrap());
        let d = max_diff(&before, &after);
        if kernel == 1 {
            assert!(
                d < 1e-10,
                "{readout:?}, degrees {readout_degrees}, sparse {sparse_attention}: relabelling moved the output by {d}"
            );
        } else {
            assert!(
                d > 1e-6,
                "sparse {sparse_attention}: the 3 × 3 kernel should see the node order ({d})"
            );
        }
    }
}

/// [`graphs`] with a one-hot label on each edge, `(src + dst) % 3` (the same both ways).
fn graphs_with_edge_labels() -> Arc<GraphDataset> {
    let mut data = (*graphs()).clone();
    for g in &mut data.graphs {
        let (src, dst) = edges(&g.adjacency);
        let mut e = ndarray::Array2::<f32>::zeros((src.len(), 3));
        for (i, (s, d)) in src.iter().zip(&dst).enumerate() {
            e[[i, ((s + d) % 3) as usize]] = 1.0;
        }
        g.edge_features = Some(e);
    }
    Arc::new(data)
}

/// ET eq. 24: A′ is a linear map of the edge features where the dataset has them. With A′'s
/// weight for label c set to c + 1 (bias 0) and the adjacency model's to 1, the two models'
/// Â differ exactly by the factor `E·(1, 2, 3)` on every attended pair (6 on the CLS entries,
/// which carry every channel), and the classifier still ignores padding.
#[test]
fn a_prime_projects_the_edge_features() {
    let _s = lock_generator();
    let data = graphs_with_edge_labels();
    let on = {
        let mut cfg = small_cfg();
        cfg.batching.dense_edge_features = true;
        cfg
    };
    let off = small_cfg();
    let widths = InputWidths::of(&data);
    assert_eq!(
        widths,
        InputWidths {
            nodes: 2,
            edges: Some(3)
        }
    );
    tch::manual_seed(11);
    let mut vs_on = VarStore::new(Device::Cpu);
    let with_edges = GraphClassifier::new(&vs_on.root(), &on, widths, 2).unwrap();
    vs_on.double();
    let (vs_off, without) = classifier(&off);
    let on_vars = vs_on.variables();
    tch::no_grad(|| {
        for (name, v) in vs_off.variables() {
            if let Some(src) = on_vars.get(&name).filter(|t| t.size() == v.size()) {
                v.shallow_clone().copy_(src);
            }
        }
        let w = &on_vars["adj_proj.weight"];
        assert_eq!(
            w.size(),
            [4, 3],
            "one column per edge channel, a row per head"
        );
        let labels = Tensor::from_slice(&[1.0f64, 2.0, 3.0]);
        w.shallow_clone().copy_(&labels.view([1, 3]).expand_as(w));
        let _ = on_vars["adj_proj.bias"].shallow_clone().zero_();
        let _ = vs_off.variables()["adj_proj.weight"]
            .shallow_clone()
            .fill_(1.0);
        let _ = vs_off.variables()["adj_proj.bias"].shallow_clone().zero_();
        let ids = [0, 1, 4];
        let (b_on, b_off) = (batch(&data, &on, &ids), batch(&data, &off, &ids));
        assert!(b_off.edge_features().is_none());
        let (x_on, s_on) = with_edges.tokens_and_structure(&b_on).unwrap();
        let (x_off, s_off) = without.tokens_and_structure(&b_off).unwrap();
        assert!(max_diff(&x_on, &x_off) < 1e-12, "the same initial tokens");
        let mask = b_on.parts().3.to_kind(Kind::Double).unsqueeze(1);
        let weighted = b_on.edge_features().unwrap().matmul(&labels).unsqueeze(1);
        let (a_on, a_off) = (s_on.scale().unwrap(), s_off.scale().unwrap());
        let d = max_diff(&(a_on * &mask), &(a_off * &weighted));
        assert!(d < 1e-9, "Â with edge features ≠ E·w times Â without: {d}");
        assert!(
            max_diff(a_on, a_off) > 1e-2,
            "the edge labels changed nothing"
        );
        // The CLS row carries every channel: 1 + 2 + 3.
        assert_eq!(weighted.double_value(&[0, 0, 0, 1]), 6.0);
    });
    for adjacency in [AdjacencyMode::Masked, AdjacencyMode::ReferenceMultiply] {
        let cfg = GraphClassifierConfig {
            adjacency,
            ..on.clone()
        };
        tch::manual_seed(11);
        let mut vs = VarStore::new(Device::Cpu);
        let model = GraphClassifier::new(&vs.root(), &cfg, widths, 2).unwrap();
        vs.double();
        let alone = tch::no_grad(|| model.forward(&batch(&data, &cfg, &[0]), false).unwrap());
        let padded = tch::no_grad(|| model.forward(&batch(&data, &cfg, &[0, 5]), false).unwrap());
        let d = max_diff(&padded.narrow(0, 0, 1), &alone);
        assert!(
            d < 1e-10,
            "{adjacency:?}: padding changed the output by {d}"
        );
    }
    // Built for edge features, a model refuses a batch without them.
    let no_edges = GraphClassifier::new(&VarStore::new(Device::Cpu).root(), &on, widths, 2)
        .unwrap()
        .tokens_and_structure(&batch(&data, &off, &[0]).to_kind(Kind::Float));
    let err = no_edges.unwrap_err().to_string();
    assert!(
        err.contains("dense_edge_features") && err.contains("3 edge-feature channels"),
        "{err}"
    );
}

/// `sparse_attention`: the mask's pairs as an edge list with Â at each edge give the dense
/// classifier's logits and parameter gradients, and its Â at the edges, for both Gram
/// products, with and without edge features and self loops, kernels 3 and 5, and padding.
#[test]
fn sparse_attention_gives_the_dense_classifier() {
    let _s = lock_generator();
    let plain = graphs();
    let labelled = graphs_with_edge_labels();
    for (adjacency, gram, edge_features, self_loops, kernel) in [
        (AdjacencyMode::Masked, Gram::Dot, false, false, 3),
        (AdjacencyMode::Masked, Gram::Cosine, false, true, 3),
        (AdjacencyMode::Masked, Gram::Dot, true, false, 5),
        (AdjacencyMode::MaskOnly, Gram::Dot, false, true, 3),
    ] {
        let data = if edge_features { &labelled } else { &plain };
        let mut dense = GraphClassifierConfig {
            adjacency,
            gram,
            conv_kernel: kernel,
            ..small_cfg()
        };
        dense.batching.dense_edge_features = edge_features;
        dense.batching.self_loops = self_loops;
        let sparse = GraphClassifierConfig {
            sparse_attention: true,
            ..dense.clone()
        };
        let widths = InputWidths::of(data);
        let build = |cfg: &GraphClassifierConfig| {
            tch::manual_seed(11);
            let mut vs = VarStore::new(Device::Cpu);
            let model = GraphClassifier::new(&vs.root(), cfg, widths, 2).unwrap();
            vs.double();
            (vs, model)
        };
        let ((vs_d, model_d), (vs_s, model_s)) = (build(&dense), build(&sparse));
        let vars_d = vs_d.variables();
        tch::no_grad(|| {
            for (name, v) in vs_s.variables() {
                let w = &vars_d[&name];
                v.shallow_clone().copy_(&(w + w.randn_like() * 0.1));
                w.shallow_clone().copy_(&v);
            }
        });
        let case = format!(
            "{adjacency:?}, {gram:?}, edges {edge_features}, self {self_loops}, k {kernel}"
        );
        // Graph 0 (5 nodes) padded to graph 5's 16 tokens.
        let b = batch(data, &dense, &[0, 5, 2]);
        if adjacency == AdjacencyMode::Masked {
            let (_, s_d) = model_d.tokens_and_structure(&b).unwrap();
            let (_, s_s) = model_s.tokens_and_structure(&b).unwrap();
            let e = s_s.sparse_edges().unwrap();
            let (q, k) = (e.query(), e.key());
            let n = b.parts().2.size()[1];
            let flat = (q.divide_scalar_mode(n, "floor") * n + q.remainder(n)) * n + k.remainder(n);
            let heads = s_s.edge_scale().unwrap().size()[1];
            let at = s_d
                .scale()
                .unwrap()
                .permute([0, 2, 3, 1])
                .reshape([-1, heads])
                .index_select(0, &flat);
            let d = max_diff(s_s.edge_scale().unwrap(), &at);
            assert!(d < 1e-10, "{case}: Â at the edges differs by {d}");
        }
        let run = |model: &GraphClassifier, vs: &VarStore| {
            let logits = model.forward(&b, false).unwrap();
            (&logits * logits.ones_like().cumsum(1, Kind::Double))
                .sum(Kind::Double)
                .backward();
            let grads: Vec<(String, Tensor)> = basin_core::testing::variables_by_name(vs)
                .into_iter()
                .map(|(n, v)| {
                    let g = v.grad();
                    (
                        n,
                        if g.defined() {
                            g.copy()
                        } else {
                            v.zeros_like()
                        },
                    )
                })
                .collect();
            (logits.detach(), grads)
        };
        let (logits_d, grads_d) = run(&model_d, &vs_d);
        let (logits_s, grads_s) = run(&model_s, &vs_s);
        let d = max_diff(&logits_s, &logits_d);
        assert!(d < 1e-10, "{case}: logits differ by {d}");
        for ((name, gd), (_, gs)) in grads_d.iter().zip(&grads_s) {
            let d = max_diff(gs, gd);
            let scale = gd.abs().max().double_value(&[]).max(1.0);
            assert!(d < 1e-9 * scale, "{case}: ∂/∂{name} differs by {d}");
        }
        // Padding: graph 0 alone, sparse, gives its row of the padded batch.
        let alone = tch::no_grad(|| model_s.forward(&batch(data, &dense, &[0]), false).unwrap());
        let d = max_diff(&logits_s.narrow(0, 0, 1), &alone);
        assert!(
            d < 1e-10,
            "{case}: padding changed the sparse output by {d}"
        );
    }
    let bad = GraphClassifierConfig {
        sparse_attention: true,
        adjacency: AdjacencyMode::ReferenceMultiply,
        ..small_cfg()
    };
    let err = bad.validate().unwrap_err().to_string();
    assert!(err.contains("sparse_attention"), "{err}");
}

/// With `readout_initial` the readout's second half of columns reads the initial tokens' pooling:
/// with the final tokens' columns zeroed, the logits are the linear map of
/// `pool(tokens_and_structure)` alone, and the blocks' output no longer matters.
#[test]
fn the_initial_readout_reads_the_pooled_initial_tokens() {
    let _s = lock_generator();
    let data = graphs();
    let cfg = GraphClassifierConfig {
        readout_initial: true,
        readout_hidden: None,
        ..small_cfg()
    };
    let (vs, model) = classifier(&cfg);
    let vars = vs.variables();
    let (w, bias) = (&vars["readout.weight"], &vars["readout.bias"]);
    // The preset's pooling: CLS ‖ mean ‖ sized mean ‖ std ‖ max.
    assert_eq!(cfg.readout, Readout::ClsMoments);
    let d = 5 * cfg.block.dim;
    assert_eq!(
        w.size()[1],
        2 * d,
        "the pooling of the final and the initial tokens"
    );
    tch::no_grad(|| {
        let _ = w.narrow(1, 0, d).zero_();
    });
    let b = batch(&data, &cfg, &[0, 5]);
    let logits = tch::no_grad(|| model.forward(&b, false).unwrap());
    let x0 = tch::no_grad(|| model.tokens_and_structure(&b).unwrap().0);
    let padding = b.parts().2;
    let pooled = basin_tasks::graph_classification::pool(cfg.readout, &x0, padding);
    let want = pooled.matmul(&w.narrow(1, d, d).tr()) + bias;
    let diff = max_diff(&logits, &want);
    assert!(
        diff < 1e-10,
        "logits differ from the initial tokens' readout by {diff}"
    );
}

/// The degree encoding adds row `min(degree, m)` of its table to each node token and nothing to
/// CLS or padding: with the table's row i set to i + 1, it adds each node's degree plus one (a
/// ring's nodes 3, a star's centre its leaves clamped at m, plus one, its leaves 2), so neither
/// CLS's edges to every node nor padding count (a padded token, degree 0, would read 1).
#[test]
fn the_degree_encoding_adds_each_nodes_clamped_degree() {
    let _s = lock_generator();
    let data = graphs();
    let cfg = GraphClassifierConfig {
        degree_encoding: Some(6),
        ..small_cfg()
    };
    let (vs, model) = classifier(&cfg);
    let table = vs.variables().remove("degree.weight").unwrap();
    let tokens = |scale: f64| {
        tch::no_grad(|| {
            let rows = table.size()[0];
            let ramp =
                (Tensor::arange(rows, (Kind::Double, Device::Cpu)) + 1.0).unsqueeze(-1) * scale;
            table.shallow_clone().copy_(&ramp.expand_as(&table));
        });
        // Ring of 5 (graph 0) padded to the 16 tokens of the star of 15 (graph 5).
        let b = batch(&data, &cfg, &[0, 5]);
        tch::no_grad(|| model.tokens_and_structure(&b).unwrap().0)
    };
    let added = (tokens(1.0) - tokens(0.0)).select(2, 0);
    let expected = |g: usize, t: usize| match (g, t) {
        (_, 0) => 0.0,     // CLS
        (0, 1..=5) => 3.0, // the ring
        (0, _) => 0.0,     // padding
        (_, 1) => 7.0,     // the star's centre: 14 leaves, clamped at 6, plus one
        _ => 2.0,          // its leaves
    };
    for g in 0..2 {
        for t in 0..16 {
            let got = added.double_value(&[g as i64, t as i64]);
            let want = expected(g, t);
            assert!(
                (got - want).abs() < 1e-9,
                "graph {g}, token {t}: {got}, not {want}"
            );
        }
    }
}

/// `Gram::Cosine` builds Â from the tokens' cosines: scaling every node token by c > 0 leaves Â
/// as it is, where the papers' X ⊗ X scales the node pairs of Â by c².
#[test]
fn cosine_gram_keeps_a_hat_when_the_tokens_scale() {
    let _s = lock_generator();
    let data = graphs();
    for (gram, factor) in [(Gram::Dot, 9.0), (Gram::Cosine, 1.0)] {
        let mut cfg = GraphClassifierConfig {
            gram,
            ..small_cfg()
        };
        // No encodings and no encoder bias: the node tokens are then linear in the weights.
        cfg.batching.pe = None;
        let (vs, model) = classifier(&cfg);
        let b = batch(&data, &cfg, &[0, 5]);
        let vars = vs.variables();
        let scale_of = || {
            let (_, s) = tch::no_grad(|| model.tokens_and_structure(&b).unwrap());
            // Node pairs whose 3×3 neighbourhood holds no CLS (slot 0, which the encoder does
            // not scale): graph 0's nodes are slots 1–5.
            s.scale().unwrap().narrow(2, 2, 3).narrow(3, 2, 3).copy()
        };
        let _ = tch::no_grad(|| vars["encoder.bias"].shallow_clone().zero_());
        let before = scale_of();
        tch::no_grad(|| {
            let mut w = vars["encoder.weight"].shallow_clone();
            w.copy_(&(&w * 3.0));
        });
        let after = scale_of();
        let d = max_diff(&after, &(&before * factor));
        assert!(
            d < 1e-9 * before.abs().max().double_value(&[]),
            "{gram:?}: Â after scaling the tokens by 3 is off by {d}"
        );
        assert!(
            before.abs().max().double_value(&[]) > 1e-3,
            "{gram:?}: Â is not trivial"
        );
    }
}

#[test]
fn et_node_readout_lists_every_node_and_ignores_padding() {
    let _s = lock_generator();
    let data = graphs();
    let cfg = GraphClassifierConfig {
        readout: Readout::Nodes,
        ..small_cfg()
    };
    let (_vs, model) = classifier(&cfg);
    let alone = tch::no_grad(|| model.forward(&batch(&data, &cfg, &[0]), false).unwrap());
    assert_eq!(alone.size(), [5, 2]);
    // Graph 0 (5 nodes) first, then graph 5 (15): its rows come first, unchanged by padding.
    let both = tch::no_grad(|| model.forward(&batch(&data, &cfg, &[0, 5]), false).unwrap());
    assert_eq!(both.size(), [20, 2]);
    let d = max_diff(&both.narrow(0, 0, 5), &alone);
    assert!(d < 1e-10, "padding changed the node outputs by {d}");
    let five = tch::no_grad(|| model.forward(&batch(&data, &cfg, &[5]), false).unwrap());
    assert!(max_diff(&both.narrow(0, 5, 15), &five) < 1e-10);
}

#[test]
fn et_graph_non_edges_carry_zero_attention_weight() {
    let _s = lock_generator();
    let data = graphs();
    let cfg = small_cfg();
    let (_vs, model) = classifier(&cfg);
    let b = batch(&data, &cfg, &[2, 3]);
    let (x, s) = model.tokens_and_structure(&b).unwrap();
    let block = &model.blocks()[0];
    let g = block.norm.forward(&x).detach();
    // ∂E/∂Â_ij is the attention weight of the pair times its score: exactly zero for a pair
    // that cannot interact, whatever Â holds there.
    let scale = s.scale().unwrap().detach().set_requires_grad(true);
    let basin_core::Interaction::Mask(mask) = s.interaction() else {
        panic!("the default switch masks non-edges");
    };
    let rebuilt = Structure::mask(mask.shallow_clone())
        .unwrap()
        .with_self_attention(s.self_attention())
        .with_padding(s.padding().unwrap().shallow_clone())
        .unwrap()
        .with_scale(scale.shallow_clone())
        .unwrap();
    let e = block.energy.energy(&g, &rebuilt).sum(Kind::Double);
    let grad = Tensor::run_backward(&[e], &[&scale], false, false).remove(0);
    let allowed = mask.unsqueeze(1).expand_as(&grad);
    let off = grad
        .masked_select(&allowed.logical_not())
        .abs()
        .max()
        .double_value(&[]);
    let on = grad.masked_select(&allowed).abs().max().double_value(&[]);
    assert_eq!(off, 0.0, "non-edges receive weight");
    assert!(on > 1e-6, "edges should receive weight (control): {on}");
}

#[test]
fn et_graph_block_energies_do_not_rise_without_noise() {
    let _s = lock_generator();
    let data = graphs();
    let cfg = small_cfg();
    let (_vs, model) = classifier(&cfg);
    let curves = model
        .energy_per_step(&batch(&data, &cfg, &[0, 1, 2, 3, 4, 5]))
        .unwrap();
    assert_eq!(curves.len(), cfg.blocks);
    for (i, c) in curves.iter().enumerate() {
        assert_eq!(c.len(), cfg.block.steps + 1);
        for w in c.windows(2) {
            assert!(w[1] <= w[0] + 1e-9 * w[0].abs(), "block {i} rose: {c:?}");
        }
        assert!(
            c[cfg.block.steps] < c[0],
            "block {i} did not descend: {c:?}"
        );
    }
}
