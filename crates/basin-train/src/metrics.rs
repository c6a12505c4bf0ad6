//! Evaluation metrics in f64 with scikit-learn's semantics (the papers report sklearn numbers).
//!
//! Pure Rust on slices: no tensors, so they can be checked against sklearn values exactly
//! (`tests/it/metrics.rs` reads a fixture written by `tests/fixtures/metrics/gen.py`).

/// Why a metric is undefined for the given input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricError {
    /// The inputs have different lengths or are empty.
    #[error("metric inputs: {0}")]
    Shape(String),
    /// ROC-AUC needs both classes in `y_true` (sklearn raises the same).
    #[error("only one class present in y_true; ROC AUC is not defined")]
    OneClass,
    /// A score is NaN or infinite.
    #[error("scores contain NaN or infinite values")]
    NonFinite,
}

fn check_len(a: usize, b: usize) -> Result<(), MetricError> {
    if a != b {
        return Err(MetricError::Shape(format!("lengths differ ({a} vs {b})")));
    }
    if a == 0 {
        return Err(MetricError::Shape("empty input".into()));
    }
    Ok(())
}

/// Fraction of exact matches (`sklearn.metrics.accuracy_score`).
pub fn accuracy(y_true: &[i64], y_pred: &[i64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), y_pred.len())?;
    let hits = y_true.iter().zip(y_pred).filter(|(a, b)| a == b).count();
    Ok(hits as f64 / y_true.len() as f64)
}

/// The sorted union of the labels in both vectors (sklearn's `unique_labels`).
fn labels(y_true: &[i64], y_pred: &[i64]) -> Vec<i64> {
    let mut l: Vec<i64> = y_true.iter().chain(y_pred).copied().collect();
    l.sort_unstable();
    l.dedup();
    l
}

/// Per-label (true positives, false positives, false negatives) over the union of labels.
fn counts(y_true: &[i64], y_pred: &[i64]) -> Vec<(i64, usize, usize, usize)> {
    labels(y_true, y_pred)
        .into_iter()
        .map(|c| {
            let (mut tp, mut fp, mut fneg) = (0, 0, 0);
            for (&t, &p) in y_true.iter().zip(y_pred) {
                match (t == c, p == c) {
                    (true, true) => tp += 1,
                    (false, true) => fp += 1,
                    (true, false) => fneg += 1,
                    _ => {}
                }
            }
            (c, tp, fp, fneg)
        })
        .collect()
}

/// Mean over labels of the per-label F1 (`f1_score(average="macro", zero_division=0)`);
/// labels are the union of those in `y_true` and `y_pred`.
pub fn macro_f1(y_true: &[i64], y_pred: &[i64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), y_pred.len())?;
    let per = counts(y_true, y_pred);
    let sum: f64 = per
        .iter()
        .map(|&(_, tp, fp, fneg)| {
            let denom = 2 * tp + fp + fneg;
            if denom == 0 {
                0.0
            } else {
                2.0 * tp as f64 / denom as f64
            }
        })
        .sum();
    Ok(sum / per.len() as f64)
}

/// Class-averaged accuracy, i.e. the mean recall over the classes present in `y_true`
/// (`balanced_accuracy_score`; the GNN Benchmark's accuracy for PATTERN/CLUSTER).
pub fn balanced_accuracy(y_true: &[i64], y_pred: &[i64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), y_pred.len())?;
    let per: Vec<f64> = counts(y_true, y_pred)
        .into_iter()
        .filter(|&(_, tp, _, fneg)| tp + fneg > 0)
        .map(|(_, tp, _, fneg)| tp as f64 / (tp + fneg) as f64)
        .collect();
    Ok(per.iter().sum::<f64>() / per.len() as f64)
}

/// Mean cross-entropy of class probabilities (`sklearn.metrics.log_loss`): `probs[i]` is item
/// `i`'s row (a single column is the probability of class 1), clipped into `[ε, 1 − ε]` with
/// ε the f64 machine epsilon as sklearn clips. Rows are taken as given, not renormalised.
pub fn log_loss(y_true: &[i64], probs: &[Vec<f64>]) -> Result<f64, MetricError> {
    check_len(y_true.len(), probs.len())?;
    let mut sum = 0.0;
    for (&y, row) in y_true.iter().zip(probs) {
        let p = match (row.as_slice(), y) {
            ([p1], 1) => *p1,
            ([p1], 0) => 1.0 - p1,
            (r, _) => match usize::try_from(y).ok().and_then(|c| r.get(c)) {
                Some(&p) if r.len() > 1 => p,
                _ => {
                    return Err(MetricError::Shape(format!(
                        "class {y} has no column in a row of {} probabilities",
                        r.len()
                    )));
                }
            },
        };
        if !p.is_finite() {
            return Err(MetricError::NonFinite);
        }
        sum -= p.clamp(f64::EPSILON, 1.0 - f64::EPSILON).ln();
    }
    Ok(sum / y_true.len() as f64)
}

/// Mean absolute error.
pub fn mae(y_true: &[f64], y_pred: &[f64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), y_pred.len())?;
    Ok(y_true
        .iter()
        .zip(y_pred)
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / y_true.len() as f64)
}

/// Mean absolute error over every column of multi-output targets (sklearn's
/// `mean_absolute_error` with `multioutput = "uniform_average"`; LRGB Peptides-struct): the
/// mean of the per-column errors, which for equal-length columns is the mean over all entries.
pub fn mae_multioutput(y_true: &[Vec<f64>], y_pred: &[Vec<f64>]) -> Result<f64, MetricError> {
    check_len(y_true.len(), y_pred.len())?;
    let width = y_true[0].len();
    let (mut sum, mut count) = (0.0, 0usize);
    for (i, (t, p)) in y_true.iter().zip(y_pred).enumerate() {
        if t.len() != width || p.len() != width {
            return Err(MetricError::Shape(format!(
                "row {i}: {} targets and {} predictions, expected {width} of each",
                t.len(),
                p.len()
            )));
        }
        for (a, b) in t.iter().zip(p) {
            if !a.is_finite() || !b.is_finite() {
                return Err(MetricError::Shape(format!(
                    "row {i}: a target or prediction is NaN or infinite"
                )));
            }
            sum += (a - b).abs();
            count += 1;
        }
    }
    if count == 0 {
        return Err(MetricError::Shape("no target columns".into()));
    }
    Ok(sum / count as f64)
}

/// Mean reciprocal rank of link candidates (LRGB PCQM-Contact; GraphGPS `inductive_edge`'s
/// `compute_mrr`, ranks as OGB's `_eval_mrr`). `rows` hold, per positive link, its score first
/// and then the scores of its candidates (every other node of the graph for the link's source);
/// `groups` says how many consecutive rows belong to each graph. A link's rank is 1 + the
/// candidates scored above it + half those tied with it (OGB's mean of the optimistic and
/// pessimistic ranks; GraphGPS's `argsort` breaks ties arbitrarily); a graph scores the mean
/// reciprocal rank of its links, 0 without positive links (as GraphGPS), and the result is the
/// mean over graphs. (GraphGPS's logger then weights each batch's mean by its labelled pairs,
/// which depends on the batching; this is the mean over every graph of the split.)
pub fn mean_reciprocal_rank(rows: &[Vec<f64>], groups: &[usize]) -> Result<f64, MetricError> {
    if groups.is_empty() {
        return Err(MetricError::Shape("no graphs".into()));
    }
    let total: usize = groups.iter().sum();
    if total != rows.len() {
        return Err(MetricError::Shape(format!(
            "{} rows for {total} positive links",
            rows.len()
        )));
    }
    let mut rows = rows.iter();
    let mut sum = 0.0;
    for &count in groups {
        let mut graph = 0.0;
        for row in rows.by_ref().take(count) {
            let (&pos, candidates) = row
                .split_first()
                .ok_or_else(|| MetricError::Shape("an empty ranking row".into()))?;
            if !pos.is_finite() || candidates.iter().any(|c| !c.is_finite()) {
                return Err(MetricError::NonFinite);
            }
            let above = candidates.iter().filter(|&&c| c > pos).count() as f64;
            let tied = candidates.iter().filter(|&&c| c == pos).count() as f64;
            graph += 1.0 / (1.0 + above + 0.5 * tied);
        }
        if count > 0 {
            sum += graph / count as f64;
        }
    }
    Ok(sum / groups.len() as f64)
}

/// Indices sorting `scores` in descending order (stable), after checking they are finite.
fn descending(scores: &[f64]) -> Result<Vec<usize>, MetricError> {
    if scores.iter().any(|s| !s.is_finite()) {
        return Err(MetricError::NonFinite);
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    Ok(order)
}

/// Area under the ROC curve for binary labels (`roc_auc_score`): the Mann–Whitney statistic,
/// ties counted one half, which equals the trapezoidal area under sklearn's curve. With one
/// class only it is an error (sklearn warns and returns NaN).
pub fn roc_auc(y_true: &[bool], scores: &[f64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), scores.len())?;
    let order = descending(scores)?;
    let pos = y_true.iter().filter(|&&y| y).count();
    let neg = y_true.len() - pos;
    if pos == 0 || neg == 0 {
        return Err(MetricError::OneClass);
    }
    // Each positive in a group of tied scores beats every negative below the group and ties
    // half of the negatives inside it.
    let (mut wins, mut neg_above) = (0.0f64, 0usize);
    for (p, n) in tie_groups(&order, scores, y_true) {
        // Negatives strictly below this group: neg − neg_above − n.
        wins += p as f64 * ((neg - neg_above - n) as f64 + 0.5 * n as f64);
        neg_above += n;
    }
    Ok(wins / (pos as f64 * neg as f64))
}

/// Average precision (`average_precision_score`): `Σ_n (R_n − R_{n−1}) P_n` over the distinct
/// score thresholds, highest first. With no positive label it is 0 (sklearn: recall set to 1,
/// precision 0).
pub fn average_precision(y_true: &[bool], scores: &[f64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), scores.len())?;
    let order = descending(scores)?;
    let pos = y_true.iter().filter(|&&y| y).count();
    if pos == 0 {
        return Ok(0.0);
    }
    let (mut tp, mut fp, mut ap, mut last_recall) = (0usize, 0usize, 0.0f64, 0.0f64);
    for (p, n) in tie_groups(&order, scores, y_true) {
        tp += p;
        fp += n;
        let recall = tp as f64 / pos as f64;
        let precision = tp as f64 / (tp + fp) as f64;
        ap += (recall - last_recall) * precision;
        last_recall = recall;
    }
    Ok(ap)
}

/// The groups of tied scores along `order` (highest score first): each group's count of
/// positive and of negative labels.
fn tie_groups<'a>(
    order: &'a [usize],
    scores: &'a [f64],
    y_true: &'a [bool],
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let mut i = 0;
    std::iter::from_fn(move || {
        let first = *order.get(i)?;
        let (mut p, mut n) = (0usize, 0usize);
        while let Some(&k) = order.get(i).filter(|&&k| scores[k] == scores[first]) {
            if y_true[k] {
                p += 1;
            } else {
                n += 1;
            }
            i += 1;
        }
        Some((p, n))
    })
}

/// The anomaly papers' thresholds: 0.05, 0.10, …, 0.95, bit for bit as
/// `np.linspace(0.05, 0.95, 19)` computes them (`i·step + start`, the last one exact), since a
/// probability can sit exactly on a threshold.
pub fn sweep_thresholds() -> Vec<f64> {
    let step = (0.95 - 0.05) / 18.0;
    (0..19)
        .map(|i| {
            if i == 18 {
                0.95
            } else {
                i as f64 * step + 0.05
            }
        })
        .collect()
}

/// Binary predictions `prob > threshold` (BWGNN's rule: strictly greater).
pub fn threshold(probs: &[f64], t: f64) -> Vec<i64> {
    probs.iter().map(|&p| i64::from(p > t)).collect()
}

/// The threshold sweep of BWGNN/ET/CDAT: the threshold among [`sweep_thresholds`] with the best
/// macro-F1 (the first one on ties), and that F1. Run it on validation scores only.
pub fn best_threshold(y_true: &[bool], probs: &[f64]) -> Result<(f64, f64), MetricError> {
    check_len(y_true.len(), probs.len())?;
    let truth: Vec<i64> = y_true.iter().map(|&y| i64::from(y)).collect();
    let mut best = (f64::NAN, -1.0);
    for t in sweep_thresholds() {
        let f1 = macro_f1(&truth, &threshold(probs, t))?;
        if f1 > best.1 {
            best = (t, f1);
        }
    }
    Ok(best)
}

/// Mean and (population, `np.std`) standard deviation; what the papers print as "mean ± std".
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// OGB's `eval_ap` (LRGB Peptides-func): for each task (column) with at least one positive and
/// one negative label, sklearn's `average_precision_score` over the labelled rows (NaN = no
/// label); the mean over those tasks. `y_true` and `scores` are rows `[N][T]`.
pub fn mean_average_precision(
    y_true: &[Vec<f64>],
    scores: &[Vec<f64>],
) -> Result<f64, MetricError> {
    check_len(y_true.len(), scores.len())?;
    let tasks = y_true[0].len();
    if y_true.iter().chain(scores).any(|r| r.len() != tasks) {
        return Err(MetricError::Shape(format!(
            "every row must have {tasks} labels and scores"
        )));
    }
    let mut per_task = Vec::new();
    for t in 0..tasks {
        let (mut truth, mut s) = (Vec::new(), Vec::new());
        for (y, p) in y_true.iter().zip(scores) {
            if !y[t].is_nan() {
                truth.push(y[t] > 0.5);
                s.push(p[t]);
            }
        }
        let pos = truth.iter().filter(|&&b| b).count();
        if pos > 0 && pos < truth.len() {
            per_task.push(average_precision(&truth, &s)?);
        }
    }
    if per_task.is_empty() {
        return Err(MetricError::Shape(
            "no task has both a positive and a negative label".into(),
        ));
    }
    Ok(per_task.iter().sum::<f64>() / per_task.len() as f64)
}

/// benchmarking-gnns' `accuracy_SBM` over a whole split (the GNN Benchmark's "weighted
/// accuracy", SFi-Former Table 2's "Accuracy"): the confusion matrix over the union of true and
/// predicted classes, and the mean of its rows' recalls, a row without true labels counting 0.
/// Equal to [`balanced_accuracy`] unless a class is predicted that never occurs.
pub fn accuracy_sbm(y_true: &[i64], y_pred: &[i64]) -> Result<f64, MetricError> {
    check_len(y_true.len(), y_pred.len())?;
    let mut classes: Vec<i64> = y_true.iter().chain(y_pred).copied().collect();
    classes.sort_unstable();
    classes.dedup();
    let recall_sum: f64 = classes
        .iter()
        .map(|&c| {
            let (tp, n) = y_true
                .iter()
                .zip(y_pred)
                .filter(|(t, _)| **t == c)
                .fold((0usize, 0usize), |(tp, n), (_, p)| {
                    (tp + usize::from(*p == c), n + 1)
                });
            if n == 0 { 0.0 } else { tp as f64 / n as f64 }
        })
        .sum();
    Ok(recall_sum / classes.len() as f64)
}
