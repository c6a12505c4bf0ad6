//! A run record read back from disk equals the one written: its config decides whether a
//! checkpoint may be resumed, so every float in it must survive JSON exactly (serde_json's
//! `float_roundtrip`; without it some values come back one unit in the last place off, and a
//! rerun of the same table was refused as "another run").

use basin_train::record::RunRecord;
use rand::{RngExt, SeedableRng};

#[test]
fn floats_in_a_run_config_survive_the_record_exactly() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let values: Vec<f64> = (0..20_000)
        .map(|_| {
            let x: f32 = rng.random::<f32>();
            // What configs hold: f32 statistics widened to f64, and plain f64s.
            if rng.random::<bool>() {
                f64::from(x)
            } else {
                rng.random::<f64>() * 10f64.powi(rng.random_range(-8..8))
            }
        })
        .collect();
    let config = serde_json::json!({ "normalize": values });
    let record = RunRecord::new("roundtrip", config.clone(), 0, "cpu".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("record.json");
    record.write(&path).expect("write");
    let back = RunRecord::read(&path).expect("read");
    assert!(
        back.config == config,
        "a float changed on the way through JSON"
    );
}
