//! The tables: what each is ([`Table`]), the contract its code implements ([`Reproduction`]),
//! how it registers itself ([`register_table!`](crate::register_table)), and how a command
//! finds them by name and checks its flags against them.

use basin_tasks::{Result, TaskError};

use crate::context::Context;
use serde::Deserialize;

use crate::preset::{Override, Preset};
use crate::report::Report;

/// What a table is, read from the `[table]` section of its `data/papers/<id>.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct About {
    title: String,
    paper: String,
    presets: Vec<Preset>,
    accepts: Vec<Override>,
    shards: bool,
    dataset_paths: bool,
}

/// A registered table: its id, what it shows, where in its paper, the datasets it looks for,
/// its presets (the first is the default), the overrides it accepts, whether shards can split
/// it, its paper's published numbers, and the code that runs it.
pub struct Table {
    id: &'static str,
    datasets: &'static [&'static str],
    toml: &'static str,
    about: About,
    code: &'static dyn Reproduction,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("id", &self.id)
            .field("about", &self.about)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Its id, e.g. `et-table1`.
    pub fn id(&self) -> &'static str {
        self.id
    }
    /// One line on what it is.
    pub fn title(&self) -> &str {
        &self.about.title
    }
    /// The paper (the paper's name and the section or table).
    pub fn paper(&self) -> &str {
        &self.about.paper
    }
    /// The datasets it looks for.
    pub fn datasets(&self) -> &'static [&'static str] {
        self.datasets
    }
    /// The presets it has; the first is the default.
    pub fn presets(&self) -> &[Preset] {
        &self.about.presets
    }
    /// The overrides it accepts.
    pub fn accepts(&self) -> &[Override] {
        &self.about.accepts
    }
    /// Whether all its training goes through runs that keep records (cross-validation folds,
    /// anomaly seeds), so that shards split it with nothing run twice and `basin reproduce
    /// --jobs N` can train it in N processes at once; a table that also trains outside them (a
    /// grid, timings) says no.
    pub fn shards(&self) -> bool {
        self.about.shards
    }
    /// Whether `--dataset` may also name a folder by its path (the TU tables read any TU
    /// folder), beside the datasets it lists.
    pub fn dataset_paths(&self) -> bool {
        self.about.dataset_paths
    }
    /// Its `data/papers/<id>.toml`, compiled in: the `[table]` section and the paper's
    /// published numbers, read by [`crate::papers::rows`].
    pub fn toml(&self) -> &'static str {
        self.toml
    }
    /// Runs it; the report is not written yet (see [`reproduce`](crate::reproduce)).
    pub fn run(&self, ctx: &Context) -> Result<Report> {
        self.code.run(self, ctx)
    }

    /// The preset the table runs without a preset flag: the paper's where a CUDA device is
    /// present, the CPU scale otherwise (or, where the table lacks that one, its first), with
    /// the reason in words.
    pub fn preset_for_machine(&self, cuda: bool) -> (Preset, String) {
        let wanted = if cuda { Preset::Paper } else { Preset::Cpu };
        let why = if cuda {
            "a CUDA device is present"
        } else {
            "no CUDA device"
        };
        if self.presets().contains(&wanted) {
            return (
                wanted,
                format!("{} chosen for this machine ({why})", wanted.flag()),
            );
        }
        let first = self.presets()[0];
        (
            first,
            format!(
                "{} chosen for this machine ({why}; {} has no {})",
                first.flag(),
                self.id,
                wanted.flag()
            ),
        )
    }
}

/// The code of a paper table: one function that runs it. A table registers itself in its own
/// file with [`register_table!`](crate::register_table), which names its id and datasets; what
/// it is otherwise (title, paper, presets, flags) is the `[table]` section of its
/// `data/papers/<id>.toml`. Nothing else lists it.
pub trait Reproduction: Sync {
    /// Runs `table` (this code's registration) under `ctx`; the report is not written yet.
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report>;
}

/// A registered table (what [`register_table!`](crate::register_table) submits).
pub struct TableEntry {
    /// The code that runs it.
    pub code: &'static dyn Reproduction,
    /// Its id, e.g. `et-table1`.
    pub id: &'static str,
    /// The datasets it looks for.
    pub datasets: &'static [&'static str],
    /// Its `data/papers/<id>.toml`.
    pub toml: &'static str,
}

inventory::collect!(TableEntry);

/// Registers a table: `register_table!(EtTable1, "et-table1", DATASETS)` with a unit struct
/// implementing [`Reproduction`], the table's id and the datasets it looks for; its
/// `data/papers/<id>.toml` (a `[table]` section, an optional `[report]` section, then the
/// paper's numbers) is compiled in.
/// Write it next to the table.
#[macro_export]
macro_rules! register_table {
    ($code:expr, $id:literal, $datasets:expr) => {
        $crate::inventory::submit! {
            $crate::TableEntry {
                code: &$code,
                id: $id,
                datasets: $datasets,
                toml: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/papers/", $id, ".toml")),
            }
        }
    };
}

/// Reads a table's `[table]` section. The files are compiled in, so an error here is a mistake
/// in the repository, which the registry's test catches.
fn about(entry: &TableEntry) -> std::result::Result<About, String> {
    #[derive(Deserialize)]
    struct File {
        table: About,
    }
    let file: File = toml::from_str::<toml::Table>(entry.toml)
        .and_then(|t| toml::Value::Table(t).try_into())
        .map_err(|e| format!("data/papers/{}.toml: {e}", entry.id))?;
    if file.table.presets.is_empty() {
        return Err(format!(
            "data/papers/{}.toml: [table] presets: none",
            entry.id
        ));
    }
    Ok(file.table)
}

/// Where a table stands in listings: by paper (ET, CDAT, SFi-Former, the Hopfield slides),
/// then by table number (tables without one last), then by id.
fn listing_order(id: &str) -> (usize, u32, &str) {
    let (paper, rest) = id.split_once('-').unwrap_or((id, ""));
    let rank = ["et", "cdat", "sfi", "hopfield"]
        .iter()
        .position(|p| *p == paper)
        .unwrap_or(usize::MAX);
    let number = rest
        .strip_prefix("table")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX);
    (rank, number, id)
}

/// Every registered table, in the order `--list` shows them ([`register_table!`](crate::register_table)).
pub fn registry() -> Vec<&'static Table> {
    static TABLES: std::sync::OnceLock<Vec<Table>> = std::sync::OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        let mut tables: Vec<Table> = inventory::iter::<TableEntry>
            .into_iter()
            .map(|e| Table {
                id: e.id,
                datasets: e.datasets,
                toml: e.toml,
                about: about(e).unwrap_or_else(|why| panic!("{why}")),
                code: e.code,
            })
            .collect();
        tables.sort_by_key(|t| listing_order(t.id()));
        tables
    });
    tables.iter().collect()
}

/// The table `id`; a name without its paper's prefix (`table14`) when one paper has such a
/// table. Otherwise an error that lists the tables it could mean (`table1`: ET's, CDAT's and
/// SFi-Former's), or every known id.
pub fn find(id: &str) -> Result<&'static Table> {
    if let Some(table) = registry().into_iter().find(|r| r.id() == id) {
        return Ok(table);
    }
    let mut papers: Vec<&'static Table> = registry()
        .into_iter()
        .filter(|r| r.id().split_once('-').is_some_and(|(_, rest)| rest == id))
        .collect();
    match papers.len() {
        1 => Ok(papers.remove(0)),
        0 => {
            let known: Vec<&str> = registry().iter().map(|r| r.id()).collect();
            Err(TaskError::invalid(
                "table",
                format!("unknown table `{id}`; known: {}", known.join(", ")),
            ))
        }
        _ => {
            let which: Vec<String> = papers
                .iter()
                .map(|r| format!("`{}` ({})", r.id(), r.title()))
                .collect();
            Err(TaskError::invalid(
                "table",
                format!(
                    "`{id}` is a table of {} papers; name one: {}",
                    papers.len(),
                    which.join("; ")
                ),
            ))
        }
    }
}

/// The tables `name` stands for, in the registry's order (ET, CDAT, SFi-Former, the Hopfield
/// slides): `all`, one table's id, or a number several papers share (`table1`: each paper's
/// Table 1); `only` (paper prefixes such as `et`, or full ids) narrows them.
pub fn tables(name: &str, only: &[String]) -> Result<Vec<&'static Table>> {
    let mut found: Vec<&'static Table> = if name == "all" {
        registry()
    } else if let Some(t) = registry().into_iter().find(|r| r.id() == name) {
        vec![t]
    } else {
        let shared: Vec<&'static Table> = registry()
            .into_iter()
            .filter(|r| r.id().split_once('-').is_some_and(|(_, rest)| rest == name))
            .collect();
        if shared.is_empty() {
            find(name)?;
        }
        shared
    };
    if !only.is_empty() {
        let keep = |t: &&Table| {
            let paper = t.id().split_once('-').map_or(t.id(), |(p, _)| p);
            only.iter().any(|o| o == paper || o == t.id())
        };
        let all = found.clone();
        found.retain(keep);
        if found.is_empty() {
            let ids: Vec<&str> = all.iter().map(|t| t.id()).collect();
            return Err(TaskError::invalid(
                "--only",
                format!(
                    "{} leaves none of {}; name a paper (et, cdat, sfi, hopfield) or an id",
                    only.join(", "),
                    ids.join(", ")
                ),
            ));
        }
    }
    Ok(found)
}

/// Checks the context against what `table` takes: a preset it has, overrides it accepts
/// (refused with a message, never silently ignored).
pub fn check(table: &Table, ctx: &Context) -> Result<()> {
    if !table.presets().contains(&ctx.preset) {
        let has: Vec<&str> = table.presets().iter().map(|p| p.flag()).collect();
        return Err(TaskError::invalid(
            ctx.preset.flag(),
            format!(
                "{} has no such preset; it has {}",
                table.id(),
                has.join(", ")
            ),
        ));
    }
    let o = &ctx.overrides;
    for (given, which) in [
        (o.epochs.is_some(), Override::Epochs),
        (!o.datasets.is_empty(), Override::Dataset),
        (o.train_images.is_some(), Override::TrainImages),
        (o.repeats.is_some(), Override::Repeats),
        (o.selection.is_some(), Override::Selection),
        (o.inner_folds.is_some(), Override::InnerFolds),
        (o.ema.is_some(), Override::Ema),
    ] {
        if given && !table.accepts().contains(&which) {
            return Err(TaskError::invalid(
                which.flag(),
                format!("{} does not take this flag", table.id()),
            ));
        }
    }
    for d in &o.datasets {
        let path = table.dataset_paths() && std::path::Path::new(d).is_dir();
        if !path && !table.datasets().iter().any(|k| k.eq_ignore_ascii_case(d)) {
            let paths = if table.dataset_paths() {
                ", or the path of a TU folder"
            } else {
                ""
            };
            return Err(TaskError::invalid(
                "--dataset",
                format!(
                    "{} has no dataset `{d}`; it runs {}{paths}",
                    table.id(),
                    table.datasets().join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The datasets a table runs: those `--dataset` names (in the table's spelling; and the paths
/// of folders, where the table reads them), else the preset's `default`.
pub fn selected(table: &Table, ctx: &Context, default: &[&str]) -> Vec<String> {
    if ctx.overrides.datasets.is_empty() {
        return default.iter().map(|d| d.to_string()).collect();
    }
    let mut chosen: Vec<String> = table
        .datasets()
        .iter()
        .filter(|d| {
            ctx.overrides
                .datasets
                .iter()
                .any(|o| o.eq_ignore_ascii_case(d))
        })
        .map(|d| d.to_string())
        .collect();
    if table.dataset_paths() {
        chosen.extend(
            ctx.overrides
                .datasets
                .iter()
                .filter(|o| !table.datasets().iter().any(|d| d.eq_ignore_ascii_case(o)))
                .filter(|o| std::path::Path::new(o).is_dir())
                .cloned(),
        );
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table's `[table]` section reads, its numbers read without it, and no two tables
    /// share an id.
    #[test]
    fn every_table_reads_its_toml() {
        let entries: Vec<&TableEntry> = inventory::iter::<TableEntry>.into_iter().collect();
        assert_eq!(entries.len(), registry().len());
        for e in &entries {
            let about = about(e).unwrap();
            assert!(
                !about.title.is_empty() && !about.paper.is_empty(),
                "{}",
                e.id
            );
            assert_eq!(
                entries.iter().filter(|o| o.id == e.id).count(),
                1,
                "{}",
                e.id
            );
        }
        let bad = TableEntry {
            code: entries[0].code,
            id: "broken",
            datasets: &[],
            toml: "[table]\ntitle = \"t\"\npaper = \"p\"\npresets = [\"gpu\"]\naccepts = []\nshards = false\ndataset_paths = false\n",
        };
        let why = about(&bad).unwrap_err();
        assert!(
            why.contains("data/papers/broken.toml") && why.contains("gpu"),
            "{why}"
        );
    }
}
