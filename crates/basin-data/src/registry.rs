//! The one dataset registry: every dataset basin reads, by name, with its place in the data
//! directory, the sha256 and size of each file, where the public original comes from, its
//! licence and citation. The manifest is `data/datasets.toml` (embedded at build time); every
//! command resolves names through [`find`] and [`DatasetInfo::location`] under the one data
//! directory of [`crate::datadir::data_dir`], so `basin data`, `basin train` and the
//! reproductions agree on where a dataset lives. [`crate::fetch`] downloads and verifies.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{DataError, Result};

const MANIFEST: &str = include_str!("../../../data/datasets.toml");

/// How basin reads a dataset (which loader opens [`DatasetInfo::location`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataKind {
    /// A TU text folder (`basin_graph::tu`).
    Tu,
    /// A node-anomaly graph as npz (`basin_graph::npz`).
    AnomalyNpz,
    /// A CARE-GNN fraud graph as MAT v5 (`basin_graph::mat`).
    FraudMat,
    /// An LRGB (or GNN-Benchmark superpixel) set in basin's npz layout (`basin_graph::lrgb`).
    #[serde(alias = "peptides")]
    Lrgb,
    /// Generated on the fly with the published settings; nothing to download.
    Generated,
    /// IDX image files, gzipped (basin-image).
    IdxImages,
    /// A tar of JPEG/PNG files in `split/class/` folders (basin-image).
    ImageTar,
    /// A folder the user provides of JPEG/PNG files in `train/<class>/` and `val/<class>/`
    /// (ImageNet-1k); never downloaded.
    ImageFolder,
    /// Multiple-instance bags as CSV (`basin_graph::mil`).
    MilCsv,
    /// Multiple-instance bags as PRTools `.mat` objects in a zip (`basin_graph::mil`).
    MilFte,
}

impl DataKind {
    /// The manifest's name of the kind (`tu`, `anomaly-npz`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tu => "tu",
            Self::AnomalyNpz => "anomaly-npz",
            Self::FraudMat => "fraud-mat",
            Self::Lrgb => "lrgb",
            Self::Generated => "generated",
            Self::IdxImages => "idx-images",
            Self::ImageTar => "image-tar",
            Self::ImageFolder => "image-folder",
            Self::MilCsv => "mil-csv",
            Self::MilFte => "mil-fte",
        }
    }
}

/// One file of a dataset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileInfo {
    /// Path relative to the dataset's folder.
    pub name: String,
    /// Size in bytes, where recorded.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// sha256 (hex), where recorded; a file without one is kept but reported as unverified.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Where this very file is published (when the dataset has no archive).
    #[serde(default)]
    pub url: Option<String>,
    /// Documentation (README, licence): verified when present, never required.
    #[serde(default)]
    pub optional: bool,
}

/// A zip archive that holds the dataset's files under `prefix`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Archive {
    /// Public URL of the zip.
    pub url: String,
    /// Folder inside the zip that holds the files (`""` for the top level).
    #[serde(default)]
    pub prefix: String,
}

/// One registered dataset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetInfo {
    /// Canonical name (`basin data fetch NAME`).
    pub name: String,
    /// Other names it answers to (case-insensitive, like the name).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// How basin reads it.
    pub kind: DataKind,
    /// The dataset's folder, relative to the data directory.
    pub path: String,
    /// The file the loader opens, relative to `path` (else the folder itself).
    #[serde(default)]
    pub open: Option<String>,
    /// One line on what it is.
    pub description: String,
    /// Where it is described.
    pub homepage: String,
    /// Licence, as its publishers state it.
    pub licence: String,
    /// What to cite.
    pub citation: String,
    /// Caveats (derived files, unverified URLs).
    #[serde(default)]
    pub notes: Option<String>,
    /// A zip that holds the files.
    #[serde(default)]
    pub archive: Option<Archive>,
    /// Every file, with checksums.
    #[serde(default)]
    pub files: Vec<FileInfo>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    dataset: Vec<DatasetInfo>,
}

/// Parses a manifest in the format of `data/datasets.toml` (checked: unique names and aliases,
/// hex checksums, relative paths).
pub fn parse_manifest(text: &str) -> Result<Vec<DatasetInfo>> {
    let m: Manifest = toml::from_str(text)
        .map_err(|e| DataError::format(Path::new("data/datasets.toml"), e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    for d in &m.dataset {
        for n in std::iter::once(&d.name).chain(&d.aliases) {
            if !seen.insert(n.to_ascii_lowercase()) {
                return Err(DataError::invalid(
                    "data/datasets.toml",
                    format!("the name `{n}` is used twice"),
                ));
            }
        }
        let relative = |p: &str| {
            !p.is_empty() && !p.starts_with('/') && !p.split('/').any(|c| c == ".." || c.is_empty())
        };
        for f in &d.files {
            if !relative(&f.name) {
                return Err(DataError::invalid(
                    format!("data/datasets.toml: {}", d.name),
                    format!(
                        "file `{}` must be a relative path inside the dataset",
                        f.name
                    ),
                ));
            }
            if let Some(h) = &f.sha256
                && (h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return Err(DataError::invalid(
                    format!("data/datasets.toml: {}/{}", d.name, f.name),
                    format!("sha256 must be 64 hex digits, got `{h}`"),
                ));
            }
        }
        if !relative(&d.path) {
            return Err(DataError::invalid(
                format!("data/datasets.toml: {}", d.name),
                format!("path `{}` must be relative", d.path),
            ));
        }
    }
    Ok(m.dataset)
}

/// Every registered dataset, in manifest order.
pub fn datasets() -> &'static [DatasetInfo] {
    static REGISTRY: OnceLock<Vec<DatasetInfo>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        // The manifest is part of the source tree; a test parses it, so this cannot fail in a
        // released build.
        parse_manifest(MANIFEST).unwrap_or_else(|e| panic!("data/datasets.toml: {e}"))
    })
}

/// The dataset called `name` (or one of its aliases), case-insensitively.
pub fn find(name: &str) -> Option<&'static DatasetInfo> {
    datasets().iter().find(|d| {
        d.name.eq_ignore_ascii_case(name) || d.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// A registered name, or an error listing every name.
pub fn get(name: &str) -> Result<&'static DatasetInfo> {
    find(name).ok_or_else(|| {
        DataError::invalid(
            "dataset",
            format!(
                "`{name}` is not a registered dataset; known: {}",
                datasets()
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })
}

/// What is on disk for one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum FileState {
    /// Present, and its sha256 matches.
    Verified,
    /// Present; no checksum is recorded to compare with.
    Unverified,
    /// Not there.
    Missing,
    /// Present with another size or checksum.
    Differs {
        /// What the manifest records.
        expected: String,
        /// What the file has.
        found: String,
    },
}

/// One file's check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileCheck {
    /// The file, relative to the data directory.
    pub path: String,
    /// Whether it is documentation.
    pub optional: bool,
    /// What was found.
    pub state: FileState,
}

/// A dataset's presence at a glance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Presence {
    /// Generated; nothing to download.
    Generated,
    /// Every required file is there (sizes match where recorded; `verify` checks contents).
    Present,
    /// Some required files are there, some are not.
    Partial,
    /// No required file is there.
    Missing,
}

impl DatasetInfo {
    /// What the loader opens: `data_dir/path[/open]`.
    pub fn location(&self, data_dir: &Path) -> PathBuf {
        let dir = data_dir.join(&self.path);
        match &self.open {
            Some(f) => dir.join(f),
            None => dir,
        }
    }

    /// `data_dir/path/file`.
    pub fn file_path(&self, data_dir: &Path, file: &FileInfo) -> PathBuf {
        data_dir.join(&self.path).join(&file.name)
    }

    /// The command that downloads it.
    pub fn fetch_command(&self) -> String {
        format!("basin data fetch {}", self.name)
    }

    /// How a missing copy is obtained, in a few words: [`Self::fetch_command`], or for a folder
    /// the user provides (ImageNet-1k) where to put it.
    pub fn how_to_get(&self) -> String {
        if self.kind == DataKind::ImageFolder {
            format!("a folder you provide: {0}/train and {0}/val", self.path)
        } else {
            self.fetch_command()
        }
    }

    /// Total recorded size of the required files.
    pub fn bytes(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| !f.optional)
            .filter_map(|f| f.bytes)
            .sum()
    }

    /// Whether its required files are there (existence and recorded sizes; no hashing).
    pub fn presence(&self, data_dir: &Path) -> Presence {
        if self.kind == DataKind::Generated {
            return Presence::Generated;
        }
        if self.kind == DataKind::ImageFolder {
            let root = self.location(data_dir);
            return match (root.join("train").is_dir(), root.join("val").is_dir()) {
                (true, true) => Presence::Present,
                (false, false) => Presence::Missing,
                _ => Presence::Partial,
            };
        }
        let required: Vec<&FileInfo> = self.files.iter().filter(|f| !f.optional).collect();
        let ok = required
            .iter()
            .filter(|f| {
                std::fs::metadata(self.file_path(data_dir, f))
                    .is_ok_and(|m| m.is_file() && f.bytes.is_none_or(|b| b == m.len()))
            })
            .count();
        match ok {
            0 => Presence::Missing,
            n if n == required.len() => Presence::Present,
            _ => Presence::Partial,
        }
    }

    /// Checks every file's size and sha256 under `data_dir`.
    pub fn verify(&self, data_dir: &Path) -> Result<Vec<FileCheck>> {
        self.files
            .iter()
            .map(|f| {
                let path = self.file_path(data_dir, f);
                Ok(FileCheck {
                    path: format!("{}/{}", self.path, f.name),
                    optional: f.optional,
                    state: check_file(&path, f)?,
                })
            })
            .collect()
    }

    /// The error for a dataset that is not under `data_dir`: its name, where it was looked
    /// for, and the command that gets it.
    pub fn missing(&self, data_dir: &Path) -> DataError {
        let downloadable = self.archive.is_some() || self.files.iter().any(|f| f.url.is_some());
        let hint = if self.kind == DataKind::ImageFolder {
            self.notes
                .clone()
                .unwrap_or_else(|| "provide the folder".into())
        } else if !downloadable && self.kind != DataKind::Generated {
            // Served in no layout basin reads: the note says how to convert it.
            format!(
                "no public file of it is in basin's layout ({}); `{}` fetches it only from a mirror (BASIN_DATA_MIRROR)",
                self.notes.as_deref().unwrap_or("see its registry entry"),
                self.fetch_command()
            )
        } else {
            format!(
                "get it with `{}` (the data directory is --data-dir, else BASIN_DATA_DIR, else the user cache)",
                self.fetch_command()
            )
        };
        DataError::MissingDataset {
            name: self.name.clone(),
            looked: self.location(data_dir),
            hint,
        }
    }

    /// [`Self::location`] if the dataset is there, else [`Self::missing`].
    pub fn require(&self, data_dir: &Path) -> Result<PathBuf> {
        let at = self.location(data_dir);
        if at.exists() {
            Ok(at)
        } else {
            Err(self.missing(data_dir))
        }
    }
}

/// The registry as a Markdown table (name, kind, size, source, licence): `data/README.md`'s
/// table is this text, and a test keeps the two equal.
pub fn markdown_table() -> String {
    let mut md = String::from("| name | kind | size | source | licence |\n|---|---|---|---|---|\n");
    for d in datasets() {
        let size = match d.kind {
            DataKind::Generated => "generated".to_owned(),
            _ if d.files.iter().all(|f| f.bytes.is_none()) => "not recorded".to_owned(),
            _ => format!("{:.1} MB", d.bytes() as f64 / 1e6),
        };
        md.push_str(&format!(
            "| `{}`{} | {} | {size} | <{}> | {} |\n",
            d.name,
            if d.aliases.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.aliases.join(", "))
            },
            d.kind.as_str(),
            d.homepage,
            d.licence
        ));
    }
    md
}

/// sha256 of a file, streamed, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| DataError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| DataError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One file against its manifest entry.
pub fn check_file(path: &Path, f: &FileInfo) -> Result<FileState> {
    let meta = match std::fs::metadata(path) {
        Ok(m) if m.is_file() => m,
        Ok(_) => return Ok(FileState::Missing),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileState::Missing),
        Err(e) => return Err(DataError::io(path, e)),
    };
    if let Some(b) = f.bytes
        && b != meta.len()
    {
        return Ok(FileState::Differs {
            expected: format!("{b} bytes"),
            found: format!("{} bytes", meta.len()),
        });
    }
    let Some(expected) = &f.sha256 else {
        return Ok(FileState::Unverified);
    };
    let found = sha256_file(path)?;
    Ok(if found.eq_ignore_ascii_case(expected) {
        FileState::Verified
    } else {
        FileState::Differs {
            expected: format!("sha256 {expected}"),
            found: format!("sha256 {found}"),
        }
    })
}
