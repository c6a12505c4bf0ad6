//! `basin compare A B`: two models' runs on the same splits, paired split by split.
//! `basin select A B …`: a hyperparameter chosen split by split among candidates' runs, by
//! validation score.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use basin_train::compare::{Paired, read_records};
use basin_train::record::RunRecord;
use basin_train::select::Selected;

/// Compare two models' runs on the same folds, fold by fold (mean difference ± standard
/// error, wins / ties / losses).
///
/// Runs are paired when they were evaluated on the same test split, matched by the split hashes
/// of their records: `basin train` outputs with the same fold seed, or a reproduction's
/// `OUT/NCI1/ET/cv` beside its `OUT/NCI1/baseline-pooled`. For each `test_*` metric it prints
/// both means and the mean paired difference ± its standard error with wins / ties / losses:
/// folds differ in difficulty by several points on the TU sets, which hides a one-point
/// difference between two means but not the paired difference. The TU reports with baselines
/// (`et-table2`, `cdat-table1`, `cdat-table11`) carry the same comparison of every model with
/// both baselines.
///
/// Example: `basin compare runs/mutag-cdat runs/mutag`.
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
        crate::outln!("{}", serde_json::to_string_pretty(&paired)?);
    } else {
        crate::out!("{}", markdown(&args.a, &args.b, &a, &b, &paired));
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

/// Choose among candidate configurations fold by fold, by each fold's validation score
/// (never its test score): the chosen runs, as one model's, for `basin compare`.
///
/// The candidates are runs of one file with one field changed (`pe.k = 15` and `pe.k = 8`, say:
/// `basin train --set …` with an `--out` per value). Each test fold takes the candidate whose
/// run scored best on that fold's own validation data (`selected_val_<metric>`, or
/// `inner_<metric>` under inner folds), ordered by the runs' own rule (`metric-then-loss`: ties
/// to the lower validation loss), remaining ties to the first candidate listed. Test scores are
/// only reported: the selected runs' mean estimates "this model with that hyperparameter chosen
/// on validation", where the best candidate's own mean over the same test folds is optimistic
/// (it was chosen on them).
///
/// Example: `basin select runs/mutag runs/mutag-k15 --out runs/sel`, then
/// `basin compare runs/sel BASELINE`.
#[derive(clap::Args)]
pub struct SelectArgs {
    /// Each candidate's runs on the same folds, the default first (it keeps the splits where
    /// candidates tie): directories written by `basin train` or a reproduction's model folders.
    #[arg(required = true, num_args = 2..)]
    candidates: Vec<PathBuf>,
    /// Write the chosen runs here (one `split-NNN/record.json` each, for `basin compare`),
    /// with `selection.json` and `selection.md`. Must be new or empty.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON instead of a Markdown table.
    #[arg(long)]
    json: bool,
}

pub fn select(args: &SelectArgs) -> Result<()> {
    let runs = args
        .candidates
        .iter()
        .map(|d| records(d))
        .collect::<Result<Vec<_>>>()?;
    let selected = basin_train::select::select(&runs)?;
    let md = select_markdown(&args.candidates, &selected);
    if let Some(out) = &args.out {
        let busy = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
        if busy {
            bail!(
                "{}: not empty; give --out a new directory (a selection's records mixed with \
                 others' would be compared as one model)",
                out.display()
            );
        }
        for (i, run) in selected.runs.iter().enumerate() {
            let dir = out.join(format!("split-{i:03}"));
            std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
            run.write(&dir.join("record.json"))?;
        }
        let json = serde_json::json!({
            "candidates": args.candidates,
            "selected": selected,
        });
        basin_core::fsio::write_atomic(
            &out.join("selection.json"),
            serde_json::to_string_pretty(&json)?.as_bytes(),
        )?;
        basin_core::fsio::write_atomic(&out.join("selection.md"), md.as_bytes())?;
    }
    if args.json {
        crate::outln!("{}", serde_json::to_string_pretty(&selected)?);
    } else {
        crate::out!("{md}");
    }
    Ok(())
}

/// One row per candidate (splits chosen, mean test score over the common splits), then the
/// selection's.
fn select_markdown(paths: &[PathBuf], s: &Selected) -> String {
    let unit = s
        .choices
        .iter()
        .flat_map(|c| &c.test)
        .all(|v| (0.0..=1.0).contains(v));
    let scale = if unit { 100.0 } else { 1.0 };
    let mut md = format!(
        "Chosen per split by each run's validation score ({} under `{}`), over the {} test \
         splits every candidate finished:\n\n| candidate | chosen | test_{} |\n|---|---|---|\n",
        s.metric,
        serde_json::to_value(s.selection)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        s.choices.len(),
        s.metric
    );
    for (i, p) in paths.iter().enumerate() {
        md.push_str(&format!(
            "| {} | {} | {:.2} |\n",
            p.display(),
            s.counts[i],
            s.candidate_means[i] * scale
        ));
    }
    md.push_str(&format!(
        "| **selected** | {} | **{:.2}** |\n",
        s.choices.len(),
        s.mean * scale
    ));
    if s.left_out > 0 {
        md.push_str(&format!(
            "\n{} finished runs had no run of every other candidate on their split and are left \
             out.\n",
            s.left_out
        ));
    }
    md.push_str(
        "\nA candidate's own mean is not an estimate of the family with the choice made: it \
         is the best of several only in hindsight of the test splits. The selected runs are; \
         compare them with a baseline by `basin select … --out DIR` then `basin compare DIR \
         BASELINE`.\n",
    );
    md
}
