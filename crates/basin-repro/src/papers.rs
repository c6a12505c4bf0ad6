//! The papers' published numbers and a report's words: each table's `data/papers/<id>.toml`,
//! compiled in ([`Table::toml`](crate::Table::toml)), so a report never depends on where the
//! binary runs. Its `[table]` section says what the table is, an optional `[report]` section
//! holds the report's prose, and the rest are the paper's numbers: rows of named cells
//! ([`PaperRow`]), one schema for every table.

use std::collections::BTreeMap;

use basin_tasks::{Result, TaskError};
use serde::de::DeserializeOwned;

use crate::registry::registry;

/// A row of a paper's table: one `[[rows]]` entry (or of another array of tables) of its
/// `data/papers/<id>.toml`, its cells read by name as the use needs them. One schema for every
/// table: an error names the file, the row and the field.
#[derive(Clone, Debug)]
pub struct PaperRow {
    /// `data/papers/<id>.toml: <section>[<i>]`.
    place: String,
    cells: toml::Table,
}

impl PaperRow {
    fn bad(&self, field: &str, expected: &str) -> TaskError {
        TaskError::invalid(
            format!("{}.{field}", self.place),
            format!("expected {expected}"),
        )
    }

    fn number_of(v: &toml::Value) -> Option<f64> {
        v.as_float().or_else(|| v.as_integer().map(|n| n as f64))
    }

    fn number_list(v: &toml::Value) -> Option<Vec<f64>> {
        v.as_array()?.iter().map(Self::number_of).collect()
    }

    /// Whether the row has cell `field`.
    pub fn has(&self, field: &str) -> bool {
        self.cells.contains_key(field)
    }

    /// Cell `field` read by `read`, or an error saying it is not `expected`.
    fn read<'a, T>(
        &'a self,
        field: &str,
        read: impl FnOnce(&'a toml::Value) -> Option<T>,
        expected: &str,
    ) -> Result<T> {
        self.cells
            .get(field)
            .and_then(read)
            .ok_or_else(|| self.bad(field, expected))
    }

    /// Cell `field` as text.
    pub fn text(&self, field: &str) -> Result<&str> {
        self.read(field, toml::Value::as_str, "a string")
    }

    /// Cell `field` as a number (an integer reads as one too).
    pub fn number(&self, field: &str) -> Result<f64> {
        self.read(field, Self::number_of, "a number")
    }

    /// Cell `field` as a whole number.
    pub fn integer(&self, field: &str) -> Result<i64> {
        self.read(field, toml::Value::as_integer, "a whole number")
    }

    /// Cell `field`, a published `[mean, std]`.
    pub fn pair(&self, field: &str) -> Result<[f64; 2]> {
        match self.numbers(field).as_deref() {
            Ok([m, s]) => Ok([*m, *s]),
            _ => Err(self.bad(field, "a pair [mean, std] of numbers")),
        }
    }

    /// The number cells `fields`, in their order.
    pub fn columns<const N: usize>(&self, fields: [&str; N]) -> Result<[f64; N]> {
        let mut values = [0.0; N];
        for (v, field) in values.iter_mut().zip(fields) {
            *v = self.number(field)?;
        }
        Ok(values)
    }

    /// Cell `field`, a list of numbers.
    pub fn numbers(&self, field: &str) -> Result<Vec<f64>> {
        self.read(field, Self::number_list, "a list of numbers")
    }

    /// Cell `field` as a yes/no.
    pub fn flag(&self, field: &str) -> Result<bool> {
        self.read(field, toml::Value::as_bool, "true or false")
    }

    /// Cell `field`, a table of number lists by name (a value per dataset: `[mean, std]`, or
    /// `[mean]` for one run); an absent cell is an empty table.
    pub fn by_name(&self, field: &str) -> Result<BTreeMap<String, Vec<f64>>> {
        let Some(cell) = self.cells.get(field) else {
            return Ok(BTreeMap::new());
        };
        let expected = "a table of number lists";
        let table = cell.as_table().ok_or_else(|| self.bad(field, expected))?;
        table
            .iter()
            .map(|(name, v)| {
                let values = Self::number_list(v)
                    .ok_or_else(|| self.bad(&format!("{field}.{name}"), "a list of numbers"))?;
                Ok((name.clone(), values))
            })
            .collect()
    }

    /// Cell `field`, a structured value (e.g. a model's published configuration), parsed as `T`.
    pub fn parse<T: DeserializeOwned>(&self, field: &str) -> Result<T> {
        let cell = self.read(field, Some, "a value")?;
        cell.clone()
            .try_into()
            .map_err(|e: toml::de::Error| self.bad(field, e.to_string().trim_end()))
    }
}

/// The rows of table `id`: its `[[rows]]`.
pub fn rows(id: &str) -> Result<Vec<PaperRow>> {
    rows_of(id, "rows")
}

/// The rows of the array of tables `section` of table `id` (a table with two parts, e.g.
/// `[[anomaly]]` and `[[graph]]`).
pub fn rows_of(id: &str, section: &str) -> Result<Vec<PaperRow>> {
    let (file, sections) = sections(id)?;
    let rows = sections
        .get(section)
        .and_then(toml::Value::as_array)
        .ok_or_else(|| TaskError::invalid(&file, format!("no [[{section}]] rows")))?;
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let place = format!("{file}: {section}[{i}]");
            let cells = row
                .as_table()
                .ok_or_else(|| TaskError::invalid(&place, "expected a table"))?
                .clone();
            Ok(PaperRow { place, cells })
        })
        .collect()
}

/// The row of `rows` whose cell `field` is `value` (`None` where none is, or where the cell is
/// not text).
pub fn find<'a>(rows: &'a [PaperRow], field: &str, value: &str) -> Option<&'a PaperRow> {
    rows.iter()
        .find(|r| r.text(field).is_ok_and(|v| v == value))
}

/// A report cell from a paper row: `show(row)`, or "–" where the paper has no such row.
pub fn cell(row: Option<&PaperRow>, show: impl Fn(&PaperRow) -> Result<String>) -> Result<String> {
    row.map_or_else(|| Ok("–".into()), show)
}

/// A top-level value `field` of table `id` (outside its rows and sections), as text.
pub fn value(id: &str, field: &str) -> Result<String> {
    let (file, sections) = sections(id)?;
    sections
        .get(field)
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| TaskError::invalid(format!("{file}: {field}"), "expected a string"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Cells read as the type asked for; a cell of another type, a missing cell and a missing
    /// section are errors that name the file, the row and the field.
    #[test]
    fn cells_are_read_by_type_and_errors_name_the_file_row_and_field() {
        let tu = rows("et-table2").unwrap();
        let proteins = find(&tu, "dataset", "PROTEINS").unwrap();
        assert_eq!(proteins.number("accuracy").unwrap(), 90.3);
        assert_eq!(proteins.columns(["accuracy"]).unwrap(), [90.3]);
        let e = proteins.pair("accuracy").unwrap_err().to_string();
        assert!(
            e.contains("data/papers/et-table2.toml: rows[0].accuracy") && e.contains("pair"),
            "{e}"
        );
        let e = proteins.text("nope").unwrap_err().to_string();
        assert!(e.contains("rows[0].nope"), "{e}");
        assert!(find(&tu, "dataset", "no such set").is_none());
        let e = rows_of("et-table2", "graph").unwrap_err().to_string();
        assert!(
            e.contains("data/papers/et-table2.toml") && e.contains("[[graph]]"),
            "{e}"
        );

        let lrgb = rows("sfi-table1").unwrap();
        let gps = find(&lrgb, "model", "GPS").unwrap();
        assert_eq!(gps.by_name("values").unwrap()["pcqm-contact"], vec![0.3337]);
        assert_eq!(
            gps.by_name("published").unwrap()["peptides-func"],
            vec![0.6535, 0.0041]
        );
        let gated = find(&lrgb, "model", "GatedGCN").unwrap();
        assert!(gated.by_name("published").unwrap().is_empty());
        assert!(gated.by_name("model").is_err());
        assert_eq!(
            value("et-table14", "dataset").unwrap().split(',').next(),
            Some("ImageNet-1k")
        );
    }
}
