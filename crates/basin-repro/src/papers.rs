//! The papers' published numbers and a report's words: each table's `data/papers/<id>.toml`,
//! compiled in ([`Table::toml`](crate::Table::toml)), so a report never depends on where the
//! binary runs. Its `[table]` section says what the table is, an optional `[report]` section
//! holds the report's prose, and the rest are the paper's numbers.

use basin_tasks::{Result, TaskError};
use serde::de::DeserializeOwned;

use crate::registry::registry;

/// The paper's numbers of table `id` (`data/papers/<id>.toml` but its `[table]` and `[report]`
/// sections), parsed as `T`.
pub fn numbers<T: DeserializeOwned>(id: &str) -> Result<T> {
    let (file, mut sections) = sections(id)?;
    sections.remove("table");
    sections.remove("report");
    parse(&file, toml::Value::Table(sections))
}

/// The `[report]` section of table `id`'s `data/papers/<id>.toml`, parsed as `T`.
pub fn report<T: DeserializeOwned>(id: &str) -> Result<T> {
    let (file, mut sections) = sections(id)?;
    let report = sections
        .remove("report")
        .ok_or_else(|| TaskError::invalid(&file, "no [report] section"))?;
    parse(&file, report)
}

fn sections(id: &str) -> Result<(String, toml::Table)> {
    let file = format!("data/papers/{id}.toml");
    let text = registry()
        .into_iter()
        .find(|t| t.id() == id)
        .map(|t| t.toml())
        .ok_or_else(|| TaskError::invalid(&file, "no such paper table"))?;
    let sections = toml::from_str(text).map_err(|e| TaskError::invalid(&file, e.to_string()))?;
    Ok((file, sections))
}

fn parse<T: DeserializeOwned>(file: &str, value: toml::Value) -> Result<T> {
    value
        .try_into()
        .map_err(|e: toml::de::Error| TaskError::invalid(file, e.to_string()))
}
