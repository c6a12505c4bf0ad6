//! Collectives across real processes on 127.0.0.1 (Gloo). The parent tests start this same
//! test binary as ranks, filtered to one `rank_*` function; those functions do nothing when
//! `WORLD_SIZE` is unset (an ordinary `cargo test` run).

use std::process::Command;
use std::time::{Duration, Instant};

use basin_dist::{Env, ProcessGroup, ReduceOp, all_reduce_gradients, launch, shard};
use tch::{Kind, Tensor};

/// The arguments that run this module's test `test` alone in the test binary (a rank).
fn ranks(test: &str) -> Vec<std::ffi::OsString> {
    let exact = format!("{}::{test}", module_path!().trim_start_matches("it::"));
    ["--exact", &exact, "--nocapture", "--test-threads=1"]
        .map(Into::into)
        .to_vec()
}

fn exe() -> std::path::PathBuf {
    std::env::current_exe().expect("test binary path")
}

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).expect("values")
}

#[test]
fn two_ranks_reduce_broadcast_and_average_gradients() {
    if basin_dist::backend_or_skip() {
        launch(2, &exe(), &ranks("rank_collectives")).expect("both ranks pass");
    }
}

#[test]
fn rank_collectives() {
    let Some(group) = basin_dist::init_from_env().expect("rendezvous") else {
        return;
    };
    let (r, w) = (group.rank(), group.world_size());
    assert_eq!(w, 2);
    assert_eq!(group.sum(&[r as f64 + 1.0, 1.0]).unwrap(), vec![3.0, 2.0]);
    assert_eq!(group.reduce(&[r as f64], ReduceOp::Max).unwrap(), vec![1.0]);
    assert_eq!(group.reduce(&[r as f64], ReduceOp::Min).unwrap(), vec![0.0]);
    // A non-contiguous tensor goes through a copy and comes back reduced.
    let mut t = Tensor::arange(6, (Kind::Float, tch::Device::Cpu))
        .reshape([2, 3])
        .tr();
    group.all_reduce(&mut t, ReduceOp::Sum).unwrap();
    assert_eq!(
        values(&t.contiguous().reshape([-1])),
        vec![0., 6., 2., 8., 4., 10.]
    );

    let mut b = Tensor::from_slice(&[r as f32 * 10.0 + 1.0]);
    group.broadcast(&mut b, 0).unwrap();
    assert_eq!(values(&b), vec![1.0]);

    // Gradients: g_r = (r+1) on `p`; weights 1/4 and 3/4 give 0.25·1 + 0.75·2. `q` gets a
    // gradient on rank 0 only (rank 1 counts zeros); `unused` none anywhere. `big` spans two
    // buckets (7·2^20 floats = 28 MiB) and `half` is another dtype (its own bucket).
    let p = Tensor::ones([3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let q = Tensor::ones([2], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let unused = Tensor::ones([2], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let big = Tensor::ones([7 << 20], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let half = Tensor::ones([4], (Kind::Double, tch::Device::Cpu)).set_requires_grad(true);
    let scale = r as f64 + 1.0;
    let mut loss = (&p * scale).sum(Kind::Float)
        + (&big * scale).sum(Kind::Float)
        + (&half * scale).sum(Kind::Double).to_kind(Kind::Float);
    if r == 0 {
        loss = loss + (&q * 4.0).sum(Kind::Float);
    }
    loss.backward();
    let weight = if r == 0 { 0.25 } else { 0.75 };
    let params = [
        p.shallow_clone(),
        q.shallow_clone(),
        unused.shallow_clone(),
        big.shallow_clone(),
        half.shallow_clone(),
    ];
    all_reduce_gradients(&group, &params, weight).unwrap();
    assert_eq!(values(&p.grad()), vec![1.75; 3]);
    assert_eq!(values(&q.grad()), vec![1.0; 2]);
    assert!(!unused.grad().defined());
    let g = big.grad();
    assert_eq!(values(&g.min()), vec![1.75]);
    assert_eq!(values(&g.max()), vec![1.75]);
    assert_eq!(values(&half.grad()), vec![1.75; 4]);
    group.barrier().unwrap();
}

#[test]
fn a_dead_peer_is_an_error_not_a_hang() {
    if !basin_dist::backend_or_skip() {
        return;
    }
    let port = basin_dist::launch::free_port().unwrap();
    let start = |rank: usize| {
        Command::new(exe())
            .args(ranks("rank_dies"))
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", "2")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env("BASIN_DIST_TIMEOUT", "30")
            .output()
    };
    let t0 = Instant::now();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| start(0));
        let b = s.spawn(|| start(1));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let out0 = String::from_utf8_lossy(&a.stdout);
    assert!(
        a.status.success(),
        "rank 0: {out0}\n{}",
        String::from_utf8_lossy(&a.stderr)
    );
    assert!(out0.contains("a peer may have died"), "{out0}");
    assert!(!b.status.success(), "rank 1 was meant to crash");
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "took {:?}",
        t0.elapsed()
    );
}

/// Rank 1 crashes after three all-reduces; rank 0's fourth must fail (well before the 30 s
/// timeout: the connection closes).
#[test]
fn rank_dies() {
    let Some(group) = basin_dist::init_from_env().expect("rendezvous") else {
        return;
    };
    for _ in 0..3 {
        group.sum(&[1.0]).unwrap();
    }
    if group.rank() == 1 {
        std::process::abort();
    }
    let e = group.sum(&[1.0]).expect_err("the peer is gone");
    assert!(matches!(e, basin_dist::DistError::Collective { .. }));
    println!("rank 0 saw: {e}");
}

#[test]
fn a_missing_peer_fails_the_rendezvous_after_the_timeout() {
    if !basin_dist::backend_or_skip() {
        return;
    }
    let env = Env {
        rank: 0,
        world_size: 2,
        local_rank: 0,
        master_addr: "127.0.0.1".into(),
        master_port: basin_dist::launch::free_port().unwrap(),
        timeout: Duration::from_secs(2),
        agent_store: false,
    };
    let t0 = Instant::now();
    let e = ProcessGroup::new(env).expect_err("rank 1 never comes");
    assert!(e.to_string().contains("rendezvous at 127.0.0.1"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn a_failing_rank_stops_the_launch() {
    if !basin_dist::backend_or_skip() {
        return;
    }
    let t0 = Instant::now();
    let e = launch(2, &exe(), &ranks("rank_fails")).expect_err("rank 1 fails");
    assert!(e.to_string().contains("rank 1 failed"), "{e}");
    // Rank 0 sleeps 120 s: only being stopped ends it this soon.
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}",
        t0.elapsed()
    );
}

#[test]
fn rank_fails() {
    let Ok(rank) = std::env::var("RANK") else {
        return;
    };
    // Rank 0 would wait for rank 1 forever were it not stopped by the launcher.
    if rank == "1" {
        std::process::exit(3);
    }
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn launcher_variables_are_checked() {
    let vars = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        Env::from_lookup(move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    };
    assert_eq!(vars(&[]).unwrap(), None);
    let ok = vars(&[
        ("WORLD_SIZE", "2"),
        ("RANK", "1"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "29500"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!((ok.rank, ok.local_rank, ok.master_port), (1, 1, 29500));
    assert!(!ok.agent_store);
    let under_torchrun = vars(&[
        ("WORLD_SIZE", "2"),
        ("RANK", "0"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "1"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
    ]);
    assert!(under_torchrun.unwrap().unwrap().agent_store);
    let e = vars(&[
        ("WORLD_SIZE", "2"),
        ("RANK", "2"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "1"),
    ]);
    assert!(e.unwrap_err().to_string().contains("RANK=\"2\""));
    let e = vars(&[("WORLD_SIZE", "2"), ("RANK", "0"), ("MASTER_ADDR", "h")]);
    assert!(e.unwrap_err().to_string().contains("MASTER_PORT"));
    let e = vars(&[("WORLD_SIZE", "two")]);
    assert!(e.unwrap_err().to_string().contains("WORLD_SIZE"));
    let e = vars(&[
        ("WORLD_SIZE", "1"),
        ("RANK", "0"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "70000"),
    ]);
    assert!(e.unwrap_err().to_string().contains("MASTER_PORT"));
}

#[test]
fn shards_are_disjoint_and_cover() {
    for n in 0..12 {
        for world in 1..5 {
            let parts: Vec<_> = (0..world).map(|r| shard(n, r, world)).collect();
            let all: Vec<usize> = parts.iter().flat_map(Clone::clone).collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "n {n} world {world}");
            let sizes: Vec<usize> = parts.iter().map(ExactSizeIterator::len).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
    }
}
