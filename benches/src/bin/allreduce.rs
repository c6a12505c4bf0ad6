//! Gradient all-reduce per optimiser step (issue: data-parallel training), for the parameters
//! of the ET ImageNet model (Table 4: D = 768, K = 3072), the ET graph classifier (TU paper
//! preset, NCI1's 37 features) and SFi-Former on Peptides-func, at 2 and 4 ranks of this
//! machine over Gloo on 127.0.0.1 — the exact call the training loop makes
//! (`basin_dist::all_reduce_gradients`, 25 MiB buckets).
//!
//! `cargo run --release -p basin-benches --bin allreduce [-- RANKS…]` (default 2 4). Prints, per
//! model: parameters, MiB of gradients, the median over 20 steps (after 3 warm-up steps), and
//! the algorithm and bus bandwidths (bus = algorithm × 2(n−1)/n, NCCL's convention).

use std::time::Instant;

use basin_sfi::model::GpsModel;
use basin_sfi::presets::{self, Dataset, Variant};
use basin_tasks::graph_classification::GraphClassifier;
use basin_tasks::image_completion::ImageCompletion;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn models() -> Vec<(&'static str, VarStore)> {
    let et_image = VarStore::new(Device::Cpu);
    ImageCompletion::new(&et_image.root(), &basin_et::image::imagenet()).expect("preset");
    let et_graph = VarStore::new(Device::Cpu);
    GraphClassifier::new(&et_graph.root(), &basin_et::graph::tu_paper(), 37, 2).expect("preset");
    let sfi = VarStore::new(Device::Cpu);
    GpsModel::new(
        &sfi.root(),
        &presets::paper(Dataset::PeptidesFunc, Variant::Sfi),
        10,
    )
    .expect("preset");
    vec![
        ("ET ImageNet (Table 4)", et_image),
        ("ET graph, TU paper preset", et_graph),
        ("SFi-Former, Peptides-func", sfi),
    ]
}

fn rank() {
    let group = basin_dist::init_from_env()
        .expect("rendezvous")
        .expect("started by the launcher");
    for (name, vs) in models() {
        // The optimised parameters in name order, as the training loop passes them.
        let mut named: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let params: Vec<Tensor> = named.into_iter().map(|(_, t)| t).collect();
        let loss = params
            .iter()
            .map(|p| p.square().sum(Kind::Float))
            .reduce(|a, b| a + b)
            .expect("parameters");
        loss.backward();
        let count: i64 = params.iter().map(Tensor::numel).sum::<usize>() as i64;
        let bytes = count as f64 * 4.0;
        let mut times = Vec::new();
        for i in 0..23 {
            group.barrier().expect("barrier");
            let t0 = Instant::now();
            basin_dist::all_reduce_gradients(&group, &params, 0.5).expect("all-reduce");
            if i >= 3 {
                times.push(t0.elapsed().as_secs_f64());
            }
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let n = group.world_size() as f64;
        if group.rank() == 0 {
            let alg = bytes / median / 1e9;
            println!(
                "{name:<28} ranks {}  params {count:>11}  {:>7.1} MiB  median {:>8.2} ms  \
                 (min {:.2})  algbw {alg:.2} GB/s  busbw {:.2} GB/s",
                group.world_size(),
                bytes / (1 << 20) as f64,
                median * 1e3,
                times[0] * 1e3,
                alg * 2.0 * (n - 1.0) / n
            );
        }
    }
    group.barrier().expect("barrier");
}

fn main() {
    if std::env::var_os("WORLD_SIZE").is_some() {
        return rank();
    }
    let ranks: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ranks = if ranks.is_empty() { vec![2, 4] } else { ranks };
    let exe = std::env::current_exe().expect("this program");
    for n in ranks {
        basin_dist::launch(n, &exe, &[]).expect("ranks");
    }
}
