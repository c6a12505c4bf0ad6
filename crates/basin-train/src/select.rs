//! Model selection between candidate configurations on each split's own validation data: the
//! runs of several candidates (`pe.k = 8` and `pe.k = 15`, say) on the same folds; for every
//! test split, the candidate whose run scored best **on its validation split** (or its inner
//! folds) — never on the test split — and that run's test result. The selected runs are then
//! one model's runs, to be compared with a baseline as any other ([`crate::compare`]); their
//! mean is an honest estimate of "this family with that hyperparameter chosen per fold", where
//! the best candidate's mean over the test folds is not (it chose on them).
//!
//! The order of the rule is the runs' own protocol's ([`Selection`]): the validation metric
//! at the selected epoch (`selected_val_<metric>`; `inner_<metric>` under inner folds), its
//! ties to the lower validation cross-entropy (`selected_val_loss`) under `metric-then-loss`,
//! the loss alone under `loss`; remaining ties go to the earlier candidate, so list the
//! default first.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::compare::{keyed, repeated, scored};
use crate::protocol::{Metric, Selection};
use crate::record::RunRecord;

/// One test split's choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// The chosen run's name.
    pub run: String,
    /// Index of the chosen candidate.
    pub candidate: usize,
    /// Each candidate's validation score on this split (the metric; MAE as is).
    pub validation: Vec<f64>,
    /// Each candidate's test score on this split (recorded, not used to choose).
    pub test: Vec<f64>,
}

/// The outcome of [`select`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selected {
    /// The protocol metric (`accuracy`, `auc`, …): the summaries' `test_<metric>`.
    pub metric: String,
    /// The rule that ordered the candidates' runs.
    pub selection: Selection,
    /// One entry per test split that every candidate finished, in split order.
    pub choices: Vec<Choice>,
    /// How many splits chose each candidate.
    pub counts: Vec<usize>,
    /// Each candidate's mean test score over those splits.
    pub candidate_means: Vec<f64>,
    /// The selected runs' mean test score.
    pub mean: f64,
    /// Finished splits of some candidate that another lacks (left out).
    pub left_out: usize,
    /// The chosen runs, their summaries gaining `selected_candidate`.
    #[serde(skip)]
    pub runs: Vec<RunRecord>,
}

/// Chooses, split by split, among `candidates` (each one candidate's runs on the same folds).
/// An error if the candidates' runs record different metrics or selection rules, a finished
/// run records no validation score, or no split was finished by every candidate.
pub fn select(candidates: &[Vec<RunRecord>]) -> Result<Selected, TrainError> {
    if candidates.len() < 2 {
        return Err(TrainError::Unpaired(
            "selection needs at least two candidates' runs".into(),
        ));
    }
    let (metric, selection) = protocol_of(candidates)?;
    let test_key = format!("test_{}", metric.name());
    // Each candidate's finished runs (a test score recorded), keyed by test split as
    // `basin compare` pairs them.
    let scored = candidates
        .iter()
        .map(|runs| scored(runs, &test_key))
        .collect::<Result<Vec<_>, _>>()?;
    let repeated: BTreeSet<&str> = scored.iter().flat_map(|s| repeated(s)).collect();
    let keyed = scored
        .iter()
        .map(|s| {
            let with_runs: Vec<_> = s.iter().map(|&(r, t, _)| (r, t, r)).collect();
            keyed(&with_runs, &repeated)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let all: BTreeSet<&String> = keyed.iter().flat_map(|k| k.keys()).collect();
    let common: Vec<&String> = all
        .iter()
        .copied()
        .filter(|k| keyed.iter().all(|c| c.contains_key(*k)))
        .collect();
    if common.is_empty() {
        return Err(TrainError::Unpaired(format!(
            "no test split was finished by every candidate ({} finished runs in all): the \
             candidates did not run on the same folds (a different dataset, fold seed, number of \
             folds or split), or have not finished",
            scored.iter().map(Vec::len).sum::<usize>()
        )));
    }
    let left_out: usize = keyed.iter().map(|k| k.len()).sum::<usize>() - common.len() * keyed.len();
    let mut choices = Vec::with_capacity(common.len());
    let mut runs = Vec::with_capacity(common.len());
    let mut counts = vec![0; candidates.len()];
    for key in common {
        let rows: Vec<&RunRecord> = keyed.iter().map(|k| k[key]).collect();
        let ranked = rows
            .iter()
            .map(|r| rank(r, metric, selection))
            .collect::<Result<Vec<_>, _>>()?;
        // The first of the best: a later candidate must beat it, not equal it.
        let mut best = 0;
        for (c, r) in ranked.iter().enumerate().skip(1) {
            if r.0 > ranked[best].0 || (r.0 == ranked[best].0 && r.1 > ranked[best].1) {
                best = c;
            }
        }
        counts[best] += 1;
        let mut chosen = rows[best].clone();
        chosen
            .summary
            .insert("selected_candidate".into(), best as f64);
        choices.push(Choice {
            run: chosen.name.clone(),
            candidate: best,
            validation: ranked.iter().map(|r| r.2).collect(),
            test: rows.iter().map(|r| r.summary[&test_key]).collect(),
        });
        runs.push(chosen);
    }
    let n = choices.len() as f64;
    let candidate_means = (0..candidates.len())
        .map(|c| choices.iter().map(|ch| ch.test[c]).sum::<f64>() / n)
        .collect();
    let mean = choices.iter().map(|ch| ch.test[ch.candidate]).sum::<f64>() / n;
    Ok(Selected {
        metric: metric.name().into(),
        selection,
        choices,
        counts,
        candidate_means,
        mean,
        left_out,
        runs,
    })
}

/// The metric and rule every run's protocol records (`config.metric`, `config.selection`).
fn protocol_of(candidates: &[Vec<RunRecord>]) -> Result<(Metric, Selection), TrainError> {
    let mut found: Option<(Metric, Selection, &str)> = None;
    for r in candidates.iter().flatten() {
        let metric: Metric = field(r, "metric")?.ok_or_else(|| {
            TrainError::Unpaired(format!(
                "run `{}` records no protocol `metric` in its config (a run of a \
                 cross-validation or fixed-split protocol was expected)",
                r.name
            ))
        })?;
        let selection: Selection = field(r, "selection")?.unwrap_or_default();
        match &found {
            None => found = Some((metric, selection, &r.name)),
            Some((m, s, first)) if (*m, *s) != (metric, selection) => {
                return Err(TrainError::Unpaired(format!(
                    "run `{}` selects by {} under {selection:?}, run `{first}` by {} under {s:?}: \
                     candidates must share the protocol's metric and rule",
                    r.name,
                    metric.name(),
                    m.name()
                )));
            }
            Some(_) => {}
        }
    }
    found
        .map(|(m, s, _)| (m, s))
        .ok_or_else(|| TrainError::Unpaired("no runs".into()))
}

/// A field of the run's protocol config, `None` where it is absent.
fn field<T: serde::de::DeserializeOwned>(
    r: &RunRecord,
    name: &str,
) -> Result<Option<T>, TrainError> {
    r.config
        .get(name)
        .map(|v| serde_json::from_value(v.clone()))
        .transpose()
        .map_err(|e| TrainError::Unpaired(format!("run `{}`: config `{name}`: {e}", r.name)))
}

/// (primary, tie-break, validation score): higher is better; MAE is negated.
fn rank(
    r: &RunRecord,
    metric: Metric,
    selection: Selection,
) -> Result<(f64, f64, f64), TrainError> {
    let name = metric.name();
    let score = [format!("selected_val_{name}"), format!("inner_{name}")]
        .iter()
        .find_map(|k| r.summary.get(k).copied())
        .ok_or_else(|| {
            TrainError::Unpaired(format!(
                "run `{}` records no validation score (`selected_val_{name}` or `inner_{name}` in \
                 its summary): it did not choose its epoch on validation data",
                r.name
            ))
        })?;
    let up = if metric == Metric::Mae { -score } else { score };
    let loss = r
        .summary
        .get("selected_val_loss")
        .copied()
        .filter(|l| l.is_finite());
    let (primary, tie) = match (selection, loss) {
        (Selection::MetricThenLoss, Some(l)) => (up, -l),
        (Selection::Loss, Some(l)) => (-l, 0.0),
        _ => (up, 0.0),
    };
    Ok((primary, tie, score))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished run on test split `split` with a validation (accuracy, loss) and a test
    /// accuracy.
    fn run(name: &str, split: &str, val: (f64, f64), test: f64, selection: &str) -> RunRecord {
        let config = serde_json::json!({ "metric": "accuracy", "selection": selection });
        let mut r = RunRecord::new(name, config, 0, "cpu".into());
        r.split_hashes.insert("test".into(), split.into());
        r.summary.insert("selected_val_accuracy".into(), val.0);
        r.summary.insert("selected_val_loss".into(), val.1);
        r.summary.insert("test_accuracy".into(), test);
        r
    }

    #[test]
    fn each_split_takes_the_candidate_best_on_validation_whatever_its_test_score() {
        let rule = "metric-then-loss";
        let a = vec![
            run("a0", "f0", (0.80, 0.5), 0.90, rule), // a wins on validation, loses on test
            run("a1", "f1", (0.70, 0.4), 0.60, rule), // tie on accuracy, a's loss lower
            run("a2", "f2", (0.70, 0.5), 0.70, rule), // a full tie: the first candidate
            run("a3", "f3", (0.60, 0.5), 0.70, rule),
        ];
        let b = vec![
            run("b2", "f2", (0.70, 0.5), 0.90, rule),
            run("b0", "f0", (0.75, 0.3), 0.95, rule),
            run("b1", "f1", (0.70, 0.6), 0.80, rule),
            run("b3", "f3", (0.65, 0.9), 0.50, rule),
            run("b9", "f9", (0.99, 0.1), 0.99, rule), // no partner: left out
        ];
        let s = select(&[a, b]).unwrap();
        let picked: Vec<&str> = s.choices.iter().map(|c| c.run.as_str()).collect();
        assert_eq!(picked, ["a0", "a1", "a2", "b3"]);
        assert_eq!(s.counts, [3, 1]);
        assert_eq!(s.left_out, 1);
        assert!((s.mean - (0.90 + 0.60 + 0.70 + 0.50) / 4.0).abs() < 1e-12);
        assert!((s.candidate_means[1] - (0.95 + 0.80 + 0.90 + 0.50) / 4.0).abs() < 1e-12);
        assert_eq!(s.runs[3].summary["selected_candidate"], 1.0);
        assert_eq!(s.choices[0].validation, [0.80, 0.75]);
    }

    #[test]
    fn the_runs_own_rule_orders_them() {
        // Under `loss` the lower validation loss wins over the higher accuracy.
        let a = vec![run("a", "f", (0.80, 0.5), 0.9, "loss")];
        let b = vec![run("b", "f", (0.70, 0.4), 0.8, "loss")];
        assert_eq!(select(&[a.clone(), b.clone()]).unwrap().choices[0].run, "b");
        // Under `metric` equal accuracies keep the first candidate, whatever the losses.
        let a = vec![run("a", "f", (0.70, 0.9), 0.9, "metric")];
        let b = vec![run("b", "f", (0.70, 0.1), 0.8, "metric")];
        assert_eq!(select(&[a, b]).unwrap().choices[0].run, "a");
    }

    #[test]
    fn a_lower_mae_is_the_better_validation_score() {
        let mae = |name: &str, val: f64| {
            let config = serde_json::json!({ "metric": "mae", "selection": "metric-then-loss" });
            let mut r = RunRecord::new(name, config, 0, "cpu".into());
            r.split_hashes.insert("test".into(), "f".into());
            r.summary.insert("selected_val_mae".into(), val);
            r.summary.insert("test_mae".into(), 1.0);
            r
        };
        let s = select(&[vec![mae("a", 0.3)], vec![mae("b", 0.2)]]).unwrap();
        assert_eq!(s.choices[0].run, "b");
    }

    #[test]
    fn inner_fold_scores_count_and_unfinished_runs_do_not() {
        let mut a = run("a", "f", (0.0, 0.0), 0.9, "metric-then-loss");
        a.summary.clear();
        a.summary.insert("inner_accuracy".into(), 0.8);
        a.summary.insert("test_accuracy".into(), 0.6);
        let b = run("b", "f", (0.9, 0.3), 0.7, "metric-then-loss");
        let mut unfinished = run("b-g", "g", (0.9, 0.3), 0.7, "metric-then-loss");
        unfinished.summary.remove("test_accuracy");
        let a2 = run("a-g", "g", (0.1, 0.3), 0.7, "metric-then-loss");
        let s = select(&[vec![a, a2], vec![b, unfinished]]).unwrap();
        assert_eq!(s.choices.len(), 1);
        assert_eq!((s.choices[0].run.as_str(), s.left_out), ("b", 1));
    }

    #[test]
    fn different_rules_no_validation_score_and_disjoint_folds_are_errors() {
        let a = vec![run("a", "f", (0.8, 0.5), 0.9, "metric")];
        let b = vec![run("b", "f", (0.8, 0.5), 0.9, "loss")];
        let e = select(&[a.clone(), b]).unwrap_err().to_string();
        assert!(e.contains("must share"), "{e}");
        let mut c = run("c", "f", (0.8, 0.5), 0.9, "metric");
        c.summary.retain(|k, _| k.starts_with("test_"));
        let e = select(&[a.clone(), vec![c]]).unwrap_err().to_string();
        assert!(e.contains("no validation score"), "{e}");
        let d = vec![run("d", "other", (0.8, 0.5), 0.9, "metric")];
        let e = select(&[a.clone(), d]).unwrap_err().to_string();
        assert!(e.contains("same folds"), "{e}");
        assert!(select(&[a]).is_err());
    }
}
