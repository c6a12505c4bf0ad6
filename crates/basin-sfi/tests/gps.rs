//! The SFi-GPS layer (float64, BatchNorm in evaluation mode): a graph's output does not depend
//! on the graphs batched with it (with per-graph λ), relabelling a graph's nodes relabels its
//! outputs, and gradients reach every weight.

use basin_core::flow::{FlowConfig, FlowSolver};
use basin_core::testing::{lock_generator, max_rel_error, variables_by_name};
use basin_sfi::attention::{LambdaNorm, SfiAttentionConfig};
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
    let src: Vec<i64> = edges.iter().map(|e| e.0).collect();
    let dst: Vec<i64> = edges.iter().map(|e| e.1).collect();
    GraphBatchTensors::new(
        sizes,
        Tensor::from_slice(&src),
        Tensor::from_slice(&dst),
        Kind::Double,
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
    let (both, e_both) = l.forward(&h, &e, &batch(&[n1, n2], &edges), None, false);
    let e1 = 2 * n1;
    let (first, _) = l.forward(
        &h.narrow(0, 0, n1),
        &e.narrow(0, 0, e1),
        &batch(&[n1], &ring(0, n1)),
        None,
        false,
    );
    let (second, e_second) = l.forward(
        &h.narrow(0, n1, n2),
        &e.narrow(0, e1, 2 * n2),
        &batch(&[n2], &ring(0, n2)),
        None,
        false,
    );
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
    let (out, _) = l.forward(&h, &e, &batch(&[n], &edges), None, false);
    let perm = [3i64, 0, 5, 1, 4, 2]; // old node i becomes perm[i]
    let relabelled: Vec<(i64, i64)> = edges
        .iter()
        .map(|&(a, b)| (perm[a as usize], perm[b as usize]))
        .collect();
    let inverse = Tensor::from_slice(&perm).argsort(0, false);
    let (out_p, _) = l.forward(
        &h.index_select(0, &inverse),
        &e,
        &batch(&[n], &relabelled),
        None,
        false,
    );
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
    let (out, e_out) = l.forward(&h, &e, &batch(&[4, 5], &edges), None, false);
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
