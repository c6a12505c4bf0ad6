//! Local launch, like `torchrun --standalone --nproc-per-node N`: N copies of a program, each
//! with `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR` = 127.0.0.1 and a
//! free `MASTER_PORT`. When one rank fails the others are stopped (they would otherwise wait
//! for it until their timeout), and the error names the first rank that failed; when the
//! launcher itself is killed, the kernel stops the ranks (Linux's parent-death signal), so no
//! orphan goes on writing into the run directory.
//!
//! Unless `OMP_NUM_THREADS` is set, each rank gets the machine's cores divided by N, so N ranks
//! do not oversubscribe the CPU (torchrun sets 1). [`launch_shards`] starts N copies that share
//! no group, each given `--shard i/N`, under the same rules.

use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use crate::DistError;

/// The variable [`launch_shards`] sets in each copy's environment.
pub const LAUNCHED_SHARD: &str = "BASIN_LAUNCHED_SHARD";

/// Set (to `1`) in the environment of every rank [`launch`] starts: the launcher holds what the
/// command holds for all of them (its output directory's lock).
pub const LAUNCHED_RANK: &str = "BASIN_LAUNCHED_RANK";

/// A free TCP port on the loopback interface (released just before the ranks bind it).
pub fn free_port() -> Result<u16, DistError> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| DistError::Launch(format!("no free port on 127.0.0.1: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| DistError::Launch(format!("no free port on 127.0.0.1: {e}")))
}

/// Runs `jobs` independent copies of `program args… --shard i/jobs` on this machine (no group:
/// each trains its own share of a protocol's runs, as `--shard` commands started by hand would)
/// and waits for all of them; `Ok` when every one exits successfully. The failure, stop and
/// thread rules are [`launch`]'s. Each copy also gets [`LAUNCHED_SHARD`] = 1 in its environment,
/// so that it can leave out what only a shard started by hand needs to be told.
pub fn launch_shards(
    jobs: usize,
    program: &std::path::Path,
    args: &[std::ffi::OsString],
) -> Result<(), DistError> {
    spawn_all(jobs, program, "shard", |command, i| {
        command
            .args(args)
            .arg("--shard")
            .arg(format!("{i}/{jobs}"))
            .env(LAUNCHED_SHARD, "1");
    })
}

/// Runs `nproc` ranks of `program args…` on this machine and waits for all of them; `Ok` when
/// every rank exits successfully.
pub fn launch(
    nproc: usize,
    program: &std::path::Path,
    args: &[std::ffi::OsString],
) -> Result<(), DistError> {
    if nproc == 0 {
        return Err(DistError::Launch("--nproc must be at least 1".into()));
    }
    let port = free_port()?;
    spawn_all(nproc, program, "rank", |command, rank| {
        command
            .args(args)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", nproc.to_string())
            .env("LOCAL_WORLD_SIZE", nproc.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .env(LAUNCHED_RANK, "1");
    })
}

/// Starts `n` (≥ 1) children of `program`, each set up by `setup(command, i)` and given the
/// cores divided by `n` (unless `OMP_NUM_THREADS` is set), then [`watch`]es them; errors call
/// child i `{noun} i`.
fn spawn_all(
    n: usize,
    program: &std::path::Path,
    noun: &str,
    setup: impl Fn(&mut Command, usize),
) -> Result<(), DistError> {
    if n == 0 {
        return Err(DistError::Launch(format!(
            "at least one {noun} to start, got 0"
        )));
    }
    let threads = std::thread::available_parallelism().map_or(1, |c| (c.get() / n).max(1));
    let mut children: Vec<Child> = Vec::with_capacity(n);
    for i in 0..n {
        let mut command = Command::new(program);
        if std::env::var_os("OMP_NUM_THREADS").is_none() {
            command.env("OMP_NUM_THREADS", threads.to_string());
        }
        crate::ffi::die_with_parent(&mut command);
        setup(&mut command, i);
        match command.spawn() {
            Ok(c) => children.push(c),
            Err(e) => {
                stop(&mut children);
                return Err(DistError::Launch(format!(
                    "cannot start {noun} {i} ({}): {e}",
                    program.display()
                )));
            }
        }
    }
    watch(children, noun)
}

/// Waits for every child; on the first failure stops the rest and reports it.
fn watch(mut children: Vec<Child>, noun: &str) -> Result<(), DistError> {
    let mut done: Vec<Option<ExitStatus>> = vec![None; children.len()];
    loop {
        for (rank, c) in children.iter_mut().enumerate() {
            if done[rank].is_some() {
                continue;
            }
            match c.try_wait() {
                Ok(Some(status)) => {
                    done[rank] = Some(status);
                    if !status.success() {
                        stop(&mut children);
                        return Err(DistError::Launch(format!(
                            "{noun} {rank} failed ({status}); the others were stopped"
                        )));
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    stop(&mut children);
                    return Err(DistError::Launch(format!(
                        "cannot watch {noun} {rank}: {e}"
                    )));
                }
            }
        }
        if done.iter().all(Option::is_some) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Kills and reaps every child still running.
fn stop(children: &mut [Child]) {
    for c in children.iter_mut() {
        if matches!(c.try_wait(), Ok(None)) {
            let _ = c.kill();
        }
        let _ = c.wait();
    }
}
