//! GatedGCN against a per-node loop of its formula, permutation equivariance, a node without
//! in-edges, and gradients (float64).

use basin_core::testing::{lock_generator, max_rel_error, variables_by_name};
use basin_sfi::gated_gcn::{GatedGcn, GatedGcnConfig};
use tch::{Kind, Tensor, nn};

const OPTS: (Kind, tch::Device) = (Kind::Double, tch::Device::Cpu);

fn layer(batch_norm: bool) -> (nn::VarStore, GatedGcn) {
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let cfg = GatedGcnConfig {
        dim: 4,
        batch_norm,
        ..GatedGcnConfig::default()
    };
    let l = GatedGcn::new(&vs.root(), &cfg);
    vs.double();
    (vs, l)
}

/// Edges j → i of a small directed graph; node 4 has no in-edge.
fn graph() -> (Tensor, Tensor) {
    let edges = [(0i64, 1i64), (1, 0), (2, 1), (3, 1), (1, 2), (2, 3), (4, 0)];
    let src: Vec<i64> = edges.iter().map(|e| e.0).collect();
    let dst: Vec<i64> = edges.iter().map(|e| e.1).collect();
    (Tensor::from_slice(&src), Tensor::from_slice(&dst))
}

#[test]
fn the_layer_is_its_formula() {
    let _g = lock_generator();
    tch::manual_seed(1);
    let (vs, l) = layer(false);
    let (src, dst) = graph();
    let h = Tensor::randn([5, 4], OPTS);
    let e = Tensor::randn([7, 4], OPTS);
    let (h1, e1) = l.forward(&h, &e, &src, &dst, None, false).unwrap();
    let v = vs.variables();
    let lin =
        |w: &str, x: &Tensor| x.matmul(&v[&format!("{w}.weight")].tr()) + &v[&format!("{w}.bias")];
    let (s, d): (Vec<i64>, Vec<i64>) = (Vec::try_from(&src).unwrap(), Vec::try_from(&dst).unwrap());
    for i in 0..5i64 {
        let hi = h.get(i);
        let mut num = Tensor::zeros([4], OPTS);
        let mut den = Tensor::zeros([4], OPTS);
        for (k, (&j, &t)) in s.iter().zip(&d).enumerate() {
            if t != i {
                continue;
            }
            let e_hat = lin("d", &hi) + lin("e", &h.get(j)) + lin("c", &e.get(k as i64));
            let sigma = e_hat.sigmoid();
            num = num + &sigma * lin("b", &h.get(j));
            den = den + &sigma;
            let e_expected = e.get(k as i64) + e_hat.relu();
            assert!(
                max_rel_error(&e1.get(k as i64), &e_expected, 1e-12) < 1e-10,
                "edge {k}"
            );
        }
        let expected = &hi + (lin("a", &hi) + num / (den + 1e-6)).relu();
        assert!(
            max_rel_error(&h1.get(i), &expected, 1e-12) < 1e-10,
            "node {i}"
        );
    }
    // Node 4 has no in-edge: h̃ = A h.
    let lone = h.get(4) + lin("a", &h.get(4)).relu();
    assert!(max_rel_error(&h1.get(4), &lone, 1e-12) < 1e-10);
}

#[test]
fn relabelled_nodes_and_reordered_edges_give_the_same_layer() {
    let _g = lock_generator();
    tch::manual_seed(2);
    let (_vs, l) = layer(true);
    let (src, dst) = graph();
    let h = Tensor::randn([5, 4], OPTS);
    let e = Tensor::randn([7, 4], OPTS);
    let (h1, e1) = l.forward(&h, &e, &src, &dst, None, true).unwrap();
    // New label of old node i: perm[i]; edges listed in another order.
    let perm = Tensor::from_slice(&[2i64, 4, 0, 1, 3]);
    let inverse = perm.argsort(0, false);
    let order = Tensor::from_slice(&[6i64, 2, 0, 5, 1, 4, 3]);
    let hp = h.index_select(0, &inverse);
    let ep = e.index_select(0, &order);
    let srcp = perm.index_select(0, &src.index_select(0, &order));
    let dstp = perm.index_select(0, &dst.index_select(0, &order));
    let (h2, e2) = l.forward(&hp, &ep, &srcp, &dstp, None, true).unwrap();
    assert!(max_rel_error(&h2, &h1.index_select(0, &inverse), 1e-12) < 1e-9);
    assert!(max_rel_error(&e2, &e1.index_select(0, &order), 1e-12) < 1e-9);
}

#[test]
fn gradients_reach_every_weight() {
    let _g = lock_generator();
    tch::manual_seed(3);
    let (vs, l) = layer(true);
    let (src, dst) = graph();
    let h = Tensor::randn([5, 4], OPTS);
    let e = Tensor::randn([7, 4], OPTS);
    // Evaluation-mode BatchNorm (in training mode it cancels the biases before it) and a fixed
    // random readout.
    let (h1, e1) = l.forward(&h, &e, &src, &dst, None, false).unwrap();
    let (wh, we) = (
        Tensor::randn(h1.size(), OPTS),
        Tensor::randn(e1.size(), OPTS),
    );
    ((h1 * wh).sum(Kind::Double) + (e1 * we).sum(Kind::Double)).backward();
    for (name, v) in variables_by_name(&vs) {
        if !v.requires_grad() {
            continue; // BatchNorm running statistics
        }
        let g = v.grad().abs().max().double_value(&[]);
        assert!(
            g > 1e-6 && g.is_finite(),
            "no gradient reaches {name} ({g:.1e})"
        );
    }
}

#[test]
fn equivstable_gates_see_only_distances_of_the_positional_embeddings() {
    let _g = lock_generator();
    tch::manual_seed(4);
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let cfg = GatedGcnConfig {
        dim: 4,
        batch_norm: false,
        es_gate: true,
        ..GatedGcnConfig::default()
    };
    let l = GatedGcn::new(&vs.root(), &cfg);
    vs.double();
    // 3d + 1 parameters on top of the five d×d maps with biases.
    let n: i64 = vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum();
    assert_eq!(n, 5 * (4 * 4 + 4) + 3 * 4 + 1);
    let (src, dst) = graph();
    let h = Tensor::randn([5, 4], OPTS);
    let e = Tensor::randn([7, 4], OPTS);
    let p = Tensor::randn([5, 3], OPTS);
    let (h1, e1) = l.forward(&h, &e, &src, &dst, Some(&p), false).unwrap();
    // Flipping every sign (or shifting) the embeddings keeps the distances: same output.
    let (h2, e2) = l
        .forward(&h, &e, &src, &dst, Some(&(p.neg() + 0.7)), false)
        .unwrap();
    assert!(max_rel_error(&h2, &h1, 1e-12) < 1e-10);
    assert!(max_rel_error(&e2, &e1, 1e-12) < 1e-10);
    // Different distances do change the node update (edges are updated before the gate).
    let (h3, e3) = l
        .forward(&h, &e, &src, &dst, Some(&(&p * 3.0)), false)
        .unwrap();
    assert!(max_rel_error(&h3, &h1, 1e-12) > 1e-6);
    assert!(max_rel_error(&e3, &e1, 1e-12) < 1e-12);
}

/// The edge batch norm of a training batch with one edge is an error naming it, not tch's
/// panic; evaluation scores the same batch, and a batch without edges trains.
#[test]
fn one_training_edge_is_an_error_and_no_edges_train() {
    let _g = lock_generator();
    tch::manual_seed(2);
    let (_vs, l) = layer(true);
    let h = Tensor::randn([3, 4], OPTS);
    let (src, dst) = (Tensor::from_slice(&[0i64]), Tensor::from_slice(&[1i64]));
    let e = Tensor::randn([1, 4], OPTS);
    let err = l
        .forward(&h, &e, &src, &dst, None, true)
        .expect_err("one training edge")
        .to_string();
    assert!(
        err.contains("1 row(s)") && err.contains("two or more"),
        "{err}"
    );
    let (h1, e1) = l.forward(&h, &e, &src, &dst, None, false).unwrap();
    assert_eq!((h1.size(), e1.size()), (vec![3, 4], vec![1, 4]));
    let none = Tensor::zeros([0], (Kind::Int64, tch::Device::Cpu));
    let (h2, e2) = l
        .forward(&h, &Tensor::zeros([0, 4], OPTS), &none, &none, None, true)
        .unwrap();
    assert_eq!((h2.size(), e2.size()), (vec![3, 4], vec![0, 4]));
}
