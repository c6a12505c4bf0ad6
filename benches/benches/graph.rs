//! Graph data benchmarks (run with `cargo bench -p basin-benches --bench graph`).
//!
//! - `tu_load/NCI1`, `tu_load/DD`: TU text files → typed dataset. Target: DD under 2 s on 2
//!   cores.
//! - `laplacian_pe/NCI1_k15_cls`: k = 15 CLS-augmented encodings of all 4110 NCI1 graphs (dense,
//!   in parallel over graphs). Target: under 2 s on 2 cores, and ≥ 5× faster than a scipy
//!   `eigh` loop over the same matrices (`crates/basin-graph/scripts/scipy_pe_loop.py` times
//!   that loop on the same machine).
//! - `laplacian_pe/DD_k15_cls`: all 1178 DD graphs (dense up to 2000 nodes, LOBPCG above);
//!   `DD_k15_cls_cap500`: the graphs cut to 500 nodes first, as a batch with the papers' cap
//!   sees them.
//! - `sparse_pe`: k = 10 eigenvectors of a 1M-node random graph (mean degree 10) by LOBPCG, run
//!   once (it takes minutes): time, iterations, residual and peak resident memory.
//!   `BASIN_BENCH_SPARSE_NODES` (default 1000000, 0 skips it) and `BASIN_BENCH_SPARSE_TOL`
//!   (default 1e-4) change it.
//!
//! Data: the data directory (`BASIN_DATA_DIR`, relative paths from the workspace root).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use basin_graph::laplacian::{PeConfig, Solver, laplacian_pe_many, smallest_nontrivial};
use basin_graph::tu::load_tu;
use basin_graph::{Csr, GraphDataset};
use criterion::{Criterion, criterion_group};
use rand::{RngExt, SeedableRng};

fn data_dir() -> PathBuf {
    basin_benches::data_dir("tu")
}

fn tu(name: &str) -> GraphDataset {
    load_tu(&data_dir().join("tu").join(name)).expect("TU dataset loads")
}

fn loading(c: &mut Criterion) {
    let mut group = c.benchmark_group("tu_load");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for name in ["NCI1", "DD"] {
        let dir = data_dir().join("tu").join(name);
        group.bench_function(name, |b| b.iter(|| load_tu(&dir).expect("loads")));
    }
    group.finish();
}

fn encodings(c: &mut Criterion) {
    let mut group = c.benchmark_group("laplacian_pe");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    let cfg = PeConfig::et_graph();
    let nci1 = tu("NCI1");
    let adj: Vec<&Csr> = nci1.graphs.iter().map(|g| &g.adjacency).collect();
    group.bench_function("NCI1_k15_cls", |b| {
        b.iter(|| laplacian_pe_many(&adj, &cfg).expect("encodes"))
    });
    let dd = tu("DD");
    let adj: Vec<&Csr> = dd.graphs.iter().map(|g| &g.adjacency).collect();
    group.bench_function("DD_k15_cls", |b| {
        b.iter(|| laplacian_pe_many(&adj, &cfg).expect("encodes"))
    });
    let capped: Vec<Csr> = dd
        .graphs
        .iter()
        .map(|g| g.truncated(500).adjacency)
        .collect();
    let adj: Vec<&Csr> = capped.iter().collect();
    group.bench_function("DD_k15_cls_cap500", |b| {
        b.iter(|| laplacian_pe_many(&adj, &cfg).expect("encodes"))
    });
    group.finish();
}

/// A connected random graph of mean degree ≈ `degree`: a ring plus `n · (degree − 2) / 2`
/// uniformly random node pairs (self pairs dropped, duplicates merged), both directions stored.
fn random_graph(n: usize, degree: usize, seed: u64) -> Csr {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut pairs: Vec<(u32, u32)> = (0..n * (degree - 2) / 2)
        .map(|_| (rng.random_range(0..n as u32), rng.random_range(0..n as u32)))
        .filter(|(a, b)| a != b)
        .collect();
    // A ring keeps it connected (otherwise isolated nodes make the wanted vectors trivial).
    pairs.extend((0..n as u32).map(|i| (i, (i + 1) % n as u32)));
    Csr::from_undirected(n, &pairs).expect("valid pairs")
}

fn sparse_once() {
    let env = |k: &str| std::env::var(k).ok();
    let n: usize = env("BASIN_BENCH_SPARSE_NODES")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    if n == 0 {
        return;
    }
    let tol: f64 = env("BASIN_BENCH_SPARSE_TOL")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1e-4);
    let g = random_graph(n, 10, 1);
    let mut cfg = PeConfig::plain(10);
    cfg.solver = Solver::Sparse;
    cfg.lobpcg.tol = tol;
    basin_benches::reset_peak_rss();
    let base = basin_benches::rss_mib().unwrap_or(0.0);
    let start = Instant::now();
    let s = smallest_nontrivial(&g, &cfg).expect("LOBPCG converges");
    let secs = start.elapsed().as_secs_f64();
    let peak = basin_benches::peak_rss_mib().unwrap_or(f64::NAN);
    println!(
        "sparse_pe: n = {n}, nnz = {}, k = 10, tol = {tol:e}: {secs:.1} s, {} iterations, \
         max residual {:.2e}, peak RSS {peak:.0} MiB ({:.0} MiB above the graph), λ = {:?}",
        g.nnz(),
        s.iterations,
        s.max_residual,
        peak - base,
        s.values
    );
}

criterion_group!(benches, loading, encodings);

fn main() {
    // `cargo bench -- <filter>`: run the one-off sparse solve only when it is selected.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if filter.is_empty() || filter.iter().any(|f| "sparse_pe".contains(f.as_str())) {
        sparse_once();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
