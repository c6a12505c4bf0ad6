//! `basin train --set KEY=VALUE`: overrides applied to a run file's text before it is read.

use crate::{Result, TaskError};

/// `text` (a run file) with each `KEY=VALUE` of `sets` applied in order: KEY a dotted path
/// (`architecture.batching.pe.k`; an array element by its index, `architecture.block.terms.1.memories`),
/// VALUE a TOML value (`8`, `0.5`, `true`, `"loss"`, `[1, 2]`), or a bare word taken as a string
/// (`data=PROTEINS`). Missing tables on the way are created; whether a key means anything is
/// left to the run file's own parsing, which refuses unknown fields by name.
pub fn apply_sets(text: &str, sets: &[String], file: &str) -> Result<String> {
    let mut doc = toml::Value::Table(
        toml::from_str(text)
            .map_err(|e| TaskError::invalid(file, e.to_string().trim_end().to_owned()))?,
    );
    for set in sets {
        let bad = |message: String| TaskError::invalid(format!("{file}: --set {set}"), message);
        let Some((key, value)) = set.split_once('=') else {
            return Err(bad(
                "expected KEY=VALUE (e.g. architecture.batching.pe.k=8)".into(),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
            Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(value.into())),
            Err(_) if !value.is_empty() && !value.contains(['"', '\'', '[', '{', '=']) => {
                toml::Value::String(value.into())
            }
            Err(e) => return Err(bad(format!("VALUE is not a TOML value: {}", e.message()))),
        };
        if key.split('.').any(str::is_empty) {
            return Err(bad("KEY is a dotted path of field names".into()));
        }
        // Down the path, a table's missing entry made on the way (the last one is overwritten).
        let upto = |n: usize| key.split('.').take(n).collect::<Vec<_>>().join(".");
        let mut node = &mut doc;
        for (i, part) in key.split('.').enumerate() {
            node = match node {
                toml::Value::Table(t) => t
                    .entry(part)
                    .or_insert_with(|| toml::Value::Table(toml::Table::new())),
                toml::Value::Array(a) => {
                    let len = a.len();
                    part.parse::<usize>()
                        .ok()
                        .and_then(|n| a.get_mut(n))
                        .ok_or_else(|| {
                            bad(format!(
                                "`{}`: an index below {len} was expected",
                                upto(i + 1)
                            ))
                        })?
                }
                _ => return Err(bad(format!("`{}` is a value, not a table", upto(i)))),
            };
        }
        *node = value;
    }
    toml::to_string(&doc).map_err(|e| TaskError::invalid(file, format!("cannot serialise: {e}")))
}
