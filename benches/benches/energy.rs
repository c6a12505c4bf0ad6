//! Energy core benchmarks (run with `cargo xtask bench` or `cargo bench -p basin-benches`).
//!
//! - `et_step_dense/*`: one ET step (energy + gradient) at B=32, N=128, D=128, H=12, Y=64,
//!   K=512: closed form vs autograd (one forward with a graph, then backward), and the
//!   closed-form gradient alone (what a descent step computes), on the explicit attention and
//!   on the fused kernels (`_fused`). Target: closed form ≥ 2× faster.
//! - `et_step_sparse`: the sparse form on a random graph of 100k nodes and 2M edges (D=64, H=2,
//!   Y=32); the peak resident memory of one step is printed.
//! - `train_step`: forward through T=4 steps of the dense block and backward, with the
//!   closed-form gradients (first-order backward through them) and with autograd gradients
//!   (`create_graph`, so the backward is second order).
//!
//! - `train_step_imagenet_T12_B*`: the ImageNet block (D = 768, K = 3072, N = 197, T = 12)
//!   trained through the unrolled descent and with recomputed activations: time, and the
//!   peak memory of each printed.
//!
//! - `attention_kernels/*`: the attention term's gradient without autograd (a descent step) at
//!   B=32, N=128, D=128, H=12, Y=64, on the explicit form and on libtorch's fused attention
//!   (`AttentionKernel`), all pairs but the diagonal, and with a quarter of the tokens padded.
//!
//! - `sparse_scaling`: one inference step on random graphs of 10⁴ … 10⁶ nodes (5·10⁶ with
//!   `BASIN_BENCH_TSOCIAL=1`), 16 edges per node: time per edge and peak memory, printed.
//!
//! Timings end with a device synchronisation, so CUDA runs (`BASIN_DEVICE=cuda`) measure
//! kernels, not launches.

use std::time::{Duration, Instant};

use basin_core::Energy;
use basin_core::energy::autograd_energy_and_grad;
use basin_core::{
    AttentionConfig, BlockConfig, DynamicsConfig, EnergyBlock, SparseEdges, Structure,
};
use criterion::{Criterion, criterion_group, criterion_main};
use tch::{Device, Kind, Tensor, nn::VarStore};

fn device() -> Device {
    basin_core::device::from_env().unwrap_or(Device::Cpu)
}

fn et_config(dim: i64, heads: i64, head_dim: i64, memories: i64, steps: usize) -> BlockConfig {
    let attention = AttentionConfig {
        heads,
        head_dim,
        init_std: 0.02,
        ..AttentionConfig::default()
    };
    basin_et::block(
        dim,
        attention,
        memories,
        steps,
        DynamicsConfig::gradient_flow(0.1),
    )
}

/// Times `iters` runs of `f`, synchronising the device at the end.
fn timed(device: Device, iters: u64, mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    basin_core::device::synchronize(device);
    start.elapsed()
}

fn dense_step(c: &mut Criterion) {
    let dev = device();
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let block =
        EnergyBlock::new(&vs.root(), &et_config(128, 12, 64, 512, 1)).expect("valid config");
    let x = Tensor::randn([32, 128, 128], (Kind::Float, dev));
    let s = Structure::full();
    let energy = block.energy.as_ref();
    let mut group = c.benchmark_group(format!(
        "et_step_dense_{}",
        basin_core::device::describe(dev).replace(' ', "_")
    ));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("closed_form", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let _ = tch::no_grad(|| {
                    let g = block.norm.forward(&x);
                    energy.energy_and_grad(&g, &s)
                });
            })
        })
    });
    // What one descent step needs: the gradient alone (the energy is only for traces).
    group.bench_function("closed_form_grad_only", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let _ = tch::no_grad(|| energy.grad(&block.norm.forward(&x), &s));
            })
        })
    });
    // The same step with the attention on libtorch's fused kernels (`kernel = "fused"`).
    let mut fused_cfg = et_config(128, 12, 64, 512, 1);
    fused_cfg
        .edit_terms(|a: &mut AttentionConfig| {
            a.kernel = basin_core::terms::attention::AttentionKernel::Fused
        })
        .expect("the ET block's attention term");
    let fused = EnergyBlock::new(&(vs.root() / "fused"), &fused_cfg).expect("valid config");
    group.bench_function("closed_form_grad_only_fused", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let _ = tch::no_grad(|| fused.energy.grad(&fused.norm.forward(&x), &s));
            })
        })
    });
    group.bench_function("autograd", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let _ = tch::no_grad(|| {
                    let g = block.norm.forward(&x);
                    autograd_energy_and_grad(energy, &g, &s)
                });
            })
        })
    });
    group.finish();
}

fn sparse_step(c: &mut Criterion) {
    let dev = device();
    tch::manual_seed(0);
    let (nodes, edges) = (100_000i64, 2_000_000i64);
    let vs = VarStore::new(dev);
    let block = EnergyBlock::new(&vs.root(), &et_config(64, 2, 32, 256, 1)).expect("valid config");
    let opts = (Kind::Int64, dev);
    let query = Tensor::randint(nodes, [edges], opts);
    let key = Tensor::randint(nodes, [edges], opts);
    let s = Structure::sparse(SparseEdges::new(&query, &key, nodes).expect("valid edges"));
    let x = Tensor::randn([1, nodes, 64], (Kind::Float, dev));
    let energy = block.energy.as_ref();
    let step = || {
        tch::no_grad(|| {
            let g = block.norm.forward(&x);
            energy.energy_and_grad(&g, &s)
        })
    };
    let _ = step(); // warm up
    basin_benches::print_peak_rss("et_step_sparse (one step)", || {
        let _ = step();
    });
    let mut group = c.benchmark_group("et_step_sparse");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("100k_nodes_2M_edges", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let _ = step();
            })
        })
    });
    group.finish();
}

/// Sparse attention scaling (issue 15, goal 4): one inference step (energy + gradient,
/// D = 64, 2 heads of 32, K = 256) on random graphs of 10⁴, 10⁵ and 10⁶ nodes with 16 edges
/// per node, and 5·10⁶ nodes / 80·10⁶ edges (the T-Social scale) when
/// `BASIN_BENCH_TSOCIAL=1`. Printed per size: median of 3 steps, time per million edges (flat
/// when the cost is linear in edges) and the step's peak resident memory above what the graph
/// and tokens already hold. Run once, not sampled by criterion (the largest size takes minutes).
fn sparse_scaling(_c: &mut Criterion) {
    if !selected("sparse_scaling") {
        return;
    }
    let dev = device();
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let block = EnergyBlock::new(&vs.root(), &et_config(64, 2, 32, 256, 1)).expect("valid config");
    let mut sizes = vec![10_000i64, 100_000, 1_000_000];
    if std::env::var("BASIN_BENCH_TSOCIAL").is_ok_and(|v| v == "1") {
        sizes.push(5_000_000);
    }
    println!(
        "sparse_scaling: nodes | edges | ms per step (median of 3) | ms per 10⁶ edges | peak RSS of the step above the resident state (MiB) | resident before (MiB)"
    );
    for nodes in sizes {
        let edges = 16 * nodes;
        let opts = (Kind::Int64, dev);
        let query = Tensor::randint(nodes, [edges], opts);
        let key = Tensor::randint(nodes, [edges], opts);
        let s = Structure::sparse(SparseEdges::new(&query, &key, nodes).expect("valid edges"));
        drop((query, key));
        let x = Tensor::randn([1, nodes, 64], (Kind::Float, dev));
        let step = || {
            tch::no_grad(|| {
                let g = block.norm.forward(&x);
                block.energy.energy_and_grad(&g, &s)
            })
        };
        let _ = step();
        basin_benches::reset_peak_rss();
        let resident = basin_benches::rss_mib().unwrap_or(f64::NAN);
        let mut times = Vec::new();
        for _ in 0..3 {
            let t = timed(dev, 1, || {
                let _ = step();
            });
            times.push(t.as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let peak = basin_benches::peak_rss_mib().unwrap_or(f64::NAN);
        println!(
            "sparse_scaling: {nodes} | {edges} | {:.1} | {:.1} | {:.0} | {resident:.0}",
            times[1],
            times[1] / (edges as f64 / 1e6),
            peak - resident
        );
    }
}

/// Whether the command line's benchmark filter (if any) matches `name` (for benchmarks that
/// run outside criterion's sampling).
fn selected(name: &str) -> bool {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    args.is_empty()
        || args
            .iter()
            .any(|f| name.contains(f.as_str()) || f.contains(name))
}

/// The same energy with its closed forms hidden: gradients come from autograd.
struct AutogradOnly(Box<dyn Energy>);

impl Energy for AutogradOnly {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn energy(&self, g: &Tensor, s: &Structure) -> Tensor {
        self.0.energy(g, s)
    }
}

fn train_step(c: &mut Criterion) {
    let dev = device();
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let mut block =
        EnergyBlock::new(&vs.root(), &et_config(128, 12, 64, 512, 4)).expect("valid config");
    let x = Tensor::randn([32, 128, 128], (Kind::Float, dev));
    let target = Tensor::randn([32, 128, 128], (Kind::Float, dev));
    let s = Structure::full();
    let params: Vec<Tensor> = vs.trainable_variables();
    let step = |block: &EnergyBlock| {
        let y = block.forward(&x, &s, true);
        let loss = (y - &target).square().mean(Kind::Float);
        let _ = Tensor::run_backward(&[loss], &params, false, false);
    };
    step(&block);
    basin_benches::print_peak_rss("train_step closed_form (one T=4 step)", || step(&block));
    let mut group = c.benchmark_group("train_step");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    group.bench_function("dense_T4_forward_backward", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let y = block.forward(&x, &s, true);
                let loss = (y - &target).square().mean(Kind::Float);
                let _ = Tensor::run_backward(&[loss], &params, false, false);
            })
        })
    });
    block.energy = Box::new(AutogradOnly(std::mem::replace(
        &mut block.energy,
        Box::new(basin_core::EnergySum::new()),
    )));
    step(&block);
    basin_benches::print_peak_rss("train_step autograd (one T=4 step)", || step(&block));
    group.bench_function("dense_T4_forward_backward_autograd", |b| {
        b.iter_custom(|iters| {
            timed(dev, iters, || {
                let y = block.forward(&x, &s, true);
                let loss = (y - &target).square().mean(Kind::Float);
                let _ = Tensor::run_backward(&[loss], &params, false, false);
            })
        })
    });
    group.finish();
}

/// The ImageNet ET block (Table 4: D = 768, 12 heads of 64, K = 3072, N = 197 with CLS,
/// T = 12) trained through the unrolled descent and with recomputed activations
/// ([`EnergyBlock::run_recomputed`]): peak memory above the resident state (printed) and time.
/// Micro-batch `BASIN_BENCH_BATCH` (default 4 on CPU, 64 on CUDA).
fn train_step_recompute(c: &mut Criterion) {
    if !selected("train_step_imagenet_T12") {
        return;
    }
    let dev = device();
    tch::manual_seed(0);
    let b = std::env::var("BASIN_BENCH_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if dev.is_cuda() { 64 } else { 4 });
    let vs = VarStore::new(dev);
    let block =
        EnergyBlock::new(&vs.root(), &et_config(768, 12, 64, 3072, 12)).expect("valid config");
    let x = Tensor::randn([b, 197, 768], (Kind::Float, dev));
    let target = Tensor::randn([b, 197, 768], (Kind::Float, dev));
    let s = Structure::full();
    let opt_free_step = |recompute: bool| {
        vs.trainable_variables().iter().for_each(|v| {
            let mut g = v.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        });
        if recompute {
            let (y, rec) = block.run_recomputed(&x, &s, true);
            (y - &target).square().mean(Kind::Float).backward();
            rec.backward(&block, &s);
        } else {
            let y = block.forward(&x, &s, true);
            (y - &target).square().mean(Kind::Float).backward();
        }
    };
    for (label, recompute) in [("unrolled", false), ("recomputed", true)] {
        opt_free_step(recompute); // warm up, gradients allocated
        basin_benches::print_peak_rss(
            &format!("train_step_imagenet_T12 B={b} {label} (one step, CPU memory)"),
            || opt_free_step(recompute),
        );
    }
    let mut group = c.benchmark_group(format!("train_step_imagenet_T12_B{b}"));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(60));
    for (label, recompute) in [("unrolled", false), ("recomputed", true)] {
        group.bench_function(label, |bench| {
            bench.iter_custom(|iters| timed(dev, iters, || opt_free_step(recompute)))
        });
    }
    group.finish();
}

fn attention_kernels(c: &mut Criterion) {
    use basin_core::terms::attention::AttentionKernel;
    let dev = device();
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let cfg = AttentionConfig {
        heads: 12,
        head_dim: 64,
        init_std: 0.02,
        ..AttentionConfig::default()
    };
    let g = Tensor::randn([32, 128, 128], (Kind::Float, dev));
    let padded = || {
        let padding = Tensor::ones([32, 128], (Kind::Bool, dev));
        let _ = padding.narrow(1, 96, 32).fill_(0);
        Structure::full()
            .with_padding(padding)
            .expect("a [B, N] bool padding")
    };
    let mut group = c.benchmark_group(format!(
        "attention_kernels_{}",
        basin_core::device::describe(dev).replace(' ', "_")
    ));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    for kernel in [AttentionKernel::Explicit, AttentionKernel::Fused] {
        let term = basin_core::EnergyAttention::new(&vs.root(), 128, &cfg).with_kernel(kernel);
        for (name, s) in [("full", Structure::full()), ("padded", padded())] {
            let label = format!("{}_{name}", format!("{kernel:?}").to_lowercase());
            group.bench_function(label, |b| {
                b.iter_custom(|iters| {
                    timed(dev, iters, || {
                        let _ = tch::no_grad(|| term.grad(&g, &s));
                    })
                })
            });
        }
    }
    group.finish();
}

criterion_group!(
    benches,
    dense_step,
    attention_kernels,
    sparse_step,
    sparse_scaling,
    train_step,
    train_step_recompute
);
criterion_main!(benches);
