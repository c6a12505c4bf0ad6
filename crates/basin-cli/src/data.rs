//! `basin data`: check what a loader reads, and export Laplacian positional encodings so they
//! can be compared with other tools.
//!
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
use basin_graph::cache::{DatasetPe, PeCache, PeLayout};
use basin_graph::laplacian::{PeConfig, Solver};
use basin_graph::source::{Dataset, open};

/// Arguments of `basin data`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(clap::Subcommand)]
enum DataCommand {
    /// Print a dataset's statistics as JSON.
    Inspect(InspectArgs),
    /// Write a dataset's Laplacian positional encodings to an npz.
    Pe(PeArgs),
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
    /// Reuse or fill an on-disk cache of encodings in this folder.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

/// Runs `basin data`.
pub fn run(args: &Args) -> Result<()> {
    match &args.command {
        DataCommand::Inspect(a) => inspect(a),
        DataCommand::Pe(a) => pe(a),
    }
}

fn load(spec: &str, data_dir: Option<&PathBuf>) -> Result<Dataset> {
    open(spec, data_dir.map(PathBuf::as_path))
        .with_context(|| format!("cannot open dataset `{spec}`"))
}

fn inspect(a: &InspectArgs) -> Result<()> {
    let ds = load(&a.dataset, a.data_dir.as_ref())?;
    println!("{}", serde_json::to_string_pretty(&ds.stats())?);
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
    let (encodings, cached) = match &a.cache_dir {
        Some(dir) => PeCache::new(dir).load_or_compute(&graphs, &cfg)?,
        None => (DatasetPe::compute(&graphs, &cfg)?, false),
    };
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
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
