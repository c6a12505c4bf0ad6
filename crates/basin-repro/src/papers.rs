//! The papers' published numbers: each table's `data/papers/<id>.toml`, compiled into the
//! table's [`TableInfo::numbers`](crate::TableInfo::numbers), so a report never depends on where
//! the binary runs.

use basin_tasks::{Result, TaskError};
use serde::de::DeserializeOwned;

use crate::registry::registry;

/// The paper's numbers of table `id` (`data/papers/<id>.toml`), parsed as `T`.
pub fn numbers<T: DeserializeOwned>(id: &str) -> Result<T> {
    let file = format!("data/papers/{id}.toml");
    let text = registry()
        .into_iter()
        .find(|t| t.id() == id)
        .and_then(|t| t.info().numbers)
        .ok_or_else(|| TaskError::invalid(&file, "no such paper table"))?;
    toml::from_str(text).map_err(|e| TaskError::invalid(file, e.to_string()))
}
