//! Fast parsing of comma-separated numeric text files (the TU format), in parallel over
//! chunks of lines, with errors that name the file and the 1-based line.

use std::path::Path;

use rayon::prelude::*;

use crate::error::{GraphError, Result};

/// A parsed table: `rows × cols` values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table<T> {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<T>,
}

/// Reads a whole file, mapping errors to [`GraphError::io`].
pub(crate) fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| GraphError::io(path, e))
}

/// Splits `data` into line slices (without the `\n` and a trailing `\r`), dropping blank lines
/// at the end of the file only. Returns `(1-based line number, text)`.
fn lines(data: &[u8]) -> Vec<(usize, &[u8])> {
    let mut out: Vec<(usize, &[u8])> = data
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix(b"\r").unwrap_or(l)))
        .collect();
    while out
        .last()
        .is_some_and(|(_, l)| l.iter().all(u8::is_ascii_whitespace))
    {
        out.pop();
    }
    out
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let e = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(s, |p| p + 1);
    &b[s..e.max(s)]
}

/// Parses a signed decimal integer (no exponent).
fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as i64)?;
    }
    Some(if neg { -v } else { v })
}

/// A value type the tables hold.
pub(crate) trait Cell: Copy + Send + Sync + Default {
    /// What the error message says was expected.
    const EXPECTED: &'static str;
    fn parse(b: &[u8]) -> Option<Self>;
}

impl Cell for i64 {
    const EXPECTED: &'static str = "an integer";
    fn parse(b: &[u8]) -> Option<Self> {
        parse_i64(b).or_else(|| {
            // Some TU files write integers as floats ("1.0").
            let f: f64 = std::str::from_utf8(b).ok()?.parse().ok()?;
            (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
        })
    }
}

/// A feature value: finite. None of the formats read here writes NaN for a missing value, so a
/// NaN or an infinity (or a number beyond f32's range) is refused where it stands, by file and
/// line, instead of surfacing later as a non-finite loss.
impl Cell for f32 {
    const EXPECTED: &'static str = "a finite number (NaN and infinity are refused)";
    fn parse(b: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(b).ok()?;
        let v: f64 = s.parse().ok()?;
        Some(v as f32).filter(|v| v.is_finite())
    }
}

/// Parses a comma-separated table whose every line has the same number of columns
/// (`expected_cols`, or that of the first line when `None`).
pub(crate) fn parse_table<T: Cell>(
    path: &Path,
    data: &[u8],
    expected_cols: Option<usize>,
) -> Result<Table<T>> {
    let lines = lines(data);
    let cols = match expected_cols {
        Some(c) => c,
        None => lines
            .first()
            .map_or(0, |(_, l)| l.split(|&b| b == b',').count()),
    };
    const CHUNK: usize = 1 << 14;
    let chunks: Vec<Result<Vec<T>>> = lines
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut out = Vec::with_capacity(chunk.len() * cols);
            for &(no, line) in chunk {
                let mut found = 0;
                for field in line.split(|&b| b == b',') {
                    found += 1;
                    if found > cols {
                        continue;
                    }
                    let f = trim(field);
                    match T::parse(f) {
                        Some(v) => out.push(v),
                        None => {
                            return Err(GraphError::Parse {
                                path: path.to_path_buf(),
                                line: no,
                                expected: T::EXPECTED.to_string(),
                                found: String::from_utf8_lossy(f).into_owned(),
                            });
                        }
                    }
                }
                if found != cols {
                    return Err(GraphError::ColumnCount {
                        path: path.to_path_buf(),
                        line: no,
                        expected: cols,
                        found,
                    });
                }
            }
            Ok(out)
        })
        .collect();
    let mut values = Vec::with_capacity(lines.len() * cols);
    for c in chunks {
        values.extend(c?);
    }
    Ok(Table {
        rows: lines.len(),
        cols,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reports_lines() {
        let p = Path::new("x.txt");
        let t: Table<i64> = parse_table(p, b"1, 2\n-3,4\r\n\n", Some(2)).unwrap();
        assert_eq!(t.rows, 2);
        assert_eq!(t.values, vec![1, 2, -3, 4]);
        let e = parse_table::<i64>(p, b"1, 2\n3\n", Some(2)).unwrap_err();
        assert!(matches!(
            e,
            GraphError::ColumnCount {
                line: 2,
                expected: 2,
                found: 1,
                ..
            }
        ));
        let e = parse_table::<i64>(p, b"1, 2\n3, x\n", Some(2)).unwrap_err();
        assert!(matches!(e, GraphError::Parse { line: 2, .. }), "{e}");
        assert!(e.to_string().starts_with("x.txt:2: expected an integer"));
        let f: Table<f32> = parse_table(p, b" 1.5, -2e-1\n", None).unwrap();
        assert_eq!(f.values, vec![1.5, -0.2]);
        let e = parse_table::<i64>(p, b"1\n\n2\n", Some(1)).unwrap_err();
        assert!(matches!(e, GraphError::Parse { line: 2, .. }));
    }
}
