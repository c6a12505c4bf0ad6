//! The LapPE DeepSet encoder: its parameter count, missing frequencies, frequency order, and the
//! training sign flip (one sign per eigenvector, shared by every node).

use basin_core::testing::{lock_generator, max_rel_error};
use basin_sfi::encoders::{LapPe, PeModel};
use tch::{Kind, Tensor, nn};

const OPTS: (Kind, tch::Device) = (Kind::Double, tch::Device::Cpu);

fn encoder(dim_pe: i64) -> (nn::VarStore, LapPe) {
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let e = LapPe::new(&vs.root(), dim_pe, PeModel::DeepSet);
    vs.double();
    (vs, e)
}

#[test]
fn the_deepset_has_the_gps_codes_624_parameters_at_16() {
    let _g = lock_generator();
    let (vs, _) = encoder(16);
    let n: i64 = vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum();
    assert_eq!(n, 624);
}

/// The encoding of 4 random frequencies of 5 nodes, checked unchanged (within `tol`) by two
/// more missing (NaN) frequencies and by another order of the frequencies; returns the inputs
/// and the encoding.
fn ignores_missing_and_order(e: &LapPe, tol: f64) -> (Tensor, Tensor, Tensor) {
    let vecs = Tensor::randn([5, 4], OPTS);
    let vals = Tensor::rand([5, 4], OPTS);
    let out = e.forward(&vecs, &vals, false, None);
    assert!(out.isfinite().all().int64_value(&[]) == 1);
    let nan = Tensor::full([5, 2], f64::NAN, OPTS);
    let more = e.forward(
        &Tensor::cat(&[&vecs, &nan], 1),
        &Tensor::cat(&[&vals, &nan], 1),
        false,
        None,
    );
    assert!(max_rel_error(&more, &out, tol) < tol, "missing frequencies");
    let order = Tensor::from_slice(&[2i64, 0, 3, 1]);
    let shuffled = e.forward(
        &vecs.index_select(1, &order),
        &vals.index_select(1, &order),
        false,
        None,
    );
    assert!(max_rel_error(&shuffled, &out, tol) < tol, "frequency order");
    (vecs, vals, out)
}

#[test]
fn missing_frequencies_count_nothing_and_order_does_not_matter() {
    let _g = lock_generator();
    tch::manual_seed(1);
    let (_vs, e) = encoder(8);
    let _ = ignores_missing_and_order(&e, 1e-12);
}

#[test]
fn training_flips_one_sign_per_eigenvector_for_every_node() {
    let _g = lock_generator();
    tch::manual_seed(2);
    let (_vs, e) = encoder(8);
    let k = 3;
    let vecs = Tensor::randn([6, k], OPTS);
    let vals = Tensor::rand([6, k], OPTS);
    let plain = e.forward(&vecs, &vals, false, None);
    let mut flipped_once = false;
    for _ in 0..5 {
        let trained = e.forward(&vecs, &vals, true, None);
        flipped_once |= max_rel_error(&trained, &plain, 1e-12) > 1e-6;
        // Some sign pattern s ∈ {±1}^k, applied to whole columns, reproduces it exactly.
        let found = (0..1 << k).any(|bits| {
            let s: Vec<f64> = (0..k)
                .map(|i| if bits >> i & 1 == 1 { -1.0 } else { 1.0 })
                .collect();
            let flipped = &vecs * Tensor::from_slice(&s).view([1, k]);
            max_rel_error(&e.forward(&flipped, &vals, false, None), &trained, 1e-12) < 1e-12
        });
        assert!(
            found,
            "the training encoding is no column sign flip of the input"
        );
    }
    assert!(flipped_once, "five training draws never flipped a sign");
}

#[test]
fn atom_and_bond_encoders_sum_one_embedding_per_column() {
    use basin_sfi::encoders::{ATOM_VOCAB, BOND_VOCAB, ColumnEmbedding};
    let _g = lock_generator();
    tch::manual_seed(3);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let atoms = ColumnEmbedding::new(&(vs.root() / "atom"), &ATOM_VOCAB, 8);
    let bonds = ColumnEmbedding::new(&(vs.root() / "bond"), &BOND_VOCAB, 8);
    // Σ vocab × d: 174·8 + 13·8 (the GPS counts' 174 and 13).
    let n: i64 = vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum();
    assert_eq!(n, 174 * 8 + 13 * 8);
    let x = Tensor::from_slice(&[6i64, 0, 3, 5, 0, 0, 2, 0, 1, 118, 4, 11, 11, 9, 5, 5, 1, 1])
        .view([2, 9]);
    let out = atoms.forward(&x).expect("in range");
    assert_eq!(out.size(), [2, 8]);
    let v = vs.variables();
    let by_hand = (0..9)
        .map(|c| v[&format!("atom.column{c}.weight")].get(x.int64_value(&[1, c])))
        .fold(
            Tensor::zeros([8], (Kind::Float, tch::Device::Cpu)),
            |a, b| a + b,
        );
    assert!(max_rel_error(&out.get(1), &by_hand, 1e-6) < 1e-6);
    let e = bonds
        .forward(&Tensor::from_slice(&[3i64, 5, 1]).view([1, 3]))
        .expect("in range");
    assert_eq!(e.size(), [1, 8]);
    // Out of a column's vocabulary, or the wrong width: named errors, not an abort.
    let err = bonds
        .forward(&Tensor::from_slice(&[3i64, 6, 1]).view([1, 3]))
        .expect_err("6 is outside column 1's 0..6");
    assert!(err.to_string().contains("column 1"), "{err}");
    assert!(
        bonds
            .forward(&Tensor::from_slice(&[3i64, 1]).view([1, 2]))
            .is_err()
    );
}

fn transformer(dim_pe: i64, layers: usize, heads: i64) -> (nn::VarStore, LapPe) {
    let mut vs = nn::VarStore::new(tch::Device::Cpu);
    let e = LapPe::new(&vs.root(), dim_pe, PeModel::Transformer { layers, heads });
    vs.double();
    (vs, e)
}

#[test]
fn the_transformer_encoder_has_pytorchs_parameter_count() {
    let _g = lock_generator();
    let (vs, _) = transformer(16, 2, 4);
    let n: i64 = vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum();
    // Linear(2, 16) + 2 × TransformerEncoderLayer(16, 4 heads, feed-forward 2048):
    // 48 + 2 × (in_proj 816 + out_proj 272 + 34,816 + 32,784 + two LayerNorms 64).
    assert_eq!(n, 48 + 2 * (816 + 272 + 34_816 + 32_784 + 64));
}

#[test]
fn the_transformer_encoder_ignores_missing_frequencies_and_their_order() {
    let _g = lock_generator();
    tch::manual_seed(4);
    let (_vs, e) = transformer(8, 2, 2);
    let (vecs, vals, out) = ignores_missing_and_order(&e, 1e-10);
    assert_eq!(out.size(), [5, 8]);
    // Attention mixes the frequencies: a token's embedding depends on the others, so the
    // encoding of all four is not the sum of the encodings of two and two (a DeepSet's is).
    let halves = |cols: [i64; 2]| {
        let idx = Tensor::from_slice(&cols);
        e.forward(
            &vecs.index_select(1, &idx),
            &vals.index_select(1, &idx),
            false,
            None,
        )
    };
    let parts = halves([0, 1]) + halves([2, 3]);
    assert!(max_rel_error(&parts, &out, 1e-10) > 1e-3);
    // A node with no frequency at all encodes to zero, finitely.
    let none = e.forward(
        &Tensor::full([1, 3], f64::NAN, OPTS),
        &Tensor::full([1, 3], f64::NAN, OPTS),
        false,
        None,
    );
    assert_eq!(none.abs().sum(Kind::Double).double_value(&[]), 0.0);
}

#[test]
fn per_graph_flips_draw_each_graphs_signs_apart() {
    let _g = lock_generator();
    tch::manual_seed(5);
    let (_vs, e) = encoder(8);
    let k = 3;
    // Nodes 0..3 belong to graph 0, nodes 3..6 to graph 1.
    let graph_of = Tensor::from_slice(&[0i64, 0, 0, 1, 1, 1]);
    let vecs = Tensor::randn([6, k], OPTS);
    let vals = Tensor::rand([6, k], OPTS);
    let rows = |t: &Tensor, g: i64| t.narrow(0, 3 * g, 3);
    let mut differed = false;
    for _ in 0..8 {
        let trained = e.forward(&vecs, &vals, true, Some(&graph_of));
        // Each graph's rows are one column sign flip of that graph's input.
        let mut found = [None, None];
        for (g, slot) in found.iter_mut().enumerate() {
            let g = g as i64;
            *slot = (0..1 << k).find(|bits| {
                let s: Vec<f64> = (0..k)
                    .map(|i| if bits >> i & 1 == 1 { -1.0 } else { 1.0 })
                    .collect();
                let flipped = rows(&vecs, g) * Tensor::from_slice(&s).view([1, k]);
                let enc = e.forward(&flipped, &rows(&vals, g), false, None);
                max_rel_error(&enc, &rows(&trained, g), 1e-12) < 1e-12
            });
        }
        let [Some(a), Some(b)] = found else {
            panic!("a graph's training encoding is no sign flip of its input: {found:?}")
        };
        differed |= a != b;
    }
    assert!(
        differed,
        "eight draws never gave the two graphs different signs"
    );
}
