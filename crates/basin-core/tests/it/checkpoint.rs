//! Checkpoints: an exact round trip; truncated or mismatched files give errors naming the tensor.

use std::collections::HashMap;

use basin_core::checkpoint::{self, read_tensors, write_tensors};
use basin_core::{BlockConfig, CoreError, EnergyBlock};
use tch::{Device, Kind, Tensor, nn::VarStore};

fn block(cfg: &BlockConfig) -> (VarStore, EnergyBlock) {
    let vs = VarStore::new(Device::Cpu);
    let blk = EnergyBlock::new(&vs.root(), cfg).unwrap();
    (vs, blk)
}

#[test]
fn round_trip_is_exact() {
    tch::manual_seed(50);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("block.safetensors");
    let cfg = basin_core::testing::et_block(12, 3, 4, 20, 5);
    let (vs, _) = block(&cfg);
    checkpoint::save(&vs, &path, &cfg).unwrap();
    assert!(
        checkpoint::config_path(&path).exists(),
        "config sidecar missing"
    );
    let loaded_cfg: BlockConfig = checkpoint::load_config(&path).unwrap();
    assert_eq!(loaded_cfg, cfg);
    tch::manual_seed(51); // different init, overwritten by the load
    let (vs2, _) = block(&loaded_cfg);
    checkpoint::load(&vs2, &path).unwrap();
    let a = vs.variables();
    let b = vs2.variables();
    assert_eq!(a.len(), b.len());
    for (name, t) in &a {
        assert!(t.equal(&b[name]), "{name} differs after the round trip");
    }
    // No temporary file is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn tensors_of_every_dtype_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.safetensors");
    let tensors = vec![
        (
            "f64".to_owned(),
            Tensor::randn([2, 3], (Kind::Double, Device::Cpu)),
        ),
        (
            "f32".to_owned(),
            Tensor::randn([4], (Kind::Float, Device::Cpu)),
        ),
        ("i64".to_owned(), Tensor::from_slice(&[1i64, -2, 3])),
        ("bool".to_owned(), Tensor::from_slice(&[true, false])),
        ("scalar".to_owned(), Tensor::from(2.5f64)),
        (
            "strided".to_owned(),
            Tensor::randn([3, 4], (Kind::Float, Device::Cpu)).tr(),
        ),
    ];
    write_tensors(
        &path,
        &tensors,
        Some(HashMap::from([("k".into(), "v".into())])),
    )
    .unwrap();
    let (back, meta) = checkpoint::read_file(&path).unwrap();
    assert_eq!(meta.get("k").map(String::as_str), Some("v"));
    let back: HashMap<String, Tensor> = back.into_iter().collect();
    for (name, t) in &tensors {
        assert_eq!(back[name].kind(), t.kind(), "{name}");
        assert!(back[name].equal(t), "{name}");
    }
}

#[test]
fn truncated_file_names_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.safetensors");
    let tensors = vec![
        (
            "first".to_owned(),
            Tensor::zeros([10], (Kind::Float, Device::Cpu)),
        ),
        (
            "second".to_owned(),
            Tensor::zeros([100], (Kind::Float, Device::Cpu)),
        ),
    ];
    write_tensors(&path, &tensors, None).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
    let err = read_tensors(&path).unwrap_err().to_string();
    assert!(
        err.contains("truncated") && err.contains("`second`") && err.contains("t.safetensors"),
        "{err}"
    );
    // Cut inside the header, and an empty file.
    std::fs::write(&path, &bytes[..20]).unwrap();
    let err = read_tensors(&path).unwrap_err().to_string();
    assert!(err.contains("header"), "{err}");
    std::fs::write(&path, b"").unwrap();
    assert!(
        read_tensors(&path)
            .unwrap_err()
            .to_string()
            .contains("too short")
    );
    // Garbage header.
    let mut junk = 16u64.to_le_bytes().to_vec();
    junk.extend(b"{not json at all");
    std::fs::write(&path, &junk).unwrap();
    assert!(
        read_tensors(&path)
            .unwrap_err()
            .to_string()
            .contains("invalid safetensors header")
    );
    // A missing file.
    let err = read_tensors(&dir.path().join("nope.safetensors")).unwrap_err();
    assert!(matches!(err, CoreError::Io { .. }) && err.to_string().contains("nope.safetensors"));
}

#[test]
fn mismatched_checkpoint_lists_every_problem_and_changes_nothing() {
    tch::manual_seed(52);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("block.safetensors");
    let cfg = basin_core::testing::et_block(12, 3, 4, 20, 5);
    let (vs, _) = block(&cfg);
    checkpoint::save(&vs, &path, &cfg).unwrap();
    // A model with more memories (xi has another shape) and no... same names otherwise.
    let mut other = cfg.clone();
    other.terms[1]
        .edit(|h: &mut basin_core::HopfieldMemoryConfig| h.memories = 21)
        .unwrap();
    other.terms[1].name = Some("memory".into());
    let (vs2, _) = block(&other);
    let before = vs2.variables();
    let err = checkpoint::load(&vs2, &path).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("missing tensor `memory.xi`"), "{msg}");
    assert!(msg.contains("unexpected tensor `hopfield.xi`"), "{msg}");
    // Shapes: a config with another width.
    let (vs3, _) = block(&basin_core::testing::et_block(13, 3, 4, 20, 5));
    let msg = checkpoint::load(&vs3, &path).unwrap_err().to_string();
    assert!(
        msg.contains("tensor `attention.w_q`: expected shape [3, 4, 13], the file has [3, 4, 12]"),
        "{msg}"
    );
    assert!(msg.contains("norm.delta"), "{msg}");
    // Nothing was modified by the failed loads.
    for (name, t) in vs2.variables() {
        assert!(t.equal(&before[&name]), "{name} modified by a failed load");
    }
}
