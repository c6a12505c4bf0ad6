//! MATLAB level-5 `.mat` files (v5/v6/v7, including `miCOMPRESSED`; not the HDF5-based v7.3)
//! and the CARE-GNN fraud graphs stored in them (YelpChi.mat, Amazon.mat: sparse `homo` and
//! `net_*` relation adjacencies, sparse or dense `features`, dense `label`).
//!
//! A small reader of the published format (MathWorks, "MAT-File Format", level 5): a 128-byte
//! header whose last two bytes give the byte order, then tagged data elements. Numeric and
//! sparse arrays are decoded; other classes (cells, structs, chars, objects) are listed but
//! not decoded. Written here rather than taken from a crate because the one pure-Rust reader
//! with sparse support (`matrw`) rejects scipy's header text: it requires the text to begin
//! `MATLAB 5.0 MAT-file, `, which the format leaves free.
//!
//! Amazon's first 3305 nodes are unlabelled (CARE-GNN `train.py`: "0-3304 are unlabeled
//! nodes"; DGL's docs); [`FraudConfig::amazon`] leaves them out of `labelled`, which BWGNN's
//! split protocol uses.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::npz::NodeLoadOptions;
use crate::{Csr, Graph, NodeDataset, Relation};

/// The most values a sparse matrix is densified to (2²⁷ `f32`, 512 MiB; the largest real
/// case, YelpChi's features, is 45,954 × 32).
pub const MAX_DENSE_CELLS: usize = 1 << 27;

/// A decoded MATLAB array.
#[derive(Clone, Debug, PartialEq)]
pub enum MatValue {
    /// A dense numeric or logical array: dimensions and values in column-major order.
    Dense {
        /// MATLAB dimensions (at least two).
        dims: Vec<usize>,
        /// Values, column-major, as f64.
        data: Vec<f64>,
    },
    /// A sparse matrix in compressed sparse column form.
    Sparse {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Column pointers (`cols + 1`).
        jc: Vec<usize>,
        /// Row index of each stored value.
        ir: Vec<usize>,
        /// Stored values (1.0 for logical matrices).
        data: Vec<f64>,
    },
    /// A struct array or an (old-style) object such as a PRTools `dataset`: its class name
    /// (objects only), dimensions, and for each field the values of every element
    /// (column-major).
    Struct {
        /// MATLAB class name of an object, `None` for a plain struct.
        class_name: Option<String>,
        /// Dimensions of the struct array.
        dims: Vec<usize>,
        /// Field names and the field's value in each element.
        fields: Vec<(String, Vec<MatValue>)>,
    },
    /// An array of a class this reader does not decode (the MATLAB class number).
    Other {
        /// mxCLASS number.
        class: u8,
    },
}

impl MatValue {
    /// The value of `field` in a 1×1 struct or object.
    pub fn field(&self, field: &str) -> Option<&MatValue> {
        match self {
            Self::Struct { fields, .. } => fields
                .iter()
                .find(|(n, _)| n == field)
                .and_then(|(_, v)| v.first()),
            _ => None,
        }
    }
}

/// The variables of a `.mat` file, by name.
#[derive(Clone, Debug, PartialEq)]
pub struct MatFile {
    /// The file read.
    pub path: PathBuf,
    /// Its variables.
    pub vars: BTreeMap<String, MatValue>,
}

const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT16: u32 = 3;
const MI_UINT16: u32 = 4;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_SINGLE: u32 = 7;
const MI_DOUBLE: u32 = 9;
const MI_INT64: u32 = 12;
const MI_UINT64: u32 = 13;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;
const MX_STRUCT: u8 = 2;
const MX_OBJECT: u8 = 3;
const MX_SPARSE: u8 = 5;
const MX_NUMERIC: std::ops::RangeInclusive<u8> = 6..=15;

struct Reader<'a> {
    path: &'a Path,
    big: bool,
}

impl Reader<'_> {
    fn err(&self, at: usize, m: impl std::fmt::Display) -> GraphError {
        GraphError::format(self.path, format!("at byte {at}: {m}"))
    }

    fn u32(&self, b: &[u8], at: usize) -> Result<u32> {
        let s: [u8; 4] = b
            .get(at..at + 4)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| self.err(at, "unexpected end of data (expected a 4-byte field)"))?;
        Ok(if self.big {
            u32::from_be_bytes(s)
        } else {
            u32::from_le_bytes(s)
        })
    }

    /// Reads one data element at `at`: `(type, payload, next offset)`, the next offset
    /// rounded up to 8 bytes as level-5 elements are padded.
    fn element<'b>(&self, b: &'b [u8], at: usize) -> Result<(u32, &'b [u8], usize)> {
        let first = self.u32(b, at)?;
        if first >> 16 != 0 {
            // Small data element: 2-byte size, 2-byte type, 4 bytes of data.
            let (ty, n) = (first & 0xffff, (first >> 16) as usize);
            if n > 4 {
                return Err(self.err(at, format!("small element of {n} bytes (at most 4)")));
            }
            let data = b
                .get(at + 4..at + 4 + n)
                .ok_or_else(|| self.err(at, "unexpected end of data in a small element"))?;
            return Ok((ty, data, at + 8));
        }
        let n = self.u32(b, at + 4)? as usize;
        let start = at + 8;
        let data = b.get(start..start + n).ok_or_else(|| {
            self.err(
                at,
                format!(
                    "element declares {n} bytes but only {} remain",
                    b.len().saturating_sub(start)
                ),
            )
        })?;
        let next = start + n.div_ceil(8) * 8;
        Ok((first, data, next))
    }

    fn numbers(&self, ty: u32, d: &[u8], at: usize) -> Result<Vec<f64>> {
        macro_rules! conv {
            ($t:ty, $w:expr) => {
                d.chunks_exact($w)
                    .map(|c| {
                        let a: [u8; $w] = c.try_into().unwrap_or([0; $w]);
                        (if self.big {
                            <$t>::from_be_bytes(a)
                        } else {
                            <$t>::from_le_bytes(a)
                        }) as f64
                    })
                    .collect()
            };
        }
        Ok(match ty {
            MI_INT8 => d.iter().map(|&x| x as i8 as f64).collect(),
            MI_UINT8 => d.iter().map(|&x| x as f64).collect(),
            MI_INT16 => conv!(i16, 2),
            MI_UINT16 => conv!(u16, 2),
            MI_INT32 => conv!(i32, 4),
            MI_UINT32 => conv!(u32, 4),
            MI_SINGLE => conv!(f32, 4),
            MI_DOUBLE => conv!(f64, 8),
            MI_INT64 => conv!(i64, 8),
            MI_UINT64 => conv!(u64, 8),
            t => return Err(self.err(at, format!("expected a numeric data type, found type {t}"))),
        })
    }

    fn indices(&self, ty: u32, d: &[u8], at: usize, what: &str) -> Result<Vec<usize>> {
        let v = self.numbers(ty, d, at)?;
        v.into_iter()
            .map(|x| {
                if x >= 0.0 && x.fract() == 0.0 {
                    Ok(x as usize)
                } else {
                    Err(self.err(
                        at,
                        format!("{what}: expected a non-negative index, found {x}"),
                    ))
                }
            })
            .collect()
    }

    /// Decodes an miMATRIX payload into `(name, value)`.
    fn matrix(&self, d: &[u8], base: usize) -> Result<(String, MatValue)> {
        if d.is_empty() {
            return Ok((String::new(), MatValue::Other { class: 0 }));
        }
        let (ty, flags, mut at) = self.element(d, 0)?;
        if ty != MI_UINT32 || flags.len() < 8 {
            return Err(self.err(base, "array flags: expected an miUINT32 element of 8 bytes"));
        }
        let f0 = self.u32(flags, 0)?;
        let class = (f0 & 0xff) as u8;
        let logical = f0 & 0x0200 != 0;
        let complex = f0 & 0x0800 != 0;
        let (ty, dims_raw, next) = self.element(d, at)?;
        at = next;
        let dims = self.indices(ty, dims_raw, base + at, "dimensions")?;
        let (_, name_raw, next) = self.element(d, at)?;
        at = next;
        let name = String::from_utf8_lossy(name_raw).into_owned();
        if complex {
            return Err(self.err(
                base,
                format!("variable `{name}`: complex arrays are not supported"),
            ));
        }
        if class == MX_SPARSE {
            if dims.len() != 2 {
                return Err(self.err(
                    base,
                    format!("sparse `{name}`: expected 2 dimensions, found {dims:?}"),
                ));
            }
            let (ty, ir_raw, next) = self.element(d, at)?;
            let ir = self.indices(ty, ir_raw, base + at, "sparse row indices")?;
            at = next;
            let (ty, jc_raw, next) = self.element(d, at)?;
            let jc = self.indices(ty, jc_raw, base + at, "sparse column pointers")?;
            at = next;
            let (rows, cols) = (dims[0], dims[1]);
            if jc.len() != cols + 1 || jc.windows(2).any(|w| w[0] > w[1]) {
                return Err(self.err(
                    base,
                    format!(
                        "sparse `{name}`: expected {} non-decreasing column pointers, found {}",
                        cols + 1,
                        jc.len()
                    ),
                ));
            }
            let nnz = jc[cols];
            if ir.len() < nnz {
                return Err(self.err(
                    base,
                    format!("sparse `{name}`: {nnz} values but {} row indices", ir.len()),
                ));
            }
            if let Some(&r) = ir[..nnz].iter().find(|&&r| r >= rows) {
                return Err(self.err(
                    base,
                    format!("sparse `{name}`: row index {r} >= {rows} rows"),
                ));
            }
            let data = if at < d.len() {
                let (ty, pr, _) = self.element(d, at)?;
                let mut v = self.numbers(ty, pr, base + at)?;
                if v.len() < nnz {
                    if logical && v.is_empty() {
                        v = vec![1.0; nnz];
                    } else {
                        return Err(self.err(
                            base,
                            format!("sparse `{name}`: {nnz} entries but {} values", v.len()),
                        ));
                    }
                }
                v.truncate(nnz);
                v
            } else {
                vec![1.0; nnz]
            };
            let mut ir = ir;
            ir.truncate(nnz);
            return Ok((
                name,
                MatValue::Sparse {
                    rows,
                    cols,
                    jc,
                    ir,
                    data,
                },
            ));
        }
        if class == MX_STRUCT || class == MX_OBJECT {
            let mut class_name = None;
            if class == MX_OBJECT {
                let (_, cname, next) = self.element(d, at)?;
                class_name = Some(String::from_utf8_lossy(cname).into_owned());
                at = next;
            }
            let (ty, len_raw, next) = self.element(d, at)?;
            let field_len = *self
                .indices(ty, len_raw, base + at, "field name length")?
                .first()
                .unwrap_or(&0);
            at = next;
            let (_, names_raw, next) = self.element(d, at)?;
            at = next;
            if field_len == 0 || names_raw.len() % field_len != 0 {
                return Err(self.err(base, format!("struct `{name}`: field names of {} bytes do not split into names of {field_len}", names_raw.len())));
            }
            let names: Vec<String> = names_raw
                .chunks(field_len)
                .map(|c| String::from_utf8_lossy(c).trim_end_matches('\0').to_owned())
                .collect();
            let elements: usize = dims.iter().product();
            let mut fields: Vec<(String, Vec<MatValue>)> = names
                .into_iter()
                .map(|n| (n, Vec::with_capacity(elements)))
                .collect();
            for _ in 0..elements {
                for field in fields.iter_mut() {
                    let (ty, payload, next) = self.element(d, at)?;
                    if ty != MI_MATRIX {
                        return Err(self.err(base + at, format!("struct `{name}`, field `{}`: expected an miMATRIX element, found type {ty}", field.0)));
                    }
                    field.1.push(self.matrix(payload, base + at + 8)?.1);
                    at = next;
                }
            }
            return Ok((
                name,
                MatValue::Struct {
                    class_name,
                    dims,
                    fields,
                },
            ));
        }
        if MX_NUMERIC.contains(&class) {
            let n: usize = dims.iter().product();
            let data = if n == 0 {
                Vec::new()
            } else {
                let (ty, pr, _) = self.element(d, at)?;
                self.numbers(ty, pr, base + at)?
            };
            if data.len() != n {
                return Err(self.err(
                    base,
                    format!(
                        "`{name}`: dimensions {dims:?} need {n} values, found {}",
                        data.len()
                    ),
                ));
            }
            return Ok((name, MatValue::Dense { dims, data }));
        }
        Ok((name, MatValue::Other { class }))
    }
}

impl MatFile {
    /// Reads and decodes a level-5 `.mat` file.
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| GraphError::io(path, e))?;
        Self::parse(path, &bytes)
    }

    /// Decodes `.mat` bytes (`path` is only used in messages).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Self> {
        if bytes.len() < 128 {
            return Err(GraphError::format(
                path,
                "expected a 128-byte MAT-file header, file is shorter",
            ));
        }
        if bytes.starts_with(b"\x89HDF") || bytes.get(512..516) == Some(b"\x89HDF") {
            return Err(GraphError::format(
                path,
                "MATLAB v7.3 (HDF5) files are not supported; re-save with -v7",
            ));
        }
        let big = match &bytes[126..128] {
            b"IM" => false,
            b"MI" => true,
            other => {
                return Err(GraphError::format(
                    path,
                    format!(
                        "expected endian indicator \"IM\" or \"MI\" at byte 126, found {other:?} (not a level-5 MAT-file)"
                    ),
                ));
            }
        };
        let r = Reader { path, big };
        let mut vars = BTreeMap::new();
        let mut at = 128;
        while at + 8 <= bytes.len() {
            let (ty, data, next) = r.element(bytes, at)?;
            let decoded = match ty {
                MI_MATRIX => Some(r.matrix(data, at + 8)?),
                MI_COMPRESSED => {
                    let mut inner = Vec::new();
                    flate2::read::ZlibDecoder::new(data)
                        .read_to_end(&mut inner)
                        .map_err(|e| r.err(at, format!("corrupt compressed element: {e}")))?;
                    let (ty2, data2, _) = r.element(&inner, 0)?;
                    (ty2 == MI_MATRIX).then(|| r.matrix(data2, 0)).transpose()?
                }
                _ => None,
            };
            if let Some((name, value)) = decoded
                && !name.is_empty()
            {
                vars.insert(name, value);
            }
            // Compressed elements are not padded to 8 bytes.
            at = if ty == MI_COMPRESSED {
                at + 8 + data.len()
            } else {
                next
            };
        }
        Ok(Self {
            path: path.to_path_buf(),
            vars,
        })
    }

    /// The variable `name`, or an error naming the file and the variables it has.
    pub fn get(&self, name: &str) -> Result<&MatValue> {
        self.vars.get(name).ok_or_else(|| {
            GraphError::format(
                &self.path,
                format!(
                    "variable `{name}` is missing (found {:?})",
                    self.vars.keys().collect::<Vec<_>>()
                ),
            )
        })
    }

    /// A square sparse (or dense) variable as a CSR adjacency: CSC column `j` with row `i` is
    /// the entry `(i, j)`; values become weights unless they are all 1.
    pub fn adjacency(&self, name: &str) -> Result<Csr> {
        match self.get(name)? {
            MatValue::Sparse {
                rows,
                cols,
                jc,
                ir,
                data,
            } => {
                if rows != cols {
                    return Err(GraphError::format(
                        &self.path,
                        format!("`{name}`: expected a square matrix, found {rows}x{cols}"),
                    ));
                }
                let mut src = Vec::with_capacity(ir.len());
                let mut dst = Vec::with_capacity(ir.len());
                for j in 0..*cols {
                    for &i in &ir[jc[j]..jc[j + 1]] {
                        src.push(i as u32);
                        dst.push(j as u32);
                    }
                }
                let (csr, perm) = Csr::from_edges(*rows, &src, &dst)?;
                if data.iter().all(|&v| v == 1.0) {
                    Ok(csr)
                } else {
                    csr.with_weights(perm.iter().map(|&p| data[p] as f32).collect())
                }
            }
            MatValue::Dense { dims, .. } => Err(GraphError::format(
                &self.path,
                format!("`{name}`: expected a sparse matrix, found a dense {dims:?} array"),
            )),
            MatValue::Other { class } => Err(GraphError::format(
                &self.path,
                format!("`{name}`: expected a sparse matrix, found MATLAB class {class}"),
            )),
            MatValue::Struct { .. } => Err(GraphError::format(
                &self.path,
                format!("`{name}`: expected a sparse matrix, found a struct"),
            )),
        }
    }

    /// A 2-D variable (dense or sparse) as a dense row-major `f32` matrix.
    /// (A sparse matrix is densified; more than [`MAX_DENSE_CELLS`] values is an error.)
    pub fn matrix(&self, name: &str) -> Result<Array2<f32>> {
        match self.get(name)? {
            MatValue::Dense { dims, data } if dims.len() == 2 => {
                Ok(Array2::from_shape_fn((dims[0], dims[1]), |(i, j)| {
                    data[j * dims[0] + i] as f32
                }))
            }
            MatValue::Sparse {
                rows,
                cols,
                jc,
                ir,
                data,
            } => {
                // A header may announce any shape over few entries: refuse a dense result
                // beyond the bound instead of allocating it.
                let cells = rows.checked_mul(*cols).filter(|&c| c <= MAX_DENSE_CELLS);
                if cells.is_none() {
                    return Err(GraphError::format(
                        &self.path,
                        format!(
                            "`{name}`: a sparse {rows} × {cols} matrix would densify to more than {MAX_DENSE_CELLS} values"
                        ),
                    ));
                }
                let mut m = Array2::zeros((*rows, *cols));
                for j in 0..*cols {
                    for p in jc[j]..jc[j + 1] {
                        m[[ir[p], j]] += data[p] as f32;
                    }
                }
                Ok(m)
            }
            other => Err(GraphError::format(
                &self.path,
                format!("`{name}`: expected a 2-D array, found {other:?}"),
            )),
        }
    }

    /// A vector variable (`1 × n`, `n × 1`, dense or sparse) as `f64` values.
    pub fn vector(&self, name: &str) -> Result<Vec<f64>> {
        let m = self.matrix(name)?;
        if m.nrows() != 1 && m.ncols() != 1 {
            return Err(GraphError::format(
                &self.path,
                format!("`{name}`: expected a vector, found {:?}", m.dim()),
            ));
        }
        Ok(m.iter().map(|&x| x as f64).collect())
    }
}

/// How a CARE-GNN fraud file is read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FraudConfig {
    /// The first this-many nodes carry no label (Amazon: 3305).
    pub unlabelled_prefix: usize,
    /// Graph options for the homogeneous graph (`homo`).
    pub graph: NodeLoadOptions,
}

impl Default for FraudConfig {
    fn default() -> Self {
        Self::yelp()
    }
}

impl FraudConfig {
    /// YelpChi: every node labelled.
    pub fn yelp() -> Self {
        Self {
            unlabelled_prefix: 0,
            graph: NodeLoadOptions::default(),
        }
    }

    /// Amazon: users 0..3305 are unlabelled.
    pub fn amazon() -> Self {
        Self {
            unlabelled_prefix: 3305,
            ..Self::yelp()
        }
    }

    /// [`Self::amazon`] when the file is named like `Amazon.mat`, else [`Self::yelp`].
    pub fn for_path(path: &Path) -> Self {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if stem.to_ascii_lowercase().starts_with("amazon") {
            Self::amazon()
        } else {
            Self::yelp()
        }
    }
}

/// Loads a CARE-GNN fraud graph: `homo` (the homogeneous graph), every `net_*` relation,
/// `features`, `label`.
pub fn load_fraud_mat(path: &Path, cfg: &FraudConfig) -> Result<NodeDataset> {
    let m = MatFile::open(path)?;
    let homo = m.adjacency("homo")?;
    let n = homo.num_nodes();
    let features = m.matrix("features")?;
    let what = "rows in `features` (one per node of `homo`)";
    GraphError::check_count(path, what, n, features.nrows())?;
    let raw = m.vector("label")?;
    let what = "values in `label` (one per node of `homo`)";
    GraphError::check_count(path, what, n, raw.len())?;
    let mut labels = Vec::with_capacity(n);
    for (i, &v) in raw.iter().enumerate() {
        if v < 0.0 || v.fract() != 0.0 {
            let what = "class in `label` (entry)";
            return Err(GraphError::out_of_range(
                path,
                i + 1,
                what,
                v as i64,
                (0, i64::MAX),
            ));
        }
        labels.push(v as usize);
    }
    if cfg.unlabelled_prefix > n {
        return Err(GraphError::CountMismatch {
            path: path.to_path_buf(),
            what: "nodes at least (the unlabelled prefix)".into(),
            expected: cfg.unlabelled_prefix,
            found: n,
        });
    }
    let mut relations = Vec::new();
    for name in m.vars.keys().filter(|k| k.starts_with("net_")) {
        let a = m.adjacency(name)?;
        let what = format!("nodes in `{name}` (as in `homo`)");
        GraphError::check_count(path, what, n, a.num_nodes())?;
        relations.push(Relation {
            name: name.clone(),
            adjacency: a,
        });
    }
    let num_classes = labels.iter().copied().max().map_or(2, |m| (m + 1).max(2));
    let ds = NodeDataset {
        name: path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("fraud")
            .to_string(),
        graph: Graph::new(cfg.graph.apply(homo), features)?,
        relations,
        labels,
        num_classes,
        labelled: (cfg.unlabelled_prefix as u32..n as u32).collect(),
        official_splits: Vec::new(),
    };
    ds.validate()?;
    Ok(ds)
}
