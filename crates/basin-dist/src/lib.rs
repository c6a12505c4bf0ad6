//! # basin-dist
//!
//! Data-parallel training on libtorch's own c10d, the engine under PyTorch's DDP: a `TCPStore`
//! rendezvous and a Gloo process group (`src/shim.cpp`, the workspace's one C++ file), set up
//! from the variables `torchrun`, SLURM and PyTorch's launchers export (`RANK`, `WORLD_SIZE`,
//! `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`).
//!
//! - [`ProcessGroup`]: all-reduce, broadcast and barrier on tensors; every failure (a peer that
//!   died, a rendezvous past its timeout) is an error, never a hang.
//! - [`init_from_env`] / [`current`]: the process's default group, which basin-train's loop
//!   uses when it is set: each rank trains on its shard of every batch and gradients are
//!   all-reduced before the optimiser (see `basin_train::runner`).
//! - [`broadcast_parameters`], [`all_reduce_gradients`]: DDP's two steps, the second bucketed
//!   by size as DDP does (25 MiB buckets).
//! - [`mod@launch`]: starts N local ranks of a program with the right environment (`torchrun
//!   --standalone`), and stops them all when one fails; [`launch_shards`] starts N independent
//!   `--shard i/N` copies the same way (folds in parallel, no group).
//!
//! On CUDA tensors go through the host (Gloo on CPU): this build has no NCCL backend.
//!
//! # Training on several processes or machines
//!
//!
//! The one mini-batch loop of basin-train runs data-parallel whenever the process belongs to a
//! group, for every task and family: each rank takes its contiguous shard of every global batch
//! (the run file's `batch` is the global batch), the batch loss is reduced across ranks before
//! `backward`, and gradients are averaged (each rank weighted by its share of the batch, in 25 MiB
//! buckets, as PyTorch's DDP) before the optimiser. For losses that are means over items, two ranks
//! take exactly the single process's steps (tested: the records of `--nproc 2` equal those of one
//! process to float32 rounding). Rank 0 alone writes records, checkpoints and reports; a restarted
//! job resumes every rank from rank 0's checkpoint (the output directory must be shared). What
//! stays per rank: dropout and Langevin noise (rank r draws from its own stream), BatchNorm
//! statistics (as DDP without SyncBatchNorm); validation runs whole on every rank.
//!
//! ```sh
//! # N processes on this machine (Gloo on 127.0.0.1), like `torchrun --standalone`:
//! basin train run.toml --nproc 2
//! # several machines: any launcher that sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//! torchrun --nnodes 2 --nproc-per-node 1 --node-rank $NODE --master-addr node0 \
//!          --master-port 29500 --no-python basin train run.toml --out /shared/run
//! # SLURM: one task per rank
//! srun --ntasks 8 bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS \
//!      MASTER_ADDR=$(scontrol show hostnames $SLURM_NODELIST | head -1) MASTER_PORT=29500 \
//!      basin train run.toml --out /shared/run'
//! ```
//!
//! Cross-validation has a coarser, communication-free kind of parallelism: its folds are
//! independent. `--shard I/N` (on `basin train` and `basin reproduce`) makes a process train only
//! run r of each protocol where r mod N = I (folds, anomaly seeds, fixed-split seeds; fold f of every
//! model lands in the same shard, so shards can compare models fold by fold). N processes, on one
//! machine or several, share one `--out`; each writes its runs' records and checkpoints and no
//! report. The same command run once more without `--shard` reads every finished run (nothing is
//! trained again) and writes the report, exactly as one process would have (tested on a
//! cross-validation: the records are equal).
//!
//! On one machine `--jobs N` does all of that in one command: N processes, each its own shard
//! with the cores divided among them (one thread each on N cores), then the report (tested: the
//! records equal one process's at the same thread count). `basin train` takes it for any run file;
//! `basin reproduce` for the tables whose training all keeps records (the TU and anomaly tables,
//! marked in `--list`), and refuses it for the others, which every shard would run again whole.
//!
//! ```sh
//! # DD's ten folds on two cores, one thread each, then the report:
//! basin reproduce et-table2 --cpu --dataset DD --out dd --jobs 2
//! # the same by hand (or across machines sharing dd/):
//! OMP_NUM_THREADS=1 basin reproduce et-table2 --cpu --dataset DD --out dd --shard 0/2 &
//! OMP_NUM_THREADS=1 basin reproduce et-table2 --cpu --dataset DD --out dd --shard 1/2 &
//! wait && basin reproduce et-table2 --cpu --dataset DD --out dd
//! ```
//!
//! Under torchrun the ranks join the agent's store (`TORCHELASTIC_USE_AGENT_STORE`), as PyTorch's
//! do. `GLOO_SOCKET_IFNAME` picks the network interface, `BASIN_DIST_TIMEOUT` (seconds, default 300)
//! bounds the rendezvous and every collective: a rank that dies makes the others fail with an error
//! naming the collective (a closed connection is seen at once), never hang, and `--nproc` stops the
//! remaining ranks when one fails. On CUDA each rank takes GPU `LOCAL_RANK`; gradients are reduced
//! through the host over Gloo (this build has no NCCL backend). The Gloo backend needs gloo's
//! headers at build time (`libgloo-dev`; `cargo xtask setup` installs it when run as root, else
//! says how): without them basin builds and trains in one process, and `--nproc` explains what is
//! missing. `cargo run --release -p basin-benches --bin allreduce` times the gradient all-reduce of
//! the ET ImageNet, ET graph and SFi-Former presets at 2 and 4 ranks.

mod ffi;
pub mod launch;

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tch::{Device, Kind, Tensor};

pub use launch::{launch, launch_shards};

/// What the crate says when it was built without the gloo headers.
pub(crate) const NO_BACKEND: &str = "this build of basin has no distributed backend: the gloo \
     headers were not found when basin-dist was built; install them (`apt-get install \
     libgloo-dev`, or `cargo xtask setup`), or point BASIN_GLOO_INCLUDE at them, and rebuild \
     (`cargo clean -p basin-dist`, then build again)";

/// Why distributed set-up or communication failed.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// A launcher variable is missing or malformed.
    #[error("environment variable {var}={value:?}: {expected}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        expected: String,
    },
    /// The rendezvous or the group's connection failed (peers absent past the timeout, port
    /// taken, no backend).
    #[error("rendezvous at {addr}:{port} as rank {rank} of {world}: {message}")]
    Rendezvous {
        /// MASTER_ADDR.
        addr: String,
        /// MASTER_PORT.
        port: u16,
        /// This rank.
        rank: usize,
        /// WORLD_SIZE.
        world: usize,
        /// c10d's message.
        message: String,
    },
    /// A collective failed, typically because a peer died or stopped answering.
    #[error("{op} failed on rank {rank} of {world} (a peer may have died or timed out): {message}")]
    Collective {
        /// all-reduce, broadcast, barrier.
        op: &'static str,
        /// This rank.
        rank: usize,
        /// World size.
        world: usize,
        /// c10d's message.
        message: String,
    },
    /// Ranks disagree where they must agree (e.g. the epoch they resume from).
    #[error("ranks disagree: {0}")]
    Mismatch(String),
    /// Starting or watching local ranks failed.
    #[error("launch: {0}")]
    Launch(String),
    /// A tensor operation failed.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// The launcher's variables, as `torchrun` sets them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env {
    /// `RANK`: this process among all.
    pub rank: usize,
    /// `WORLD_SIZE`: how many processes.
    pub world_size: usize,
    /// `LOCAL_RANK`: this process on its machine (picks its GPU); `RANK` if unset.
    pub local_rank: usize,
    /// `MASTER_ADDR`: where rank 0 serves the rendezvous store.
    pub master_addr: String,
    /// `MASTER_PORT`.
    pub master_port: u16,
    /// How long rendezvous and collectives may wait (`BASIN_DIST_TIMEOUT` seconds, else 300).
    pub timeout: Duration,
    /// The launcher's agent already serves the store at MASTER_ADDR:MASTER_PORT (torchrun sets
    /// `TORCHELASTIC_USE_AGENT_STORE=True`): every rank joins it as a client.
    pub agent_store: bool,
}

fn parse<T: std::str::FromStr>(
    var: &'static str,
    value: &str,
    expected: &str,
) -> Result<T, DistError> {
    value.trim().parse().map_err(|_| DistError::Env {
        var,
        value: value.to_owned(),
        expected: expected.to_owned(),
    })
}

impl Env {
    /// Reads the variables; `None` when `WORLD_SIZE` is unset (a single-process run).
    pub fn from_env() -> Result<Option<Self>, DistError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// [`Env::from_env`] over any lookup (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, DistError> {
        let Some(world) = get("WORLD_SIZE") else {
            return Ok(None);
        };
        let world_size: usize = parse("WORLD_SIZE", &world, "a number of processes ≥ 1")?;
        if world_size == 0 {
            return Err(DistError::Env {
                var: "WORLD_SIZE",
                value: world,
                expected: "a number of processes ≥ 1".into(),
            });
        }
        let need = |var: &'static str| {
            get(var).ok_or_else(|| DistError::Env {
                var,
                value: String::new(),
                expected: "set whenever WORLD_SIZE is (torchrun, srun or `--nproc` set it)".into(),
            })
        };
        let rank_s = need("RANK")?;
        let rank: usize = parse("RANK", &rank_s, "a rank below WORLD_SIZE")?;
        if rank >= world_size {
            return Err(DistError::Env {
                var: "RANK",
                value: rank_s,
                expected: format!("a rank below WORLD_SIZE = {world_size}"),
            });
        }
        let local_rank = match get("LOCAL_RANK") {
            Some(v) => parse("LOCAL_RANK", &v, "a number")?,
            None => rank,
        };
        let master_addr = need("MASTER_ADDR")?;
        let master_port = parse("MASTER_PORT", &need("MASTER_PORT")?, "a TCP port (1–65535)")?;
        let timeout = match get("BASIN_DIST_TIMEOUT") {
            Some(v) => {
                let s: f64 = parse("BASIN_DIST_TIMEOUT", &v, "seconds > 0")?;
                if !(s > 0.0 && s.is_finite()) {
                    return Err(DistError::Env {
                        var: "BASIN_DIST_TIMEOUT",
                        value: v,
                        expected: "seconds > 0".into(),
                    });
                }
                Duration::from_secs_f64(s)
            }
            None => Duration::from_secs(300),
        };
        let agent_store = get("TORCHELASTIC_USE_AGENT_STORE")
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        Ok(Some(Self {
            rank,
            world_size,
            local_rank,
            master_addr,
            master_port,
            timeout,
            agent_store,
        }))
    }
}

/// A reduction for [`ProcessGroup::all_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum over ranks.
    Sum,
    /// Minimum over ranks.
    Min,
    /// Maximum over ranks.
    Max,
}

impl ReduceOp {
    /// c10d's `ReduceOp::RedOpType`.
    fn code(self) -> i32 {
        match self {
            Self::Sum => 0,
            Self::Min => 3,
            Self::Max => 4,
        }
    }
}

/// A connected group of ranks (Gloo over TCP).
pub struct ProcessGroup {
    raw: ffi::RawGroup,
    env: Env,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.env.rank)
            .field("world_size", &self.env.world_size)
            .finish()
    }
}

impl ProcessGroup {
    /// Rendezvous with the other ranks and connect (blocks until all `world_size` ranks are
    /// there, or fails after `env.timeout`). `GLOO_SOCKET_IFNAME` picks the network interface,
    /// as in PyTorch.
    pub fn new(env: Env) -> Result<Self, DistError> {
        let ifname = std::env::var("GLOO_SOCKET_IFNAME").unwrap_or_default();
        let ms = i64::try_from(env.timeout.as_millis()).unwrap_or(i64::MAX);
        let raw = ffi::RawGroup::new_gloo(
            &env.master_addr,
            env.master_port,
            env.rank,
            env.world_size,
            env.rank == 0 && !env.agent_store,
            ms,
            &ifname,
        )
        .map_err(|message| DistError::Rendezvous {
            addr: env.master_addr.clone(),
            port: env.master_port,
            rank: env.rank,
            world: env.world_size,
            message,
        })?;
        Ok(Self { raw, env })
    }

    /// Whether this build can create groups (it found the gloo headers).
    pub fn available() -> bool {
        ffi::HAS_GLOO
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.env.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.env.world_size
    }

    /// The launcher's variables this group was made from.
    pub fn env(&self) -> &Env {
        &self.env
    }

    fn failed(&self, op: &'static str) -> impl FnOnce(String) -> DistError + '_ {
        move |message| DistError::Collective {
            op,
            rank: self.env.rank,
            world: self.env.world_size,
            message,
        }
    }

    /// Runs `f` on a dense CPU copy of `t` (or `t` itself when it already is one), then writes
    /// the result back.
    fn on_host(
        &self,
        t: &mut Tensor,
        f: impl FnOnce(&mut Tensor) -> Result<(), String>,
        op: &'static str,
    ) -> Result<(), DistError> {
        if t.device() == Device::Cpu && t.is_contiguous() {
            return f(t).map_err(self.failed(op));
        }
        let mut host = t.to_device(Device::Cpu).contiguous();
        f(&mut host).map_err(self.failed(op))?;
        tch::no_grad(|| t.copy_(&host));
        Ok(())
    }

    /// Reduces `t` over all ranks in place.
    pub fn all_reduce(&self, t: &mut Tensor, op: ReduceOp) -> Result<(), DistError> {
        self.on_host(t, |h| self.raw.all_reduce(h, op.code()), "all-reduce")
    }

    /// Copies `root`'s `t` into every rank's `t`.
    pub fn broadcast(&self, t: &mut Tensor, root: usize) -> Result<(), DistError> {
        self.on_host(t, |h| self.raw.broadcast(h, root), "broadcast")
    }

    /// Waits until every rank gets here.
    pub fn barrier(&self) -> Result<(), DistError> {
        self.raw.barrier().map_err(self.failed("barrier"))
    }

    /// Sums `values` over ranks (in float64; small vectors of counts and losses).
    pub fn sum(&self, values: &[f64]) -> Result<Vec<f64>, DistError> {
        self.reduce(values, ReduceOp::Sum)
    }

    /// Reduces `values` over ranks with `op` (in float64).
    pub fn reduce(&self, values: &[f64], op: ReduceOp) -> Result<Vec<f64>, DistError> {
        let mut t = Tensor::from_slice(values);
        self.all_reduce(&mut t, op)?;
        Ok(Vec::<f64>::try_from(&t)?)
    }
}

/// For tests that need the backend: `true` when this build has it; otherwise says the test is
/// skipped and returns `false`, or panics when `BASIN_REQUIRE_DIST` is set (CI sets it: there
/// every data-parallel test must run).
pub fn backend_or_skip() -> bool {
    if ProcessGroup::available() {
        return true;
    }
    assert!(
        std::env::var_os("BASIN_REQUIRE_DIST").is_none(),
        "BASIN_REQUIRE_DIST is set but basin-dist was built without gloo: {NO_BACKEND}"
    );
    eprintln!("skipped: basin-dist was built without the gloo headers");
    false
}

static CURRENT: Mutex<Option<Arc<ProcessGroup>>> = Mutex::new(None);

/// The process's default group, once [`init_from_env`] or [`set_current`] made one.
pub fn current() -> Option<Arc<ProcessGroup>> {
    CURRENT.lock().ok().and_then(|g| g.clone())
}

/// Makes `group` the process's default (or clears it with `None`; the group closes when the
/// last `Arc` goes).
pub fn set_current(group: Option<Arc<ProcessGroup>>) {
    if let Ok(mut g) = CURRENT.lock() {
        *g = group;
    }
}

/// Whether this process writes a run's shared outputs (records, reports, plots): it is alone,
/// or it is rank 0 of its group.
pub fn is_writer() -> bool {
    current().is_none_or(|g| g.rank() == 0)
}

/// Joins the group the launcher's variables describe and makes it the default; `Ok(None)` when
/// `WORLD_SIZE` is unset (one process: nothing to do).
pub fn init_from_env() -> Result<Option<Arc<ProcessGroup>>, DistError> {
    let Some(env) = Env::from_env()? else {
        return Ok(None);
    };
    let group = Arc::new(ProcessGroup::new(env)?);
    set_current(Some(group.clone()));
    Ok(Some(group))
}

/// The part of `0..n` rank `rank` of `world` takes: contiguous, sizes differing by at most one,
/// the first `n % world` ranks one larger; disjoint and covering over the ranks.
pub fn shard(n: usize, rank: usize, world: usize) -> Range<usize> {
    let world = world.max(1);
    let (base, extra) = (n / world, n % world);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

/// Gradient buckets are at most this many bytes (DDP's default `bucket_cap_mb = 25`).
pub const BUCKET_BYTES: usize = 25 << 20;

/// Copies rank 0's value of every tensor into every rank's (DDP's start: identical replicas).
/// `vars` must list the same tensors in the same order on every rank (sort them by name).
pub fn broadcast_parameters(group: &ProcessGroup, vars: &[Tensor]) -> Result<(), DistError> {
    for v in vars {
        // Gloo writes into the tensor's memory: no autograd record, even for a leaf parameter.
        group.broadcast(&mut v.shallow_clone(), 0)?;
    }
    Ok(())
}

/// Averages the gradients of `params` over ranks, as DDP does after `backward`: each rank's
/// gradients are scaled by `weight` (its share of the global batch: for a mean loss, its items
/// over all ranks' items, so the result is the global batch's mean gradient exactly) and summed,
/// in buckets of at most [`BUCKET_BYTES`] of one dtype and device. A gradient undefined on this
/// rank but defined on another (a rank with no items this step) counts as zeros; one undefined
/// everywhere stays undefined. `params` must be in the same order on every rank.
pub fn all_reduce_gradients(
    group: &ProcessGroup,
    params: &[Tensor],
    weight: f64,
) -> Result<(), DistError> {
    let defined: Vec<f64> = params
        .iter()
        .map(|p| f64::from(u8::from(p.grad().defined())))
        .collect();
    let anywhere = group.reduce(&defined, ReduceOp::Max)?;
    let missing: Vec<&Tensor> = params
        .iter()
        .zip(defined.iter().zip(&anywhere))
        .filter(|(_, (here, any))| **here == 0.0 && **any > 0.0)
        .map(|(p, _)| p)
        .collect();
    if !missing.is_empty() {
        // `backward` of 0·p gives p a zero gradient (tch cannot set `.grad` directly).
        let zero = missing
            .iter()
            .map(|p| (*p * 0.0).sum(Kind::Float))
            .reduce(|a, b| a + b);
        if let Some(z) = zero {
            z.backward();
        }
    }
    let grads: Vec<Tensor> = params
        .iter()
        .map(|p| p.grad())
        .filter(Tensor::defined)
        .collect();
    let mut bucket: Vec<&Tensor> = Vec::new();
    let mut bytes = 0usize;
    for g in &grads {
        let size = g.numel() * g.kind().elt_size_in_bytes();
        let fits = bucket.first().is_none_or(|b| {
            b.kind() == g.kind() && b.device() == g.device() && bytes + size <= BUCKET_BYTES
        });
        if !fits {
            reduce_bucket(group, &bucket, weight)?;
            (bucket, bytes) = (Vec::new(), 0);
        }
        bucket.push(g);
        bytes += size;
    }
    reduce_bucket(group, &bucket, weight)
}

/// One bucket: flatten, scale, sum over ranks, copy back.
fn reduce_bucket(group: &ProcessGroup, grads: &[&Tensor], weight: f64) -> Result<(), DistError> {
    if grads.is_empty() {
        return Ok(());
    }
    tch::no_grad(|| {
        let flat: Vec<Tensor> = grads.iter().map(|g| g.reshape([-1])).collect();
        let mut flat = Tensor::cat(&flat, 0);
        if weight != 1.0 {
            flat = flat * weight;
        }
        group.all_reduce(&mut flat, ReduceOp::Sum)?;
        let mut offset = 0i64;
        for g in grads {
            let n = g.numel() as i64;
            g.shallow_clone()
                .copy_(&flat.narrow(0, offset, n).view_as(g));
            offset += n;
        }
        Ok(())
    })
}
