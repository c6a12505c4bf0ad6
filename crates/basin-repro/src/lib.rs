//! # basin-repro
//!
//! Every paper table basin reproduces, each a [`Reproduction`] in its own file that registers
//! itself ([`register_table!`]; [`registry()`] collects them, `basin reproduce --list` prints
//! them and `cargo xtask` asks the binary for them), plus what experiments share: [`papers`]
//! (the paper's numbers, from `data/papers/*.toml`), [`report`] (missing datasets, energy
//! plots, `report.md` + `report.json`), [`tu_classification`] (TU classification under leak-free CV with baselines, for every
//! family), [`examples`] (the example run files of `basin train --example`) and the [`demo`].
//!
//! Tables are named by id and subject, not by one paper's numbering alone: CDAT's Table 1 is
//! ET's Table 2 task, so a table that compares families lives here, where every family is in
//! reach. The modules [`et`], [`cdat`], [`sfi`] and [`hopfield`] hold each paper's tables, one
//! file per table (or per group of tables that share their runs).
//!
//! Adding a table is its file (a unit struct, its [`Reproduction::run`], and
//! `register_table!(Struct, "<id>", DATASETS)`) and `data/papers/<id>.toml`: a `[table]`
//! section (title, paper, presets, accepted flags, shards, dataset paths), then the paper's
//! numbers as `[[rows]]` of named cells, which the table reads through [`papers::rows`] (no
//! struct per table).

use basin_tasks::Result;

pub mod anomaly;
pub mod context;
pub mod demo;
pub mod examples;
pub mod index;
pub mod papers;
pub mod preset;
pub mod registry;
pub mod report;
pub mod tu_classification;

/// The Energy Transformer's tables.
pub mod et {
    pub mod ablation_table13;
    pub mod ablation_table14;
    pub mod anomaly_table1;
    pub mod gnn_table7;
    pub mod heterogeneous_table12;
    pub mod params_table15;
    pub mod tu_table2;
    pub mod vit_table16;
}

/// CDAT's tables.
pub mod cdat {
    pub mod ablation_table12;
    pub mod anomaly_table2;
    pub mod cost_table4;
    pub mod params_tables13_14;
    pub mod tu_tables;
}

/// SFi-Former's tables (and the GraphGPS rows beside them).
pub mod sfi;

/// The Hopfield slides' tables.
pub mod hopfield {
    pub mod claims;
    pub mod memory;
    pub mod mil;
}

pub use basin_tasks::TaskError;
pub use context::Context;
pub use index::{IndexEntry, reproduce_all};
pub use preset::{Override, Overrides, Preset};
pub use registry::{Reproduction, Table, TableEntry, check, find, registry, selected, tables};
pub use report::Report;

/// Re-exported for [`register_table!`].
#[doc(hidden)]
pub use inventory;

/// Checks, runs and writes `ctx.out()/report.md` and `report.json` for table `id`. A sharded
/// process ([`Context::run`]`.shard`) trains its runs and writes no report: the same command run
/// again without a shard reads every finished run and writes it.
pub fn reproduce(id: &str, ctx: &Context) -> Result<Report> {
    let table = find(id)?;
    check(table, ctx)?;
    let mut report = table.run(ctx)?;
    // The preset and why it ran, under the title; the whole command's time at the end.
    let note = format!("Preset: {} ({}).\n\n", ctx.preset.flag(), ctx.preset_reason);
    report.markdown = match report.markdown.split_once("\n\n") {
        Some((title, rest)) => format!("{title}\n\n{note}{rest}"),
        None => format!("{note}{}", report.markdown),
    };
    let command = ctx.command_started.elapsed().as_secs_f64();
    report.markdown.push_str(&format!(
        "\nThe command took {command:.0} s of wall time for this table, every pass and shard included.\n"
    ));
    if let Some(o) = report.json.as_object_mut() {
        o.insert("preset".into(), serde_json::json!(ctx.preset));
        o.insert("preset_reason".into(), ctx.preset_reason.clone().into());
        o.insert("command_seconds".into(), command.into());
        o.insert(
            "headline".into(),
            serde_json::to_value(&report.headline).unwrap_or_default(),
        );
    }
    if ctx.reports() {
        report.write(ctx.out())?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The five anomaly tables' published numbers read through one schema, and their report's
    /// words through another; a model key a table's file lacks is an error naming the file, the
    /// row and the field.
    #[test]
    fn the_anomaly_tables_paper_rows_share_one_schema() {
        let tables: [(&str, &[(&str, &str)]); 5] = [
            ("et-table1", &[("ET", "et"), ("BWGNN", "bwgnn")]),
            (
                "et-table12",
                &[
                    ("MaxPool", "maxpool"),
                    ("Concatenation", "concat"),
                    ("BWGNN", "bwgnn"),
                ],
            ),
            ("et-table13", &[("ATT", "att"), ("HN", "hn"), ("ET", "et")]),
            ("cdat-table2", &[("CDAT", "cdat"), ("ET", "et")]),
            (
                "cdat-table12",
                &[
                    ("CDAT", "cdat"),
                    ("SUPP", "supp"),
                    ("Wx", "wx"),
                    ("ET", "et"),
                ],
            ),
        ];
        for (id, models) in tables {
            let rows = anomaly::paper_rows(id, models).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert!(!rows.is_empty(), "{id}");
            assert!(rows.iter().all(|r| r.models.len() == models.len()), "{id}");
            anomaly::prose(id).unwrap_or_else(|e| panic!("{id}: {e}"));
        }
        let et = anomaly::paper_rows("et-table1", &[("ET", "et")]).unwrap();
        assert_eq!((et[0].dataset.as_str(), et[0].ratio), ("yelp", 0.01));
        assert_eq!(et[0].models[0], ("ET".to_owned(), [63.0, 0.6], [73.2, 0.8]));
        let e = anomaly::paper_rows("et-table1", &[("X", "nope")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("data/papers/et-table1.toml: rows[0].nope_f1"),
            "{e}"
        );
    }

    /// A table's name without its paper's prefix finds it when one paper has it, and is
    /// refused, naming the candidates, when several do.
    #[test]
    fn a_table_is_found_by_its_full_or_its_unique_short_name() {
        assert_eq!(find("et-table14").map(|t| t.id()).ok(), Some("et-table14"));
        assert_eq!(find("table14").map(|t| t.id()).ok(), Some("et-table14"));
        assert_eq!(find("table15").map(|t| t.id()).ok(), Some("et-table15"));
        let err = find("params")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`cdat-params`") && err.contains("`sfi-params`"),
            "{err}"
        );
        let err = find("table3")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`cdat-table3`") && err.contains("`sfi-table3`"),
            "{err}"
        );
        let err = find("table99")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("unknown table `table99`"), "{err}");
    }
}
