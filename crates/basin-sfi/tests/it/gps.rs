//! The SFi-GPS layer (float64, BatchNorm in evaluation mode): a graph's output does not depend
//! on the graphs batched with it (with per-graph λ), relabelling a graph's nodes relabels its
//! outputs, gradients reach every weight, and size buckets change how the attention's work is
//! cut, not what the layer computes.

use basin_core::testing::{lock_generator, max_rel_error, variables_by_name};
use basin_graph::batch::{BUCKET_OVERHEAD, size_buckets};
use basin_sfi::attention::{LambdaNorm, SfiAttentionConfig};
use basin_sfi::flow::{FlowConfig, FlowSolver};
use basin_sfi::gps::{GpsConfig, GpsLayer, GraphBatchTensors};
use tch::{Kind, Tensor, nn};

const OPTS: (Kind, tch::Device) = (Kind::Double, tch::Device::Cpu);

fn layer(lambda_norm: LambdaNorm) -> (nn::VarStore, GpsLayer) {
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let cfg = GpsConfig {
        attention: SfiAttentionConfig {
            dim: 6,
            heads: 2,
            head_dim: 6,
            flow: FlowConfig {
                solver: FlowSolver::ProxBb,
                ..FlowConfig::default()
            },
            lambda_norm,
            ..SfiAttentionConfig::default()
        },
        dropout: 0.0,
        es_gate: false,
        global: true,
    };
    let l = GpsLayer::new(&vs.root(), &cfg);
    vs.double();
    (vs, l)
}

/// Undirected edges (both directions) of a ring of `n` nodes starting at global id `first`.
fn ring(first: i64, n: i64) -> Vec<(i64, i64)> {
    (0..n)
        .flat_map(|i| {
            let (a, b) = (first + i, first + (i + 1) % n);
            [(a, b), (b, a)]
        })
        .collect()
}

fn batch(sizes: &[i64], edges: &[(i64, i64)]) -> GraphBatchTensors {
    batch_with(sizes, edges, BUCKET_OVERHEAD)
}

fn batch_with(sizes: &[i64], edges: &[(i64, i64)], overhead: i64) -> GraphBatchTensors {
    let src: Vec<i64> = edges.iter().map(|e| e.0).collect();
    let dst: Vec<i64> = edges.iter().map(|e| e.1).collect();
    GraphBatchTensors::with_bucket_overhead(
        sizes,
        Tensor::from_slice(&src),
        Tensor::from_slice(&dst),
        Kind::Double,
        overhead,
    )
}

#[test]
fn a_graph_gives_the_same_output_alone_or_batched() {
    let _g = lock_generator();
    tch::manual_seed(1);
    let (_vs, l) = layer(LambdaNorm::PerGraph);
    let (n1, n2) = (4, 7);
    let h = Tensor::randn([n1 + n2, 6], OPTS);
    let mut edges = ring(0, n1);
    edges.extend(ring(n1, n2));
    let e = Tensor::randn([edges.len() as i64, 6], OPTS);
    let (both, e_both) = l
        .forward(&h, &e, &batch(&[n1, n2], &edges), None, false)
        .unwrap();
    let e1 = 2 * n1;
    let (first, _) = l
        .forward(
            &h.narrow(0, 0, n1),
            &e.narrow(0, 0, e1),
            &batch(&[n1], &ring(0, n1)),
            None,
            false,
        )
        .unwrap();
    let (second, e_second) = l
        .forward(
            &h.narrow(0, n1, n2),
            &e.narrow(0, e1, 2 * n2),
            &batch(&[n2], &ring(0, n2)),
            None,
            false,
        )
        .unwrap();
    assert!(max_rel_error(&both.narrow(0, 0, n1), &first, 1e-12) < 1e-9);
    assert!(max_rel_error(&both.narrow(0, n1, n2), &second, 1e-12) < 1e-9);
    assert!(max_rel_error(&e_both.narrow(0, e1, 2 * n2), &e_second, 1e-12) < 1e-9);
}

#[test]
fn relabelling_a_graphs_nodes_relabels_its_outputs() {
    let _g = lock_generator();
    tch::manual_seed(2);
    let (_vs, l) = layer(LambdaNorm::BatchMax);
    let n = 6;
    let edges = ring(0, n);
    let h = Tensor::randn([n, 6], OPTS);
    let e = Tensor::randn([edges.len() as i64, 6], OPTS);
    let (out, _) = l
        .forward(&h, &e, &batch(&[n], &edges), None, false)
        .unwrap();
    let perm = [3i64, 0, 5, 1, 4, 2]; // old node i becomes perm[i]
    let relabelled: Vec<(i64, i64)> = edges
        .iter()
        .map(|&(a, b)| (perm[a as usize], perm[b as usize]))
        .collect();
    let inverse = Tensor::from_slice(&perm).argsort(0, false);
    let (out_p, _) = l
        .forward(
            &h.index_select(0, &inverse),
            &e,
            &batch(&[n], &relabelled),
            None,
            false,
        )
        .unwrap();
    assert!(max_rel_error(&out_p, &out.index_select(0, &inverse), 1e-12) < 1e-9);
}

#[test]
fn gradients_reach_every_weight() {
    let _g = lock_generator();
    tch::manual_seed(3);
    let (vs, l) = layer(LambdaNorm::BatchMax);
    let mut edges = ring(0, 4);
    edges.extend(ring(4, 5));
    let h = Tensor::randn([9, 6], OPTS);
    let e = Tensor::randn([edges.len() as i64, 6], OPTS);
    // Evaluation-mode BatchNorm: in training mode it subtracts the batch mean, which cancels
    // (and so gives no gradient to) the bias of the linear map before it.
    let (out, e_out) = l
        .forward(&h, &e, &batch(&[4, 5], &edges), None, false)
        .unwrap();
    // A fixed random readout (a sum of squares after BatchNorm would be constant in training).
    let w = Tensor::randn(out.size(), OPTS);
    let we = Tensor::randn(e_out.size(), OPTS);
    ((out * w).sum(Kind::Double) + (e_out * we).sum(Kind::Double)).backward();
    for (name, v) in variables_by_name(&vs) {
        // BatchNorm statistics do not learn; a key bias adds a per-row constant to the scores,
        // which a softmax cancels: no gradient reaches it, in any attention.
        if !v.requires_grad() || name.ends_with("k.bias") {
            continue;
        }
        let g = v.grad().abs().max().double_value(&[]);
        assert!(
            g > 1e-6 && g.is_finite(),
            "no gradient reaches {name} ({g:.1e})"
        );
    }
}

#[test]
fn size_buckets_change_neither_outputs_nor_gradients() {
    let _g = lock_generator();
    tch::manual_seed(4);
    // λ = λ*/N* couples the graphs of a batch: the buckets must keep the batch's N*.
    let (vs, l) = layer(LambdaNorm::BatchMax);
    let sizes = [5i64, 2, 11, 0, 6, 3, 11, 9];
    let mut edges = Vec::new();
    let mut first = 0;
    for &n in &sizes {
        if n > 1 {
            edges.extend(ring(first, n));
        }
        first += n;
    }
    let mut h = Tensor::randn([first, 6], OPTS).set_requires_grad(true);
    let e = Tensor::randn([edges.len() as i64, 6], OPTS);
    let w = Tensor::randn([first, 6], OPTS);
    let mut run = |overhead: i64| {
        for mut v in vs.trainable_variables() {
            v.zero_grad();
        }
        h.zero_grad();
        let (out, _) = l
            .forward(&h, &e, &batch_with(&sizes, &edges, overhead), None, false)
            .unwrap();
        (&out * &w).sum(Kind::Double).backward();
        let grads: Vec<Tensor> = vs
            .trainable_variables()
            .iter()
            .map(|v| {
                let g = v.grad();
                // A variable the output does not depend on has no gradient at all.
                if g.defined() {
                    g.copy()
                } else {
                    v.zeros_like()
                }
            })
            .collect();
        (out.detach(), h.grad().copy(), grads)
    };
    let (whole, dh_whole, dw_whole) = run(i64::MAX);
    for overhead in [0, 20] {
        assert!(size_buckets(&sizes, overhead).len() > 2);
        let (parts, dh, dw) = run(overhead);
        assert!(max_rel_error(&parts, &whole, 1e-12) < 1e-9);
        assert!(max_rel_error(&dh, &dh_whole, 1e-12) < 1e-9);
        // Floor 10⁻³: a key bias's gradient is zero up to rounding (a softmax cancels it).
        for (a, b) in dw.iter().zip(&dw_whole) {
            let err = max_rel_error(a, b, 1e-3);
            assert!(err < 1e-9, "overhead {overhead}: {err:.1e} {a} {b}");
        }
    }
}
