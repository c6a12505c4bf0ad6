//! Structure properties: permuting tokens (and the structure) permutes ∂E/∂g; padded tokens
//! leave real tokens' gradients unchanged; dense and sparse forms agree on the same graph.

use crate::common::*;
use basin_core::testing::max_rel_error;
use basin_core::{Activation, Energy, EnergySum, SparseEdges, Structure};
use tch::{Kind, Tensor};

const D: i64 = 6;

fn et_energy(vs: &mut tch::nn::VarStore) -> EnergySum {
    let att = attention(vs, D, 2, 4, true);
    let hop = hopfield(vs, D, 9, Activation::Relu);
    vs.double();
    EnergySum::new().with(1.0, att).with(1.0, hop)
}

#[test]
fn permuting_tokens_permutes_the_gradient() {
    tch::manual_seed(30);
    let mut vs = store();
    let energy = et_energy(&mut vs);
    let (b, n) = (2, 7);
    let g = tokens(b, n, D);
    let mask = random_mask(b, n, 0.5);
    let perm = Tensor::randperm(n, (Kind::Int64, tch::Device::Cpu));
    let gp = g.index_select(1, &perm);
    let maskp = mask.index_select(1, &perm).index_select(2, &perm);
    let cases: Vec<(&str, Structure, Structure)> = vec![
        ("full", Structure::full(), Structure::full()),
        (
            "mask",
            Structure::mask(mask.shallow_clone()).unwrap(),
            Structure::mask(maskp.shallow_clone()).unwrap(),
        ),
        (
            "sparse",
            Structure::sparse(edges_of(&mask)),
            Structure::sparse(edges_of(&maskp)),
        ),
    ];
    for (name, s, sp) in cases {
        let (e, grad) = energy.energy_and_grad(&g, &s);
        let (ep, gradp) = energy.energy_and_grad(&gp, &sp);
        assert!(
            max_rel_error(&ep, &e, 1e-12) < 1e-12,
            "{name}: energy changed under permutation"
        );
        let err = max_rel_error(&gradp, &grad.index_select(1, &perm), 1e-12);
        assert!(err < 1e-12, "{name}: gradient not permuted ({err:e})");
    }
}

#[test]
fn padding_leaves_real_tokens_unchanged() {
    tch::manual_seed(31);
    let mut vs = store();
    let energy = et_energy(&mut vs);
    let (b, n, extra) = (3, 5, 3);
    let g = tokens(b, n, D);
    let junk = tokens(b, extra, D) * 10.0;
    let gp = Tensor::cat(&[&g, &junk], 1);
    let mut pad = Tensor::ones([b, n + extra], (Kind::Bool, tch::Device::Cpu));
    pad = pad.index_fill(
        1,
        &Tensor::arange_start(n, n + extra, (Kind::Int64, tch::Device::Cpu)),
        0,
    );
    let mask = random_mask(b, n, 0.6);
    // The same mask, padded with arbitrary (even allowed) pairs for the padded tokens.
    let maskp = Tensor::ones([b, n + extra, n + extra], (Kind::Bool, tch::Device::Cpu));
    maskp.narrow(1, 0, n).narrow(2, 0, n).copy_(&mask);
    let cases: Vec<(&str, Structure, Structure)> = vec![
        (
            "full",
            Structure::full(),
            Structure::full().with_padding(pad.shallow_clone()).unwrap(),
        ),
        (
            "mask+self",
            Structure::mask(mask.shallow_clone())
                .unwrap()
                .with_self_attention(true),
            Structure::mask(maskp.shallow_clone())
                .unwrap()
                .with_self_attention(true)
                .with_padding(pad.shallow_clone())
                .unwrap(),
        ),
        (
            "sparse",
            Structure::sparse(edges_of(&mask)),
            Structure::sparse(edges_of(&maskp))
                .with_padding(pad.shallow_clone())
                .unwrap(),
        ),
    ];
    for (name, s, sp) in cases {
        let (e, grad) = energy.energy_and_grad(&g, &s);
        let (ep, gradp) = energy.energy_and_grad(&gp, &sp);
        assert!(
            max_rel_error(&ep, &e, 1e-12) < 1e-12,
            "{name}: padding changed the energy"
        );
        let err = max_rel_error(&gradp.narrow(1, 0, n), &grad, 1e-12);
        assert!(
            err < 1e-12,
            "{name}: padding changed real tokens' gradients ({err:e})"
        );
        assert_eq!(
            gradp.narrow(1, n, extra).abs().max().double_value(&[]),
            0.0,
            "{name}: padded tokens have a gradient"
        );
    }
}

/// The sparse structure's energy and gradient equal `want` with an autograd graph (the weights
/// require grad) and without one (no_grad).
fn assert_sparse_agrees(
    energy: &EnergySum,
    g: &Tensor,
    sparse: &Structure,
    (e_d, g_d): &(Tensor, Tensor),
    case: &str,
) {
    for graph in [true, false] {
        let (e_s, g_s) = if graph {
            energy.energy_and_grad(g, sparse)
        } else {
            tch::no_grad(|| energy.energy_and_grad(g, sparse))
        };
        assert!(
            max_rel_error(&e_s, e_d, 1e-12) < 1e-12,
            "energies differ ({case}, graph={graph})"
        );
        assert!(
            max_rel_error(&g_s, g_d, 1e-12) < 1e-12,
            "gradients differ ({case}, graph={graph})"
        );
    }
}

#[test]
fn dense_and_sparse_forms_agree() {
    tch::manual_seed(32);
    let mut vs = store();
    let energy = et_energy(&mut vs);
    let (b, n) = (3, 8);
    let g = tokens(b, n, D);
    let mask = random_mask(b, n, 0.4);
    for self_attention in [false, true] {
        let dense = Structure::mask(mask.shallow_clone())
            .unwrap()
            .with_self_attention(self_attention);
        let sparse = Structure::sparse(edges_of(&mask)).with_self_attention(self_attention);
        let want = energy.energy_and_grad(&g, &dense);
        assert_sparse_agrees(
            &energy,
            &g,
            &sparse,
            &want,
            &format!("self={self_attention}"),
        );
    }
    // Edges given in any order are the same pattern (a mask's come query-major already).
    let nz = mask.nonzero();
    let shuffle = Tensor::randperm(nz.size()[0], (Kind::Int64, tch::Device::Cpu));
    let nz = nz.index_select(0, &shuffle);
    let (query, key) = (
        nz.select(1, 0) * n + nz.select(1, 1),
        nz.select(1, 0) * n + nz.select(1, 2),
    );
    let edges = SparseEdges::new(&query, &key, b * n).unwrap();
    let order = edges.query() * (b * n) + edges.key();
    let e = order.size()[0];
    assert!(
        bool::try_from(
            order
                .narrow(0, 1, e - 1)
                .gt_tensor(&order.narrow(0, 0, e - 1))
                .all()
        )
        .unwrap(),
        "edges not stored query-major"
    );
    let shuffled = Structure::sparse(edges);
    let want = energy.energy_and_grad(&g, &Structure::mask(mask.shallow_clone()).unwrap());
    assert_sparse_agrees(&energy, &g, &shuffled, &want, "shuffled edges");
    // More edges than one chunk of the sparse kernels (2¹⁶): 300² pairs of one sample.
    let big = tokens(1, 300, D);
    let full = Tensor::ones([1, 300, 300], (Kind::Bool, tch::Device::Cpu));
    let want = energy.energy_and_grad(&big, &Structure::full());
    assert_sparse_agrees(
        &energy,
        &big,
        &Structure::sparse(edges_of(&full)),
        &want,
        "chunks",
    );
    // A full graph as an edge list equals the `Full` structure.
    let full = Tensor::ones([b, n, n], (Kind::Bool, tch::Device::Cpu));
    let (e_f, g_f) = energy.energy_and_grad(&g, &Structure::full());
    let (e_s, g_s) = energy.energy_and_grad(&g, &Structure::sparse(edges_of(&full)));
    assert!(max_rel_error(&e_s, &e_f, 1e-12) < 1e-12);
    assert!(max_rel_error(&g_s, &g_f, 1e-12) < 1e-12);
}

/// The per-edge scale of a sparse pattern is the dense scale read at its edges: a mask with
/// `with_scale` and the same edges with `with_edge_scale` agree, with padding and the diagonal.
#[test]
fn a_per_edge_scale_equals_the_dense_scale_at_the_edges() {
    tch::manual_seed(34);
    let mut vs = store();
    let energy = et_energy(&mut vs);
    let (b, n, heads) = (3, 7, 2);
    let g = tokens(b, n, D);
    let mask = random_mask(b, n, 0.5);
    let scale = Tensor::randn([b, heads, n, n], (Kind::Double, tch::Device::Cpu));
    let pad = Tensor::ones([b, n], (Kind::Bool, tch::Device::Cpu));
    let _ = pad.get(1).narrow(0, n - 2, 2).fill_(0);
    for self_attention in [false, true] {
        let dense = Structure::mask(mask.shallow_clone())
            .unwrap()
            .with_self_attention(self_attention)
            .with_padding(pad.shallow_clone())
            .unwrap()
            .with_scale(scale.shallow_clone())
            .unwrap();
        let sparse = Structure::sparse(edges_of(&mask))
            .with_self_attention(self_attention)
            .with_padding(pad.shallow_clone())
            .unwrap();
        let e = sparse.sparse_edges().unwrap();
        // Flattened token t = b·N + i: scale[b, :, q, k] at every edge, [E, H].
        let (q, k) = (e.query(), e.key());
        let at = scale
            .permute([0, 2, 3, 1])
            .reshape([-1, heads])
            .index_select(
                0,
                &((q.divide_scalar_mode(n, "floor") * n + q.remainder(n)) * n + k.remainder(n)),
            );
        let sparse = sparse.with_edge_scale(at).unwrap();
        sparse.check(b, n, Some(heads)).unwrap();
        let want = energy.energy_and_grad(&g, &dense);
        assert_sparse_agrees(
            &energy,
            &g,
            &sparse,
            &want,
            &format!("self={self_attention}"),
        );
        assert!(
            max_rel_error(&energy.energy(&g, &sparse), &want.0, 1e-12) < 1e-12,
            "energy alone differs (self={self_attention})"
        );
    }
}

#[test]
fn self_attention_switch_changes_the_energy() {
    tch::manual_seed(33);
    let mut vs = store();
    let energy = et_energy(&mut vs);
    let g = tokens(2, 5, D);
    let without = energy.energy(&g, &Structure::full());
    let with = energy.energy(&g, &Structure::full().with_self_attention(true));
    assert!(max_rel_error(&with, &without, 1e-12) > 1e-6);
}

#[test]
fn bad_structures_are_reported_not_panicked() {
    let q = Tensor::from_slice(&[0i64, 1, 5]);
    let k = Tensor::from_slice(&[1i64, 0, 2]);
    let err = SparseEdges::new(&q, &k, 4).unwrap_err().to_string();
    assert!(err.contains("query") && err.contains("0..4"), "{err}");
    let err =
        SparseEdges::from_edge_index(&Tensor::zeros([3, 2], (Kind::Int64, tch::Device::Cpu)), 4)
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("edge_index") && err.contains("[2, E]"),
        "{err}"
    );
    let err = Structure::mask(Tensor::zeros([2, 3], (Kind::Bool, tch::Device::Cpu)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("mask"), "{err}");
    let s = Structure::mask(Tensor::zeros([2, 3, 3], (Kind::Bool, tch::Device::Cpu))).unwrap();
    let err = s.check(2, 4, None).unwrap_err().to_string();
    assert!(
        err.contains("[2, 4, 4]") && err.contains("[2, 3, 3]"),
        "{err}"
    );
    let edges = SparseEdges::new(
        &Tensor::from_slice(&[0i64]),
        &Tensor::from_slice(&[1i64]),
        6,
    )
    .unwrap();
    let err = Structure::sparse(edges)
        .with_padding(Tensor::ones([2, 2], (Kind::Bool, tch::Device::Cpu)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("padding"), "{err}");
    // A per-edge scale needs a sparse structure and one row per effective edge.
    let err = Structure::full()
        .with_edge_scale(Tensor::ones([3, 1], (Kind::Float, tch::Device::Cpu)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("edge_scale") && err.contains("with_scale"),
        "{err}"
    );
    let edges = SparseEdges::new(
        &Tensor::from_slice(&[0i64, 1]),
        &Tensor::from_slice(&[1i64, 0]),
        4,
    )
    .unwrap();
    let err = Structure::sparse(edges)
        .with_edge_scale(Tensor::ones([3, 1], (Kind::Float, tch::Device::Cpu)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("[2, H]") && err.contains("[3, 1]"), "{err}");
    // Factors belong to the edges they were computed for: padding set after them is refused,
    // and a diagonal added after them leaves a count that `check` refuses.
    let edges = || {
        SparseEdges::new(
            &Tensor::from_slice(&[0i64, 1]),
            &Tensor::from_slice(&[1i64, 0]),
            4,
        )
        .unwrap()
    };
    let scaled = Structure::sparse(edges())
        .with_edge_scale(Tensor::ones([2, 1], (Kind::Float, tch::Device::Cpu)))
        .unwrap();
    scaled.check(2, 2, Some(3)).unwrap();
    let err = scaled
        .with_padding(Tensor::ones([2, 2], (Kind::Bool, tch::Device::Cpu)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("padding") && err.contains("per-edge scale"),
        "{err}"
    );
    let err = Structure::sparse(edges())
        .with_edge_scale(Tensor::ones([2, 1], (Kind::Float, tch::Device::Cpu)))
        .unwrap()
        .with_self_attention(true)
        .check(2, 2, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("edge_scale") && err.contains("[6, H]"),
        "{err}"
    );
}
