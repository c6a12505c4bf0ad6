//! `basin reproduce <table>`: one paper table, end to end (xtask's `reproduce` calls this).

use std::path::PathBuf;

use anyhow::{Result, bail};
use basin_core::device::DeviceChoice;
use basin_et::table1::{self, Table1Options};
use basin_et::table2::{self, Table2Options};
use basin_et::table14::{self, ImageDataset, Table14Options};

/// Arguments of `basin reproduce`.
#[derive(clap::Args)]
pub struct Args {
    /// The table: `et-table14` (module ablation of masked image completion) or
    /// `hopfield-memory` (the Hopfield slides' claims on retrieval, metastability, capacity).
    table: String,
    /// Minutes-long smoke version (tiny subsets, one epoch): checks the whole path, not the model.
    #[arg(long, conflicts_with = "cpu")]
    quick: bool,
    /// The documented CPU-scale configuration (et-table1, et-table2: smaller models or fewer
    /// runs and epochs, about an hour on two cores; et-table14 and the Hopfield tables are
    /// CPU-scale by default). Without it, et-table1 and et-table2 run the paper's protocol.
    #[arg(long)]
    cpu: bool,
    /// Data directory (default: BASIN_DATA_DIR, else ~/.cache/basin/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output directory (default: reports/<table>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
    /// Override the number of epochs.
    #[arg(long)]
    epochs: Option<usize>,
    /// Override the number of training images.
    #[arg(long)]
    train_images: Option<usize>,
    /// Only this dataset (et-table14: cifar10 or fashion-mnist; et-table1: yelp, amazon,
    /// tfinance, tsocial, reddit or tolokers).
    #[arg(long)]
    dataset: Option<String>,
}

pub fn run(args: &Args) -> Result<()> {
    let device = crate::device(args.device)?;
    let data = basin_core::data::data_dir(args.data_dir.as_deref());
    let table = match args.table.as_str() {
        "table1" => "et-table1",
        t => t,
    };
    if ![
        "et-table1",
        "et-table2",
        "et-table14",
        "hopfield-mil",
        "hopfield-memory",
    ]
    .contains(&table)
    {
        bail!(
            "unknown or not yet reproducible table `{table}` (see `cargo xtask reproduce --list`)"
        );
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("reports").join(table));
    println!(
        "{table} on {} (data: {}) → {}",
        basin_core::device::describe(device),
        data.display(),
        out.display()
    );
    // Each table returns how many of its datasets it could run.
    let ran = match table {
        "et-table14" => {
            let mut opts = if args.quick {
                Table14Options::quick()
            } else {
                Table14Options::cpu()
            };
            if let Some(e) = args.epochs {
                opts.epochs = e;
            }
            if let Some(n) = args.train_images {
                opts.train_images = n;
            }
            if let Some(d) = &args.dataset {
                opts.datasets = match d.as_str() {
                    "cifar10" => vec![ImageDataset::Cifar10],
                    "fashion-mnist" => vec![ImageDataset::FashionMnist],
                    other => bail!("--dataset: expected cifar10 or fashion-mnist, got `{other}`"),
                };
            }
            table14::reproduce(&opts, &data, &out, device, args.quick)?.len()
        }
        "et-table1" => {
            let mut opts = if args.quick {
                Table1Options::quick()
            } else if args.cpu {
                Table1Options::cpu()
            } else {
                Table1Options::paper()
            };
            if let Some(e) = args.epochs {
                opts.epochs = e;
            }
            if let Some(d) = &args.dataset {
                opts.datasets = vec![d.clone()];
            }
            table1::reproduce(&opts, &data, &out, device, args.quick)?.len()
        }
        "et-table2" => {
            let mut opts = if args.quick {
                Table2Options::quick()
            } else if args.cpu {
                Table2Options::cpu()
            } else {
                Table2Options::paper()
            };
            if let Some(e) = args.epochs {
                opts.epochs = e;
            }
            if let Some(d) = &args.dataset {
                opts.datasets = vec![d.clone()];
            }
            table2::reproduce(&opts, &data, &out, device, args.quick)?.len()
        }
        "hopfield-mil" => crate::hopfield_mil::run(&data, &out, args.quick)?,
        _ => {
            crate::hopfield_memory::run(&out, args.quick)?;
            1
        }
    };
    if ran == 0 {
        bail!(
            "no dataset could be loaded from {}; see {}",
            data.display(),
            out.join("report.md").display()
        );
    }
    println!("wrote {}", out.join("report.md").display());
    Ok(())
}
