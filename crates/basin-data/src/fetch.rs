//! Downloading a registered dataset into the data directory, verified and all-or-nothing.
//!
//! Every file is written into a staging folder inside the data directory
//! (`.fetch-<name>/`), checked against the manifest's size and sha256, and only then renamed
//! into place, one atomic rename per file. A failed, interrupted or corrupt download removes the
//! staging folder and leaves the data directory as it was: no file of the dataset is ever
//! half-written.
//!
//! Sources, first match wins:
//! 1. `BASIN_DATA_MIRROR` (or `FetchOptions::mirror`): a copy of a basin data directory, as
//!    an `http(s)://` URL prefix or a local folder; each file comes from
//!    `<mirror>/<dataset path>/<file>`. This is how machines without internet get data, and
//!    the only source of files that no public URL serves as they are (converted npz files).
//! 2. The dataset's zip archive (TU sets, CARE-GNN graphs), its `prefix/` folder unpacked.
//! 3. Each file's own public URL.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{DataError, Result};
use crate::registry::{DataKind, DatasetInfo, FileInfo, FileState, check_file};

/// The environment variable naming a mirror (URL prefix or local folder).
pub const MIRROR_ENV: &str = "BASIN_DATA_MIRROR";

/// Largest file accepted when the manifest records no size (a bound on what a server or an
/// archive can make us write).
const UNKNOWN_SIZE_LIMIT: u64 = 16 << 30;

/// How to fetch.
#[derive(Clone, Debug, Default)]
pub struct FetchOptions {
    /// A mirror of a basin data directory (`http(s)://…` or a local folder); `None` reads
    /// `BASIN_DATA_MIRROR`.
    pub mirror: Option<String>,
    /// Download every file again, even those already present and verified.
    pub force: bool,
}

impl FetchOptions {
    fn mirror(&self) -> Option<String> {
        self.mirror
            .clone()
            .or_else(|| std::env::var(MIRROR_ENV).ok())
            .filter(|m| !m.trim().is_empty())
    }
}

/// Progress of a fetch, for a bar or log lines.
#[derive(Clone, Debug, PartialEq)]
pub enum FetchEvent {
    /// A download starts (`total` from the manifest or the server, when known).
    Start {
        /// What is downloaded (a file or an archive name).
        what: String,
        /// Expected bytes.
        total: Option<u64>,
    },
    /// Bytes received since the last event.
    Bytes(u64),
    /// The current download finished.
    Done,
    /// Checking checksums.
    Verifying,
}

/// What a fetch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// Generated on the fly; nothing to download.
    Generated,
    /// Every file was already there and verified.
    AlreadyPresent,
    /// Files were downloaded, verified and moved into place.
    Fetched {
        /// Files written.
        files: Vec<String>,
        /// Bytes written.
        bytes: u64,
        /// Files kept without a recorded checksum to compare with.
        unverified: Vec<String>,
    },
}

/// Downloads `info` into `data_dir` (see the module docs).
pub fn fetch(
    info: &DatasetInfo,
    data_dir: &Path,
    opts: &FetchOptions,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<FetchOutcome> {
    if info.kind == DataKind::Generated {
        return Ok(FetchOutcome::Generated);
    }
    if info.kind == DataKind::ImageFolder {
        return Err(DataError::Fetch {
            dataset: info.name.clone(),
            url: String::new(),
            message: format!(
                "it is never downloaded: {}",
                info.notes.as_deref().unwrap_or("provide the folder")
            ),
        });
    }
    // What is needed: every required file not already good, and documentation that is missing.
    let mut wanted: Vec<&FileInfo> = Vec::new();
    for f in &info.files {
        let state = check_file(&info.file_path(data_dir, f), f)?;
        let good = matches!(state, FileState::Verified | FileState::Unverified);
        if opts.force || !good {
            wanted.push(f);
        }
    }
    // Documentation alone is not worth a download (an archive would come again for a README).
    if !opts.force && wanted.iter().all(|f| f.optional) {
        return Ok(FetchOutcome::AlreadyPresent);
    }
    std::fs::create_dir_all(data_dir).map_err(|e| DataError::io(data_dir, e))?;
    let staging = Staging::new(data_dir.join(format!(".fetch-{}", info.name)))?;

    let mirror = opts.mirror();
    let mut got: Vec<(&FileInfo, PathBuf, String)> = Vec::new();
    if let Some(mirror) = &mirror {
        for f in &wanted {
            let src = format!("{}/{}/{}", mirror.trim_end_matches('/'), info.path, f.name);
            let dest = staging.path.join(&f.name);
            match copy_source(&src, &dest, f.bytes, &f.name, progress) {
                Ok(()) => got.push((f, dest, src)),
                Err(_) if f.optional => {}
                Err(e) => return Err(e),
            }
        }
    } else if let Some(archive) = &info.archive {
        let zip_path = staging.path.join(".archive.zip");
        let what = archive
            .url
            .rsplit('/')
            .next()
            .unwrap_or("archive")
            .to_owned();
        copy_source(&archive.url, &zip_path, None, &what, progress)?;
        let file = File::open(&zip_path).map_err(|e| DataError::io(&zip_path, e))?;
        let mut zip = zip::ZipArchive::new(file).map_err(|e| {
            fetch_error(&info.name, &archive.url, format!("not a zip archive: {e}"))
        })?;
        for f in &wanted {
            let inner = format!("{}{}", archive.prefix, f.name);
            let mut entry = match zip.by_name(&inner) {
                Ok(e) => e,
                Err(_) if f.optional => continue,
                Err(_) => {
                    return Err(fetch_error(
                        &info.name,
                        &archive.url,
                        format!("the archive holds no `{inner}`"),
                    ));
                }
            };
            let dest = staging.path.join(&f.name);
            write_bounded(&mut entry, &dest, f.bytes, &archive.url, &mut |_| {})?;
            got.push((f, dest, format!("{}!{inner}", archive.url)));
        }
    } else {
        let unserved: Vec<&str> = wanted
            .iter()
            .filter(|f| f.url.is_none() && !f.optional)
            .map(|f| f.name.as_str())
            .collect();
        if !unserved.is_empty() {
            return Err(fetch_error(
                &info.name,
                "",
                format!(
                    "no public URL serves {} as basin reads it: set {MIRROR_ENV} (or --mirror) to a copy of a basin data directory (an http(s):// URL or a folder) and fetch again{}",
                    unserved.join(", "),
                    info.notes
                        .as_deref()
                        .map(|n| format!(". Note: {n}"))
                        .unwrap_or_default()
                ),
            ));
        }
        for f in &wanted {
            let Some(url) = &f.url else { continue };
            let dest = staging.path.join(&f.name);
            match copy_source(url, &dest, f.bytes, &f.name, progress) {
                Ok(()) => got.push((f, dest, url.clone())),
                Err(_) if f.optional => {}
                Err(e) => return Err(e),
            }
        }
    }

    // Verify everything before anything moves.
    progress(FetchEvent::Verifying);
    let mut unverified = Vec::new();
    for (f, staged, src) in &got {
        match check_file(staged, f)? {
            FileState::Verified => {}
            FileState::Unverified => unverified.push(format!("{}/{}", info.path, f.name)),
            FileState::Missing => {
                return Err(fetch_error(
                    &info.name,
                    src,
                    format!("{} was not written", f.name),
                ));
            }
            FileState::Differs { expected, found } => {
                return Err(DataError::Checksum {
                    file: format!("{}/{}", info.path, f.name),
                    source_url: src.clone(),
                    expected,
                    found,
                });
            }
        }
    }
    let mut files = Vec::new();
    let mut bytes = 0;
    for (f, staged, _) in &got {
        let dest = info.file_path(data_dir, f);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DataError::io(parent, e))?;
        }
        bytes += std::fs::metadata(staged).map(|m| m.len()).unwrap_or(0);
        std::fs::rename(staged, &dest).map_err(|e| DataError::io(&dest, e))?;
        files.push(format!("{}/{}", info.path, f.name));
    }
    drop(staging);
    Ok(FetchOutcome::Fetched {
        files,
        bytes,
        unverified,
    })
}

fn fetch_error(dataset: &str, url: &str, message: String) -> DataError {
    DataError::Fetch {
        dataset: dataset.to_owned(),
        url: url.to_owned(),
        message,
    }
}

/// The staging folder, removed on drop (success or failure).
struct Staging {
    path: PathBuf,
}

impl Staging {
    fn new(path: PathBuf) -> Result<Self> {
        // A folder left by a killed fetch is stale: start again.
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(|e| DataError::io(&path, e))?;
        }
        std::fs::create_dir_all(&path).map_err(|e| DataError::io(&path, e))?;
        Ok(Self { path })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies `src` (an `http(s)://` URL or a local path) to `dest`, bounded by `expected` bytes.
fn copy_source(
    src: &str,
    dest: &Path,
    expected: Option<u64>,
    what: &str,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<()> {
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DataError::io(parent, e))?;
    }
    if src.starts_with("http://") || src.starts_with("https://") {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_per_read(Some(Duration::from_secs(120)))
            .build()
            .into();
        let response = agent
            .get(src)
            .call()
            .map_err(|e| fetch_error(what, src, e.to_string()))?;
        let (_, body) = response.into_parts();
        let total = expected.or(body.content_length());
        progress(FetchEvent::Start {
            what: what.to_owned(),
            total,
        });
        let declared = body.content_length();
        let mut reader = body.into_reader();
        let written = write_bounded(&mut reader, dest, expected, src, progress)?;
        if let Some(d) = declared
            && d != written
        {
            return Err(fetch_error(
                what,
                src,
                format!("the transfer ended after {written} of {d} bytes"),
            ));
        }
    } else {
        let path = Path::new(src.strip_prefix("file://").unwrap_or(src));
        let mut file = File::open(path).map_err(|e| DataError::io(path, e))?;
        let total = file.metadata().ok().map(|m| m.len());
        progress(FetchEvent::Start {
            what: what.to_owned(),
            total,
        });
        write_bounded(&mut file, dest, expected, src, progress)?;
    }
    progress(FetchEvent::Done);
    Ok(())
}

/// Streams `reader` into a new file at `dest`, refusing more than the expected size (or the
/// bound for files of unknown size); returns the bytes written.
fn write_bounded(
    reader: &mut dyn Read,
    dest: &Path,
    expected: Option<u64>,
    src: &str,
    progress: &mut dyn FnMut(FetchEvent),
) -> Result<u64> {
    let limit = expected.unwrap_or(UNKNOWN_SIZE_LIMIT);
    let mut out = File::create(dest).map_err(|e| DataError::io(dest, e))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut written: u64 = 0;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| fetch_error(&dest.display().to_string(), src, e.to_string()))?;
        if n == 0 {
            break;
        }
        written += n as u64;
        if written > limit {
            return Err(fetch_error(
                &dest.display().to_string(),
                src,
                format!("more than the {limit} bytes expected"),
            ));
        }
        out.write_all(&buf[..n])
            .map_err(|e| DataError::io(dest, e))?;
        progress(FetchEvent::Bytes(n as u64));
    }
    out.sync_all().map_err(|e| DataError::io(dest, e))?;
    Ok(written)
}
