//! Metrics against scikit-learn values (fixture written by `fixtures/metrics/gen.py`).

use basin_train::metrics::*;
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/metrics/metrics.json")).unwrap()
}

fn bools(v: &Value) -> Vec<bool> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_bool().unwrap())
        .collect()
}
fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}
fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * b.abs().max(1.0),
        "{what}: ours {a}, sklearn {b}"
    );
}

#[test]
fn binary_metrics_match_sklearn() {
    let f = fixture();
    for case in f["binary"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (y, s) = (bools(&case["y_true"]), floats(&case["scores"]));
        match case["roc_auc"].as_f64() {
            Some(auc) => close(roc_auc(&y, &s).unwrap(), auc, &format!("{name} roc_auc")),
            None => assert_eq!(roc_auc(&y, &s), Err(MetricError::OneClass), "{name}"),
        }
        close(
            average_precision(&y, &s).unwrap(),
            case["average_precision"].as_f64().unwrap(),
            &format!("{name} AP"),
        );
        let (t, f1) = best_threshold(&y, &s).unwrap();
        assert_eq!(
            t,
            case["best_threshold"].as_f64().unwrap(),
            "{name}: threshold"
        );
        close(
            f1,
            case["best_macro_f1"].as_f64().unwrap(),
            &format!("{name} best macro-F1"),
        );
    }
}

#[test]
fn classification_metrics_match_sklearn() {
    let f = fixture();
    for case in f["classes"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (y, p) = (ints(&case["y_true"]), ints(&case["y_pred"]));
        close(
            accuracy(&y, &p).unwrap(),
            case["accuracy"].as_f64().unwrap(),
            &format!("{name} accuracy"),
        );
        close(
            macro_f1(&y, &p).unwrap(),
            case["macro_f1"].as_f64().unwrap(),
            &format!("{name} macro-F1"),
        );
        close(
            balanced_accuracy(&y, &p).unwrap(),
            case["balanced_accuracy"].as_f64().unwrap(),
            &format!("{name} balanced"),
        );
    }
    for case in f["mae"].as_array().unwrap() {
        close(
            mae(&floats(&case["y_true"]), &floats(&case["y_pred"])).unwrap(),
            case["mae"].as_f64().unwrap(),
            "mae",
        );
    }
}

#[test]
fn log_loss_matches_sklearn() {
    let f = fixture();
    for case in f["log_loss"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let probs: Vec<Vec<f64>> = case["probs"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        close(
            log_loss(&ints(&case["y_true"]), &probs).unwrap(),
            case["log_loss"].as_f64().unwrap(),
            &format!("{name} log_loss"),
        );
    }
    // A class without a column, and a NaN probability, are errors.
    assert!(matches!(
        log_loss(&[2], &[vec![0.5, 0.5]]),
        Err(MetricError::Shape(_))
    ));
    assert_eq!(
        log_loss(&[0], &[vec![f64::NAN, 0.5]]),
        Err(MetricError::NonFinite)
    );
}

#[test]
fn thresholds_are_numpys_linspace() {
    let t = sweep_thresholds();
    assert_eq!(t.len(), 19);
    assert_eq!(t[0], 0.05);
    assert_eq!(t[9], 0.49999999999999994); // what np.linspace gives, not 0.5
    assert_eq!(t[18], 0.95);
}

#[test]
fn bad_inputs_are_errors() {
    assert!(matches!(
        accuracy(&[1, 2], &[1]),
        Err(MetricError::Shape(_))
    ));
    assert!(matches!(macro_f1(&[], &[]), Err(MetricError::Shape(_))));
    assert_eq!(
        roc_auc(&[true, false], &[f64::NAN, 0.1]),
        Err(MetricError::NonFinite)
    );
    let (m, s) = mean_std(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(m, 2.5);
    close(s, 1.118033988749895, "population std");
}
