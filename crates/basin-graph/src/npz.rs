//! `.npz` archives: typed reading with casts and errors that name the file and the array, an
//! atomic writer, and the loader for node-anomaly graphs stored as npz (GADBench/PyGOD Reddit,
//! Tolokers: `node_features` `[N, F]`, `node_labels` `[N]` with 1 = anomaly, `edges` `[E, 2]`,
//! and optionally the published `train_masks`/`val_masks`/`test_masks` `[S, N]`).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2};
use npyz::npz::{NpzArchive, NpzWriter as RawWriter};
use npyz::{DType, Order, TypeChar, WriterBuilder};
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::{Csr, Graph, NodeDataset};
use basin_data::split::Split;

/// An array read from an npz: its shape and its values in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub struct NpzArray<T> {
    /// Shape.
    pub shape: Vec<usize>,
    /// Values, row-major.
    pub data: Vec<T>,
}

/// Element types the reader can cast to.
pub trait NpzElement: Copy + Default + 'static {
    /// Name for messages.
    const NAME: &'static str;
    /// Converts from `f64` (floats are stored through f64).
    fn from_f64(v: f64) -> Self;
    /// Converts from `i64` (integers and booleans).
    fn from_i64(v: i64) -> Self;
    /// Whether float sources are accepted (integer targets refuse non-integral values).
    fn accepts_float() -> bool;
}

macro_rules! element {
    ($t:ty, $name:expr, $float:expr) => {
        impl NpzElement for $t {
            const NAME: &'static str = $name;
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn accepts_float() -> bool {
                $float
            }
        }
    };
}
element!(f32, "f32", true);
element!(f64, "f64", true);
element!(i64, "i64", false);

impl NpzElement for bool {
    const NAME: &'static str = "bool";
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn accepts_float() -> bool {
        false
    }
}

/// Reads arrays from an `.npz` file.
pub struct NpzReader {
    path: PathBuf,
    archive: NpzArchive<BufReader<File>>,
    /// Bytes of the archive: no array can hold more than deflate's 1032:1 of them.
    file_len: u64,
}

impl NpzReader {
    /// Opens an archive.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| GraphError::io(path, e))?;
        let file_len = file.metadata().map_err(|e| GraphError::io(path, e))?.len();
        let archive = NpzArchive::new(BufReader::new(file))
            .map_err(|e| GraphError::format(path, format!("not a readable npz archive: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            archive,
            file_len,
        })
    }

    /// Refuses a member whose `.npy` header announces a shape whose element count overflows,
    /// before the npy reader multiplies it out (hostile headers; the size check against the
    /// file follows once the dtype is known).
    fn check_shape(&self, name: &str) -> Result<()> {
        use std::io::Read as _;
        let fmt = |m: String| GraphError::format(&self.path, format!("array `{name}`: {m}"));
        let file = File::open(&self.path).map_err(|e| GraphError::io(&self.path, e))?;
        let Ok(mut zip) = zip::ZipArchive::new(BufReader::new(file)) else {
            return Ok(()); // the npz reader reports it
        };
        let Ok(member) = zip.by_name(&format!("{name}.npy")) else {
            return Ok(());
        };
        let mut head = Vec::with_capacity(4096);
        member
            .take(4096)
            .read_to_end(&mut head)
            .map_err(|e| fmt(format!("cannot read the header: {e}")))?;
        let text = String::from_utf8_lossy(&head);
        let Some(open) = text
            .find("'shape'")
            .and_then(|i| text[i..].find('(').map(|j| i + j))
        else {
            return Ok(());
        };
        let Some(close) = text[open..].find(')').map(|j| open + j) else {
            return Ok(());
        };
        let mut count: u64 = 1;
        for dim in text[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            let d: u64 = dim
                .trim_end_matches('L')
                .parse()
                .map_err(|_| fmt(format!("bad dimension `{dim}` in the header's shape")))?;
            count = count.checked_mul(d).ok_or_else(|| {
                fmt(format!(
                    "the header's shape {} overflows a 64-bit element count",
                    &text[open..=close]
                ))
            })?;
        }
        Ok(())
    }

    /// The archive's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The array names in the archive.
    pub fn names(&self) -> Vec<String> {
        self.archive.array_names().map(String::from).collect()
    }

    /// Whether the archive holds `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.archive.array_names().any(|n| n == name)
    }

    /// Reads `name`, casting numeric data to `T` (integers to integer types only).
    pub fn read<T: NpzElement>(&mut self, name: &str) -> Result<NpzArray<T>> {
        let path = self.path.clone();
        let fmt = |m: String| GraphError::format(&path, format!("array `{name}`: {m}"));
        self.check_shape(name)?;
        let file = self
            .archive
            .by_name(name)
            .map_err(|e| fmt(e.to_string()))?
            .ok_or_else(|| fmt("missing".into()))?;
        let shape: Vec<usize> = file.shape().iter().map(|&s| s as usize).collect();
        let order = file.order();
        let DType::Plain(ts) = file.dtype() else {
            return Err(fmt("structured dtypes are not supported".into()));
        };
        let size = ts.num_bytes().unwrap_or(0);
        // A hostile header must be refused before anything is allocated for it: the announced
        // bytes may not overflow, nor exceed what deflate (at most 1032:1) can unpack from the file.
        shape
            .iter()
            .try_fold(size.max(1), |acc, &d| acc.checked_mul(d))
            .filter(|&b| (b as u64) <= self.file_len.saturating_mul(1032).saturating_add(4096))
            .ok_or_else(|| {
                fmt(format!(
                    "the header announces shape {shape:?} of {size}-byte values, more than this {}-byte file can hold",
                    self.file_len
                ))
            })?;
        let bad_read = |e: std::io::Error| fmt(format!("cannot read data: {e}"));
        // The values as `$t`, each converted by `$f`.
        macro_rules! read_as {
            ($t:ty, $f:expr) => {
                file.into_vec::<$t>()
                    .map_err(bad_read)?
                    .into_iter()
                    .map($f)
                    .collect::<Vec<T>>()
            };
        }
        macro_rules! ints {
            ($t:ty) => {
                read_as!($t, |v| T::from_i64(v as i64))
            };
        }
        let data: Vec<T> = match (ts.type_char(), size) {
            (TypeChar::Float, 4) | (TypeChar::Float, 8) if !T::accepts_float() => {
                return Err(fmt(format!(
                    "expected integers for {}, found float dtype {ts}",
                    T::NAME
                )));
            }
            (TypeChar::Float, 4) => read_as!(f32, |v| T::from_f64(v as f64)),
            (TypeChar::Float, 8) => read_as!(f64, T::from_f64),
            (TypeChar::Int, 1) => ints!(i8),
            (TypeChar::Int, 2) => ints!(i16),
            (TypeChar::Int, 4) => ints!(i32),
            (TypeChar::Int, 8) => ints!(i64),
            (TypeChar::Uint, 1) => ints!(u8),
            (TypeChar::Uint, 2) => ints!(u16),
            (TypeChar::Uint, 4) => ints!(u32),
            (TypeChar::Uint, 8) => ints!(u64),
            (TypeChar::Bool, 1) => read_as!(bool, |b| T::from_i64(b as i64)),
            _ => {
                return Err(fmt(format!(
                    "unsupported dtype {ts} (expected a numeric or boolean array)"
                )));
            }
        };
        let expected: usize = shape.iter().product();
        if data.len() != expected {
            return Err(fmt(format!(
                "shape {shape:?} needs {expected} values, found {}",
                data.len()
            )));
        }
        let data = if order == Order::Fortran && shape.len() > 1 {
            fortran_to_c(&data, &shape)
        } else {
            data
        };
        Ok(NpzArray { shape, data })
    }

    /// Reads a 1-D array.
    pub fn read1<T: NpzElement>(&mut self, name: &str) -> Result<Array1<T>> {
        let a = self.read::<T>(name)?;
        if a.shape.len() != 1 {
            return Err(GraphError::format(
                &self.path,
                format!(
                    "array `{name}`: expected 1 dimension, found shape {:?}",
                    a.shape
                ),
            ));
        }
        Ok(Array1::from_vec(a.data))
    }

    /// Reads a 2-D array, checking the column count if given.
    pub fn read2<T: NpzElement>(&mut self, name: &str, cols: Option<usize>) -> Result<Array2<T>> {
        let a = self.read::<T>(name)?;
        let shape_ok = a.shape.len() == 2 && cols.is_none_or(|c| a.shape[1] == c);
        if !shape_ok {
            return Err(GraphError::format(
                &self.path,
                format!(
                    "array `{name}`: expected shape [rows, {}], found {:?}",
                    cols.map_or("cols".to_string(), |c| c.to_string()),
                    a.shape
                ),
            ));
        }
        Array2::from_shape_vec((a.shape[0], a.shape[1]), a.data)
            .map_err(|e| GraphError::format(&self.path, format!("array `{name}`: {e}")))
    }
}

fn fortran_to_c<T: Copy + Default>(data: &[T], shape: &[usize]) -> Vec<T> {
    let n = data.len();
    let mut out = vec![T::default(); n];
    let d = shape.len();
    let mut idx = vec![0usize; d];
    for (f, &v) in data.iter().enumerate() {
        // Fortran linear index f → multi-index (first axis fastest).
        let mut rem = f;
        for (a, slot) in idx.iter_mut().enumerate() {
            *slot = rem % shape[a];
            rem /= shape[a];
        }
        let mut c = 0;
        for a in 0..d {
            c = c * shape[a] + idx[a];
        }
        out[c] = v;
    }
    out
}

/// Writes an `.npz` atomically (to a temporary file renamed into place on [`finish`]).
///
/// [`finish`]: NpzWriter::finish
pub struct NpzWriter {
    path: PathBuf,
    tmp: PathBuf,
    inner: RawWriter<std::io::BufWriter<File>>,
}

impl NpzWriter {
    /// Starts writing `path`.
    pub fn create(path: &Path) -> Result<Self> {
        let tmp = path.with_extension(format!("npz.{}.partial", std::process::id()));
        let file = File::create(&tmp).map_err(|e| GraphError::io(&tmp, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            inner: RawWriter::new(std::io::BufWriter::new(file)),
            tmp,
        })
    }

    fn add<T: npyz::AutoSerialize + Copy>(
        &mut self,
        name: &str,
        shape: &[usize],
        data: &[T],
    ) -> Result<()> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(GraphError::invalid(
                format!("npz array `{name}`"),
                format!("shape {shape:?} needs {n} values, got {}", data.len()),
            ));
        }
        let io = |e: std::io::Error| GraphError::io(&self.tmp, e);
        let shape: Vec<u64> = shape.iter().map(|&s| s as u64).collect();
        let opts = npyz::zip::write::FileOptions::default()
            .compression_method(npyz::zip::CompressionMethod::Stored);
        let mut w = self
            .inner
            .array::<T>(name, opts)
            .map_err(|e| GraphError::io(&self.tmp, e))?
            .default_dtype()
            .shape(&shape)
            .begin_nd()
            .map_err(io)?;
        w.extend(data.iter().copied()).map_err(io)?;
        w.finish().map_err(io)
    }

    /// Adds an `f32` array.
    pub fn add_f32(&mut self, name: &str, shape: &[usize], data: &[f32]) -> Result<()> {
        self.add(name, shape, data)
    }

    /// Adds an `f64` array.
    pub fn add_f64(&mut self, name: &str, shape: &[usize], data: &[f64]) -> Result<()> {
        self.add(name, shape, data)
    }

    /// Adds an `i64` array.
    pub fn add_i64(&mut self, name: &str, shape: &[usize], data: &[i64]) -> Result<()> {
        self.add(name, shape, data)
    }

    /// Adds a boolean array.
    pub fn add_bool(&mut self, name: &str, shape: &[usize], data: &[bool]) -> Result<()> {
        self.add(name, shape, data)
    }

    /// Finishes the archive and moves it into place.
    pub fn finish(self) -> Result<()> {
        use std::io::Write as _;
        let Self {
            path,
            tmp,
            mut inner,
        } = self;
        let mut file = inner
            .zip_writer()
            .finish()
            .map_err(|e| GraphError::format(&tmp, format!("cannot finish the archive: {e}")))?;
        file.flush().map_err(|e| GraphError::io(&tmp, e))?;
        drop(file);
        drop(inner);
        std::fs::rename(&tmp, &path).map_err(|e| GraphError::io(&path, e))
    }
}

/// How self loops of a loaded node-level graph are treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelfLoops {
    /// As stored.
    #[default]
    Keep,
    /// Removed.
    Remove,
    /// One on every node (BWGNN/ET add them for Yelp and Amazon).
    Add,
}

/// Options of the node-level loaders.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeLoadOptions {
    /// Make the graph undirected (`A ∪ Aᵀ`, duplicates merged). Tolokers stores each edge
    /// once, Reddit both directions.
    pub symmetrize: bool,
    /// Self-loop policy.
    pub self_loops: SelfLoops,
}

impl Default for NodeLoadOptions {
    fn default() -> Self {
        Self {
            symmetrize: true,
            self_loops: SelfLoops::Keep,
        }
    }
}

impl NodeLoadOptions {
    /// Applies the options to an adjacency.
    pub fn apply(&self, a: Csr) -> Csr {
        let a = if self.symmetrize { a.symmetrized() } else { a };
        match self.self_loops {
            SelfLoops::Keep => a,
            SelfLoops::Remove => a.without_self_loops(),
            SelfLoops::Add => a.with_self_loops(),
        }
    }
}

/// Builds a CSR from an `[E, 2]` (or `[2, E]` when `transposed`) integer edge array, checking
/// ids against `n`.
pub(crate) fn edges_to_csr(path: &Path, array: &str, e: &NpzArray<i64>, n: usize) -> Result<Csr> {
    let (rows, transposed) = match e.shape.as_slice() {
        [r, 2] => (*r, false),
        [2, r] => (*r, true),
        s => {
            return Err(GraphError::format(
                path,
                format!("array `{array}`: expected shape [E, 2] or [2, E], found {s:?}"),
            ));
        }
    };
    let at = |i: usize, side: usize| {
        if transposed {
            e.data[side * rows + i]
        } else {
            e.data[2 * i + side]
        }
    };
    let mut src = Vec::with_capacity(rows);
    let mut dst = Vec::with_capacity(rows);
    for i in 0..rows {
        for side in 0..2 {
            let v = at(i, side);
            if v < 0 || v >= n as i64 {
                let what = format!("node id in array `{array}` (row)");
                let range = (0, n as i64 - 1);
                return Err(GraphError::out_of_range(path, i + 1, what, v, range));
            }
        }
        src.push(at(i, 0) as u32);
        dst.push(at(i, 1) as u32);
    }
    Ok(Csr::from_edges(n, &src, &dst)?.0)
}

/// Converts integer labels to classes `0..C` (C = max + 1), refusing negative values.
pub(crate) fn labels_to_classes(
    path: &Path,
    array: &str,
    l: &[i64],
) -> Result<(Vec<usize>, usize)> {
    if let Some((i, &v)) = l.iter().enumerate().find(|(_, v)| **v < 0) {
        let what = format!("label in array `{array}` (row)");
        return Err(GraphError::out_of_range(
            path,
            i + 1,
            what,
            v,
            (0, i64::MAX),
        ));
    }
    let c = l.iter().copied().max().map_or(0, |m| m as usize + 1).max(2);
    Ok((l.iter().map(|&v| v as usize).collect(), c))
}

/// Loads a node-anomaly graph from an npz (see the module docs).
pub fn load_anomaly_npz(path: &Path, opts: &NodeLoadOptions) -> Result<NodeDataset> {
    let mut z = NpzReader::open(path)?;
    let x = z.read2::<f32>("node_features", None)?;
    let n = x.nrows();
    let y = z.read1::<i64>("node_labels")?;
    let what = "values in `node_labels` (one per row of `node_features`)";
    GraphError::check_count(path, what, n, y.len())?;
    let e = z.read::<i64>("edges")?;
    let adjacency = opts.apply(edges_to_csr(path, "edges", &e, n)?);
    let (labels, num_classes) =
        labels_to_classes(path, "node_labels", y.as_slice().unwrap_or(&[]))?;
    let mut official_splits = Vec::new();
    if z.contains("train_masks") {
        let mut masks = Vec::new();
        for name in ["train_masks", "val_masks", "test_masks"] {
            let m = z.read::<bool>(name)?;
            let (s, cols) = match m.shape.as_slice() {
                [s, c] => (*s, *c),
                [c] => (1, *c),
                sh => {
                    return Err(GraphError::format(
                        path,
                        format!("array `{name}`: expected shape [splits, N], found {sh:?}"),
                    ));
                }
            };
            GraphError::check_count(path, format!("columns in `{name}` (one per node)"), n, cols)?;
            masks.push((s, m.data));
        }
        let s = masks[0].0;
        if masks.iter().any(|(k, _)| *k != s) {
            return Err(GraphError::format(
                path,
                "train/val/test masks hold different numbers of splits",
            ));
        }
        for i in 0..s {
            let ids = |m: &Vec<bool>| -> Vec<u32> {
                (0..n).filter(|&v| m[i * n + v]).map(|v| v as u32).collect()
            };
            let split = Split::new(ids(&masks[0].1), ids(&masks[1].1), ids(&masks[2].1));
            split
                .check_disjoint()
                .map_err(|e| GraphError::format(path, format!("published split {i}: {e}")))?;
            official_splits.push(split);
        }
    }
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("npz")
        .to_string();
    let ds = NodeDataset {
        name,
        graph: Graph::new(adjacency, x)?,
        relations: Vec::new(),
        labels,
        num_classes,
        labelled: (0..n as u32).collect(),
        official_splits,
    };
    ds.validate()?;
    Ok(ds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_order_is_transposed() {
        // 2×3 matrix [[1,2,3],[4,5,6]] stored column-major.
        let f = [1, 4, 2, 5, 3, 6];
        assert_eq!(fortran_to_c(&f, &[2, 3]), vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn write_then_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npz");
        let mut w = NpzWriter::create(&p).unwrap();
        w.add_f32("x", &[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        w.add_i64("e", &[1, 2], &[0, 1]).unwrap();
        w.add_bool("m", &[3], &[true, false, true]).unwrap();
        assert!(w.add_f64("bad", &[3], &[1.0]).is_err());
        w.finish().unwrap();
        let mut r = NpzReader::open(&p).unwrap();
        assert_eq!(r.read2::<f32>("x", Some(2)).unwrap()[[1, 0]], 3.0);
        assert_eq!(r.read2::<f64>("x", Some(2)).unwrap()[[1, 1]], 4.0);
        assert!(
            r.read::<i64>("x").is_err(),
            "floats are not silently truncated"
        );
        assert_eq!(r.read1::<i64>("m").unwrap().to_vec(), vec![1, 0, 1]);
        let e = r.read::<f32>("nope").unwrap_err();
        assert!(e.to_string().contains("array `nope`: missing"), "{e}");
    }
}
