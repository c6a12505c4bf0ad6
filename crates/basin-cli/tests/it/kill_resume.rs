//! Crash safety of `basin train`: SIGKILL at random moments (inside an epoch, during a checkpoint
//! write, during the report), restarted each time, ends with the same records as a run never
//! interrupted, and no file is ever left half-written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};

use crate::common::data_dir;

fn basin(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_basin"));
    c.args(args)
        .env("BASIN_DEVICE", "cpu")
        .env("BASIN_DATA_DIR", data_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// The JSON files of an output directory (relative path → value), with wall-clock fields
/// (`*seconds*`, `*unix*`, `*_s`, `time`, the epoch `phases`) removed: they are the only fields
/// that may differ.
fn records(dir: &Path) -> Vec<(PathBuf, serde_json::Value)> {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.retain(|k, _| {
                    !(k.contains("seconds")
                        || k.contains("unix")
                        || k.ends_with("_s")
                        || k == "time"
                        || k == "phases")
                });
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let text = std::fs::read_to_string(&p).unwrap();
                let mut v: serde_json::Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{} is not whole JSON: {e}", p.display()));
                strip(&mut v);
                out.push((p.strip_prefix(dir).unwrap().to_path_buf(), v));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every file under `dir` (for leftovers of interrupted writes).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Starts `args` with `--out <killed>` again and again, SIGKILLing it `kills` times at random
/// moments within the first 70 % of `duration` (a start that finishes first is started again,
/// and `duration` shrinks to its time), then lets it finish; returns the number of starts.
fn kill_and_restart(
    args: &[&str],
    killed: &Path,
    mut duration: Duration,
    kills_wanted: usize,
    seed: u64,
) -> usize {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut kills, mut restarts) = (0, 0);
    let mut full: Vec<&str> = args.to_vec();
    full.extend(["--out", killed.to_str().unwrap()]);
    loop {
        let started = Instant::now();
        let mut child = basin(&full).spawn().unwrap();
        restarts += 1;
        let delay = duration.mul_f64(rng.random_range(0.02..0.7));
        let deadline = Instant::now() + delay;
        let finished = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if kills < kills_wanted && Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        match finished {
            Some(status) => {
                assert!(status.success(), "a restarted run failed ({status})");
                if kills >= kills_wanted {
                    break;
                }
                // Started again: later kills fall within this start's own time. (With
                // `duration` timed on a busier machine, restarts of a finished run outpaced
                // every kill and the loop never ended.)
                duration = duration.min(started.elapsed());
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
            }
        }
    }
    eprintln!("{kills} kills, {restarts} starts");
    restarts
}

/// The records of `whole` and `killed` are equal (wall clock aside) and nothing is half-written.
fn same_records(whole: &Path, killed: &Path) {
    let (a, b) = (records(whole), records(killed));
    assert_eq!(
        a.iter().map(|r| &r.0).collect::<Vec<_>>(),
        b.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    for ((path, x), (_, y)) in a.iter().zip(&b) {
        assert_eq!(x, y, "{} differs after the kills", path.display());
    }
    let leftovers: Vec<_> = files(killed)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.contains(".tmp") || name.starts_with('.')
        })
        .collect();
    assert!(leftovers.is_empty(), "half-written files: {leftovers:?}");
}

#[test]
fn killed_and_restarted_training_ends_with_the_records_of_an_uninterrupted_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = basin(&["train", "--example", "et-anomaly"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replacen("data = \"tolokers\"", "data = \"planted\"", 1)
        .replacen("epochs = 100", "epochs = 6", 1)
        .replacen("runs = 1", "runs = 2", 1);
    let run = tmp.path().join("run.toml");
    std::fs::write(&run, text).unwrap();
    let run = run.to_str().unwrap();

    // The uninterrupted run, timed: kills are spread over its duration.
    let whole = tmp.path().join("whole");
    let start = Instant::now();
    let status = basin(&["train", run, "--out", whole.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let duration = start.elapsed();

    let killed = tmp.path().join("killed");
    kill_and_restart(&["train", run], &killed, duration, 12, 18);
    same_records(&whole, &killed);
}

#[test]
fn a_killed_and_restarted_reproduction_skips_finished_runs_and_ends_the_same() {
    basin_data::require_data!("images/fashion-mnist");
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "reproduce",
        "et-table14",
        "--quick",
        "--dataset",
        "fashion-mnist",
    ];
    let whole = tmp.path().join("whole");
    let start = Instant::now();
    let mut full = args.to_vec();
    full.extend(["--out", whole.to_str().unwrap()]);
    assert!(basin(&full).status().unwrap().success());
    let duration = start.elapsed();
    let killed = tmp.path().join("killed");
    kill_and_restart(&args, &killed, duration, 6, 14);
    same_records(&whole, &killed);
}

/// SIGTERM (and SIGINT, the same handler) stops a training within seconds with a line saying the
/// same command resumes it, and resumed it ends with the records of a run never stopped.
#[test]
fn sigterm_stops_a_training_and_the_same_command_resumes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = basin(&["train", "--example", "et-anomaly"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replacen("data = \"tolokers\"", "data = \"planted\"", 1)
        .replacen("epochs = 100", "epochs = 200", 1);
    let run = tmp.path().join("run.toml");
    std::fs::write(&run, text).unwrap();
    let run = run.to_str().unwrap();
    let whole = tmp.path().join("whole");
    assert!(
        basin(&["train", run, "--out", whole.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
    );

    let stopped = tmp.path().join("stopped");
    let args = ["train", run, "--out", stopped.to_str().unwrap()];
    let child = basin(&args).stderr(Stdio::piped()).spawn().unwrap();
    // Once its first epoch is checkpointed, ask it to stop.
    let first = stopped.join("run-0").join("checkpoint.safetensors");
    let t0 = Instant::now();
    while !first.exists() && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(first.exists(), "no epoch was checkpointed");
    let signalled = Instant::now();
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "took {:?} to stop",
        signalled.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("the same command resumes the run"), "{err}");
    assert!(
        !stopped.join("report.md").exists(),
        "it did not stop before the end"
    );

    assert!(basin(&args).status().unwrap().success());
    same_records(&whole, &stopped);
}

/// One SIGINT during `reproduce table1` stops the whole command: the table that was training
/// stops at its next step, no later table starts, and one line says how to resume.
#[test]
fn one_interrupt_stops_every_table_of_the_command() {
    basin_data::require_data!("anomaly/reddit.npz");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("all");
    let args = [
        "reproduce",
        "table1",
        "--quick",
        "--out",
        out.to_str().unwrap(),
    ];
    let child = basin(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once ET Table 1 has checkpointed an epoch, interrupt it.
    let t0 = Instant::now();
    let trained = || {
        walk(&out.join("et-table1"))
            .iter()
            .any(|p| p.ends_with("checkpoint.safetensors"))
    };
    while !trained() && t0.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(trained(), "ET Table 1 checkpointed no epoch");
    let signalled = Instant::now();
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let done = child.wait_with_output().unwrap();
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "took {:?} to stop",
        signalled.elapsed()
    );
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{err}");
    assert!(err.contains("the same command resumes"), "{err}");
    assert!(!err.contains("failed"), "{err}");
    for later in ["cdat-table1", "sfi-table1"] {
        assert!(
            !out.join(later).exists(),
            "{later} started after the interrupt"
        );
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files
}
