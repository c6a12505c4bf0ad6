//! Files written so that nothing is ever half-written: [`write_atomic`] (a temporary file in
//! the same directory, flushed, then renamed over the target) for records, checkpoints,
//! reports and run files alike, [`remove_stale_temporaries`] for what a killed process left
//! behind, and [`DirLock`], the one writer of an output directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{CoreError, Result};

/// Writes `bytes` to `path` atomically: temporary file in the same directory, fsync, rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| CoreError::io(&dir, e))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(CoreError::io(path, e));
    }
    Ok(())
}

/// Removes the temporary files [`write_atomic`] leaves in `dir` when its process was killed
/// between creating and renaming them (`.<name>.tmp-<pid>` of a process that no longer runs).
/// The files they were meant to replace are untouched: the old version is still whole.
pub fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix('.')
            .and_then(|n| n.rsplit_once(".tmp-"))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Whether process `pid` runs (on Linux: its `/proc` entry exists).
fn alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
}

/// An exclusive hold on an output directory while a command writes it: `basin train`,
/// `reproduce`, `eval` and the launchers take one, so a second process into the same directory
/// is refused at once, naming the holder's pid and command line; a hold left by a process that
/// died is taken over (with a line saying so). Shards of one command (`--shard i/n`) share a
/// directory by design: each holds its own shard, and a process training every run conflicts
/// with all of them. Released when dropped.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
}

impl DirLock {
    /// The folder of the holds inside an output directory.
    pub const FOLDER: &'static str = ".basin-lock";

    /// Takes `dir`'s hold for `part` (`all`, or one shard such as `shard-0-of-2`).
    pub fn acquire(dir: &Path, part: &str) -> Result<Self> {
        let folder = dir.join(Self::FOLDER);
        std::fs::create_dir_all(&folder).map_err(|e| CoreError::io(&folder, e))?;
        let path = folder.join(part);
        let me = format!(
            "{}\n{}\n",
            std::process::id(),
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        for attempt in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(me.as_bytes())
                        .and_then(|()| f.sync_all())
                        .map_err(|e| CoreError::io(&path, e))?;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt == 0 => {
                    match Holder::read(&path) {
                        Some(h) if alive(h.pid) => return Err(h.refusal(dir)),
                        holder => {
                            tracing::warn!(
                                "{}: taking over the hold of a process that is gone (pid {})",
                                dir.display(),
                                holder.map_or("unknown".into(), |h| h.pid.to_string())
                            );
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => return Err(CoreError::io(&path, e)),
            }
        }
        let lock = Self { path };
        // Another part held at the same time: one training every run conflicts with all.
        let entries = std::fs::read_dir(&folder).map_err(|e| CoreError::io(&folder, e))?;
        for other in entries.flatten() {
            let name = other.file_name().to_string_lossy().into_owned();
            if name == part || (part != "all" && name != "all") {
                continue;
            }
            match Holder::read(&other.path()) {
                Some(h) if alive(h.pid) => return Err(h.refusal(dir)),
                _ => {
                    let _ = std::fs::remove_file(other.path());
                }
            }
        }
        Ok(lock)
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Who holds a lock, as its file says.
struct Holder {
    pid: u32,
    command: String,
}

impl Holder {
    fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        let mut lines = text.lines();
        let pid = lines.next()?.trim().parse().ok()?;
        Some(Self {
            pid,
            command: lines.next().unwrap_or("").to_owned(),
        })
    }

    fn refusal(&self, dir: &Path) -> CoreError {
        CoreError::Busy {
            path: dir.to_path_buf(),
            pid: self.pid,
            command: self.command.clone(),
        }
    }
}
