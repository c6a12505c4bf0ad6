//! The dense ET step and training step timed the way the Python anchor `bench_et_pytorch.py`
//! (found through `BASIN_CHECKS`) times PyTorch (medians of 30 runs; 10 for the training step),
//! after a warm-up and with the variants interleaved round by round,
//! so that `benches/compare.py` sets basin beside PyTorch under one protocol as well as beside
//! criterion's sustained sampling. Prints one JSON line of milliseconds.

use std::time::Instant;

use basin_core::energy::autograd_energy_and_grad;
use basin_core::{AttentionConfig, DynamicsConfig, EnergyBlock, Structure};
use tch::{Device, Kind, Tensor, nn::VarStore};

/// Medians in milliseconds of `fs`, measured in interleaved rounds (each once per round,
/// `reps` rounds after `warm` warm-up rounds), so that no variant gets the process's slow
/// first seconds (fresh heap pages) or a quiet minute to itself.
fn medians(reps: usize, warm: usize, device: Device, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    let mut ts = vec![Vec::with_capacity(reps); fs.len()];
    for round in 0..warm + reps {
        for (f, t) in fs.iter_mut().zip(ts.iter_mut()) {
            let start = Instant::now();
            f();
            basin_core::device::synchronize(device);
            if round >= warm {
                t.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    ts.into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect()
}

/// The anchor's sizes: `foundation` (B = 32, N = 128, D = 128, H = 12, Y = 64, K = 512) and
/// `imagenet` (Table 4 per micro-batch of 64: B = 64, N = 197, D = 768, H = 12, Y = 64,
/// K = 3072), as `(B, N, D, H, Y, K)`.
fn size(name: &str) -> Option<[i64; 6]> {
    match name {
        "foundation" => Some([32, 128, 128, 12, 64, 512]),
        "imagenet" => Some([64, 197, 768, 12, 64, 3072]),
        _ => None,
    }
}

/// The anchor's FLOP count of one step (energy attention without self, ReLU Hopfield).
fn flops([b, n, d, h, y, k]: [i64; 6]) -> f64 {
    (8 * b * n * d * h * y + 6 * b * h * n * n * y + 4 * b * n * d * k) as f64
}

/// The device's float32 matmul rate in TFLOP/s, as the anchor measures it (an n×n product,
/// n = 8192 on CUDA and 2048 on the CPU; median of 10 after 3 warm-ups).
fn matmul_rate(dev: Device) -> f64 {
    let n = if dev.is_cuda() { 8192 } else { 2048 };
    let a = Tensor::randn([n, n], (Kind::Float, dev));
    let b = Tensor::randn([n, n], (Kind::Float, dev));
    let ms = medians(
        10,
        3,
        dev,
        &mut [&mut || {
            let _ = a.matmul(&b);
        }],
    )[0];
    2.0 * (n as f64).powi(3) / (ms * 1e-3) / 1e12
}

fn block(vs: &VarStore, [_, _, d, h, y, k]: [i64; 6], steps: usize) -> EnergyBlock {
    let attention = AttentionConfig {
        heads: h,
        head_dim: y,
        init_std: 0.02,
        ..AttentionConfig::default()
    };
    let cfg = basin_et::block(d, attention, k, steps, DynamicsConfig::gradient_flow(0.1));
    EnergyBlock::new(&vs.root(), &cfg).expect("valid config")
}

/// usage: `et_step_anchor [foundation] [imagenet] [--rate]` (default: foundation). One JSON
/// line per size; `--rate` adds the measured matmul rate and the FLOP floor of the step.
/// `BASIN_DEVICE` and `BASIN_TF32` as everywhere.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dev = basin_core::device::from_env().unwrap_or(Device::Cpu);
    let rate = args.iter().any(|a| a == "--rate").then(|| matmul_rate(dev));
    let mut sizes: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    if sizes.is_empty() {
        sizes.push("foundation");
    }
    for name in sizes {
        let Some(shape) = size(name) else {
            eprintln!("et_step_anchor: unknown size `{name}` (foundation or imagenet)");
            std::process::exit(2);
        };
        run(dev, name, shape, rate);
    }
}

fn run(dev: Device, name: &str, shape: [i64; 6], rate: Option<f64>) {
    let [b, n, d, ..] = shape;
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let one = block(&vs, shape, 1);
    let x = Tensor::randn([b, n, d], (Kind::Float, dev));
    let s = Structure::full();
    let e = one.energy.as_ref();
    let vs4 = VarStore::new(dev);
    let four = block(&vs4, shape, 4);
    let target = Tensor::randn([b, n, d], (Kind::Float, dev));
    let params = vs4.trainable_variables();
    let steps = medians(
        30,
        10,
        dev,
        &mut [
            &mut || {
                let _ = tch::no_grad(|| e.grad(&one.norm.forward(&x), &s));
            },
            &mut || {
                let _ = tch::no_grad(|| e.energy_and_grad(&one.norm.forward(&x), &s));
            },
            &mut || {
                let _ = tch::no_grad(|| autograd_energy_and_grad(e, &one.norm.forward(&x), &s));
            },
        ],
    );
    let train = medians(
        10,
        2,
        dev,
        &mut [&mut || {
            let y = four.forward(&x, &s, true);
            let loss = (y - &target).square().mean(Kind::Float);
            let _ = Tensor::run_backward(&[loss], &params, false, false);
        }],
    );
    let (grad_only, closed, autograd, train) = (steps[0], steps[1], steps[2], train[0]);
    let floor = rate.map_or(String::new(), |r| {
        format!(
            ", \"matmul_tflops\": {r:.2}, \"floor\": {:.4}",
            flops(shape) / (r * 1e12) * 1e3
        )
    });
    println!(
        "{{\"size\": \"{name}\", \"device\": \"{}\", \"closed_form_grad_only\": {grad_only:.3}, \"closed_form\": {closed:.3}, \"autograd\": {autograd:.3}, \"train\": {train:.3}{floor}}}",
        basin_core::device::describe(dev)
    );
}
