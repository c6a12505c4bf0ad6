//! `basin compare A B`: two models' runs on the same splits, paired split by split.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use basin_train::compare::{Paired, read_records};
use basin_train::record::RunRecord;

/// Arguments of `basin compare`.
#[derive(clap::Args)]
pub struct Args {
    /// The first model's runs: a directory written by `basin train`, or one model's folder of a
    /// reproduction (`OUT/NCI1/ET/cv`, `OUT/NCI1/baseline-pooled`); every `record.json` under it
    /// counts.
    a: PathBuf,
    /// The second model's runs, the same way.
    b: PathBuf,
    /// A summary metric to compare (repeatable; default: every `test_*` metric both sides
    /// recorded).
    #[arg(long = "metric")]
    metrics: Vec<String>,
    /// Print JSON (one object per metric) instead of a Markdown table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let a = records(&args.a)?;
    let b = records(&args.b)?;
    let metrics = if args.metrics.is_empty() {
        let names = |runs: &[RunRecord]| -> BTreeSet<String> {
            runs.iter()
                .flat_map(|r| r.summary.keys())
                .filter(|k| k.starts_with("test_"))
                .cloned()
                .collect()
        };
        let (na, nb) = (names(&a), names(&b));
        let common: Vec<String> = na.intersection(&nb).cloned().collect();
        if common.is_empty() {
            bail!(
                "no `test_*` metric recorded on both sides ({}: {na:?}; {}: {nb:?}); name one \
                 with --metric",
                args.a.display(),
                args.b.display()
            );
        }
        common
    } else {
        args.metrics.clone()
    };
    let paired = metrics
        .iter()
        .map(|m| Paired::new(&a, &b, m).with_context(|| format!("metric `{m}`")))
        .collect::<Result<Vec<_>>>()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&paired)?);
    } else {
        print!("{}", markdown(&args.a, &args.b, &a, &b, &paired));
    }
    Ok(())
}

/// The records under `dir`, an error if there are none.
fn records(dir: &Path) -> Result<Vec<RunRecord>> {
    let found = read_records(dir)?;
    if found.is_empty() {
        bail!(
            "{}: no record.json under it (give a directory written by `basin train` or \
             `basin reproduce`)",
            dir.display()
        );
    }
    Ok(found.into_iter().map(|(_, r)| r).collect())
}

/// A table of one row per metric; metrics lying in [0, 1] (accuracy, AUC, F1) in percent.
fn markdown(pa: &Path, pb: &Path, a: &[RunRecord], b: &[RunRecord], paired: &[Paired]) -> String {
    let mut md = format!(
        "A: {} ({} runs)\nB: {} ({} runs)\n\n| metric | pairs | A | B | A − B, paired (± s.e.) (wins / ties / losses of A) |\n|---|---|---|---|---|\n",
        pa.display(),
        a.len(),
        pb.display(),
        b.len()
    );
    for p in paired {
        let unit = a
            .iter()
            .chain(b)
            .filter_map(|r| r.summary.get(&p.metric))
            .all(|v| (0.0..=1.0).contains(v));
        let (scale, name) = if unit {
            (100.0, format!("{} (%)", p.metric))
        } else {
            (1.0, p.metric.clone())
        };
        md.push_str(&format!(
            "| {name} | {} | {:.2} | {:.2} | {} |\n",
            p.pairs,
            p.mean_a * scale,
            p.mean_b * scale,
            p.show(scale)
        ));
        if p.unmatched_a + p.unmatched_b > 0 {
            md.push_str(&format!(
                "\n{}: {} runs of A and {} of B had no run of the other on their test split and \
                 are left out.\n",
                p.metric, p.unmatched_a, p.unmatched_b
            ));
        }
    }
    md.push_str(
        "\nPairs are runs evaluated on the same test split (the same fold; the seed too where \
         runs share a split). The standard error is the differences' sample deviation over √n.\n",
    );
    md
}
