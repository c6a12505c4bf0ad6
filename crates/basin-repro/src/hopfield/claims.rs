//! The claims of the Hopfield slides as computations, shared by the tests (with thresholds) and
//! by `basin reproduce hopfield-memory` (as plots). Each returns plain numbers; each draws from
//! libtorch's global generator (seed it first).

use tch::{Device, Kind, Tensor};

use basin_hopfield::memory::distances;
use basin_hopfield::{ClassicalHopfield, DamInteraction, DenseAssociativeMemory, ModernHopfield};

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
            let err = distances(&out, &x).mean(Kind::Double).double_value(&[]);
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
    let to_mean = distances(&fixed, &means)
        .mean(Kind::Double)
        .double_value(&[]);
    let dists = distances(&fixed.unsqueeze(1), &members.view([clusters, per, d]));
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
    let far = distances(&fixed, &mean).max().double_value(&[]);
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
                    let miss = distances(&out, &x).gt(0.1);
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

/// The slides' theorem of exponential storage capacity for patterns on the sphere of radius
/// `M = K√(d−1)`, failure probability `p`: `a`, `b`, `c`, the smallest `c` the theorem needs,
/// `(2/√p)^{4/(d−1)}`, and the guaranteed count `N ≥ √p c^{(d−1)/4}`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CapacityBound {
    /// `a = 2/(d−1) · (1 + ln(2βK²p(d−1)))`.
    pub a: f64,
    /// `b = 2K²β/5`.
    pub b: f64,
    /// `c = b / W₀(exp(a + ln b))`.
    pub c: f64,
    /// The theorem's condition on `c`.
    pub c_min: f64,
    /// `√p c^{(d−1)/4}`: patterns storable with probability `1 − p` (when `c ≥ c_min`).
    pub patterns: f64,
}

impl CapacityBound {
    /// Whether the theorem applies (`c ≥ c_min`).
    pub fn holds(&self) -> bool {
        self.c >= self.c_min
    }
}

/// The upper branch W₀ of the Lambert W function for `x ≥ 0` (Newton from a log start).
fn lambert_w0(x: f64) -> f64 {
    let mut w = if x < 3.0 {
        x.ln_1p()
    } else {
        x.ln() - x.ln().ln()
    };
    for _ in 0..60 {
        let e = w.exp();
        let step = (w * e - x) / (e * (w + 1.0));
        w -= step;
        if step.abs() < 1e-15 * w.abs().max(1.0) {
            break;
        }
    }
    w
}

/// The capacity theorem's numbers at `beta`, `k`, `d` and `p` ([`CapacityBound`]).
pub fn capacity_theorem(beta: f64, k: f64, d: i64, p: f64) -> CapacityBound {
    let d1 = (d - 1) as f64;
    let a = 2.0 / d1 * (1.0 + (2.0 * beta * k * k * p * d1).ln());
    let b = 2.0 * k * k * beta / 5.0;
    let c = b / lambert_w0((a + b.ln()).exp());
    CapacityBound {
        a,
        b,
        c,
        c_min: (2.0 / p.sqrt()).powf(4.0 / d1),
        patterns: p.sqrt() * c.powf(d1 / 4.0),
    }
}

/// Patterns stored, as the capacity theorem means it, among `n` random patterns on the sphere of
/// radius `M = K√(d−1)` at `beta`: the fraction whose fixed point, iterated from the pattern
/// itself, lies within the theorem's sphere `1/(βNM)` of it. Queries run 512 at a time.
pub fn stored_fraction(beta: f64, k: f64, d: i64, counts: &[i64]) -> Vec<(i64, f64)> {
    let m = k * ((d - 1) as f64).sqrt();
    counts
        .iter()
        .map(|&n| {
            let x = sphere(n, d) * m;
            let net = ModernHopfield {
                patterns: x.shallow_clone(),
                beta,
            };
            let radius = 1.0 / (beta * n as f64 * m);
            let mut stored = 0i64;
            for start in (0..n).step_by(512) {
                let q = x.narrow(0, start, (n - start).min(512));
                let (fixed, _) = net.retrieve(&q, 1e-12, 100);
                stored += distances(&fixed, &q)
                    .le(radius)
                    .sum(Kind::Int64)
                    .int64_value(&[]);
            }
            (n, stored as f64 / n as f64)
        })
        .collect()
}

/// Where the classical network settles from random states, as fractions of the starts.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct FixedPoints {
    /// A stored pattern.
    pub stored: f64,
    /// A stored pattern's negation (`−x` is always a minimum too).
    pub reversed: f64,
    /// A mixture `sgn(±x_a ± x_b ± x_c)` of three stored patterns.
    pub mixtures: f64,
    /// Any other state: spurious minima of no stored pattern.
    pub other: f64,
}

/// The classical network's spurious states: `n` random ±1 patterns of `d` bits (below capacity
/// when `n < 0.14 d`), `starts` random states swept to a fixed point and classified.
pub fn spurious_states(d: i64, n: i64, starts: i64) -> FixedPoints {
    let x = binary(n, d);
    let (fixed, _) = ClassicalHopfield::store(&x).retrieve(&binary(starts, d), 200);
    let equal = |target: &Tensor| {
        fixed
            .unsqueeze(1)
            .eq_tensor(&target.unsqueeze(0))
            .all_dim(-1, false)
            .any_dim(-1, false)
    };
    let stored = equal(&x);
    let reversed = equal(&-&x).logical_and(&stored.logical_not());
    // Every three-pattern mixture with every sign pattern.
    let mut mixtures = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            for c in b + 1..n {
                for s in 0..8 {
                    let sign = |bit: i64| if s >> bit & 1 == 1 { -1.0 } else { 1.0 };
                    let sum = x.get(a) * sign(0) + x.get(b) * sign(1) + x.get(c) * sign(2);
                    mixtures.push(sum.sign());
                }
            }
        }
    }
    let mixture = if mixtures.is_empty() {
        Tensor::zeros([starts], (Kind::Bool, Device::Cpu))
    } else {
        equal(&Tensor::stack(&mixtures, 0))
    };
    let known = stored.logical_or(&reversed);
    let mixture = mixture.logical_and(&known.logical_not());
    let frac = |t: &Tensor| t.to_kind(Kind::Double).mean(Kind::Double).double_value(&[]);
    FixedPoints {
        stored: frac(&stored),
        reversed: frac(&reversed),
        mixtures: frac(&mixture),
        other: frac(&known.logical_or(&mixture).logical_not()),
    }
}

/// Retrieval of stored patterns from masked queries (the slides' "masked test image"): the
/// modern network's one update from each pattern with every entry from `visible` on set to 0.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MaskedRetrieval {
    /// The inverse temperature.
    pub beta: f64,
    /// Fraction of queries whose update is nearer to their own pattern than to any other.
    pub retrieved: f64,
    /// Fraction whose largest score `xⱼᵀξ` is their own pattern's: what any β can retrieve in
    /// one update, since the scores are dot products, not distances.
    pub own_score: f64,
    /// Mean largest softmax weight.
    pub max_weight: f64,
    /// Mean number of patterns the update averages, `1/Σ pᵢ²`.
    pub averaged: f64,
    /// Fraction in a metastable state: largest weight under ½, an average of several patterns.
    pub metastable: f64,
}

/// [`MaskedRetrieval`] of `patterns` `[N, d]` at `beta`, with the updated queries `[N, d]`.
pub fn masked_retrieval(patterns: &Tensor, visible: i64, beta: f64) -> (MaskedRetrieval, Tensor) {
    let d = patterns.size()[1];
    let query = patterns.copy();
    let _ = query.narrow(1, visible, d - visible).fill_(0.0);
    let net = ModernHopfield {
        patterns: patterns.shallow_clone(),
        beta,
    };
    let p = net.weights(&query);
    let out = p.matmul(patterns);
    let mean = |t: Tensor| t.to_kind(Kind::Double).mean(Kind::Double).double_value(&[]);
    let own = Tensor::arange(patterns.size()[0], (Kind::Int64, Device::Cpu));
    let largest = p.amax(-1, false);
    let stats = MaskedRetrieval {
        beta,
        retrieved: mean(nearest(&out, patterns).eq_tensor(&own)),
        own_score: mean(p.argmax(-1, false).eq_tensor(&own)),
        max_weight: mean(largest.shallow_clone()),
        averaged: mean(
            p.square()
                .sum_dim_intlist(-1, false, Kind::Double)
                .reciprocal(),
        ),
        metastable: mean(largest.lt(0.5)),
    };
    (stats, out)
}

/// The classical network storing ±1 `patterns` `[N, d]`, swept from each pattern with every bit
/// from `visible` on set to −1: the fraction retrieved exactly, the mean overlap `ξᵀx/d` with
/// the pattern, and the fixed points `[N, d]`. Correlated patterns (images) fail here far below
/// the capacity of random ones: the slides' "spurious minima: patterns are correlated".
pub fn classical_masked(patterns: &Tensor, visible: i64) -> (f64, f64, Tensor) {
    let d = patterns.size()[1];
    let query = patterns.copy();
    let _ = query.narrow(1, visible, d - visible).fill_(-1.0);
    let (fixed, _) = ClassicalHopfield::store(patterns).retrieve(&query, 100);
    let mean = |t: Tensor| t.to_kind(Kind::Double).mean(Kind::Double).double_value(&[]);
    let exact = mean(fixed.eq_tensor(patterns).all_dim(-1, false));
    let overlap = mean((&fixed * patterns).sum_dim_intlist(-1, false, Kind::Double) / d as f64);
    (exact, overlap, fixed)
}

/// For each row of `x` `[B, d]`, the index of the nearest row of `patterns` `[N, d]`.
fn nearest(x: &Tensor, patterns: &Tensor) -> Tensor {
    let sq = |t: &Tensor| t.square().sum_dim_intlist(-1, true, Kind::Double);
    (sq(x) - x.matmul(&patterns.tr()) * 2.0 + sq(patterns).tr()).argmin(-1, false)
}
