//! The dense ET step and training step timed the way `../shared/checks/bench_et_pytorch.py`
//! times PyTorch (medians of 30 runs; 10 for the training step), after a warm-up and with the
//! variants interleaved round by round,
//! so that `benches/compare.py` sets basin beside PyTorch under one protocol as well as beside
//! criterion's sustained sampling. Prints one JSON line of milliseconds.

use std::time::Instant;

use basin_core::energy::autograd_energy_and_grad;
use basin_core::{AttentionConfig, BlockConfig, EnergyBlock, Structure};
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

fn block(vs: &VarStore, steps: usize) -> EnergyBlock {
    let mut cfg = BlockConfig::et(128, 12, 64, 512, steps);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.02)
        .expect("the ET block's attention term");
    EnergyBlock::new(&vs.root(), &cfg).expect("valid config")
}

fn main() {
    let dev = basin_core::device::from_env().unwrap_or(Device::Cpu);
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let one = block(&vs, 1);
    let x = Tensor::randn([32, 128, 128], (Kind::Float, dev));
    let s = Structure::full();
    let e = one.energy.as_ref();
    let vs4 = VarStore::new(dev);
    let four = block(&vs4, 4);
    let target = Tensor::randn([32, 128, 128], (Kind::Float, dev));
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
    println!(
        "{{\"device\": \"{}\", \"closed_form_grad_only\": {grad_only:.3}, \"closed_form\": {closed:.3}, \"autograd\": {autograd:.3}, \"train\": {train:.3}}}",
        basin_core::device::describe(dev)
    );
}
