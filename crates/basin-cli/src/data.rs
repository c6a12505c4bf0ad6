//! `basin data`: the registered datasets (list, fetch, verify), what a loader reads, and
//! Laplacian positional encodings exported so they can be compared with other tools.
//!
//! - `basin data list` shows every registered dataset: present, partial or missing under the
//!   data directory, its size and place, and the command that fetches a missing one.
//! - `basin data fetch NAME…` downloads, verifies (sha256) and moves the files into place, all
//!   or nothing; `--mirror` / `BASIN_DATA_MIRROR` names a copy of a data directory (URL or
//!   folder) to fetch from instead of the public sources.
//! - `basin data verify [NAME…]` checks the files that are there and names every one that
//!   differs from the registry.
//! - `basin data inspect <path-or-name>` prints the dataset's statistics as JSON: graphs,
//!   nodes (total, mean, min, max), directed and undirected edges, feature widths, classes and
//!   their counts, and for node-level sets the labelled nodes and the anomaly ratio.
//! - `basin data pe <path-or-name> --out FILE.npz` writes the encodings (k smallest non-trivial
//!   eigenvectors of the normalised Laplacian, CLS-augmented by default). Layouts, as
//!   `basin_graph::cache` documents them: `packed` (default) = `pe` `f32 [ΣN', k]` with
//!   `offsets` `i64 [G+1]`, `eigenvalues` `f64 [G, k]` (NaN past a small graph's last
//!   eigenvector), `k`, `cls`; `per-graph` = `pe_<g>` `[N'_g, k]` and `eigenvalues_<g>` `[k]`.
//!
//! Names are looked up under `--data-dir` (else `BASIN_DATA_DIR`): a TU folder name (`MUTAG`),
//! `reddit`, `tolokers`, `peptides-func`, `yelpchi`, `amazon`; `pattern`, `cluster` and
//! `planted` are generated.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use basin_data::datadir::data_dir;
use basin_data::fetch::{FetchEvent, FetchOptions, FetchOutcome};
use basin_data::registry::{self, DatasetInfo, FileState, Presence};
use basin_graph::cache::{DatasetPe, EncodingCache, PeLayout};
use basin_graph::laplacian::{PeConfig, Solver};
use basin_graph::source::{Dataset, open};
use indicatif::{ProgressBar, ProgressStyle};

/// List, fetch and verify the registered datasets; print a dataset's statistics or export its
/// Laplacian positional encodings.
///
/// Names are looked up under `--data-dir`, else BASIN_DATA_DIR, else
/// `$XDG_CACHE_HOME/basin/data` or `~/.cache/basin/data`. `data/README.md` describes the
/// registry, these commands and every dataset.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(clap::Subcommand)]
enum DataCommand {
    /// List the registered datasets: present or missing under the data directory, size, place.
    List(ListArgs),
    /// Download registered datasets into the data directory (verified, all or nothing).
    Fetch(FetchArgs),
    /// Check the sha256 of every dataset file present (or of the named datasets).
    Verify(VerifyArgs),
    /// Print a dataset's statistics as JSON.
    Inspect(InspectArgs),
    /// Write a dataset's Laplacian positional encodings to an npz.
    Pe(PeArgs),
}

#[derive(clap::Args)]
struct ListArgs {
    /// Where datasets live (else BASIN_DATA_DIR, else the user cache).
    #[arg(long, env = "BASIN_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Print the registry as Markdown (the README's Datasets section).
    #[arg(long, conflicts_with = "json")]
    markdown: bool,
}

#[derive(clap::Args)]
struct FetchArgs {
    /// Registered names (`basin data list`), or `all`.
    #[arg(required = true)]
    names: Vec<String>,
    /// Where datasets live (else BASIN_DATA_DIR, else the user cache).
    #[arg(long, env = "BASIN_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// A copy of a basin data directory to fetch from (http(s):// URL prefix or a folder)
    /// instead of the public sources.
    #[arg(long, env = "BASIN_DATA_MIRROR")]
    mirror: Option<String>,
    /// Download again even what is already present and verified.
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct VerifyArgs {
    /// Registered names; none: every dataset with files present.
    names: Vec<String>,
    /// Where datasets live (else BASIN_DATA_DIR, else the user cache).
    #[arg(long, env = "BASIN_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
struct InspectArgs {
    /// A dataset folder or file, or a name under the data directory.
    dataset: String,
    /// Where named datasets live.
    #[arg(long, env = "BASIN_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Layout {
    Packed,
    PerGraph,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SolverArg {
    Auto,
    Dense,
    Sparse,
}

#[derive(clap::Args)]
struct PeArgs {
    /// A dataset folder or file, or a name under the data directory.
    dataset: String,
    /// Where named datasets live.
    #[arg(long, env = "BASIN_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Output npz.
    #[arg(long)]
    out: PathBuf,
    /// Number of eigenvectors (ET graph: 15).
    #[arg(long, default_value_t = 15)]
    k: usize,
    /// Eigenvectors of the plain graph instead of the CLS-augmented one.
    #[arg(long)]
    no_cls: bool,
    /// packed (one array + offsets) or per-graph (one array per graph).
    #[arg(long, value_enum, default_value = "packed")]
    layout: Layout,
    /// Cut graphs to their first N nodes first (what a batch with this cap sees).
    #[arg(long)]
    max_nodes: Option<usize>,
    /// auto (dense up to --dense-max-nodes, LOBPCG above), dense or sparse.
    #[arg(long, value_enum, default_value = "auto")]
    solver: SolverArg,
    /// Largest graph the auto solver decomposes densely.
    #[arg(long, default_value_t = 2000)]
    dense_max_nodes: usize,
    /// LOBPCG residual tolerance.
    #[arg(long, default_value_t = 1e-6)]
    tol: f64,
    /// Reuse or fill the on-disk cache of encodings in this folder (default: the one every
    /// run uses, BASIN_CACHE_DIR, else ~/.cache/basin/encodings; BASIN_CACHE_DIR=off: none).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

/// Runs `basin data`.
pub fn run(args: &Args, quiet: bool) -> Result<()> {
    match &args.command {
        DataCommand::List(a) => list(a),
        DataCommand::Fetch(a) => fetch(a, quiet),
        DataCommand::Verify(a) => verify(a),
        DataCommand::Inspect(a) => inspect(a),
        DataCommand::Pe(a) => pe(a),
    }
}

fn load(spec: &str, data_dir: Option<&PathBuf>) -> Result<Dataset> {
    open(spec, data_dir.map(PathBuf::as_path))
        .with_context(|| format!("cannot open dataset `{spec}`"))
}

fn megabytes(bytes: u64) -> String {
    if bytes == 0 {
        "–".into()
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

fn list(a: &ListArgs) -> Result<()> {
    if a.markdown {
        crate::out!("{}", registry::markdown_table());
        return Ok(());
    }
    let dir = data_dir(a.data_dir.as_deref());
    if a.json {
        let rows: Vec<serde_json::Value> = registry::datasets()
            .iter()
            .map(|d| {
                let presence = d.presence(&dir);
                serde_json::json!({
                    "name": d.name,
                    "aliases": d.aliases,
                    "kind": d.kind,
                    "presence": presence,
                    "bytes": d.bytes(),
                    "location": d.location(&dir).display().to_string(),
                    "fetch": match presence {
                        Presence::Missing | Presence::Partial => Some(d.fetch_command()),
                        _ => None,
                    },
                    "licence": d.licence,
                    "homepage": d.homepage,
                })
            })
            .collect();
        crate::outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    crate::outln!("data directory: {}\n", dir.display());
    crate::outln!(
        "{:<20} {:<12} {:<10} {:>9}  where / how to get it",
        "name",
        "kind",
        "status",
        "size"
    );
    for d in registry::datasets() {
        let presence = d.presence(&dir);
        let (status, place) = match presence {
            Presence::Generated => ("generated", "no download needed".to_owned()),
            Presence::Present => ("present", d.location(&dir).display().to_string()),
            Presence::Partial => ("partial", d.how_to_get()),
            Presence::Missing => ("missing", d.how_to_get()),
        };
        crate::outln!(
            "{:<20} {:<12} {:<10} {:>9}  {place}",
            d.name,
            d.kind.as_str(),
            status,
            megabytes(d.bytes())
        );
    }
    Ok(())
}

/// A byte bar on a terminal; plain lines (one per file) otherwise; nothing with `quiet`.
fn fetch_progress(quiet: bool) -> impl FnMut(FetchEvent) {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(0)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:<32} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} [{eta}]",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let lines = !quiet && bar.is_hidden();
    let mut current = (String::new(), 0u64);
    move |event| match event {
        FetchEvent::Start { what, total } => {
            bar.reset();
            bar.set_length(total.unwrap_or(0));
            bar.set_message(what.clone());
            current = (what, 0);
        }
        FetchEvent::Bytes(n) => {
            bar.inc(n);
            current.1 += n;
        }
        FetchEvent::Done => {
            bar.finish_and_clear();
            if lines {
                eprintln!("fetched {} ({})", current.0, megabytes(current.1));
            }
        }
        FetchEvent::Verifying => {
            if lines {
                eprintln!("verifying checksums");
            }
        }
    }
}

fn fetch(a: &FetchArgs, quiet: bool) -> Result<()> {
    let dir = data_dir(a.data_dir.as_deref());
    let infos: Vec<&DatasetInfo> = if a.names.iter().any(|n| n == "all") {
        registry::datasets().iter().collect()
    } else {
        a.names
            .iter()
            .map(|n| registry::get(n))
            .collect::<basin_data::Result<_>>()?
    };
    let opts = FetchOptions {
        mirror: a.mirror.clone(),
        force: a.force,
    };
    let mut failed = Vec::new();
    for info in infos {
        let mut progress = fetch_progress(quiet);
        match basin_data::fetch::fetch(info, &dir, &opts, &mut progress) {
            Ok(FetchOutcome::Generated) => {
                crate::outln!("{}: generated on use; nothing to fetch", info.name)
            }
            Ok(FetchOutcome::AlreadyPresent) => {
                crate::outln!(
                    "{}: already present (checksums match where recorded)",
                    info.name
                )
            }
            Ok(FetchOutcome::Fetched {
                files,
                bytes,
                unverified,
            }) => {
                crate::outln!(
                    "{}: {} file(s), {} into {}",
                    info.name,
                    files.len(),
                    megabytes(bytes),
                    dir.join(&info.path).display()
                );
                for f in unverified {
                    crate::outln!("  {f}: kept without a recorded checksum (unverified)");
                }
            }
            Err(e) => {
                eprintln!("error: {}: {e}", info.name);
                failed.push(info.name.clone());
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "could not fetch {}; nothing was written for them",
            failed.join(", ")
        );
    }
    Ok(())
}

fn verify(a: &VerifyArgs) -> Result<()> {
    let dir = data_dir(a.data_dir.as_deref());
    let named = !a.names.is_empty();
    let infos: Vec<&DatasetInfo> = if named {
        a.names
            .iter()
            .map(|n| registry::get(n))
            .collect::<basin_data::Result<_>>()?
    } else {
        registry::datasets()
            .iter()
            .filter(|d| !matches!(d.presence(&dir), Presence::Missing | Presence::Generated))
            .collect()
    };
    let mut bad = 0;
    for info in infos {
        if info.presence(&dir) == Presence::Generated {
            crate::outln!("{}: generated; nothing to verify", info.name);
            continue;
        }
        let checks = info.verify(&dir)?;
        let mut problems = Vec::new();
        let mut unverified = 0;
        for c in &checks {
            match &c.state {
                FileState::Verified => {}
                FileState::Unverified => unverified += 1,
                FileState::Missing if c.optional => {}
                FileState::Missing => problems.push(format!("  {}: missing", c.path)),
                FileState::Differs { expected, found } => {
                    problems.push(format!("  {}: expected {expected}, found {found}", c.path))
                }
            }
        }
        if problems.is_empty() {
            let ok = checks
                .iter()
                .filter(|c| c.state == FileState::Verified)
                .count();
            let extra = if unverified > 0 {
                format!(", {unverified} without a recorded checksum")
            } else {
                String::new()
            };
            crate::outln!("{}: ok ({ok} file(s) verified{extra})", info.name);
        } else {
            bad += 1;
            crate::outln!("{}: {} problem(s)", info.name, problems.len());
            for p in problems {
                crate::outln!("{p}");
            }
            crate::outln!("  (`{} --force` fetches it again)", info.fetch_command());
        }
    }
    if bad > 0 {
        bail!(
            "{bad} dataset(s) differ from the registry (data directory {})",
            dir.display()
        );
    }
    Ok(())
}

fn inspect(a: &InspectArgs) -> Result<()> {
    let ds = load(&a.dataset, a.data_dir.as_ref())?;
    crate::outln!("{}", serde_json::to_string_pretty(&ds.stats())?);
    Ok(())
}

fn pe(a: &PeArgs) -> Result<()> {
    if a.k == 0 {
        bail!("--k must be at least 1");
    }
    if !(a.tol.is_finite() && a.tol > 0.0) {
        bail!("--tol must be a positive number");
    }
    if a.max_nodes == Some(0) {
        bail!("--max-nodes must be at least 1");
    }
    let ds = load(&a.dataset, a.data_dir.as_ref())?;
    let cfg = PeConfig {
        k: a.k,
        cls: !a.no_cls,
        solver: match a.solver {
            SolverArg::Auto => Solver::Auto,
            SolverArg::Dense => Solver::Dense,
            SolverArg::Sparse => Solver::Sparse,
        },
        dense_max_nodes: a.dense_max_nodes,
        lobpcg: basin_graph::lobpcg::LobpcgConfig {
            tol: a.tol,
            ..Default::default()
        },
    };
    let truncated: Vec<basin_graph::Csr>;
    let mut graphs = ds.adjacencies();
    if let Some(cap) = a.max_nodes {
        truncated = graphs
            .iter()
            .map(|g| {
                let keep: Vec<u32> = (0..g.num_nodes().min(cap) as u32).collect();
                g.induced(&keep).map(|(c, _)| c)
            })
            .collect::<basin_graph::Result<_>>()?;
        graphs = truncated.iter().collect();
    }
    let start = Instant::now();
    let cache = match &a.cache_dir {
        Some(dir) => EncodingCache::new(dir),
        None => EncodingCache::user(),
    };
    let (encodings, cached) = DatasetPe::compute(&graphs, &cfg, &cache)?;
    let seconds = start.elapsed().as_secs_f64();
    let layout = match a.layout {
        Layout::Packed => PeLayout::Packed,
        Layout::PerGraph => PeLayout::PerGraph,
    };
    encodings
        .write_npz(&a.out, layout)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    let rows: usize = encodings.encodings.iter().map(|p| p.vectors.nrows()).sum();
    let summary = serde_json::json!({
        "dataset": ds.stats().name,
        "graphs": encodings.encodings.len(),
        "k": cfg.k,
        "cls": cfg.cls,
        "rows": rows,
        "layout": match layout { PeLayout::Packed => "packed", PeLayout::PerGraph => "per-graph" },
        "out": a.out.display().to_string(),
        "cached": cached,
        "seconds": seconds,
    });
    crate::outln!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
