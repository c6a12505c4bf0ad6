//! The README's "adding an energy term" example, kept compiling and correct: a term that only
//! defines its energy gets its gradient from autograd and runs inside an `EnergyBlock`.

use crate::common::*;
use basin_core::testing::{finite_difference, max_rel_error};
use basin_core::{
    Energy, EnergyBlock, EnergyLayerNorm, EnergySum, GradientFlow, NormConfig, Structure,
    TraceOptions,
};
use tch::{Tensor, nn};

/// E = −Σ_tokens ½ ‖P g‖²: pulls tokens towards the span of P's rows.
struct Projection {
    p: Tensor,
}

impl Projection {
    fn new(path: &nn::Path, dim: i64, rank: i64) -> Self {
        Self {
            p: path.var(
                "p",
                &[rank, dim],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                },
            ),
        }
    }
}

impl Energy for Projection {
    fn name(&self) -> &str {
        "projection"
    }
    fn energy(&self, g: &Tensor, _s: &Structure) -> Tensor {
        let h = g.matmul(&self.p.tr()); // [B, N, rank]
        -(h.square() * 0.5).sum_dim_intlist(&[1i64, 2][..], false, g.kind()) // [B]
    }
}

#[test]
fn a_new_term_gets_its_gradient_from_autograd_and_descends() {
    tch::manual_seed(60);
    let mut vs = store();
    let term = Projection::new(&(vs.root() / "projection"), 6, 3);
    let norm = EnergyLayerNorm::new(&(vs.root() / "norm"), 6, &NormConfig::default());
    vs.double();
    tch::no_grad(|| term.p.shallow_clone().copy_(&Tensor::randn([3, 6], F64)));
    let g = tokens(2, 4, 6);
    let s = Structure::full();
    // Expected: ∂E/∂g = −g PᵀP.
    let expect = -g.matmul(&term.p.tr()).matmul(&term.p);
    assert!(max_rel_error(&term.grad(&g, &s), &expect, 1e-12) < 1e-10);
    let fd = finite_difference(|x| total(&term, x, &s), &g, 1e-5);
    assert!(max_rel_error(&term.grad(&g, &s), &fd, 1e-12) < 1e-6);
    let (e, d) = term.energy_and_grad(&g, &s);
    assert!(max_rel_error(&e, &term.energy(&g, &s), 1e-12) < 1e-12);
    assert!(max_rel_error(&d, &expect, 1e-12) < 1e-10);

    let block = EnergyBlock::from_parts(
        norm,
        Box::new(EnergySum::new().with(1.0, term)),
        Box::new(GradientFlow { alpha: 0.05 }),
        30,
    );
    let (_, trace) = tch::no_grad(|| {
        block.run(
            &(tokens(2, 4, 6) * 3.0),
            &s,
            false,
            Some(TraceOptions::default()),
        )
    });
    let e = trace.unwrap().mean_total();
    assert!(
        e.windows(2).all(|w| w[1] <= w[0] + 1e-9 * w[0].abs()),
        "{e:?}"
    );
    assert!(e[30] < e[0] - 1e-3, "{e:?}");
}
