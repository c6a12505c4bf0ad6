//! Paired comparison of two models evaluated on the same splits (cross-validation folds, or a
//! fixed split under several seeds): per split, the difference of a metric; its mean, standard
//! error and wins / ties / losses. On the TU sets the folds differ in difficulty by several
//! points (± 3 on PROTEINS), which hides a one-point difference between two models' means; the
//! paired difference cancels what the folds share (a paired t-test's statistic is
//! `difference / std_error`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::record::RunRecord;

/// `a` against `b` on the splits both were evaluated on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// The summary metric compared (`test_accuracy`, `test_auc`, …).
    pub metric: String,
    /// Splits both sides were evaluated on.
    pub pairs: usize,
    /// Mean of `a`'s metric over those splits.
    pub mean_a: f64,
    /// Mean of `b`'s.
    pub mean_b: f64,
    /// Mean of `a − b`.
    pub difference: f64,
    /// Standard error of that mean: the sample standard deviation (n − 1) of the differences
    /// over √n; NaN for a single pair.
    pub std_error: f64,
    /// Splits where `a` scored higher, …
    pub wins: usize,
    /// … equal (identical values: the same count right on the same test set), …
    pub ties: usize,
    /// … lower.
    pub losses: usize,
    /// Runs of `a` with no run of `b` on their split (left out).
    pub unmatched_a: usize,
    /// Runs of `b` with no run of `a` on their split (left out).
    pub unmatched_b: usize,
}

impl Paired {
    /// Pairs the runs of `a` and `b` by their test split (the SHA-256 of its indices in each
    /// record; with the seed too where several runs share one test split, as repeated runs on
    /// a fixed split do) and compares `metric` of each pair. Runs without the metric (not
    /// finished) or with a non-finite value are left out. An error if no split has a run on both sides, or if a run has
    /// no test split recorded.
    pub fn new(a: &[RunRecord], b: &[RunRecord], metric: &str) -> Result<Self, TrainError> {
        let (a, b) = (scored(a, metric)?, scored(b, metric)?);
        let mut repeats = repeated(&a);
        repeats.extend(repeated(&b));
        let (a, b) = (keyed(&a, &repeats)?, keyed(&b, &repeats)?);
        let pairs: Vec<(f64, f64)> = a
            .iter()
            .filter_map(|(k, &x)| b.get(k).map(|&y| (x, y)))
            .collect();
        if pairs.is_empty() {
            return Err(TrainError::Unpaired(format!(
                "no split was evaluated on both sides ({} and {} runs with `{metric}`): the two \
                 were not run on the same folds (a different dataset, fold seed, number of \
                 folds or split)",
                a.len(),
                b.len()
            )));
        }
        let n = pairs.len() as f64;
        let d: Vec<f64> = pairs.iter().map(|(x, y)| x - y).collect();
        let difference = d.iter().sum::<f64>() / n;
        let var = d.iter().map(|v| (v - difference).powi(2)).sum::<f64>() / (n - 1.0);
        let tie = |v: &f64| v.abs() <= 1e-12;
        Ok(Self {
            metric: metric.into(),
            pairs: pairs.len(),
            mean_a: pairs.iter().map(|p| p.0).sum::<f64>() / n,
            mean_b: pairs.iter().map(|p| p.1).sum::<f64>() / n,
            difference,
            std_error: if pairs.len() > 1 {
                (var / n).sqrt()
            } else {
                f64::NAN
            },
            wins: d.iter().filter(|v| !tie(v) && **v > 0.0).count(),
            ties: d.iter().filter(|v| tie(v)).count(),
            losses: d.iter().filter(|v| !tie(v) && **v < 0.0).count(),
            unmatched_a: a.len() - pairs.len(),
            unmatched_b: b.len() - pairs.len(),
        })
    }

    /// `+1.87 ± 1.01 (7 / 1 / 2)`: the mean difference ± its standard error, scaled (100 for
    /// percentages), and wins / ties / losses of `a`.
    pub fn show(&self, scale: f64) -> String {
        let se = if self.std_error.is_nan() {
            "–".to_string()
        } else {
            format!("{:.2}", self.std_error * scale)
        };
        format!(
            "{:+.2} ± {se} ({} / {} / {})",
            self.difference * scale,
            self.wins,
            self.ties,
            self.losses
        )
    }
}

/// Each run with the metric (finite) as (record, test split hash, value); runs without it are
/// left out.
pub(crate) fn scored<'r>(
    runs: &'r [RunRecord],
    metric: &str,
) -> Result<Vec<(&'r RunRecord, &'r str, f64)>, TrainError> {
    let mut out = Vec::new();
    for r in runs {
        let Some(&v) = r.summary.get(metric).filter(|v| v.is_finite()) else {
            continue;
        };
        let test = r.split_hashes.get("test").ok_or_else(|| {
            TrainError::Unpaired(format!(
                "run `{}` records no test split, so it cannot be paired with another run",
                r.name
            ))
        })?;
        out.push((r, test.as_str(), v));
    }
    Ok(out)
}

/// Split keys: the test split's hash, and the seed too for a split that several runs of one side
/// share (on both sides, so that one run on a fixed split pairs with the run of its seed).
pub(crate) fn keyed<T: Copy>(
    runs: &[(&RunRecord, &str, T)],
    repeated: &BTreeSet<&str>,
) -> Result<BTreeMap<String, T>, TrainError> {
    let mut keyed = BTreeMap::new();
    for &(r, test, v) in runs {
        let key = if repeated.contains(test) {
            format!("{test}/{}", r.seed)
        } else {
            test.to_string()
        };
        if keyed.insert(key, v).is_some() {
            return Err(TrainError::Unpaired(format!(
                "run `{}`: another run has the same test split and seed ({}); pair runs of one \
                 model against runs of another, not two copies of one",
                r.name, r.seed
            )));
        }
    }
    Ok(keyed)
}

/// The test splits that more than one run of `runs` was evaluated on.
pub(crate) fn repeated<'r, T>(runs: &[(&RunRecord, &'r str, T)]) -> BTreeSet<&'r str> {
    let mut seen = BTreeSet::new();
    runs.iter()
        .filter(|(_, test, _)| !seen.insert(*test))
        .map(|(_, test, _)| *test)
        .collect()
}

/// Every `record.json` under `dir` (a `basin train` output, a reproduction's folder, or one
/// run's), in path order, with its path.
pub fn read_records(dir: &Path) -> Result<Vec<(PathBuf, RunRecord)>, TrainError> {
    let io = |path: &Path, source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries = std::fs::read_dir(&d)
            .map_err(|e| io(&d, e))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| io(&d, e))?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "record.json") {
                found.push(p);
            }
        }
    }
    found.sort();
    found
        .into_iter()
        .map(|p| RunRecord::read(&p).map(|r| (p, r)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, test: &str, seed: u64, acc: Option<f64>) -> RunRecord {
        let mut r = RunRecord::new(name, serde_json::Value::Null, seed, "cpu".into());
        r.split_hashes.insert("test".into(), test.into());
        if let Some(a) = acc {
            r.summary.insert("test_accuracy".into(), a);
        }
        r
    }

    #[test]
    fn pairs_by_test_split_whatever_the_order_and_names() {
        let a = [
            run("A/fold-0", "f0", 0, Some(0.80)),
            run("A/fold-1", "f1", 1, Some(0.70)),
            run("A/fold-2", "f2", 2, Some(0.90)),
            run("A/fold-3", "f3", 3, Some(0.60)),
        ];
        // B's runs in another order, other names and seeds; f9 has no partner; one unfinished.
        let b = [
            run("B 2", "f2", 7, Some(0.85)),
            run("B 0", "f0", 5, Some(0.80)),
            run("B 3", "f3", 8, Some(0.65)),
            run("B 1", "f1", 6, Some(0.60)),
            run("B 9", "f9", 9, Some(0.10)),
            run("B 4", "f4", 4, None),
        ];
        let p = Paired::new(&a, &b, "test_accuracy").unwrap();
        // Differences 0, +0.10, +0.05, −0.05: mean 0.025, sample variance 0.00416̅ over n = 4.
        assert_eq!((p.pairs, p.wins, p.ties, p.losses), (4, 2, 1, 1));
        assert!((p.difference - 0.025).abs() < 1e-12);
        let d = [0.0, 0.1, 0.05, -0.05f64];
        let var = d.iter().map(|v| (v - 0.025).powi(2)).sum::<f64>() / 3.0;
        assert!((p.std_error - (var / 4.0).sqrt()).abs() < 1e-12);
        assert!((p.mean_a - 0.75).abs() < 1e-12 && (p.mean_b - 0.725).abs() < 1e-12);
        assert_eq!((p.unmatched_a, p.unmatched_b), (0, 1));
        assert_eq!(p.show(100.0), "+2.50 ± 3.23 (2 / 1 / 1)");
    }

    #[test]
    fn runs_sharing_a_test_split_pair_by_seed() {
        let a = [run("a0", "s", 0, Some(0.5)), run("a1", "s", 1, Some(0.7))];
        let b = [run("b1", "s", 1, Some(0.6)), run("b0", "s", 0, Some(0.5))];
        let p = Paired::new(&a, &b, "test_accuracy").unwrap();
        assert_eq!((p.pairs, p.wins, p.ties, p.losses), (2, 1, 1, 0));
        assert!((p.difference - 0.05).abs() < 1e-12);
        // One run on the split pairs with the other side's run of its seed; a NaN is left out.
        let single = [run("b1", "s", 1, Some(0.6))];
        let p = Paired::new(&a, &single, "test_accuracy").unwrap();
        assert_eq!((p.pairs, p.wins, p.unmatched_a), (1, 1, 1));
        assert!((p.difference - 0.1).abs() < 1e-12);
        let nan = [
            run("b0", "s", 0, Some(f64::NAN)),
            run("b1", "s", 1, Some(0.6)),
        ];
        let p = Paired::new(&a, &nan, "test_accuracy").unwrap();
        assert_eq!((p.pairs, p.unmatched_a, p.unmatched_b), (1, 1, 0));
    }

    #[test]
    fn different_folds_a_missing_split_and_copies_are_errors() {
        let a = [run("a", "x", 0, Some(0.5))];
        let b = [run("b", "y", 0, Some(0.5))];
        let e = Paired::new(&a, &b, "test_accuracy")
            .unwrap_err()
            .to_string();
        assert!(e.contains("same folds"), "{e}");
        let mut bare = run("bare", "x", 0, Some(0.5));
        bare.split_hashes.clear();
        let e = Paired::new(&[bare], &b, "test_accuracy")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`bare` records no test split"), "{e}");
        let twice = [
            run("c", "x", 3, Some(0.5)),
            run("c again", "x", 3, Some(0.6)),
        ];
        let e = Paired::new(&twice, &a, "test_accuracy")
            .unwrap_err()
            .to_string();
        assert!(e.contains("same test split and seed"), "{e}");
        // One pair: no standard error.
        let p = Paired::new(&a, &[run("b", "x", 0, Some(0.25))], "test_accuracy").unwrap();
        assert!(p.std_error.is_nan());
        assert_eq!(p.show(100.0), "+25.00 ± – (1 / 0 / 0)");
    }
}
