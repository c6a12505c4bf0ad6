//! `basin-fuzz`: runs every reader of user files on mutated inputs and prints, per reader,
//! inputs, panics, the largest allocation and the time (`cargo xtask fuzz --inputs N`).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;

/// Fuzz every reader of user files (TU text, npz, MAT v5, LRGB, IDX, image tar and folder, MIL,
/// checkpoints, TOML run and block files) with deterministic mutations of a seed corpus.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Inputs per reader.
    #[arg(long, default_value_t = 10_000)]
    inputs: usize,
    /// Seed of the mutations (the same seed gives the same inputs).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Only these readers (repeatable; see the table for names).
    #[arg(long = "reader")]
    readers: Vec<String>,
    /// Largest single allocation allowed, in MiB; a reader asking for more aborts the run with
    /// a message (a hostile header must be refused before it allocates).
    #[arg(long, default_value_t = 1024)]
    bound_mib: usize,
    /// Also seed with the real files of more than a few hundred kilobytes (slower per input).
    #[arg(long)]
    large: bool,
    /// Benchmark data directory for the real seed files (else BASIN_DATA_DIR, else the cache).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Write the table as Markdown here too.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    basin_fuzz::alloc::set_bound(args.bound_mib << 20);
    let data = basin_data::datadir::data_dir(args.data_dir.as_deref());
    let data = data.is_dir().then_some(data);
    if data.is_none() {
        eprintln!("no benchmark data directory: seeding with the built-in files only");
    }
    let scratch = tempfile::tempdir().context("scratch directory")?;
    let mut rows = Vec::new();
    let mut panics = 0;
    for target in basin_fuzz::targets::all(data.as_deref(), args.large) {
        if !args.readers.is_empty() && !args.readers.iter().any(|r| r == target.name) {
            continue;
        }
        if target.seeds.is_empty() {
            eprintln!(
                "{}: skipped, no seed files (its dataset is missing)",
                target.name
            );
            continue;
        }
        eprintln!(
            "{}: {} inputs from {} seeds …",
            target.name,
            args.inputs,
            target.seeds.len()
        );
        let stats = basin_fuzz::fuzz(&target, args.inputs, args.seed, scratch.path())
            .with_context(|| format!("{}: scratch files", target.name))?;
        for m in &stats.panic_messages {
            eprintln!("  PANIC {m}");
        }
        panics += stats.panics;
        rows.push((target.name, stats));
    }
    let table = basin_fuzz::table(&rows);
    println!("{table}");
    if let Some(out) = &args.out {
        basin_core::fsio::write_atomic(out, table.as_bytes())
            .with_context(|| format!("writing {}", out.display()))?;
    }
    if panics > 0 {
        bail!("{panics} inputs panicked");
    }
    Ok(())
}
