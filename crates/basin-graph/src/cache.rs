//! Positional encodings of a whole dataset: computed in parallel, written to and read from an
//! npz, and cached on disk under a key that hashes the graphs and the settings.
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

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Csr;
use crate::error::{GraphError, Result};
use crate::laplacian::{LaplacianPe, PeConfig, laplacian_pe_many};
use crate::npz::{NpzReader, NpzWriter};

/// Version of the encoding algorithm; bump it when results change so old caches are ignored.
const ALGORITHM: &str = "basin-graph laplacian-pe v1";

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
    /// Computes the encodings of `graphs` in parallel.
    pub fn compute(graphs: &[&Csr], cfg: &PeConfig) -> Result<Self> {
        Ok(Self {
            k: cfg.k,
            cls: cfg.cls,
            encodings: laplacian_pe_many(graphs, cfg)?,
        })
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

/// Hex SHA-256 of the graphs' structure and the settings that change the encodings.
pub fn fingerprint(graphs: &[&Csr], cfg: &PeConfig) -> String {
    let mut h = Sha256::new();
    h.update(ALGORITHM.as_bytes());
    // Only fields that change results (not the solver tolerance's bookkeeping order).
    let settings = serde_json::to_string(cfg).unwrap_or_default();
    h.update(settings.as_bytes());
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

/// A directory of cached dataset encodings, one npz per fingerprint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeCache {
    dir: PathBuf,
}

impl PeCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the encodings for `key` live.
    pub fn path_for(&self, key: &str) -> PathBuf {
        self.dir.join(format!("pe-{key}.npz"))
    }

    /// The cached encodings of `graphs` under `cfg`, computing and storing them on a miss.
    /// Returns them and whether they came from the cache. A cached file that cannot be read
    /// or does not fit the graphs is recomputed and replaced.
    pub fn load_or_compute(&self, graphs: &[&Csr], cfg: &PeConfig) -> Result<(DatasetPe, bool)> {
        let key = fingerprint(graphs, cfg);
        let path = self.path_for(&key);
        if path.is_file()
            && let Ok(pe) = DatasetPe::read_npz(&path)
            && pe.k == cfg.k
            && pe.cls == cfg.cls
            && pe.encodings.len() == graphs.len()
            && pe
                .encodings
                .iter()
                .zip(graphs)
                .all(|(p, g)| p.vectors.nrows() == g.num_nodes() + usize::from(cfg.cls))
        {
            return Ok((pe, true));
        }
        let pe = DatasetPe::compute(graphs, cfg)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| GraphError::io(&self.dir, e))?;
        pe.write_npz(&path, PeLayout::Packed)?;
        Ok((pe, false))
    }
}
