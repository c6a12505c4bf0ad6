//! Fuzzing of every reader of user files, on stable Rust.
//!
//! Each [`Target`] is one reader (TU text, anomaly npz, the encodings cache, MAT v5, LRGB,
//! IDX, image tar and folder, MIL CSV and PRTools `.mat`, checkpoints, TOML run and block
//! files) with a seed corpus: small files written here in the reader's layout, hostile headers,
//! and — when the benchmark data is present — the real files (or a slice of them). An input is a
//! set of named files; [`mutate`] changes one of them (bit flips, interesting integers, cuts,
//! repeats, splices, and for text files number and line edits), deterministically from a seed.
//! [`fuzz`] writes each input into a scratch directory, calls the reader under `catch_unwind`
//! and counts outcomes: a reader may return an error, never panic. The counting allocator of
//! [`alloc`] records the largest allocation and refuses any above a stated bound, so a header
//! announcing 10¹⁹ bytes cannot take the machine's memory.
//!
//! `cargo xtask fuzz --inputs N` runs every target (the binary `basin-fuzz`); `cargo xtask
//! test` runs a short deterministic pass (`tests/it/short.rs`).

pub mod alloc;
pub mod targets;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One input: named files (a reader of a folder gets several).
pub type Input = Vec<(String, Vec<u8>)>;

/// A reader under test.
pub struct Target {
    /// Short name, shown in the table.
    pub name: &'static str,
    /// Seed inputs.
    pub seeds: Vec<Input>,
    /// Files of these names are text: number and line mutations apply to them.
    pub text: bool,
    /// Reads the input's files from the directory; `Err` is a clean refusal.
    pub read: fn(&Path) -> Result<(), String>,
}

/// What a run of one target saw.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Inputs tried.
    pub inputs: usize,
    /// Inputs the reader accepted.
    pub accepted: usize,
    /// Inputs refused with an error.
    pub refused: usize,
    /// Inputs that panicked, with the first few messages.
    pub panics: usize,
    /// Up to five panic messages with the seed and input number.
    pub panic_messages: Vec<String>,
    /// Largest single allocation during any input (bytes).
    pub largest_allocation: usize,
    /// Largest peak of live bytes above the start of an input (bytes).
    pub peak_live: usize,
    /// Wall time.
    pub time: Duration,
}

const INTERESTING_INTS: [u64; 12] = [
    0,
    1,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 40,
    0x7fff_ffff_ffff_ffff,
    u64::MAX,
];

const INTERESTING_TOKENS: [&str; 14] = [
    "-1",
    "0",
    "1",
    "4294967296",
    "2147483648",
    "99999999999999999999",
    "1e309",
    "-1e309",
    "nan",
    "inf",
    "1.5",
    "",
    "x",
    "-0",
];

/// One mutation of `input` (one of its files), drawing on `corpus` for splices.
pub fn mutate(rng: &mut impl Rng, input: &Input, corpus: &[Input], text: bool) -> Input {
    let mut out = input.clone();
    if out.is_empty() {
        return out;
    }
    let f = rng.random_range(0..out.len());
    let rounds = rng.random_range(1..=4);
    for _ in 0..rounds {
        let other = &corpus[rng.random_range(0..corpus.len())];
        let donor: &[u8] = other
            .iter()
            .find(|(n, _)| *n == out[f].0)
            .map_or(&[], |(_, b)| b.as_slice());
        let bytes = &mut out[f].1;
        let ops = if text { 12 } else { 9 };
        match rng.random_range(0..ops) {
            0 if !bytes.is_empty() => {
                let i = rng.random_range(0..bytes.len());
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
            1 if !bytes.is_empty() => {
                let i = rng.random_range(0..bytes.len());
                bytes[i] = [0u8, 1, 0x7f, 0x80, 0xff][rng.random_range(0..5)];
            }
            2 if !bytes.is_empty() => {
                let v = INTERESTING_INTS[rng.random_range(0..INTERESTING_INTS.len())];
                let width = [2usize, 4, 8][rng.random_range(0..3)];
                let i = rng.random_range(0..bytes.len());
                let le = v.to_le_bytes();
                let be = v.to_be_bytes();
                let src = if rng.random_bool(0.5) {
                    &le[..width]
                } else {
                    &be[8 - width..]
                };
                for (k, b) in src.iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(i + k) {
                        *slot = *b;
                    }
                }
            }
            3 => {
                let cut = rng.random_range(0..=bytes.len());
                bytes.truncate(cut);
            }
            4 if !bytes.is_empty() => {
                let a = rng.random_range(0..bytes.len());
                let b = (a + rng.random_range(1..=64)).min(bytes.len());
                bytes.drain(a..b);
            }
            5 if !bytes.is_empty() => {
                let a = rng.random_range(0..bytes.len());
                let b = (a + rng.random_range(1..=64)).min(bytes.len());
                let chunk = bytes[a..b].to_vec();
                let at = rng.random_range(0..=bytes.len());
                bytes.splice(at..at, chunk);
            }
            6 => {
                let at = rng.random_range(0..=bytes.len());
                let n = rng.random_range(1..=16);
                let junk: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                bytes.splice(at..at, junk);
            }
            7 if !donor.is_empty() => {
                let a = rng.random_range(0..=bytes.len());
                let b = rng.random_range(0..=donor.len());
                bytes.truncate(a);
                bytes.extend_from_slice(&donor[b..]);
            }
            8 => bytes.clear(),
            9 => replace_number(rng, bytes),
            10 => edit_line(rng, bytes),
            11 => replace_number(rng, bytes),
            _ => {}
        }
    }
    out
}

/// Replaces one run of digits (with its sign) by an interesting token.
fn replace_number(rng: &mut impl Rng, bytes: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..bytes.len())
        .filter(|&i| bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let a = starts[rng.random_range(0..starts.len())];
    let mut b = a;
    while b < bytes.len() && (bytes[b].is_ascii_digit() || bytes[b] == b'.') {
        b += 1;
    }
    let token = INTERESTING_TOKENS[rng.random_range(0..INTERESTING_TOKENS.len())];
    bytes.splice(a..b, token.bytes());
}

/// Deletes, repeats or swaps lines.
fn edit_line(rng: &mut impl Rng, bytes: &mut Vec<u8>) {
    let mut lines: Vec<Vec<u8>> = bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    if lines.is_empty() {
        return;
    }
    let i = rng.random_range(0..lines.len());
    match rng.random_range(0..3) {
        0 => {
            lines.remove(i);
        }
        1 => {
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        _ => {
            let j = rng.random_range(0..lines.len());
            lines.swap(i, j);
        }
    }
    *bytes = lines.join(&b'\n');
}

/// Where the last caught panic happened (the silenced hook records it).
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Writes an input's files into `dir` (emptied first).
pub fn write_input(dir: &Path, input: &Input) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in input {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    Ok(())
}

/// Runs `inputs` inputs of `target`: the seeds first, then mutations of seeds and of earlier
/// accepted mutants, from `seed`. Panics are caught and counted; the panic hook is silenced for
/// the duration and restored after.
pub fn fuzz(target: &Target, inputs: usize, seed: u64, scratch: &Path) -> std::io::Result<Stats> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stats = Stats::default();
    if target.seeds.is_empty() {
        return Ok(stats);
    }
    let mut corpus = target.seeds.clone();
    let dir = scratch.join(target.name);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = info.location().map(|l| l.to_string());
        }
    }));
    let start = Instant::now();
    for i in 0..inputs {
        let input = if i < target.seeds.len() {
            target.seeds[i].clone()
        } else {
            let base = &corpus[rng.random_range(0..corpus.len())];
            mutate(&mut rng, base, &corpus, target.text)
        };
        if let Err(e) = write_input(&dir, &input) {
            std::panic::set_hook(hook);
            return Err(e);
        }
        let base_live = alloc::live();
        alloc::reset();
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.read)(&dir)));
        stats.largest_allocation = stats.largest_allocation.max(alloc::largest());
        stats.peak_live = stats.peak_live.max(alloc::peak().saturating_sub(base_live));
        stats.inputs += 1;
        match outcome {
            Ok(Ok(())) => {
                stats.accepted += 1;
                // Accepted mutants join the corpus (bounded), so later mutations go deeper.
                if i >= target.seeds.len() && corpus.len() < 64 {
                    corpus.push(input);
                }
            }
            Ok(Err(_)) => stats.refused += 1,
            Err(payload) => {
                stats.panics += 1;
                if stats.panic_messages.len() < 5 {
                    let msg = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    let at = LAST_PANIC
                        .lock()
                        .ok()
                        .and_then(|l| l.clone())
                        .unwrap_or_default();
                    stats
                        .panic_messages
                        .push(format!("input {i} (seed {seed}): {msg} at {at}"));
                }
            }
        }
    }
    stats.time = start.elapsed();
    std::panic::set_hook(hook);
    Ok(stats)
}

/// Bytes as a short human figure (KiB, MiB, GiB).
pub fn human_bytes(b: usize) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", b / 1024.0)
    }
}

/// The Markdown table of a run: reader | inputs | accepted | refused | panics | largest
/// allocation | peak live | time.
pub fn table(rows: &[(&str, Stats)]) -> String {
    let mut s = String::from(
        "| reader | inputs | accepted | refused | panics | largest allocation | peak live | time |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (name, st) in rows {
        s.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {:.1} s |\n",
            st.inputs,
            st.accepted,
            st.refused,
            st.panics,
            human_bytes(st.largest_allocation),
            human_bytes(st.peak_live),
            st.time.as_secs_f64()
        ));
    }
    s
}
