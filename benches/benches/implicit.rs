//! Training at the attractor against training through the unrolled descent: one training step
//! of ET image completion at the CIFAR-10 CPU configuration (64 tokens of 4×4 patches, D = 64,
//! 4 heads of 16, K = 256 memories, a batch of 32), for T = 4 … 256 descent steps, each way:
//!
//! - `unrolled`: backpropagation through the T steps (every step's activations kept);
//! - `recompute`: the same gradient, each step recomputed in the backward pass;
//! - `implicit`: T steps without a graph (`max_steps = T`, the tolerance out of reach, so the
//!   forward does the same work), then 20 GMRES products of one step's vector–Jacobian.
//!
//! The peak resident memory of one step of each is printed first (run with
//! `MALLOC_MMAP_THRESHOLD_=131072`, so that freed blocks return to the system and each figure
//! counts what its own step allocated), then criterion times them. `BASIN_BENCH_STEPS`
//! (e.g. `4,16,64`) narrows the sweep. Run: `cargo bench -p basin-benches --bench implicit`.

use std::time::Duration;

use basin_core::{GradientConfig, GradientMode};
use basin_tasks::image_completion::{ImageCompletion, ImageCompletionConfig, PatchBatchOnDevice};
use criterion::{Criterion, criterion_group};
use tch::nn::{Optimizer, OptimizerConfig, VarStore};
use tch::{Device, Kind, Tensor};

const MODES: [&str; 3] = ["implicit", "recompute", "unrolled"];

fn steps() -> Vec<usize> {
    std::env::var("BASIN_BENCH_STEPS")
        .ok()
        .map(|s| s.split(',').filter_map(|t| t.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![4, 16, 64, 256])
}

fn config(mode: &str, t: usize) -> ImageCompletionConfig {
    let mut cfg = basin_et::image::cifar10_cpu();
    cfg.block.steps = t;
    cfg.recompute = mode == "recompute";
    if mode == "implicit" {
        cfg.block.gradient = GradientConfig {
            mode: GradientMode::Implicit,
            tol: 1e-30,
            max_steps: t,
            solver_iters: 20,
            ..GradientConfig::default()
        };
    }
    cfg
}

struct Step {
    model: ImageCompletion,
    opt: Optimizer,
    batch: PatchBatchOnDevice,
    _vs: VarStore,
}

impl Step {
    fn new(mode: &str, t: usize, dev: Device) -> Self {
        tch::manual_seed(0);
        let cfg = config(mode, t);
        let vs = VarStore::new(dev);
        let model = ImageCompletion::new(&vs.root(), &cfg).expect("valid config");
        let (b, n, p) = (32, cfg.tokens(), cfg.patch_len());
        let masked = Tensor::rand([b, n], (Kind::Float, dev)).lt(0.5);
        let batch = PatchBatchOnDevice {
            patches: Tensor::randn([b, n, p], (Kind::Float, dev)),
            scored: masked.shallow_clone(),
            masked,
        };
        let opt = tch::nn::AdamW::default()
            .build(&vs, 1e-4)
            .expect("optimiser");
        Self {
            model,
            opt,
            batch,
            _vs: vs,
        }
    }

    /// One optimiser step, as the image learner takes it in each mode.
    fn run(&mut self) {
        let (m, b) = (&self.model, &self.batch);
        let block = m.block().expect("an energy block");
        self.opt.zero_grad();
        if m.cfg.recompute {
            let x0 = m.encode(&b.patches, &b.masked);
            let (x, pending) = block.run_recomputed(&x0, &m.structure(), true);
            m.loss(&m.decode(&x), b).backward();
            pending.backward(block, &m.structure());
        } else {
            let (pred, _) = m.forward(b, true, None);
            basin_core::implicit::attach(&m.loss(&pred, b), [block]).backward();
        }
        self.opt.step();
        basin_core::device::synchronize(b.patches.device());
    }
}

fn bench(c: &mut Criterion) {
    let dev = basin_core::device::from_env().unwrap_or(Device::Cpu);
    let ts = steps();
    // Memory first, smallest first, each step on a model of its own.
    for &t in &ts {
        for mode in MODES {
            let mut step = Step::new(mode, t, dev);
            step.run();
            basin_benches::print_peak_rss(&format!("implicit_step/{mode}/T={t}"), || step.run());
        }
    }
    let mut group = c.benchmark_group("implicit_step");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for &t in &ts {
        for mode in MODES {
            let mut step = Step::new(mode, t, dev);
            group.bench_function(format!("{mode}/T={t}"), |bch| bch.iter(|| step.run()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
