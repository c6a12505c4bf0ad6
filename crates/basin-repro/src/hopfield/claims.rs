//! The claims of the Hopfield slides as computations, shared by the tests (with thresholds) and
//! by `basin reproduce hopfield-memory` (as plots). Each returns plain numbers; each draws from
//! libtorch's global generator (seed it first).

use tch::{Device, Kind, Tensor};

use basin_core::hopfield::{
    ClassicalHopfield, DamInteraction, DenseAssociativeMemory, ModernHopfield,
};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

/// Random unit vectors `[n, d]`.
pub fn sphere(n: i64, d: i64) -> Tensor {
    let x = Tensor::randn([n, d], F64);
    &x / x.square().sum_dim_intlist(-1, true, Kind::Double).sqrt()
}

/// Random ±1 patterns `[n, d]`.
pub fn binary(n: i64, d: i64) -> Tensor {
    Tensor::rand([n, d], F64).ge(0.5).to_kind(Kind::Double) * 2.0 - 1.0
}

/// Retrieval in one update: for patterns on a sphere of radius `r` (separation Δ grows as r²),
/// the mean distance `‖f(ξ) − x_i‖` after one update from a query near each pattern, against
/// the mean separation `Δ_i = x_iᵀx_i − max_{j≠i} x_iᵀx_j`. Returns `(Δ, error)` per radius.
pub fn one_update_error(n: i64, d: i64, radii: &[f64], noise: f64, beta: f64) -> Vec<(f64, f64)> {
    let base = sphere(n, d);
    let jitter = Tensor::randn([n, d], F64) * noise;
    radii
        .iter()
        .map(|&r| {
            let x = &base * r;
            let gram = x.matmul(&x.tr());
            let diag = gram.diagonal(0, 0, 1);
            let off = gram.masked_fill(
                &Tensor::eye(n, (Kind::Bool, Device::Cpu)),
                f64::NEG_INFINITY,
            );
            let delta = (&diag - off.amax(1, false))
                .mean(Kind::Double)
                .double_value(&[]);
            let net = ModernHopfield {
                patterns: x.shallow_clone(),
                beta,
            };
            let out = net.update(&(&x + &jitter));
            let err = (&out - &x)
                .square()
                .sum_dim_intlist(-1, false, Kind::Double)
                .sqrt()
                .mean(Kind::Double)
                .double_value(&[]);
            (delta, err)
        })
        .collect()
}

/// Metastable states: `clusters` groups of `per` nearly identical patterns; a query near one
/// group converges to (close to) the group's mean rather than to a member. Returns the mean
/// distances of the fixed point to the group mean and to the nearest member.
pub fn metastable(d: i64, clusters: i64, per: i64, spread: f64, beta: f64) -> (f64, f64) {
    let centres = sphere(clusters, d) * 4.0;
    let members = centres.repeat_interleave_self_int(per, 0, None)
        + Tensor::randn([clusters * per, d], F64) * spread;
    let net = ModernHopfield {
        patterns: members.shallow_clone(),
        beta,
    };
    let start = &centres + Tensor::randn([clusters, d], F64) * spread;
    let (fixed, _) = net.retrieve(&start, 1e-10, 500);
    let means = members
        .view([clusters, per, d])
        .mean_dim(1, false, Kind::Double);
    let to_mean = (&fixed - &means)
        .square()
        .sum_dim_intlist(-1, false, Kind::Double)
        .sqrt()
        .mean(Kind::Double)
        .double_value(&[]);
    let dists = (fixed.unsqueeze(1) - members.view([clusters, per, d]))
        .square()
        .sum_dim_intlist(-1, false, Kind::Double)
        .sqrt();
    let to_member = dists.amin(1, false).mean(Kind::Double).double_value(&[]);
    (to_mean, to_member)
}

/// Small β: from random starts the iteration reaches one global fixed point near the mean of
/// all patterns. Returns the largest distance of the fixed points to the mean and the norm of
/// the mean.
pub fn global_fixed_point(n: i64, d: i64, beta: f64) -> (f64, f64) {
    let x = sphere(n, d) * 2.0 + 0.5;
    let net = ModernHopfield {
        patterns: x.shallow_clone(),
        beta,
    };
    let (fixed, _) = net.retrieve(&(Tensor::randn([8, d], F64) * 3.0), 1e-12, 1000);
    let mean = x.mean_dim(0, true, Kind::Double);
    let far = (&fixed - &mean)
        .square()
        .sum_dim_intlist(-1, false, Kind::Double)
        .sqrt()
        .max()
        .double_value(&[]);
    (
        far,
        mean.square().sum(Kind::Double).sqrt().double_value(&[]),
    )
}

/// Which memory a capacity curve is for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Memory {
    /// Classical binary network.
    Classical,
    /// Binary dense associative memory with `F(z) = zᵃ`.
    Polynomial(u32),
    /// Binary dense associative memory with `F(z) = exp(z)`.
    Exponential,
    /// Continuous modern Hopfield network on the sphere, with this β.
    Modern(f64),
}

/// Retrieval error against the number of stored patterns: for each `n`, the fraction of
/// patterns not recovered exactly (binary) or to within 0.1·‖x‖ (continuous) from a query with
/// `flip` of the bits flipped (binary) or `flip`·‖x‖ Gaussian noise (continuous).
pub fn capacity(memory: Memory, d: i64, counts: &[i64], flip: f64) -> Vec<(i64, f64)> {
    counts
        .iter()
        .map(|&n| {
            let err = match memory {
                Memory::Modern(beta) => {
                    let x = sphere(n, d);
                    let q = &x + Tensor::randn([n, d], F64) * (flip / (d as f64).sqrt());
                    let net = ModernHopfield {
                        patterns: x.shallow_clone(),
                        beta,
                    };
                    let (out, _) = net.retrieve(&q, 1e-8, 50);
                    let miss = (&out - &x)
                        .square()
                        .sum_dim_intlist(-1, false, Kind::Double)
                        .sqrt()
                        .gt(0.1);
                    miss.to_kind(Kind::Double)
                        .mean(Kind::Double)
                        .double_value(&[])
                }
                _ => {
                    let x = binary(n, d);
                    let flips =
                        Tensor::rand([n, d], F64).lt(flip).to_kind(Kind::Double) * -2.0 + 1.0;
                    let q = &x * flips;
                    let out = match memory {
                        Memory::Classical => ClassicalHopfield::store(&x).retrieve(&q, 20).0,
                        Memory::Polynomial(a) => {
                            DenseAssociativeMemory {
                                patterns: x.shallow_clone(),
                                interaction: DamInteraction::Polynomial(a),
                            }
                            .retrieve(&q, 20)
                            .0
                        }
                        _ => {
                            DenseAssociativeMemory {
                                patterns: x.shallow_clone(),
                                interaction: DamInteraction::Exponential,
                            }
                            .retrieve(&q, 20)
                            .0
                        }
                    };
                    let miss = out.ne_tensor(&x).any_dim(-1, false);
                    miss.to_kind(Kind::Double)
                        .mean(Kind::Double)
                        .double_value(&[])
                }
            };
            (n, err)
        })
        .collect()
}

/// Energies along the updates of each memory from random starts, `[steps + 1]` each (mean over
/// the batch): they never rise (the convergence theorem; asynchronous updates for the binary
/// memories).
pub fn energy_along_updates(
    d: i64,
    n: i64,
    steps: usize,
    beta: f64,
) -> Vec<(&'static str, Vec<f64>)> {
    let mean = |t: Tensor| t.mean(Kind::Double).double_value(&[]);
    let mut out = Vec::new();
    let x = sphere(n, d) * 3.0;
    let net = ModernHopfield { patterns: x, beta };
    let mut xi = Tensor::randn([16, d], F64);
    let mut e = vec![mean(net.energy(&xi))];
    for _ in 0..steps {
        xi = net.update(&xi);
        e.push(mean(net.energy(&xi)));
    }
    out.push(("modern (continuous)", e));
    let xb = binary(n, d);
    let order: Vec<i64> = (0..d).collect();
    let classical = ClassicalHopfield::store(&xb);
    let mut s = binary(16, d);
    let mut e = vec![mean(classical.energy(&s))];
    for _ in 0..steps {
        s = classical.sweep(&s, &order);
        e.push(mean(classical.energy(&s)));
    }
    out.push(("classical (binary)", e));
    for (name, interaction) in [
        ("dense, F = z³", DamInteraction::Polynomial(3)),
        ("dense, F = exp", DamInteraction::Exponential),
    ] {
        let dam = DenseAssociativeMemory {
            patterns: xb.shallow_clone(),
            interaction,
        };
        let mut s = binary(16, d);
        let mut e = vec![mean(dam.energy(&s))];
        for _ in 0..steps {
            s = dam.sweep(&s, &order);
            e.push(mean(dam.energy(&s)));
        }
        out.push((name, e));
    }
    out
}
