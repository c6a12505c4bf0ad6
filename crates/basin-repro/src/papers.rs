//! The papers' published numbers: each table's `data/papers/<id>.toml` past its `[table]`
//! section, compiled in ([`Table::toml`](crate::Table::toml)), so a report never depends on
//! where the binary runs.

use basin_tasks::{Result, TaskError};
use serde::de::DeserializeOwned;

use crate::registry::registry;

/// The paper's numbers of table `id` (`data/papers/<id>.toml`), parsed as `T`.
pub fn numbers<T: DeserializeOwned>(id: &str) -> Result<T> {
    let file = format!("data/papers/{id}.toml");
    let text = registry()
        .into_iter()
        .find(|t| t.id() == id)
        .map(|t| t.toml())
        .ok_or_else(|| TaskError::invalid(&file, "no such paper table"))?;
    // The numbers are everything but the `[table]` section (what the table is).
    let mut numbers: toml::Table =
        toml::from_str(text).map_err(|e| TaskError::invalid(&file, e.to_string()))?;
    numbers.remove("table");
    toml::Value::Table(numbers)
        .try_into()
        .map_err(|e: toml::de::Error| TaskError::invalid(file, e.to_string()))
}
