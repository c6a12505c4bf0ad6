//! Multiple-instance learning data: bags of instance feature vectors with one binary label per
//! bag (the benchmarks of the Hopfield paper: Musk1/2, Fox, Tiger, Elephant, UCSB breast cancer).
//!
//! Readers: the CSV layout of the `mil` package (no header; column 0 = label, column 1 = bag id,
//! then the instance's features; a bag is positive if any of its rows is) and PRTools `.mat`
//! datasets (`fte.zip`: a `dataset` object with `data`, `nlab` and `ident.milbag`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{GraphError, Result};

/// One bag: its instances (`len × features`, row-major) and label.
#[derive(Clone, Debug, PartialEq)]
pub struct Bag {
    /// Identifier from the file.
    pub id: i64,
    /// Number of instances.
    pub len: usize,
    /// Instance features, row-major.
    pub features: Vec<f32>,
    /// Whether the bag is positive.
    pub label: bool,
}

/// A MIL dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct MilDataset {
    /// Name (file stem).
    pub name: String,
    /// Feature width.
    pub features: usize,
    /// The bags, ordered by id.
    pub bags: Vec<Bag>,
}

impl MilDataset {
    /// Bag labels.
    pub fn labels(&self) -> Vec<bool> {
        self.bags.iter().map(|b| b.label).collect()
    }

    /// Total instances.
    pub fn instances(&self) -> usize {
        self.bags.iter().map(|b| b.len).sum()
    }

    /// Builds bags from instance rows `(bag id, instance label, features)`.
    fn from_rows(name: String, file: &Path, rows: Vec<(i64, bool, Vec<f32>)>) -> Result<Self> {
        let features = rows.first().map_or(0, |r| r.2.len());
        if features == 0 {
            return Err(GraphError::format(file, "no instances"));
        }
        let mut by_bag: BTreeMap<i64, Bag> = BTreeMap::new();
        for (id, label, f) in rows {
            let bag = by_bag.entry(id).or_insert_with(|| Bag {
                id,
                len: 0,
                features: Vec::new(),
                label: false,
            });
            bag.len += 1;
            bag.label |= label;
            bag.features.extend(f);
        }
        Ok(Self {
            name,
            features,
            bags: by_bag.into_values().collect(),
        })
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Reads the `mil` package's CSV layout; errors name the file, line and column.
pub fn load_csv(path: &Path) -> Result<MilDataset> {
    let text = std::fs::read_to_string(path).map_err(|e| GraphError::io(path, e))?;
    let mut rows = Vec::new();
    let mut width = None;
    for (ln, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = |message: String| GraphError::AtLine {
            path: path.to_path_buf(),
            line: ln + 1,
            message,
        };
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        if cols.len() < 3 {
            return Err(at(format!(
                "{} columns; expected label, bag id and at least one feature",
                cols.len()
            )));
        }
        match width {
            None => width = Some(cols.len()),
            Some(w) if w != cols.len() => {
                return Err(at(format!(
                    "{} columns, the first line has {w}",
                    cols.len()
                )));
            }
            _ => {}
        }
        let label = match cols[0] {
            "1" | "1.0" => true,
            "0" | "0.0" | "-1" | "-1.0" => false,
            other => {
                return Err(at(format!(
                    "column 1: bag label `{other}`, expected 0 or 1"
                )));
            }
        };
        let id: i64 = cols[1].parse().map_err(|_| {
            at(format!(
                "column 2: bag id `{}`, expected an integer",
                cols[1]
            ))
        })?;
        let f = cols[2..]
            .iter()
            .enumerate()
            .map(|(j, c)| {
                c.parse::<f32>()
                    .map_err(|_| at(format!("column {}: `{c}` is not a number", j + 3)))
            })
            .collect::<Result<Vec<f32>, _>>()?;
        rows.push((id, label, f));
    }
    MilDataset::from_rows(stem(path), path, rows)
}

/// Reads a PRTools MIL dataset (`fox.mat`, `tiger.mat`, `elephant.mat`): the variable `x`, a
/// `dataset` object with `data` (instances × features), `nlab` (1 = negative, 2 = positive, one
/// per instance, constant within a bag) and `ident.milbag` (the bag of each instance).
pub fn load_prtools_mat(name: &str, shown: &Path, bytes: &[u8]) -> Result<MilDataset> {
    use crate::mat::{MatFile, MatValue};
    let bad = |what: String| GraphError::format(shown, what);
    let mat = MatFile::parse(shown, bytes)?;
    let x = mat.get("x")?;
    let dense = |v: Option<&MatValue>, field: &str| match v {
        Some(MatValue::Dense { dims, data }) => Ok((dims.clone(), data.clone())),
        _ => Err(bad(format!(
            "expected a numeric field `{field}` in the dataset object `x`"
        ))),
    };
    let (dims, data) = dense(x.field("data"), "data")?;
    let (_, nlab) = dense(x.field("nlab"), "nlab")?;
    let (_, bags) = dense(
        x.field("ident").and_then(|i| i.field("milbag")),
        "ident.milbag",
    )?;
    let (n, f) = match dims.as_slice() {
        [n, f] => (*n, *f),
        other => {
            return Err(bad(format!(
                "`x.data`: expected 2 dimensions, found {other:?}"
            )));
        }
    };
    if nlab.len() != n || bags.len() != n {
        return Err(bad(format!(
            "{n} instances but {} labels and {} bag ids",
            nlab.len(),
            bags.len()
        )));
    }
    // MATLAB stores `data` column-major.
    let rows = (0..n)
        .map(|i| {
            let label = match nlab[i] as i64 {
                1 => Ok(false),
                2 => Ok(true),
                other => Err(bad(format!(
                    "instance {}: label {other}, expected 1 (negative) or 2 (positive)",
                    i + 1
                ))),
            }?;
            Ok((
                bags[i] as i64,
                label,
                (0..f).map(|j| data[j * n + i] as f32).collect(),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    MilDataset::from_rows(name.to_owned(), shown, rows)
}

/// Reads `member` (e.g. `fox.mat`) from a zip archive such as `fte.zip`.
pub fn load_prtools_zip(zip_path: &Path, member: &str) -> Result<MilDataset> {
    use std::io::Read;
    let file = std::fs::File::open(zip_path).map_err(|e| GraphError::io(zip_path, e))?;
    let shown = zip_path.join(member);
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|e| GraphError::format(zip_path, format!("not a zip archive: {e}")))?;
    let mut entry = archive
        .by_name(member)
        .map_err(|e| GraphError::format(&shown, e.to_string()))?;
    let mut bytes = Vec::new();
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| GraphError::format(&shown, format!("truncated or corrupt entry: {e}")))?;
    let name = member.trim_end_matches(".mat");
    load_prtools_mat(name, &shown, &bytes)
}
