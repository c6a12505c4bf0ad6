//! The Hopfield module: the slides' claims with thresholds that fail when the implementation is
//! wrong, and the layers against a direct computation from the formulas (float64).

use basin_core::testing::{max_rel_error, seeded};
use basin_hopfield::*;
use tch::{Device, Kind, Tensor, nn};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

#[test]
fn modern_energy_matches_its_formula_and_the_update_is_its_cccp_step() {
    seeded(5, || {
        let x = Tensor::randn([7, 5], F64);
        let net = ModernHopfield {
            patterns: x.shallow_clone(),
            beta: 0.7,
        };
        let xi = Tensor::randn([3, 5], F64);
        // E = −β⁻¹ log Σ exp(β xᵢᵀξ) + ½ξᵀξ + β⁻¹ log N + ½M², written out.
        let scores = xi.matmul(&x.tr()) * 0.7;
        let lse = scores.exp().sum_dim_intlist(-1, false, Kind::Double).log() / 0.7;
        let m2 = x.square().sum_dim_intlist(-1, false, Kind::Double).max();
        let expect = -lse
            + xi.square().sum_dim_intlist(-1, false, Kind::Double) * 0.5
            + (7f64).ln() / 0.7
            + m2 * 0.5;
        assert!(max_rel_error(&net.energy(&xi), &expect, 1e-12) < 1e-12);
        // ξ_new = X softmax(β Xᵀ ξ) is the stationary point of the concave-convex split: ∇(−lse) + ξ_new = 0.
        let new = net.update(&xi);
        let xr = xi.detach().set_requires_grad(true);
        let l = ((xr.matmul(&x.tr()) * 0.7).logsumexp(-1, false) / 0.7).sum(Kind::Double);
        let grad = Tensor::run_backward(&[l], &[&xr], false, false)
            .pop()
            .unwrap();
        assert!(max_rel_error(&new, &grad, 1e-12) < 1e-12);
    });
}

fn layer(cfg: &AssociationConfig) -> (nn::VarStore, Hopfield) {
    let mut vs = nn::VarStore::new(Device::Cpu);
    let h = Hopfield::new(&vs.root(), cfg).unwrap();
    vs.double();
    (vs, h)
}

fn layer_norm(t: &Tensor) -> Tensor {
    let m = t.mean_dim(-1, true, Kind::Double);
    let v = (t - &m).square().mean_dim(-1, true, Kind::Double);
    (t - m) / (v + 1e-5).sqrt()
}

#[test]
fn one_step_of_hopfield_is_softmax_attention_with_the_same_weights() {
    seeded(6, || {
        let cfg = AssociationConfig {
            state_size: 6,
            stored_size: 5,
            heads: 2,
            hidden_size: Some(3),
            pattern_size: Some(4),
            init_std: 0.5,
            ..AssociationConfig::default()
        };
        let (vs, h) = layer(&cfg);
        let r = Tensor::randn([2, 3, 6], F64);
        let y = Tensor::randn([2, 4, 5], F64);
        let (out, weights) = h.forward_with_weights(&r, &y, None);
        let v = vs.variables();
        let (wq, wk, wv, wo, bo) = (
            &v["w_q"],
            &v["w_k"],
            &v["w_v"],
            &v["out.weight"],
            &v["out.bias"],
        );
        let beta = 1.0 / 3f64.sqrt();
        let (rn, yn) = (layer_norm(&r), layer_norm(&y));
        let mut heads = Vec::new();
        for hd in 0..2 {
            let q = rn.matmul(&wq.narrow(0, 3 * hd, 3).tr());
            let k = yn.matmul(&wk.narrow(0, 3 * hd, 3).tr());
            let val = yn.matmul(&wv.narrow(0, 4 * hd, 4).tr());
            let a = (q.matmul(&k.transpose(1, 2)) * beta).softmax(-1, Kind::Double);
            assert!(
                max_rel_error(&weights.select(1, hd), &a, 1e-12) < 1e-12,
                "weights of head {hd}"
            );
            heads.push(a.matmul(&val));
        }
        let expect = Tensor::cat(&heads, -1).matmul(&wo.tr()) + bo;
        assert_eq!(out.size(), [2, 3, 6]);
        assert!(
            max_rel_error(&out, &expect, 1e-12) < 1e-12,
            "output differs from softmax attention"
        );
    });
}

#[test]
fn iterated_retrieval_repeats_the_association_in_key_space() {
    seeded(7, || {
        let cfg = AssociationConfig {
            state_size: 4,
            stored_size: 4,
            heads: 1,
            update_steps_max: 3,
            update_steps_eps: 0.0,
            input_norms: false,
            output_projection: false,
            beta: Some(2.0),
            init_std: 0.8,
            ..AssociationConfig::default()
        };
        let (vs, h) = layer(&cfg);
        let r = Tensor::randn([1, 2, 4], F64);
        let y = Tensor::randn([1, 5, 4], F64);
        let (out, _) = h.forward_with_weights(&r, &y, None);
        let v = vs.variables();
        let (q0, k, val) = (
            r.matmul(&v["w_q"].tr()),
            y.matmul(&v["w_k"].tr()),
            y.matmul(&v["w_v"].tr()),
        );
        let mut xi = (q0 * 2.0)
            .matmul(&k.transpose(1, 2))
            .softmax(-1, Kind::Double);
        for _ in 0..3 {
            xi = (xi.matmul(&k) * 2.0)
                .matmul(&k.transpose(1, 2))
                .softmax(-1, Kind::Double);
        }
        assert!(max_rel_error(&out, &xi.matmul(&val), 1e-12) < 1e-12);
        // Gradients flow through the iterations.
        let rr = r.detach().set_requires_grad(true);
        let g = Tensor::run_backward(
            &[h.forward(&rr, &y, None).sum(Kind::Double)],
            &[&rr],
            false,
            false,
        )
        .pop()
        .unwrap();
        assert!(g.abs().max().double_value(&[]) > 0.0);
    });
}

#[test]
fn ignored_stored_patterns_get_exactly_zero_weight() {
    seeded(8, || {
        let (_, h) = layer(&AssociationConfig {
            state_size: 4,
            stored_size: 4,
            heads: 2,
            init_std: 0.5,
            ..AssociationConfig::default()
        });
        let r = Tensor::randn([2, 3, 4], F64);
        let y = Tensor::randn([2, 5, 4], F64);
        let ignore = Tensor::from_slice(&[
            false, true, false, true, true, false, false, false, false, true,
        ])
        .view([2, 5]);
        let (out, w) = h.forward_with_weights(&r, &y, Some(&ignore));
        let blocked = ignore.view([2, 1, 1, 5]).expand_as(&w);
        assert_eq!(w.masked_select(&blocked).abs().max().double_value(&[]), 0.0);
        assert!(
            (w.sum_dim_intlist(-1, false, Kind::Double) - 1.0)
                .abs()
                .max()
                .double_value(&[])
                < 1e-12
        );
        // Ignored patterns do not influence the output at all.
        let y2 = y.where_self(
            &ignore.unsqueeze(-1).logical_not(),
            &(Tensor::randn([2, 5, 4], F64) * 100.0),
        );
        assert!(max_rel_error(&h.forward(&r, &y2, Some(&ignore)), &out, 1e-12) < 1e-12);
        // Everything ignored: zero weights, not NaN.
        let all = Tensor::ones([2, 5], (Kind::Bool, Device::Cpu));
        let (_, w) = h.forward_with_weights(&r, &y, Some(&all));
        assert_eq!(w.abs().max().double_value(&[]), 0.0);
    });
}

#[test]
fn pooling_and_lookup_layers_are_hopfield_with_learned_patterns() {
    seeded(9, || {
        let mut vs = nn::VarStore::new(Device::Cpu);
        let cfg = AssociationConfig {
            state_size: 4,
            stored_size: 6,
            heads: 2,
            init_std: 0.5,
            ..AssociationConfig::default()
        };
        let pool = HopfieldPooling::new(&(vs.root() / "pool"), &cfg, 3).unwrap();
        let lookup = HopfieldLayer::new(
            &(vs.root() / "lookup"),
            &AssociationConfig {
                stored_size: 4,
                ..cfg.clone()
            },
            7,
        )
        .unwrap();
        vs.double();
        let y = Tensor::randn([2, 9, 6], F64);
        let pooled = pool.forward(&y, None);
        assert_eq!(pooled.size(), [2, 3 * 4]);
        let direct = pool
            .hopfield
            .forward(&pool.queries.expand([2, -1, -1], false), &y, None)
            .reshape([2, -1]);
        assert!(max_rel_error(&pooled, &direct, 1e-12) < 1e-12);
        // Pooling is invariant to the order of the set.
        let perm = Tensor::randperm(9, (Kind::Int64, Device::Cpu));
        assert!(
            max_rel_error(
                &pool.forward(&y.index_select(1, &perm), None),
                &pooled,
                1e-12
            ) < 1e-10
        );
        let r = Tensor::randn([2, 5, 4], F64);
        let out = lookup.forward(&r);
        assert_eq!(out.size(), [2, 5, 4]);
        let direct = lookup
            .hopfield
            .forward(&r, &lookup.lookup.expand([2, -1, -1], false), None);
        assert!(max_rel_error(&out, &direct, 1e-12) < 1e-12);
        assert!(AssociationConfig { heads: 0, ..cfg }.validate().is_err());
    });
}
