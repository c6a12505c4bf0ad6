//! Hopfield layer benchmark (run with `cargo bench -p basin-benches --bench hopfield`):
//! `HopfieldPooling`-style association of 32 sets of 1,000 instances (d = 230), forward and
//! backward — the MIL workload of the Hopfield paper.

use std::time::{Duration, Instant};

use basin_hopfield::{AssociationConfig, Hopfield};
use criterion::{Criterion, criterion_group, criterion_main};
use tch::{Device, Kind, Tensor, nn::VarStore};

fn hopfield_forward_backward(c: &mut Criterion) {
    let dev = basin_core::device::from_env().unwrap_or(Device::Cpu);
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let cfg = AssociationConfig {
        state_size: 230,
        stored_size: 230,
        heads: 8,
        hidden_size: Some(32),
        ..AssociationConfig::default()
    };
    let layer = Hopfield::new(&vs.root(), &cfg).expect("valid config");
    let y = Tensor::randn([32, 1000, 230], (Kind::Float, dev));
    let r = Tensor::randn([32, 1, 230], (Kind::Float, dev));
    let params = vs.trainable_variables();
    let mut group = c.benchmark_group("hopfield");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(20));
    group.bench_function("32_sets_of_1000_d230_forward_backward", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let out = layer.forward(&r, &y, None);
                let _ =
                    Tensor::run_backward(&[out.square().mean(Kind::Float)], &params, false, false);
            }
            basin_core::device::synchronize(dev);
            start.elapsed()
        })
    });
    group.finish();
}

criterion_group!(benches, hopfield_forward_backward);
criterion_main!(benches);
