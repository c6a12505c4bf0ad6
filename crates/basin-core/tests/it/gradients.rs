//! Every built-in term passes the public conformance suite (closed form = autograd = finite
//! differences on every structure, padding invariance, monotone descent); sums and the
//! attention's key-side term are checked on their own.

use crate::common::*;
use basin_core::testing::{conformance, max_rel_error};
use basin_core::{Activation, AttentionConfig, Energy, EnergyAttention, EnergySum, Structure};
use tch::Tensor;

const B: i64 = 3;
const N: i64 = 6;
const D: i64 = 5;

#[test]
fn attention_passes_the_term_conformance_suite() {
    for learn_beta in [false, true] {
        conformance::energy_term("attention", 3, |path, dim| {
            let cfg = AttentionConfig {
                heads: 3,
                head_dim: 4,
                init_std: 0.4,
                learn_beta,
                beta: Some(0.7),
                head_mixing: false,
                ..Default::default()
            };
            Box::new(EnergyAttention::new(path, dim, &cfg))
        });
    }
}

#[test]
fn attention_with_a_shared_divisor_and_an_idle_clip_passes_the_conformance_suite() {
    // The CDAT anomaly reference's β (one learned divisor) and its logit clip, set so wide that
    // it never acts: the suite's finite differences hold.
    conformance::energy_term("attention+divisor", 3, |path, dim| {
        let cfg = AttentionConfig {
            heads: 3,
            head_dim: 4,
            init_std: 0.4,
            learn_beta: true,
            beta: Some(0.7),
            beta_mode: basin_core::BetaMode::SharedDivisor,
            logit_clip: Some(1e6),
            ..Default::default()
        };
        Box::new(EnergyAttention::new(path, dim, &cfg))
    });
}

/// The anomaly reference's attention: β_h = 1/b for one learned b, logits
/// clipped to ±c in value with the clip ignored in the gradient — closed form = autograd of the
/// straight-through energy on every structure, the energy as computed by hand, and finite
/// differences that do see the clip (so it acts).
#[test]
fn the_reference_attention_clips_its_logits_straight_through() {
    use basin_core::testing::conformance::structures;
    basin_core::testing::seeded(21, || {
        let mut vs = store();
        let cfg = AttentionConfig {
            heads: 2,
            head_dim: 3,
            init_std: 1.5,
            learn_beta: true,
            beta: Some(0.5),
            beta_mode: basin_core::BetaMode::SharedDivisor,
            logit_clip: Some(1.0),
            ..Default::default()
        };
        let att = EnergyAttention::new(&(vs.root() / "att"), D, &cfg);
        vs.double();
        let vars = vs.variables();
        assert!(vars.contains_key("att.beta_divisor") && !vars.contains_key("att.beta"));
        assert_eq!(vars["att.beta_divisor"].double_value(&[]), 2.0);
        assert!(max_rel_error(&att.beta(), &Tensor::from_slice(&[0.5, 0.5]), 0.0) < 1e-15);
        let g = tokens(B, N, D) * 3.0;
        // By hand, dense (no self-attention): E = −Σ_h b Σ_q lse_{k ≠ q} clip(β q·k).
        let q = g.unsqueeze(1).matmul(&att.w_q.transpose(-1, -2)); // [B, H, N, Y]
        let k = g.unsqueeze(1).matmul(&att.w_k.transpose(-1, -2));
        let logits = q.matmul(&k.transpose(-1, -2)) * 0.5;
        let clipped_share = logits
            .abs()
            .gt(1.0)
            .to_kind(tch::Kind::Double)
            .mean(tch::Kind::Double);
        assert!(clipped_share.double_value(&[]) > 0.2, "the clip should act");
        let no_self = Tensor::eye(N, (tch::Kind::Double, tch::Device::Cpu)) * -1e30;
        let want = -((logits.clamp(-1.0, 1.0) + no_self).logsumexp(-1, false) * 2.0)
            .sum_dim_intlist(&[1i64, 2][..], false, tch::Kind::Double);
        let full = Structure::full();
        assert!(max_rel_error(&att.energy(&g, &full), &want, 1e-12) < 1e-10);
        for (name, s) in structures(B, N, 2) {
            let (_, closed) = att.energy_and_grad(&g, &s);
            let auto = basin_core::energy::autograd_grad(&att, &g, &s);
            let err = max_rel_error(&closed, &auto, 1e-12);
            assert!(err < 1e-8, "[{name}] closed form vs autograd: {err:e}");
        }
        let fd = basin_core::testing::finite_difference(
            |x| {
                att.energy(x, &full)
                    .sum(tch::Kind::Double)
                    .double_value(&[])
            },
            &g,
            1e-5,
        );
        let (_, closed) = att.energy_and_grad(&g, &full);
        assert!(
            max_rel_error(&closed, &fd, 1e-12) > 1e-2,
            "the clip is not straight-through"
        );
    });
}

#[test]
fn attention_with_the_references_head_mixing_passes_the_conformance_suite() {
    conformance::energy_term("attention+head-mixing", 3, |path, dim| {
        let cfg = AttentionConfig {
            heads: 3,
            head_dim: 4,
            init_std: 0.4,
            learn_beta: true,
            beta: Some(0.7),
            head_mixing: true,
            ..Default::default()
        };
        let att = EnergyAttention::new(path, dim, &cfg);
        if let Some(mix) = &att.head_mix {
            tch::no_grad(|| mix.shallow_clone().copy_(&(mix.randn_like() * 0.5)));
        }
        Box::new(att)
    });
}

#[test]
fn vmf_attention_passes_the_term_conformance_suite() {
    for learn_beta in [false, true] {
        conformance::energy_term("vmf-attention", 3, |path, dim| {
            let cfg = AttentionConfig {
                heads: 3,
                head_dim: 4,
                init_std: 0.4,
                learn_beta,
                beta: Some(1.3),
                head_mixing: false,
                ..Default::default()
            };
            Box::new(EnergyAttention::new(path, dim, &cfg).unit_vectors(1e-12))
        });
    }
}

/// Energy attention (β = 0.7, weights N(0, 0.4²)), plain or vMF (unit queries and keys).
fn plain_or_vmf(
    path: &tch::nn::Path,
    dim: i64,
    heads: i64,
    head_dim: i64,
    unit: bool,
) -> EnergyAttention {
    let cfg = AttentionConfig {
        heads,
        head_dim,
        init_std: 0.4,
        beta: Some(0.7),
        ..Default::default()
    };
    let a = EnergyAttention::new(path, dim, &cfg);
    if unit { a.unit_vectors(1e-12) } else { a }
}

/// On the CPU the dense form goes through the batch in chunks; with one sample per chunk the
/// conformance suite holds, and energy, gradient and both together, with and without autograd
/// recording, equal the whole batch's on every structure, for plain and vMF attention.
#[test]
fn attention_in_batch_chunks_equals_the_whole_batch() {
    let make = |path: &tch::nn::Path, dim: i64, unit: bool| plain_or_vmf(path, dim, 3, 4, unit);
    for unit in [false, true] {
        conformance::energy_term("attention in chunks", 3, |path, dim| {
            Box::new(make(path, dim, unit).with_chunk_bytes(1))
        });
        basin_core::testing::seeded(12, || {
            let mut vs = store();
            let whole = make(&vs.root(), D, unit).with_chunk_bytes(i64::MAX);
            vs.double();
            let g = tokens(B, N, D);
            assert_eq!(whole.dense_chunk_len(&g), B);
            let structures = conformance::structures(B, N, 3);
            let want: Vec<_> = structures
                .iter()
                .map(|(_, s)| whole.energy_and_grad(&g, s))
                .collect();
            let chunked = whole.with_chunk_bytes(1);
            assert_eq!(chunked.dense_chunk_len(&g), 1);
            for ((name, s), (e0, d0)) in structures.iter().zip(&want) {
                let (e1, d1) = chunked.energy_and_grad(&g, s);
                // Without autograd the projections take another path (one fused matmul).
                let (e2, d2) = tch::no_grad(|| chunked.energy_and_grad(&g, s));
                for (what, got, want) in [
                    ("energy", &e1, e0),
                    ("gradient", &d1, d0),
                    ("energy alone", &chunked.energy(&g, s), e0),
                    ("gradient alone", &chunked.grad(&g, s), d0),
                    ("energy without autograd", &e2, e0),
                    ("gradient without autograd", &d2, d0),
                    (
                        "gradient alone without autograd",
                        &tch::no_grad(|| chunked.grad(&g, s)),
                        d0,
                    ),
                ] {
                    let err = max_rel_error(got, want, 1e-12);
                    assert!(
                        err < 1e-10,
                        "unit {unit} [{name}]: {what} in chunks differs ({err:e})"
                    );
                }
            }
        });
    }
}

/// The dense form on libtorch's fused attention kernels (what runs without autograd with
/// `kernel = "fused"`): the conformance suite holds (its no-autograd checks are the fused
/// path's), for plain and vMF attention and every β mode; and in float32 its energies and
/// gradients equal the explicit form's to float rounding on the dense structures.
#[test]
fn attention_on_fused_kernels_equals_the_explicit_form() {
    use basin_core::terms::attention::{AttentionKernel, BetaMode};
    for unit in [false, true] {
        conformance::energy_term("attention on fused kernels", 3, |path, dim| {
            Box::new(plain_or_vmf(path, dim, 3, 4, unit).with_kernel(AttentionKernel::Fused))
        });
    }
    for (beta_mode, learn_beta) in [
        (BetaMode::PerHead, true),
        (BetaMode::SharedDivisor, false),
        (BetaMode::SharedDivisor, true),
    ] {
        conformance::energy_term("attention on fused kernels, β modes", 2, |path, dim| {
            let cfg = AttentionConfig {
                heads: 2,
                head_dim: 3,
                init_std: 0.4,
                beta: Some(0.6),
                learn_beta,
                beta_mode,
                kernel: AttentionKernel::Fused,
                ..Default::default()
            };
            Box::new(EnergyAttention::new(path, dim, &cfg))
        });
    }
    basin_core::testing::seeded(21, || {
        let (b, n, d, h) = (4, 37, 24, 3);
        for unit in [false, true] {
            let vs = store();
            let explicit =
                plain_or_vmf(&vs.root(), d, h, 8, unit).with_kernel(AttentionKernel::Explicit);
            let fused = plain_or_vmf(&(vs.root() / "same"), d, h, 8, unit);
            tch::no_grad(|| {
                fused.w_q.shallow_clone().copy_(&explicit.w_q);
                fused.w_k.shallow_clone().copy_(&explicit.w_k);
            });
            let fused = fused.with_kernel(AttentionKernel::Fused);
            let g = Tensor::randn([b, n, d], (tch::Kind::Float, tch::Device::Cpu)) * 3.0;
            for (name, s) in conformance::structures(b, n, h) {
                // The suite's biases are float64 (checked above, in the suite's own kind).
                if s.is_sparse() || s.scale().is_some() || name.contains("bias") {
                    continue;
                }
                let (e0, d0) = tch::no_grad(|| explicit.energy_and_grad(&g, &s));
                let (e1, d1) = tch::no_grad(|| fused.energy_and_grad(&g, &s));
                let err_e = max_rel_error(&e1, &e0, 1e-3);
                let err_d = max_rel_error(&d1, &d0, 1e-3);
                assert!(
                    err_e < 1e-5 && err_d < 1e-4,
                    "unit {unit} [{name}]: fused differs in float32 (energy {err_e:e}, gradient {err_d:e})"
                );
            }
        }
    });
}

/// The sparse form's two kernel families agree: with [`SparseKernels::Bags`] (sampled matmuls
/// and weighted bags, what large graphs use) the conformance suite holds, and energy, gradient
/// and the weights' gradients of a loss on the closed-form gradient (what training
/// backpropagates through the descent) equal [`SparseKernels::Gather`]'s on every sparse
/// structure, for plain and vMF attention with two heads.
#[test]
fn sparse_attention_by_bags_equals_by_gathers() {
    use basin_core::terms::attention::SparseKernels;
    let make = |path: &tch::nn::Path, dim: i64, unit: bool| plain_or_vmf(path, dim, 2, 3, unit);
    for unit in [false, true] {
        conformance::energy_term("attention by bags", 2, |path, dim| {
            Box::new(make(path, dim, unit).with_sparse_kernels(SparseKernels::Bags))
        });
        basin_core::testing::seeded(13, || {
            let mut vs = store();
            let gather = make(&vs.root(), D, unit).with_sparse_kernels(SparseKernels::Gather);
            vs.double();
            let g = tokens(B, N, D);
            let weights = vs.trainable_variables();
            let probe = Tensor::randn([B, N, D], (tch::Kind::Double, tch::Device::Cpu));
            // Energy, gradient, and the weights' gradients of ⟨∂E/∂g, probe⟩ + ΣE.
            let run = |term: &EnergyAttention, s: &Structure| {
                let (e, d) = term.energy_and_grad(&g, s);
                let loss = (&d * &probe).sum(tch::Kind::Double) + e.sum(tch::Kind::Double);
                let grads = Tensor::run_backward(&[loss], &weights, false, false);
                (e.detach(), d.detach(), grads)
            };
            let sparse: Vec<_> = conformance::structures(B, N, 2)
                .into_iter()
                .filter(|(_, s)| s.is_sparse())
                .collect();
            assert_eq!(sparse.len(), 4);
            let want: Vec<_> = sparse.iter().map(|(_, s)| run(&gather, s)).collect();
            let bags = gather.with_sparse_kernels(SparseKernels::Bags);
            for ((name, s), (e0, d0, w0)) in sparse.iter().zip(&want) {
                let (e1, d1, w1) = run(&bags, s);
                let mut pairs = vec![("energy", &e1, e0), ("gradient", &d1, d0)];
                pairs.extend(
                    w1.iter()
                        .zip(w0)
                        .map(|(a, b)| ("a weight's gradient", a, b)),
                );
                for (what, got, want) in pairs {
                    let err = max_rel_error(got, want, 1e-12);
                    assert!(
                        err < 1e-10,
                        "unit {unit} [{name}]: {what} by bags differs ({err:e})"
                    );
                }
                let (e2, d2) = tch::no_grad(|| bags.energy_and_grad(&g, s));
                assert!(
                    max_rel_error(&e2, e0, 1e-12) < 1e-10,
                    "[{name}] energy, no autograd"
                );
                assert!(
                    max_rel_error(&d2, d0, 1e-12) < 1e-10,
                    "[{name}] gradient, no autograd"
                );
            }
        });
    }
}

/// CDAT eq. 10: scaling W_Q or W_K by c > 0 changes neither the vMF energy nor its gradient;
/// the plain attention's energy does change (control).
#[test]
fn vmf_attention_is_invariant_to_the_scale_of_its_projections() {
    basin_core::testing::seeded(11, || {
        let mut vs = store();
        let cfg = AttentionConfig {
            heads: 2,
            head_dim: 3,
            init_std: 0.4,
            learn_beta: false,
            beta: Some(0.9),
            head_mixing: false,
            ..Default::default()
        };
        let vmf = EnergyAttention::new(&(vs.root() / "vmf"), D, &cfg).unit_vectors(1e-12);
        let plain = EnergyAttention::new(&(vs.root() / "plain"), D, &cfg);
        vs.double();
        let g = tokens(B, N, D);
        for (name, s) in structures(B, N, 2) {
            let (e0, d0) = vmf.energy_and_grad(&g, &s);
            let p0 = plain.energy(&g, &s);
            tch::no_grad(|| {
                let _ = vmf.w_q.shallow_clone().g_mul_scalar_(3.7);
                let _ = vmf.w_k.shallow_clone().g_mul_scalar_(0.2);
                let _ = plain.w_q.shallow_clone().g_mul_scalar_(3.7);
            });
            let (e1, d1) = vmf.energy_and_grad(&g, &s);
            assert!(
                max_rel_error(&e1, &e0, 1e-12) < 1e-9,
                "{name}: energy changed"
            );
            assert!(
                max_rel_error(&d1, &d0, 1e-12) < 1e-8,
                "{name}: gradient changed"
            );
            assert!(
                max_rel_error(&plain.energy(&g, &s), &p0, 1e-12) > 1e-3,
                "{name}: the control did not change"
            );
            tch::no_grad(|| {
                let _ = vmf.w_q.shallow_clone().g_div_scalar_(3.7);
                let _ = vmf.w_k.shallow_clone().g_div_scalar_(0.2);
                let _ = plain.w_q.shallow_clone().g_div_scalar_(3.7);
            });
        }
        // Every logit of a unit query and key lies in [−β, β]: the energy per query is within
        // (1/β)·log(N) + 1 of −1 in magnitude.
        let e = vmf.energy(&g, &Structure::full());
        let bound = (2 * N) as f64 * ((N as f64).ln() / 0.9 + 1.0);
        assert!(e.abs().max().double_value(&[]) <= bound);
    });
}

#[test]
fn hopfield_memories_pass_the_term_conformance_suite() {
    for act in [
        Activation::Relu,
        Activation::Rectified,
        Activation::Power,
        Activation::Exp,
        Activation::Softmax,
    ] {
        conformance::energy_term(&format!("hopfield/{act:?}"), 2, |path, dim| {
            Box::new(hopfield_at(path, dim, 7, act))
        });
    }
}

#[test]
fn weighted_sums_pass_the_term_conformance_suite_and_their_parts_add_up() {
    let make = |path: &tch::nn::Path, dim: i64| {
        let cfg = AttentionConfig {
            heads: 2,
            head_dim: 3,
            init_std: 0.4,
            learn_beta: false,
            beta: Some(0.7),
            head_mixing: false,
            ..Default::default()
        };
        let att = EnergyAttention::new(&(path / "attention"), dim, &cfg);
        let hop = hopfield_at(&(path / "hopfield"), dim, 4, Activation::Relu);
        EnergySum::new().with(0.7, att).with(-1.3, hop)
    };
    conformance::energy_term("sum", 2, |path, dim| Box::new(make(path, dim)));
    let mut vs = store();
    let sum = make(&vs.root(), D);
    vs.double();
    let g = tokens(B, N, D);
    let s = Structure::full();
    let parts: f64 = sum
        .parts(&g, &s)
        .iter()
        .map(|(_, e)| e.sum(tch::Kind::Double).double_value(&[]))
        .sum();
    assert!((parts - total(&sum, &g, &s)).abs() < 1e-10);
}

/// The attention gradient really has the key-side (second) term: dropping it breaks agreement.
#[test]
fn attention_gradient_needs_the_key_side_term() {
    let _g = basin_core::testing::lock_generator();
    tch::manual_seed(4);
    let mut vs = store();
    let att = attention(&vs, D, 2, 3, false);
    vs.double();
    let g = tokens(B, N, D);
    let s = Structure::full();
    let grad = att.grad(&g, &s);
    // Query-side term only: −Σ_h ω K W_Q, i.e. the gradient with keys held fixed.
    let fixed_keys = tch::with_grad(|| {
        let gq = g.detach().set_requires_grad(true);
        let q = gq
            .matmul(&att.w_q.view([-1, D]).tr())
            .view([B, N, 2, 3])
            .transpose(1, 2);
        let k = g
            .matmul(&att.w_k.view([-1, D]).tr())
            .view([B, N, 2, 3])
            .transpose(1, 2);
        let mask = tch::Tensor::eye(N, (tch::Kind::Bool, tch::Device::Cpu));
        let logits = (q.matmul(&k.transpose(-1, -2)) * 0.7).masked_fill(&mask, -1e30);
        let e = -(logits.logsumexp(-1, false) / 0.7).sum(tch::Kind::Double);
        tch::Tensor::run_backward(&[e], &[&gq], false, false)
            .pop()
            .unwrap()
    });
    assert!(
        max_rel_error(&fixed_keys, &grad, 1e-12) > 1e-3,
        "key-side term missing from the closed form"
    );
}

/// A term whose closed form is wrong (half the true gradient): the suite must catch it.
struct WrongGradient(EnergyAttention);

impl Energy for WrongGradient {
    fn name(&self) -> &str {
        "wrong"
    }
    fn energy(&self, g: &tch::Tensor, s: &Structure) -> tch::Tensor {
        self.0.energy(g, s)
    }
    fn grad(&self, g: &tch::Tensor, s: &Structure) -> tch::Tensor {
        self.0.grad(g, s) * 0.5
    }
    fn energy_and_grad(&self, g: &tch::Tensor, s: &Structure) -> (tch::Tensor, tch::Tensor) {
        (self.energy(g, s), self.grad(g, s))
    }
}

#[test]
#[should_panic(expected = "differs from autograd")]
fn the_conformance_suite_catches_a_wrong_closed_form() {
    conformance::energy_term("wrong", 2, |path, dim| {
        let cfg = AttentionConfig {
            heads: 2,
            head_dim: 3,
            init_std: 0.4,
            learn_beta: false,
            beta: Some(0.7),
            head_mixing: false,
            ..Default::default()
        };
        Box::new(WrongGradient(EnergyAttention::new(path, dim, &cfg)))
    });
}

/// A term that reads every token, padded or not: the suite must catch it.
struct ReadsPadding;

impl Energy for ReadsPadding {
    fn name(&self) -> &str {
        "reads-padding"
    }
    fn energy(&self, g: &tch::Tensor, _s: &Structure) -> tch::Tensor {
        -(g.sum_dim_intlist(&[1i64][..], false, g.kind()).square()).sum_dim_intlist(
            &[1i64][..],
            false,
            g.kind(),
        )
    }
}

#[test]
#[should_panic(expected = "depends on padded tokens")]
fn the_conformance_suite_catches_a_term_that_reads_padding() {
    conformance::energy_term("reads-padding", 2, |_, _| Box::new(ReadsPadding));
}

/// Tokens go through the memory in chunks when `[tokens, K]` would be large (2²⁴ values): with
/// K = 2²⁰ memories, 40 tokens make three chunks, and the energy and gradient still equal
/// `−½ Σ relu(ξ·g)²` and `−relu(ξ g) ξ` computed in one piece, padding included.
#[test]
fn hopfield_memory_in_chunks_equals_the_whole() {
    tch::manual_seed(60);
    let mut vs = store();
    let hn = hopfield(&vs, 2, 1 << 20, Activation::Relu);
    vs.double();
    let g = tokens(2, 20, 2);
    let padding = Tensor::ones([2, 20], (tch::Kind::Bool, tch::Device::Cpu));
    let _ = padding.narrow(1, 15, 5).get(1).fill_(0);
    for s in [
        Structure::full(),
        Structure::full()
            .with_padding(padding.shallow_clone())
            .unwrap(),
    ] {
        let (e, grad) = tch::no_grad(|| hn.energy_and_grad(&g, &s));
        let r = g.matmul(&hn.xi.tr()).relu();
        let w = s
            .token_weights(tch::Kind::Double)
            .unwrap_or_else(|| Tensor::ones([2, 20], F64));
        let want_e = (r.square().sum_dim_intlist(-1, false, tch::Kind::Double) * -0.5 * &w)
            .sum_dim_intlist(-1, false, tch::Kind::Double);
        let want_g = -r.matmul(&hn.xi) * w.unsqueeze(-1);
        assert!(max_rel_error(&e, &want_e, 1e-12) < 1e-10);
        assert!(max_rel_error(&grad, &want_g, 1e-12) < 1e-10);
        let only = tch::no_grad(|| hn.grad(&g, &s));
        assert!(max_rel_error(&only, &want_g, 1e-12) < 1e-10);
        let energy = tch::no_grad(|| hn.energy(&g, &s));
        assert!(max_rel_error(&energy, &want_e, 1e-12) < 1e-10);
    }
}
