//! Positional encodings of a whole dataset: computed in parallel, written to and read from an
//! npz ([`DatasetPe`], what `basin data pe` exports), and cached on disk under a key that hashes
//! the graphs and the settings ([`EncodingCache`], for every kind of per-graph encoding).
//!
//! The npz layouts (what `basin data pe` writes; readable with `numpy.load`):
//!
//! - **packed** (default): `pe` `f32 [ΣN', k]`, the rows of graph `g` being
//!   `offsets[g]..offsets[g + 1]` of `offsets` `i64 [G + 1]`; `eigenvalues` `f64 [G, k]` (NaN
//!   where a graph has fewer than `k` non-trivial eigenvectors, whose `pe` columns are zero);
//!   `k` and `cls` `i64 [1]` (`cls = 1`: row 0 of each graph is the CLS token, `N' = N + 1`).
//! - **per-graph**: `pe_<g>` `f32 [N'_g, k]` and `eigenvalues_<g>` `f64 [k]` for each graph,
//!   plus `k` and `cls`.

use std::path::{Path, PathBuf};

use ndarray::Array2;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Csr;
use crate::error::{GraphError, Result};
use crate::laplacian::{LaplacianPe, PeConfig, laplacian_pe_many};
use crate::npz::{NpzReader, NpzWriter};
use crate::posenc::GpsLaplacian;

/// Version of the encodings and their file; bump it when results change so old caches are ignored.
const ALGORITHM: &str = "basin-graph encodings v2";

/// How `pe` arrays are laid out in an npz.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeLayout {
    /// One packed array with offsets.
    #[default]
    Packed,
    /// One array per graph.
    PerGraph,
}

/// The encodings of every graph of a dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct DatasetPe {
    /// Eigenvectors per graph.
    pub k: usize,
    /// Whether row 0 of each graph is CLS.
    pub cls: bool,
    /// One encoding per graph.
    pub encodings: Vec<LaplacianPe>,
}

impl DatasetPe {
    /// The encodings of `graphs`, computed in parallel or read from `cache`; also whether they
    /// came from the cache.
    pub fn compute(graphs: &[&Csr], cfg: &PeConfig, cache: &EncodingCache) -> Result<(Self, bool)> {
        let (encodings, cached) = cache.laplacian_pe(graphs, cfg)?;
        Ok((
            Self {
                k: cfg.k,
                cls: cfg.cls,
                encodings,
            },
            cached,
        ))
    }

    /// Writes an npz in the given layout (see the module docs).
    pub fn write_npz(&self, path: &Path, layout: PeLayout) -> Result<()> {
        let mut w = NpzWriter::create(path)?;
        w.add_i64("k", &[1], &[self.k as i64])?;
        w.add_i64("cls", &[1], &[i64::from(self.cls)])?;
        let values = |p: &LaplacianPe| -> Vec<f64> {
            (0..self.k)
                .map(|j| p.values.get(j).copied().unwrap_or(f64::NAN))
                .collect()
        };
        match layout {
            PeLayout::Packed => {
                let rows: usize = self.encodings.iter().map(|p| p.vectors.nrows()).sum();
                let mut pe = Vec::with_capacity(rows * self.k);
                let mut offsets = Vec::with_capacity(self.encodings.len() + 1);
                let mut eig = Vec::with_capacity(self.encodings.len() * self.k);
                offsets.push(0i64);
                for p in &self.encodings {
                    pe.extend(p.vectors.iter().copied());
                    offsets.push(offsets[offsets.len() - 1] + p.vectors.nrows() as i64);
                    eig.extend(values(p));
                }
                w.add_f32("pe", &[rows, self.k], &pe)?;
                w.add_i64("offsets", &[offsets.len()], &offsets)?;
                w.add_f64("eigenvalues", &[self.encodings.len(), self.k], &eig)?;
            }
            PeLayout::PerGraph => {
                for (g, p) in self.encodings.iter().enumerate() {
                    let data: Vec<f32> = p.vectors.iter().copied().collect();
                    w.add_f32(&format!("pe_{g}"), &[p.vectors.nrows(), self.k], &data)?;
                    w.add_f64(&format!("eigenvalues_{g}"), &[self.k], &values(p))?;
                }
            }
        }
        w.finish()
    }

    /// Reads an npz written by [`Self::write_npz`] (either layout).
    pub fn read_npz(path: &Path) -> Result<Self> {
        let mut z = NpzReader::open(path)?;
        let k = *z.read1::<i64>("k")?.first().unwrap_or(&0) as usize;
        let cls = *z.read1::<i64>("cls")?.first().unwrap_or(&0) != 0;
        let mut encodings = Vec::new();
        let unpack = |vals: &[f64]| -> Vec<f64> {
            vals.iter().copied().take_while(|v| !v.is_nan()).collect()
        };
        if z.contains("pe") {
            let pe = z.read2::<f32>("pe", Some(k))?;
            let off = z.read1::<i64>("offsets")?;
            let eig = z.read2::<f64>("eigenvalues", Some(k))?;
            let g = off.len().saturating_sub(1);
            let ok = off.first() == Some(&0)
                && off.last().copied() == Some(pe.nrows() as i64)
                && off.iter().zip(off.iter().skip(1)).all(|(a, b)| a <= b)
                && eig.nrows() == g;
            if !ok {
                return Err(GraphError::format(
                    path,
                    "array `offsets`: expected non-decreasing offsets from 0 to the rows of `pe`, one per graph + 1",
                ));
            }
            for i in 0..g {
                let (a, b) = (off[i] as usize, off[i + 1] as usize);
                encodings.push(LaplacianPe {
                    vectors: pe.slice(ndarray::s![a..b, ..]).to_owned(),
                    values: unpack(eig.row(i).as_slice().unwrap_or(&[])),
                });
            }
        } else {
            for g in 0.. {
                let name = format!("pe_{g}");
                if !z.contains(&name) {
                    break;
                }
                let vectors = z.read2::<f32>(&name, Some(k))?;
                let vals = z.read1::<f64>(&format!("eigenvalues_{g}"))?;
                encodings.push(LaplacianPe {
                    vectors,
                    values: unpack(vals.as_slice().unwrap_or(&[])),
                });
            }
        }
        Ok(Self { k, cls, encodings })
    }
}

/// One graph's encoding as the cache stores it: a matrix of `f32` rows and a vector of values
/// (stored as `f64`, so `f32` values come back bit for bit).
pub trait Encoding: Sized {
    /// The rows (one per node, or per node and CLS).
    fn rows(&self) -> &Array2<f32>;
    /// The values beside the rows (eigenvalues; empty when there are none).
    fn values(&self) -> Vec<f64>;
    /// The encoding rebuilt from what [`Self::rows`] and [`Self::values`] returned.
    fn from_parts(rows: Array2<f32>, values: Vec<f64>) -> Self;
}

impl Encoding for LaplacianPe {
    fn rows(&self) -> &Array2<f32> {
        &self.vectors
    }
    fn values(&self) -> Vec<f64> {
        self.values.clone()
    }
    fn from_parts(vectors: Array2<f32>, values: Vec<f64>) -> Self {
        Self { vectors, values }
    }
}

impl Encoding for GpsLaplacian {
    fn rows(&self) -> &Array2<f32> {
        &self.vectors
    }
    fn values(&self) -> Vec<f64> {
        self.values.iter().map(|&v| f64::from(v)).collect()
    }
    fn from_parts(vectors: Array2<f32>, values: Vec<f64>) -> Self {
        Self {
            vectors,
            values: values.into_iter().map(|v| v as f32).collect(),
        }
    }
}

/// Random-walk encodings ([`crate::posenc::rwse`]): rows only.
impl Encoding for Array2<f32> {
    fn rows(&self) -> &Array2<f32> {
        self
    }
    fn values(&self) -> Vec<f64> {
        Vec::new()
    }
    fn from_parts(rows: Array2<f32>, _: Vec<f64>) -> Self {
        rows
    }
}

/// Hex SHA-256 of the graphs' structure, the encoding's `kind` and the `settings` that change
/// it (serialised as JSON): the cache key.
pub fn fingerprint(graphs: &[&Csr], kind: &str, settings: &impl Serialize) -> String {
    let mut h = Sha256::new();
    h.update(ALGORITHM.as_bytes());
    h.update(kind.as_bytes());
    h.update(
        serde_json::to_string(settings)
            .unwrap_or_default()
            .as_bytes(),
    );
    h.update((graphs.len() as u64).to_le_bytes());
    for g in graphs {
        h.update((g.num_nodes() as u64).to_le_bytes());
        for &p in g.indptr() {
            h.update((p as u64).to_le_bytes());
        }
        for &c in g.indices() {
            h.update(c.to_le_bytes());
        }
        if let Some(w) = g.weights() {
            for x in w {
                h.update(x.to_le_bytes());
            }
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A folder of per-dataset encodings (Laplacian eigenvectors, RWSE), one npz per
/// [`fingerprint`], so a table or run that loads a dataset again reads them instead of
/// recomputing them (peptides-func's LapPE statistics take about a minute on two cores).
///
/// Files are written atomically (a temporary file renamed into place), so two processes that
/// miss at once both compute and the last rename wins with identical contents; a file that
/// cannot be read or does not fit is recomputed and replaced; a folder that cannot be written
/// (a read-only cache) costs the recomputation only, with a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodingCache {
    dir: Option<PathBuf>,
}

impl EncodingCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: Some(dir.into()),
        }
    }

    /// No cache: every call computes.
    pub fn off() -> Self {
        Self { dir: None }
    }

    /// The user's cache ([`basin_data::datadir::cache_dir`]: `BASIN_CACHE_DIR`, else
    /// `~/.cache/basin/encodings`; `BASIN_CACHE_DIR=off` turns it off).
    pub fn user() -> Self {
        Self {
            dir: basin_data::datadir::cache_dir(),
        }
    }

    /// The cache folder, if caching is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Where the encodings of `kind` under `key` live, if caching is on.
    pub fn path_for(&self, kind: &str, key: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{kind}-{key}.npz")))
    }

    /// ET's Laplacian encodings of `graphs` ([`laplacian_pe_many`]), cached; also whether they
    /// came from the cache.
    pub fn laplacian_pe(
        &self,
        graphs: &[&Csr],
        cfg: &PeConfig,
    ) -> Result<(Vec<LaplacianPe>, bool)> {
        self.load_or_compute("laplacian-pe", graphs, cfg, || {
            laplacian_pe_many(graphs, cfg)
        })
    }

    /// The GraphGPS LapPE statistics of `graphs` with `k` frequencies
    /// ([`crate::posenc::gps_laplacian_many`]), cached.
    pub fn gps_laplacian(&self, graphs: &[&Csr], k: usize) -> Result<(Vec<GpsLaplacian>, bool)> {
        self.load_or_compute("gps-laplacian", graphs, &k, || {
            crate::posenc::gps_laplacian_many(graphs, k)
        })
    }

    /// The random-walk encodings of `graphs` over `steps` walk lengths
    /// ([`crate::posenc::rwse_many`]), cached.
    pub fn rwse(&self, graphs: &[&Csr], steps: usize) -> Result<(Vec<Array2<f32>>, bool)> {
        self.load_or_compute("rwse", graphs, &steps, || {
            Ok(crate::posenc::rwse_many(graphs, steps))
        })
    }

    /// The cached encodings (`kind` under `settings`) of `graphs`, `compute`d and stored on a
    /// miss; also whether they came from the cache. `compute` must return one encoding per
    /// graph.
    pub fn load_or_compute<T: Encoding>(
        &self,
        kind: &str,
        graphs: &[&Csr],
        settings: &impl Serialize,
        compute: impl FnOnce() -> Result<Vec<T>>,
    ) -> Result<(Vec<T>, bool)> {
        let Some(path) = self.path_for(kind, &fingerprint(graphs, kind, settings)) else {
            return Ok((compute()?, false));
        };
        if path.is_file()
            && let Ok(found) = read_encodings::<T>(&path)
            && found.len() == graphs.len()
        {
            return Ok((found, true));
        }
        let computed = compute()?;
        let stored = self
            .dir
            .as_ref()
            .map_or(Ok(()), |d| {
                std::fs::create_dir_all(d).map_err(|e| GraphError::io(d, e))
            })
            .and_then(|()| write_encodings(&path, &computed));
        if let Err(e) = stored {
            eprintln!("warning: encodings not cached ({e}); they will be computed again next time");
        }
        Ok((computed, false))
    }
}

/// Writes per-graph encodings: `rows` `f32 [ΣN, c]`, `row_offsets` `i64 [G + 1]`, `values`
/// `f64 [ΣV]`, `value_offsets` `i64 [G + 1]`.
fn write_encodings<T: Encoding>(path: &Path, encodings: &[T]) -> Result<()> {
    let cols = encodings.first().map_or(0, |e| e.rows().ncols());
    let (mut rows, mut values) = (Vec::new(), Vec::new());
    let (mut row_off, mut value_off) = (vec![0i64], vec![0i64]);
    for e in encodings {
        if e.rows().ncols() != cols {
            return Err(GraphError::format(
                path,
                "encodings of one dataset must have the same number of columns",
            ));
        }
        rows.extend(e.rows().iter().copied());
        values.extend(e.values());
        row_off.push(row_off[row_off.len() - 1] + e.rows().nrows() as i64);
        value_off.push(values.len() as i64);
    }
    let mut w = NpzWriter::create(path)?;
    w.add_f32("rows", &[rows.len() / cols.max(1), cols], &rows)?;
    w.add_i64("row_offsets", &[row_off.len()], &row_off)?;
    w.add_f64("values", &[values.len()], &values)?;
    w.add_i64("value_offsets", &[value_off.len()], &value_off)?;
    w.finish()
}

/// Reads what [`write_encodings`] wrote, checking the offsets against the arrays.
fn read_encodings<T: Encoding>(path: &Path) -> Result<Vec<T>> {
    let mut z = NpzReader::open(path)?;
    let rows = z.read2::<f32>("rows", None)?;
    let row_off = z.read1::<i64>("row_offsets")?;
    let values = z.read1::<f64>("values")?;
    let value_off = z.read1::<i64>("value_offsets")?;
    let fits = |off: &ndarray::Array1<i64>, end: usize| {
        off.first() == Some(&0)
            && off.last().copied() == Some(end as i64)
            && off.iter().zip(off.iter().skip(1)).all(|(a, b)| a <= b)
    };
    if !fits(&row_off, rows.nrows())
        || !fits(&value_off, values.len())
        || row_off.len() != value_off.len()
    {
        return Err(GraphError::format(
            path,
            "offsets that do not fit the arrays",
        ));
    }
    Ok((0..row_off.len() - 1)
        .map(|g| {
            let (a, b) = (row_off[g] as usize, row_off[g + 1] as usize);
            let (c, d) = (value_off[g] as usize, value_off[g + 1] as usize);
            T::from_parts(
                rows.slice(ndarray::s![a..b, ..]).to_owned(),
                values.slice(ndarray::s![c..d]).to_vec(),
            )
        })
        .collect())
}
