//! Local launch, like `torchrun --standalone --nproc-per-node N`: N copies of a program, each
//! with `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR` = 127.0.0.1 and a
//! free `MASTER_PORT`. When one rank fails the others are stopped (they would otherwise wait
//! for it until their timeout), and the error names the first rank that failed; when the
//! launcher itself is killed, the kernel stops the ranks (Linux's parent-death signal), so no
//! orphan goes on writing into the run directory.
//!
//! Unless `OMP_NUM_THREADS` is set, each rank gets the machine's cores divided by N, so N ranks
//! do not oversubscribe the CPU (torchrun sets 1).

use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use crate::DistError;

/// A free TCP port on the loopback interface (released just before the ranks bind it).
pub fn free_port() -> Result<u16, DistError> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| DistError::Launch(format!("no free port on 127.0.0.1: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| DistError::Launch(format!("no free port on 127.0.0.1: {e}")))
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
    let threads = std::thread::available_parallelism().map_or(1, |n| (n.get() / nproc).max(1));
    let mut children: Vec<Child> = Vec::with_capacity(nproc);
    for rank in 0..nproc {
        let mut command = Command::new(program);
        if std::env::var_os("OMP_NUM_THREADS").is_none() {
            command.env("OMP_NUM_THREADS", threads.to_string());
        }
        crate::ffi::die_with_parent(&mut command);
        let child = command
            .args(args)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", nproc.to_string())
            .env("LOCAL_WORLD_SIZE", nproc.to_string())
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", port.to_string())
            .spawn();
        match child {
            Ok(c) => children.push(c),
            Err(e) => {
                stop(&mut children);
                return Err(DistError::Launch(format!(
                    "cannot start rank {rank} ({}): {e}",
                    program.display()
                )));
            }
        }
    }
    watch(children)
}

/// Waits for every child; on the first failure stops the rest and reports it.
fn watch(mut children: Vec<Child>) -> Result<(), DistError> {
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
                            "rank {rank} failed ({status}); the other ranks were stopped"
                        )));
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    stop(&mut children);
                    return Err(DistError::Launch(format!("cannot watch rank {rank}: {e}")));
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
