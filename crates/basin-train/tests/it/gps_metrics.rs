//! The GPS family's metrics against scikit-learn values (fixture written by
//! `fixtures/metrics/gen_gps.py`), and its losses against their formulas.

use basin_train::loss::{batch_weighted_cross_entropy, masked_bce_with_logits};
use basin_train::metrics::{accuracy_sbm, balanced_accuracy, mean_average_precision};
use serde_json::Value;
use tch::{Kind, Tensor};

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/metrics/gps_metrics.json")).unwrap()
}

fn rows(v: &Value) -> Vec<Vec<f64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap_or(f64::NAN))
                .collect()
        })
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

#[test]
fn mean_ap_over_tasks_matches_ogb_eval_ap() {
    let f = fixture();
    for case in f["mean_ap"].as_array().unwrap() {
        let got = mean_average_precision(&rows(&case["y_true"]), &rows(&case["scores"])).unwrap();
        let want = case["mean_ap"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // No task with both classes: an error, not a number.
    assert!(mean_average_precision(&[vec![1.0], vec![1.0]], &[vec![0.3], vec![0.4]]).is_err());
}

#[test]
fn accuracy_sbm_matches_benchmarking_gnns() {
    let f = fixture();
    for case in f["accuracy_sbm"].as_array().unwrap() {
        let (t, p) = (ints(&case["y_true"]), ints(&case["y_pred"]));
        let got = accuracy_sbm(&t, &p).unwrap();
        // The reference computes in float32.
        let want = case["accuracy_sbm"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
    // A class only predicted counts as a row of recall 0; balanced accuracy ignores it.
    let (t, p) = ([0, 0, 1, 1, 1, 2], [0, 3, 1, 1, 0, 2]);
    assert!(accuracy_sbm(&t, &p).unwrap() < balanced_accuracy(&t, &p).unwrap());
}

#[test]
fn the_batch_weighted_cross_entropy_follows_the_gps_code() {
    let y = Tensor::from_slice(&[0i64, 1, 1, 2, 1]);
    let logits = Tensor::from_slice(&[
        0.2, -0.1, 0.4, 1.0, 0.0, -1.0, 0.3, 0.3, 0.3, -0.5, 2.0, 0.1, 0.0, 0.7, -0.2,
    ])
    .view([5, 3]);
    // w_c = (V − n_c)/V = [4/5, 2/5, 4/5]; Σ w_y ℓ / Σ w_y.
    let w = [0.8, 0.4, 0.4, 0.8, 0.4];
    let lsm = logits.log_softmax(-1, Kind::Double);
    let (mut num, mut den) = (0.0, 0.0);
    for (i, wi) in w.iter().enumerate() {
        let c = y.int64_value(&[i as i64]);
        num -= wi * lsm.double_value(&[i as i64, c]);
        den += wi;
    }
    let got = batch_weighted_cross_entropy(&logits, &y).double_value(&[]);
    assert!((got - num / den).abs() < 1e-12);
    // Binary, one output: mean over the V nodes of w_y · BCE (not divided by Σ w).
    let yb = Tensor::from_slice(&[1i64, 0, 0, 0]);
    let z = Tensor::from_slice(&[0.5, -1.0, 2.0, 0.0]).view([4, 1]);
    let wb = [0.75, 0.25, 0.25, 0.25]; // n_0 = 3, n_1 = 1
    let mut want = 0.0;
    for (i, wi) in wb.iter().enumerate() {
        let p = 1.0 / (1.0 + (-z.double_value(&[i as i64, 0])).exp());
        let l = if i == 0 { -p.ln() } else { -(1.0 - p).ln() };
        want += wi * l / 4.0;
    }
    let got = batch_weighted_cross_entropy(&z, &yb).double_value(&[]);
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
}

#[test]
fn the_masked_bce_averages_over_labelled_entries_only() {
    let z = Tensor::from_slice(&[0.3f64, -0.2, 1.0, 0.0]).view([2, 2]);
    let y = Tensor::from_slice(&[1.0f64, f64::NAN, 0.0, 1.0]).view([2, 2]);
    let bce = |z: f64, y: f64| {
        let p = 1.0 / (1.0 + (-z).exp());
        -(y * p.ln() + (1.0 - y) * (1.0 - p).ln())
    };
    let want = (bce(0.3, 1.0) + bce(1.0, 0.0) + bce(0.0, 1.0)) / 3.0;
    let got = masked_bce_with_logits(&z, &y).double_value(&[]);
    assert!((got - want).abs() < 1e-12);
}

#[test]
fn multi_output_mae_matches_sklearn() {
    use basin_train::metrics::mae_multioutput;
    let f = fixture();
    for case in f["mae"].as_array().unwrap() {
        let got = mae_multioutput(&rows(&case["y_true"]), &rows(&case["y_pred"])).unwrap();
        let want = case["mae"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // Ragged rows and NaN are named errors, not numbers.
    let err = mae_multioutput(&[vec![1.0, 2.0], vec![1.0]], &[vec![1.0, 2.0], vec![1.0]]);
    assert!(err.unwrap_err().to_string().contains("row 1"));
    assert!(mae_multioutput(&[vec![f64::NAN]], &[vec![1.0]]).is_err());
}

#[test]
fn mean_reciprocal_rank_matches_graphgps_compute_mrr() {
    use basin_train::metrics::mean_reciprocal_rank;
    let f = fixture();
    for case in f["mrr"].as_array().unwrap() {
        // The rows the GPS learner builds: per positive (i, j), x_i·x_j first, then x_i·x_k for
        // every other k.
        let (mut ranking, mut groups) = (Vec::new(), Vec::new());
        for g in case["graphs"].as_array().unwrap() {
            let x = rows(&g["x"]);
            let dot = |a: usize, b: usize| x[a].iter().zip(&x[b]).map(|(u, v)| u * v).sum::<f64>();
            let pos = g["pos"].as_array().unwrap();
            for p in pos {
                let (i, j) = (
                    p[0].as_u64().unwrap() as usize,
                    p[1].as_u64().unwrap() as usize,
                );
                let mut row = vec![dot(i, j)];
                row.extend((0..x.len()).filter(|&k| k != j).map(|k| dot(i, k)));
                ranking.push(row);
            }
            groups.push(pos.len());
        }
        let got = mean_reciprocal_rank(&ranking, &groups).unwrap();
        let want = case["mrr"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    }
    // Ties count half (OGB): a positive tied with one of two candidates ranks 1.5.
    let tied = mean_reciprocal_rank(&[vec![0.5, 0.5, 0.1]], &[1]).unwrap();
    assert!((tied - 1.0 / 1.5).abs() < 1e-15);
    // A graph without positive links scores 0; rows and groups must agree.
    assert_eq!(
        mean_reciprocal_rank(&[vec![1.0, 0.0]], &[1, 0]).unwrap(),
        0.5
    );
    assert!(mean_reciprocal_rank(&[vec![1.0, 0.0]], &[2]).is_err());
    assert!(mean_reciprocal_rank(&[vec![f64::NAN, 0.0]], &[1]).is_err());
}
