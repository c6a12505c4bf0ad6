//! A descent drawn over its energy landscape, as CDAT's Figures 1 and 3 picture it: the states of
//! a block's own descent and of the plain gradient flow `x ← x − α ∂E/∂g` (ET eq. 6 discretised)
//! from the same start, projected on the plane of the two principal directions of all those
//! states (each state the whole `N × D` token matrix of one set), with the energy evaluated on a
//! grid of that plane through the states' mean. The plane is a slice: the energy off it is not
//! drawn, and the share of the states' variance it holds says how faithful the picture is.

use serde::Serialize;
use tch::{Kind, Tensor};

use crate::block::{EnergyBlock, TraceOptions};
use crate::structure::Structure;

/// One trajectory in the plane.
#[derive(Clone, Debug, Serialize)]
pub struct Path {
    /// What moved the tokens (`block`: the block's own dynamics; `gradient flow`).
    pub name: String,
    /// The state at each step in the plane's coordinates.
    pub points: Vec<[f64; 2]>,
    /// The energy at each step (of the full state, not of its projection).
    pub energy: Vec<f64>,
    /// The dynamics' storage functional at each step, where it has one (CDAT eq. 6).
    pub storage: Option<Vec<f64>>,
}

/// The energy on a grid of the plane and the trajectories in it.
#[derive(Clone, Debug, Serialize)]
pub struct Landscape {
    /// Grid coordinates along the first direction.
    pub u: Vec<f64>,
    /// Grid coordinates along the second direction.
    pub v: Vec<f64>,
    /// `energy[j][i]`: the energy at `(u[i], v[j])`.
    pub energy: Vec<Vec<f64>>,
    /// The block's descent, then the gradient flow.
    pub paths: Vec<Path>,
    /// Share of the states' variance the plane holds, in [0, 1].
    pub explained: f64,
}

/// The landscape of `block` around its descent from `x0` (`[1, N, D]`, one set) under
/// `structure`, beside `steps` gradient-flow steps of size `alpha` from `x0`, on a `grid × grid`
/// lattice reaching a fifth beyond the states on every side. Evaluation mode, no autograd graph.
pub fn landscape(
    block: &EnergyBlock,
    x0: &Tensor,
    structure: &Structure,
    alpha: f64,
    grid: usize,
) -> Landscape {
    tch::no_grad(|| {
        let energy_of = |x: &Tensor| {
            block
                .energy
                .energy(&block.norm.forward(x), structure)
                .double_value(&[0])
        };
        let options = TraceOptions {
            states: true,
            term_grads: false,
        };
        let (_, trace) = block.run(x0, structure, false, Some(options));
        let (own, storage) = trace.map_or((vec![x0.shallow_clone()], None), |t| {
            let storage = t.mean_storage();
            (t.states, storage)
        });
        let mut flow = vec![x0.shallow_clone()];
        for _ in 0..own.len().saturating_sub(1) {
            let x = flow
                .last()
                .map(|x| x - block.energy_grad(x, structure) * alpha);
            flow.extend(x);
        }
        let shape = x0.size();
        let all: Vec<Tensor> = own
            .iter()
            .chain(&flow)
            .map(|x| x.to_kind(Kind::Double).reshape([-1]))
            .collect();
        let states = Tensor::stack(&all, 0);
        let mean = states.mean_dim(0, true, Kind::Double);
        let centred = &states - &mean;
        let (_, s, v) = centred.svd(true, true);
        let vt = v.tr();
        let directions = vt.narrow(0, 0, 2.min(vt.size()[0]));
        let variance = s.square();
        let total = variance.sum(Kind::Double).double_value(&[]);
        let explained = if total > 0.0 {
            variance
                .narrow(0, 0, directions.size()[0])
                .sum(Kind::Double)
                .double_value(&[])
                / total
        } else {
            1.0
        };
        // Coordinates in the plane (a missing second direction is 0).
        let coords = centred.matmul(&directions.tr());
        let point = |row: i64| {
            let c = coords.get(row);
            let at = |k: i64| {
                if k < c.size()[0] {
                    c.double_value(&[k])
                } else {
                    0.0
                }
            };
            [at(0), at(1)]
        };
        let n = own.len() as i64;
        let paths = [("block", &own, storage), ("gradient flow", &flow, None)]
            .into_iter()
            .enumerate()
            .map(|(p, (name, xs, storage))| Path {
                name: name.into(),
                points: (0..xs.len() as i64)
                    .map(|t| point(p as i64 * n + t))
                    .collect(),
                energy: xs.iter().map(energy_of).collect(),
                storage,
            })
            .collect::<Vec<_>>();
        let span = |k: usize| {
            let values = paths
                .iter()
                .flat_map(|p| p.points.iter().map(move |q| q[k]));
            let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
            let pad = ((hi - lo) * 0.2).max(1e-3);
            let steps = grid.max(2);
            (0..steps)
                .map(|i| lo - pad + (hi - lo + 2.0 * pad) * i as f64 / (steps - 1) as f64)
                .collect::<Vec<f64>>()
        };
        let (u, v) = (span(0), span(1));
        let direction = |k: i64| {
            if k < directions.size()[0] {
                directions.get(k)
            } else {
                directions.get(0).zeros_like()
            }
        };
        let (d1, d2) = (direction(0), direction(1));
        let energy = v
            .iter()
            .map(|&b| {
                u.iter()
                    .map(|&a| {
                        let x = (&mean.squeeze_dim(0) + &d1 * a + &d2 * b)
                            .reshape(&shape)
                            .to_kind(x0.kind());
                        energy_of(&x)
                    })
                    .collect()
            })
            .collect();
        Landscape {
            u,
            v,
            energy,
            paths,
            explained,
        }
    })
}
