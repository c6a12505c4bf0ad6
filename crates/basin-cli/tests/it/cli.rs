//! The `basin` binary end to end: `basin energy` on good and bad input, and `basin demo`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use basin_core::checkpoint::{read_tensors, write_tensors};
use basin_core::testing::max_rel_error;
use basin_core::{BlockConfig, EnergyBlock, Structure};
use tch::{Device, Kind, Tensor, nn::VarStore};

const CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../data/blocks/et-small.toml"
);

fn basin(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_basin"))
        .args(args)
        .env("BASIN_DEVICE", "cpu")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stderr.contains("panicked"), "basin panicked:\n{stderr}");
    (out.status.success(), stdout, stderr)
}

/// A block built from the example config (float64), its weights and random tokens.
fn fixture() -> (VarStore, EnergyBlock, Vec<(String, Tensor)>, Tensor) {
    tch::manual_seed(70);
    let cfg = BlockConfig::from_toml(&std::fs::read_to_string(CONFIG).unwrap()).unwrap();
    let mut vs = VarStore::new(Device::Cpu);
    let block = EnergyBlock::new(&vs.root(), &cfg).unwrap();
    vs.double();
    // Larger weights than the default init, so the energy landscape is not flat.
    tch::no_grad(|| {
        for (_, v) in basin_core::testing::variables_by_name(&vs) {
            if v.dim() > 1 {
                v.shallow_clone().copy_(&(v.randn_like() * 0.2));
            }
        }
    });
    let weights: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    let x = Tensor::randn([2, 7, 32], (Kind::Double, Device::Cpu));
    (vs, block, weights, x)
}

fn write(dir: &Path, name: &str, tensors: Vec<(String, Tensor)>) -> PathBuf {
    let p = dir.join(name);
    write_tensors(&p, &tensors, None).unwrap();
    p
}

fn outputs(path: &Path) -> HashMap<String, Tensor> {
    read_tensors(path).unwrap().into_iter().collect()
}

#[test]
fn energy_matches_the_library_and_descends() {
    let dir = tempfile::tempdir().unwrap();
    let (_vs, block, weights, x) = fixture();
    let mut input: Vec<(String, Tensor)> = weights
        .iter()
        .map(|(n, v)| (n.clone(), v.shallow_clone()))
        .collect();
    input.push(("x".into(), x.shallow_clone()));
    let input = write(dir.path(), "in.safetensors", input);
    let out = dir.path().join("out.safetensors");
    let (ok, stdout, stderr) = basin(&[
        "energy",
        "--config",
        CONFIG,
        "--input",
        input.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--double",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("attention") && stdout.contains("hopfield"),
        "{stdout}"
    );
    let o = outputs(&out);
    assert_eq!(o["energy"].size(), [13, 2]);
    assert_eq!(o["energy.attention"].size(), [13, 2]);
    assert_eq!(o["x_final"].size(), [2, 7, 32]);
    let s = Structure::full();
    let (expect_final, trace) = tch::no_grad(|| block.run(&x, &s, false, Some(Default::default())));
    assert!(max_rel_error(&o["x_final"], &expect_final, 1e-12) < 1e-10);
    assert!(max_rel_error(&o["energy"], &trace.unwrap().total, 1e-12) < 1e-10);
    assert!(
        max_rel_error(
            &o["grad_input"],
            &tch::no_grad(|| block.energy_grad(&x, &s)),
            1e-12
        ) < 1e-10
    );
    let parts = &o["energy.attention"] + &o["energy.hopfield"];
    assert!(max_rel_error(&parts, &o["energy"], 1e-12) < 1e-10);
    let e: Vec<Vec<f64>> = Vec::try_from(&o["energy"].tr().contiguous()).unwrap();
    for row in e {
        assert!(
            row.windows(2).all(|w| w[1] <= w[0] + 1e-9 * w[0].abs()),
            "energy rose: {row:?}"
        );
    }
    assert!(
        !o.contains_key("states"),
        "the trajectory is off by default"
    );

    // The trajectory on request: its last state is the output, its first the input, and it is
    // the library's trajectory.
    let (ok, _, stderr) = basin(&[
        "energy",
        "--config",
        CONFIG,
        "--input",
        input.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--double",
        "--states",
        "--term-grads",
    ]);
    assert!(ok, "{stderr}");
    let o = outputs(&out);
    assert_eq!(o["states"].size(), [13, 2, 7, 32]);
    assert!(max_rel_error(&o["states"].get(12), &o["x_final"], 1e-12) < 1e-12);
    assert!(max_rel_error(&o["states"].get(0), &x, 1e-12) < 1e-12);
    let keep = basin_core::TraceOptions {
        states: true,
        term_grads: false,
    };
    let (_, lib) = tch::no_grad(|| block.run(&x, &s, false, Some(keep)));
    let lib = Tensor::stack(&lib.unwrap().states, 0);
    assert!(max_rel_error(&o["states"], &lib, 1e-12) < 1e-12);
    assert_eq!(o["grad.attention"].size(), [12, 2, 7, 32]);
    assert_eq!(o["grad.hopfield"].size(), [12, 2, 7, 32]);

    // Separate weights file, sparse edges equal to a dense mask, padding.
    let mask = Tensor::rand([2, 7, 7], (Kind::Double, Device::Cpu)).lt(0.5);
    let pad = Tensor::ones([2, 7], (Kind::Bool, Device::Cpu));
    let _ = pad.get(1).narrow(0, 5, 2).fill_(0);
    let nz = mask.nonzero();
    let edge_index = Tensor::stack(
        &[
            nz.select(1, 0) * 7 + nz.select(1, 2),
            nz.select(1, 0) * 7 + nz.select(1, 1),
        ],
        0,
    );
    let w = write(dir.path(), "w.safetensors", weights);
    let dense = write(
        dir.path(),
        "dense.safetensors",
        vec![
            ("x".into(), x.shallow_clone()),
            ("mask".into(), mask.shallow_clone()),
            ("padding".into(), pad.shallow_clone()),
        ],
    );
    let sparse = write(
        dir.path(),
        "sparse.safetensors",
        vec![
            ("x".into(), x.shallow_clone()),
            ("edge_index".into(), edge_index),
            ("padding".into(), pad.shallow_clone()),
        ],
    );
    let run = |input: &Path, name: &str| {
        let out = dir.path().join(name);
        let (ok, _, stderr) = basin(&[
            "energy",
            "--config",
            CONFIG,
            "--input",
            input.to_str().unwrap(),
            "--weights",
            w.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--double",
            "--self-attention",
            "--steps",
            "4",
        ]);
        assert!(ok, "{stderr}");
        outputs(&out)
    };
    let (d, sp) = (run(&dense, "d.safetensors"), run(&sparse, "s.safetensors"));
    assert_eq!(d["energy"].size(), [5, 2]);
    assert!(max_rel_error(&sp["x_final"], &d["x_final"], 1e-12) < 1e-10);
    assert!(max_rel_error(&sp["energy"], &d["energy"], 1e-12) < 1e-10);
}

#[test]
fn bad_input_gets_a_named_error() {
    let dir = tempfile::tempdir().unwrap();
    let (_vs, _block, weights, x) = fixture();
    let good = |extra: Vec<(String, Tensor)>, drop: &str| {
        let mut t: Vec<(String, Tensor)> = weights
            .iter()
            .filter(|(n, _)| n != drop)
            .map(|(n, v)| (n.clone(), v.shallow_clone()))
            .collect();
        t.extend(extra);
        t
    };
    let out = dir.path().join("out.safetensors");
    let run = |config: &Path, input: &Path| {
        let (ok, _, stderr) = basin(&[
            "energy",
            "--config",
            config.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ]);
        assert!(!ok, "expected failure");
        stderr
    };
    let config = Path::new(CONFIG);
    let fine = write(
        dir.path(),
        "fine.safetensors",
        good(vec![("x".into(), x.shallow_clone())], ""),
    );

    // Malformed TOML, unknown field, invalid value.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "dim = 32\nsteps = [oops\n").unwrap();
    let err = run(&bad, &fine);
    assert!(err.contains("bad.toml") && err.contains("line 2"), "{err}");
    std::fs::write(
        &bad,
        std::fs::read_to_string(CONFIG)
            .unwrap()
            .replace("heads = 4", "head = 4"),
    )
    .unwrap();
    let err = run(&bad, &fine);
    assert!(err.contains("unknown field `head`"), "{err}");
    std::fs::write(
        &bad,
        std::fs::read_to_string(CONFIG)
            .unwrap()
            .replace("alpha = 0.1", "alpha = -1.0"),
    )
    .unwrap();
    let err = run(&bad, &fine);
    assert!(err.contains("dynamics.alpha"), "{err}");

    // A missing weight, a wrong shape of x, no x at all, two structures at once.
    let missing = write(
        dir.path(),
        "missing.safetensors",
        good(vec![("x".into(), x.shallow_clone())], "hopfield.xi"),
    );
    let err = run(config, &missing);
    assert!(
        err.contains("missing tensor `hopfield.xi`") && err.contains("[128, 32]"),
        "{err}"
    );
    let wrong = write(
        dir.path(),
        "wrong.safetensors",
        good(
            vec![(
                "x".into(),
                Tensor::zeros([2, 7, 31], (Kind::Float, Device::Cpu)),
            )],
            "",
        ),
    );
    let err = run(config, &wrong);
    assert!(
        err.contains("`x`") && err.contains("[B, N, 32]") && err.contains("[2, 7, 31]"),
        "{err}"
    );
    let no_x = write(dir.path(), "nox.safetensors", good(vec![], ""));
    assert!(run(config, &no_x).contains("`x`"));
    let both = write(
        dir.path(),
        "both.safetensors",
        good(
            vec![
                ("x".into(), x.shallow_clone()),
                (
                    "mask".into(),
                    Tensor::ones([2, 7, 7], (Kind::Bool, Device::Cpu)),
                ),
                (
                    "edge_index".into(),
                    Tensor::zeros([2, 1], (Kind::Int64, Device::Cpu)),
                ),
            ],
            "",
        ),
    );
    assert!(run(config, &both).contains("at most one of mask, bias, edge_index"));
    let bad_edges = write(
        dir.path(),
        "edges.safetensors",
        good(
            vec![
                ("x".into(), x.shallow_clone()),
                (
                    "edge_index".into(),
                    Tensor::from_slice(&[0i64, 99]).view([2, 1]),
                ),
            ],
            "",
        ),
    );
    let err = run(config, &bad_edges);
    assert!(err.contains("0..14"), "{err}");
    let bad_mask = write(
        dir.path(),
        "mask.safetensors",
        good(
            vec![
                ("x".into(), x.shallow_clone()),
                (
                    "mask".into(),
                    Tensor::ones([2, 6, 6], (Kind::Bool, Device::Cpu)),
                ),
            ],
            "",
        ),
    );
    let err = run(config, &bad_mask);
    assert!(
        err.contains("mask") && err.contains("[2, 7, 7]") && err.contains("[2, 6, 6]"),
        "{err}"
    );
    // A truncated file.
    let bytes = std::fs::read(&fine).unwrap();
    let cut = dir.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(run(config, &cut).contains("truncated"));
    assert!(!out.exists(), "an output was written despite the errors");
}

#[test]
fn demo_learns_to_complete_patterns() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let (ok, stdout, stderr) = basin(&["demo", "--epochs", "6", "--out", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("energy per step"), "{stdout}");
    for f in [
        "energy.png",
        "completions.png",
        "descent.png",
        "descent.gif",
        "updates.png",
        "demo.json",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("demo.json")).unwrap()).unwrap();
    let mse = summary["test_mse_masked"].as_f64().unwrap();
    let baseline = summary["baseline_mse_mean"].as_f64().unwrap();
    assert!(
        mse < 0.6 * baseline,
        "the demo did not learn: {mse} vs baseline {baseline}"
    );
    assert_eq!(summary["energy_monotone"], serde_json::Value::Bool(true));
}

/// Every command that prints ends quietly when its reader has gone (`basin data list | head
/// -1`): the read end of the pipe is closed before it writes a byte, and it still exits without
/// a panic.
#[test]
fn printing_into_a_closed_pipe_is_not_a_panic() {
    let data = crate::common::data_dir();
    for args in [
        vec!["data", "list"],
        vec!["data", "list", "--markdown"],
        vec!["reproduce", "--list"],
        vec!["train", "--example", "list"],
        vec!["train", "--example", "et-graph"],
        vec!["energy", "--kinds"],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_basin"))
            .args(&args)
            .env("BASIN_DATA_DIR", &data)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
    }
}
