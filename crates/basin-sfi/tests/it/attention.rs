//! SFi attention (eq. 11), in float64: DFi without adjacency is multi-head softmax attention
//! with rows as queries; the layer is permutation equivariant and blind to padding; the "Ã"
//! ablation ignores queries and keys; gradients reach every projection and γ.

use basin_core::testing::{lock_generator, max_rel_error, variables_by_name};
use basin_sfi::attention::{Adjacency, SfiAttention, SfiAttentionConfig, gcn_normalize};
use basin_sfi::flow::{FlowConfig, FlowSolver};
use tch::{Kind, Tensor, nn};

const OPTS: (Kind, tch::Device) = (Kind::Double, tch::Device::Cpu);

fn layer(cfg: &SfiAttentionConfig) -> (nn::VarStore, SfiAttention) {
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let att = SfiAttention::new(&vs.root(), cfg);
    vs.double();
    tch::no_grad(|| {
        for (name, v) in variables_by_name(&vs) {
            if name != "gamma" {
                v.shallow_clone().copy_(&(v.randn_like() * 0.5));
            }
        }
    });
    (vs, att)
}

fn cfg(solver: FlowSolver, adjacency: Adjacency) -> SfiAttentionConfig {
    SfiAttentionConfig {
        dim: 6,
        heads: 2,
        head_dim: 3,
        flow: FlowConfig {
            solver,
            ..FlowConfig::default()
        },
        adjacency,
        ..SfiAttentionConfig::default()
    }
}

/// A ring of `n` nodes, dense `[1, n, n]`.
fn ring(n: i64) -> Tensor {
    let a = Tensor::zeros([n, n], OPTS);
    for i in 0..n {
        let j = (i + 1) % n;
        let _ = a.get(i).get(j).fill_(1.0);
        let _ = a.get(j).get(i).fill_(1.0);
    }
    a.unsqueeze(0)
}

#[test]
fn dfi_without_adjacency_is_softmax_attention_with_query_rows() {
    let _g = lock_generator();
    tch::manual_seed(1);
    let (vs, att) = layer(&cfg(FlowSolver::Dense, Adjacency::None));
    let n = 5;
    let x = Tensor::randn([1, n, 6], OPTS);
    let mask = Tensor::ones([1, n], (Kind::Bool, tch::Device::Cpu));
    let out = att.forward(&x, &mask, &Tensor::zeros([1, n, n], OPTS));
    // By hand: softmax(q_i·k_j/√d_k) over keys j, times values, heads concatenated, W_O.
    let v = vs.variables();
    let proj = |w: &str| x.matmul(&v[&format!("{w}.weight")].tr()) + &v[&format!("{w}.bias")];
    let (q, k, val) = (proj("q"), proj("k"), proj("v"));
    let mut heads = Vec::new();
    for h in 0..2 {
        let (qh, kh, vh) = (
            q.narrow(2, 3 * h, 3),
            k.narrow(2, 3 * h, 3),
            val.narrow(2, 3 * h, 3),
        );
        let a = (qh.matmul(&kh.transpose(1, 2)) / 3f64.sqrt()).softmax(-1, Kind::Double);
        heads.push(a.matmul(&vh));
    }
    let expected = Tensor::cat(&heads, 2).matmul(&v["o.weight"].tr()) + &v["o.bias"];
    assert!(max_rel_error(&out, &expected, 1e-12) < 1e-10);
}

#[test]
fn the_layer_is_permutation_equivariant_and_blind_to_padding() {
    let _g = lock_generator();
    tch::manual_seed(2);
    for (solver, adjacency) in [
        (FlowSolver::ProxBb, Adjacency::Enhanced),
        (FlowSolver::ExactPenalized, Adjacency::Enhanced),
        (FlowSolver::Dense, Adjacency::Enhanced),
        (FlowSolver::ProxBb, Adjacency::None),
        (FlowSolver::ProxBb, Adjacency::Only),
    ] {
        let (_vs, att) = layer(&cfg(solver, adjacency));
        let n = 6;
        let x = Tensor::randn([1, n, 6], OPTS);
        let mask = Tensor::ones([1, n], (Kind::Bool, tch::Device::Cpu));
        let adj = gcn_normalize(&ring(n), &mask);
        let out = att.forward(&x, &mask, &adj);
        // Permuted nodes give permuted outputs.
        let perm = Tensor::from_slice(&[3i64, 0, 5, 1, 4, 2]);
        let xp = x.index_select(1, &perm);
        let adjp = adj.index_select(1, &perm).index_select(2, &perm);
        let outp = att.forward(&xp, &mask, &adjp);
        let err = max_rel_error(&outp, &out.index_select(1, &perm), 1e-12);
        assert!(
            err < 1e-9,
            "{solver:?}/{adjacency:?}: not equivariant ({err:.1e})"
        );
        // The same graph padded to 9 tokens: the real outputs do not move, padding outputs 0.
        let pad = 3;
        let xpad = Tensor::cat(&[&x, &(Tensor::randn([1, pad, 6], OPTS) * 10.0)], 1);
        let mut m = vec![true; n as usize];
        m.extend(vec![false; pad as usize]);
        let mpad = Tensor::from_slice(&m).view([1, -1]);
        let apad = Tensor::zeros([1, n + pad, n + pad], OPTS);
        apad.narrow(1, 0, n).narrow(2, 0, n).copy_(&ring(n));
        let outpad = att.forward(&xpad, &mpad, &gcn_normalize(&apad, &mpad));
        let err = max_rel_error(&outpad.narrow(1, 0, n), &out, 1e-12);
        assert!(
            err < 1e-9,
            "{solver:?}/{adjacency:?}: padding changed the output ({err:.1e})"
        );
        let leak = outpad.narrow(1, n, pad).abs().max().double_value(&[]);
        assert_eq!(
            leak, 0.0,
            "{solver:?}/{adjacency:?}: padded tokens got output"
        );
    }
}

#[test]
fn the_adjacency_ablation_ignores_queries_and_keys() {
    let _g = lock_generator();
    tch::manual_seed(3);
    let (vs, att) = layer(&cfg(FlowSolver::ProxBb, Adjacency::Only));
    // The ablation builds no queries, keys, frictions or γ (nothing it would ignore).
    let names: Vec<String> = variables_by_name(&vs).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["o.bias", "o.weight", "v.bias", "v.weight"]);
    let n = 5;
    let x = Tensor::randn([1, n, 6], OPTS);
    let mask = Tensor::ones([1, n], (Kind::Bool, tch::Device::Cpu));
    let adj = gcn_normalize(&ring(n), &mask);
    // Its output is (Ã X W_V) W_O + b_O exactly.
    let out = att.forward(&x, &mask, &adj);
    let vars = vs.variables();
    let v = x.matmul(&vars["v.weight"].tr()) + &vars["v.bias"];
    let want = adj.matmul(&v).matmul(&vars["o.weight"].tr()) + &vars["o.bias"];
    assert!(max_rel_error(&out, &want, 1e-12) < 1e-10);
    // Ã of a ring: each real row sums over itself and two neighbours of degree 3: 1.
    let rows = adj.sum_dim_intlist(&[-1i64][..], false, Kind::Double);
    assert!(max_rel_error(&rows, &rows.ones_like(), 1e-12) < 1e-12);
}

#[test]
fn gradients_reach_every_projection_and_gamma() {
    let _g = lock_generator();
    tch::manual_seed(4);
    let (vs, att) = layer(&cfg(FlowSolver::ProxBb, Adjacency::Enhanced));
    let n = 5;
    let x = Tensor::randn([2, n, 6], OPTS);
    let mask = Tensor::ones([2, n], (Kind::Bool, tch::Device::Cpu));
    let adj = gcn_normalize(&ring(n).expand([2, n, n], false), &mask);
    let loss = att.forward(&x, &mask, &adj).square().sum(Kind::Double);
    loss.backward();
    for (name, v) in variables_by_name(&vs) {
        // A key bias adds a per-row constant to the scores, which a softmax cancels.
        let g = v.grad().abs().max().double_value(&[]);
        if name.ends_with("k.bias") {
            assert!(g < 1e-10, "{name}: {g:.1e}");
            continue;
        }
        assert!(
            g > 1e-6 && g.is_finite(),
            "no gradient reaches {name} ({g:.1e})"
        );
    }
}
