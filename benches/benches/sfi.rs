//! SFi attention against dense softmax attention (DFi), forward + backward (issue 17's
//! benchmark; run with `cargo bench -p basin-benches --bench sfi`).
//!
//! - `sfi_peptides_batch/*`: the global branch of one layer on a Peptides-func batch of 128
//!   graphs (the first 128 training graphs of the official split), width 64, 2 heads of width
//!   32: dense softmax, and the unrolled prox-BB solver with K = 5 (the CPU presets) and K = 10
//!   (the paper's), each on the whole batch padded to its largest graph and (`…/buckets`) over
//!   the size buckets the GPS layer uses. The peak resident memory of one step each is printed.
//! - `sfi_scaling/*`: how both grow with the largest graph: 32 graphs of N ∈ {64, 128, 256,
//!   444} nodes (444 is Peptides-func's largest), K = 5.

use std::sync::Arc;
use std::time::Duration;

use basin_sfi::attention::{Adjacency, SfiAttention, SfiAttentionConfig};
use basin_sfi::flow::{FlowConfig, FlowSolver};
use basin_sfi::gps::GraphBatchTensors;
use basin_sfi::learner::GpsData;
use basin_sfi::model::{EdgeEncoder, GpsModelConfig, NodeEncoder, PosEnc};
use criterion::{Criterion, criterion_group, criterion_main};
use tch::{Device, Kind, Tensor, nn::VarStore};

fn device() -> Device {
    basin_core::device::from_env().unwrap_or(Device::Cpu)
}

fn attention(solver: FlowSolver, iters: usize, dev: Device) -> (VarStore, SfiAttention) {
    tch::manual_seed(0);
    let vs = VarStore::new(dev);
    let cfg = SfiAttentionConfig {
        dim: 64,
        heads: 2,
        head_dim: 32,
        flow: FlowConfig {
            solver,
            iters,
            ..FlowConfig::default()
        },
        adjacency: Adjacency::Enhanced,
        ..SfiAttentionConfig::default()
    };
    let att = SfiAttention::new(&vs.root(), &cfg);
    (vs, att)
}

/// One forward and backward of the branch.
fn step(att: &SfiAttention, x: &Tensor, mask: &Tensor, adj: &Tensor) {
    let x = x.detach().set_requires_grad(true);
    let out = att.forward_t(&x, mask, adj, true);
    out.square().sum(Kind::Float).backward();
}

/// One forward and backward of the branch over the buckets of `g`, nodes `h` `[M, d]`.
fn batch_step(att: &SfiAttention, h: &Tensor, g: &GraphBatchTensors) {
    let h = h.detach().set_requires_grad(true);
    let largest = Some(g.max_nodes);
    let out = g.per_bucket(&h, |x, mask, adj| {
        att.forward_part(x, mask, adj, largest, true)
    });
    out.square().sum(Kind::Float).backward();
}

fn solvers() -> [(&'static str, FlowSolver, usize); 3] {
    [
        ("dense_softmax", FlowSolver::Dense, 0),
        ("sfi_k5", FlowSolver::ProxBb, 5),
        ("sfi_k10", FlowSolver::ProxBb, 10),
    ]
}

fn peptides_batch(c: &mut Criterion) {
    let dev = device();
    let dir = basin_benches::data_dir("lrgb/peptides-functional");
    let ds = basin_graph::lrgb::load(
        &dir.join("lrgb/peptides-functional"),
        basin_graph::lrgb::LrgbSet::PeptidesFunc,
    )
    .expect("Peptides-func loads");
    let ids: Vec<usize> = ds
        .official_split
        .as_ref()
        .expect("official split")
        .train
        .iter()
        .take(128)
        .map(|&i| i as usize)
        .collect();
    let data = GpsData::new(Arc::new(ds), 0, 0).expect("data");
    let cfg = GpsModelConfig {
        node: NodeEncoder::Atom,
        edge: EdgeEncoder::Bond,
        pe: PosEnc::None,
        ..GpsModelConfig::default()
    };
    let b = data.inputs(&cfg, &ids, dev).expect("batch");
    let buckets = &b.graphs;
    let whole = buckets.rebucketed(i64::MAX);
    let m = buckets.batch.size()[0];
    let h = Tensor::randn([m, 64], (Kind::Float, dev));
    println!(
        "Peptides-func batch: {} graphs, {m} nodes, padded to {} (or {} size buckets)",
        buckets.graphs,
        buckets.max_nodes,
        buckets.bucket_count()
    );
    let mut group = c.benchmark_group("sfi_peptides_batch");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for (name, solver, iters) in solvers() {
        let (_vs, att) = attention(solver, iters, dev);
        for (layout, g) in [("", &whole), ("/buckets", buckets)] {
            let id = format!("{name}{layout}");
            basin_benches::print_peak_rss(&format!("sfi_peptides_batch/{id} (one step)"), || {
                batch_step(&att, &h, g)
            });
            group.bench_function(id, |bench| {
                bench.iter(|| {
                    batch_step(&att, &h, g);
                    basin_core::device::synchronize(dev);
                })
            });
        }
    }
    group.finish();
}

fn scaling(c: &mut Criterion) {
    let dev = device();
    let mut group = c.benchmark_group("sfi_scaling");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for n in [64i64, 128, 256, 444] {
        let x = Tensor::randn([32, n, 64], (Kind::Float, dev));
        let mask = Tensor::ones([32, n], (Kind::Bool, dev));
        let adj = Tensor::eye(n, (Kind::Float, dev)).expand([32, n, n], false);
        for (name, solver, iters) in [solvers()[0], solvers()[1]] {
            let (_vs, att) = attention(solver, iters, dev);
            group.bench_function(format!("{name}/n{n}"), |bench| {
                bench.iter(|| {
                    step(&att, &x, &mask, &adj);
                    basin_core::device::synchronize(dev);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, peptides_batch, scaling);
criterion_main!(benches);
