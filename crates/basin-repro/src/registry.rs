//! The tables: what each is ([`TableInfo`]), the contract it implements ([`Reproduction`]),
//! how it registers itself ([`register_table!`](crate::register_table)(crate::register_table)), and how a command
//! finds them by name and checks its flags against them.

use basin_tasks::{Result, TaskError};

use crate::context::Context;
use crate::preset::{Override, Preset};
use crate::report::Report;

/// What a table is, as one value: its id, what it shows, where in its paper, the datasets it
/// looks for, its presets (the first is the default), the overrides it accepts, and whether
/// shards can split it.
#[derive(Clone, Copy, Debug)]
pub struct TableInfo {
    /// Its id, e.g. `et-table1`.
    pub id: &'static str,
    /// One line on what it is.
    pub title: &'static str,
    /// The paper (the paper's name and the section or table).
    pub paper: &'static str,
    /// The datasets it looks for.
    pub datasets: &'static [&'static str],
    /// The presets it has; the first is the default.
    pub presets: &'static [Preset],
    /// The overrides it accepts.
    pub accepts: &'static [Override],
    /// Whether all its training goes through runs that keep records (cross-validation folds,
    /// anomaly seeds), so that shards split it with nothing run twice and `basin reproduce
    /// --jobs N` can train it in N processes at once; a table that also trains outside them (a
    /// grid, timings) says no.
    pub shards: bool,
    /// Whether `--dataset` may also name a folder by its path (the TU tables read any TU
    /// folder), beside the datasets it lists.
    pub dataset_paths: bool,
    /// Its paper's published numbers (`data/papers/<id>.toml`, compiled in with
    /// `include_str!`), read by [`crate::papers::numbers`]; `None` for a table without them.
    pub numbers: Option<&'static str>,
}

impl TableInfo {
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
        if self.presets.contains(&wanted) {
            return (
                wanted,
                format!("{} chosen for this machine ({why})", wanted.flag()),
            );
        }
        let first = self.presets[0];
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

/// A paper table, end to end: its [`TableInfo`] and one function that runs it. A table
/// registers itself in its own file with [`register_table!`](crate::register_table); nothing else lists it.
pub trait Reproduction: Sync {
    /// What the table is.
    fn info(&self) -> &'static TableInfo;
    /// Runs it; the report is not written yet (see [`reproduce`](crate::reproduce)).
    fn run(&self, ctx: &Context) -> Result<Report>;
    /// Its id, e.g. `et-table1`.
    fn id(&self) -> &'static str {
        self.info().id
    }
    /// One line on what it is.
    fn title(&self) -> &'static str {
        self.info().title
    }
    /// The paper (the paper's name and the section or table).
    fn paper(&self) -> &'static str {
        self.info().paper
    }
    /// The datasets it looks for.
    fn datasets(&self) -> &'static [&'static str] {
        self.info().datasets
    }
    /// The presets it has; the first is the default.
    fn presets(&self) -> &'static [Preset] {
        self.info().presets
    }
    /// The overrides it accepts.
    fn accepts(&self) -> &'static [Override] {
        self.info().accepts
    }
    /// Whether shards can split it ([`TableInfo::shards`]).
    fn shards(&self) -> bool {
        self.info().shards
    }
}

/// A registered table (what [`register_table!`](crate::register_table) submits).
pub struct TableEntry(pub &'static dyn Reproduction);

inventory::collect!(TableEntry);

/// Registers a table (a unit struct implementing [`Reproduction`]) so that `basin reproduce`
/// and `--list` know it. Write it next to the table.
#[macro_export]
macro_rules! register_table {
    ($table:expr) => {
        $crate::inventory::submit! { $crate::TableEntry(&$table) }
    };
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
pub fn registry() -> Vec<&'static dyn Reproduction> {
    let mut tables: Vec<&'static dyn Reproduction> = inventory::iter::<TableEntry>
        .into_iter()
        .map(|e| e.0)
        .collect();
    tables.sort_by_key(|t| listing_order(t.id()));
    tables
}

/// The table `id`; a name without its paper's prefix (`table14`) when one paper has such a
/// table. Otherwise an error that lists the tables it could mean (`table1`: ET's, CDAT's and
/// SFi-Former's), or every known id.
pub fn find(id: &str) -> Result<&'static dyn Reproduction> {
    if let Some(table) = registry().into_iter().find(|r| r.id() == id) {
        return Ok(table);
    }
    let mut papers: Vec<&'static dyn Reproduction> = registry()
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
pub fn tables(name: &str, only: &[String]) -> Result<Vec<&'static dyn Reproduction>> {
    let mut found: Vec<&'static dyn Reproduction> = if name == "all" {
        registry()
    } else if let Some(t) = registry().into_iter().find(|r| r.id() == name) {
        vec![t]
    } else {
        let shared: Vec<&'static dyn Reproduction> = registry()
            .into_iter()
            .filter(|r| r.id().split_once('-').is_some_and(|(_, rest)| rest == name))
            .collect();
        if shared.is_empty() {
            find(name)?;
        }
        shared
    };
    if !only.is_empty() {
        let keep = |t: &&dyn Reproduction| {
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
pub fn check(table: &dyn Reproduction, ctx: &Context) -> Result<()> {
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
        let path = table.info().dataset_paths && std::path::Path::new(d).is_dir();
        if !path && !table.datasets().iter().any(|k| k.eq_ignore_ascii_case(d)) {
            let paths = if table.info().dataset_paths {
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
pub fn selected(table: &dyn Reproduction, ctx: &Context, default: &[&str]) -> Vec<String> {
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
    if table.info().dataset_paths {
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
