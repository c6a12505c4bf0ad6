//! Seeded, deterministic, stratified splits with a recorded hash.
//!
//! - [`stratified_split`]: the BWGNN/ET/CDAT anomaly protocol — a stratified `train_ratio`
//!   draw, then the rest split stratified into validation and test with test = 0.67 of the rest
//!   (val:test ≈ 1:2), both with a fixed seed (BWGNN's `main.py`).
//! - [`stratified_kfold`]: stratified k-fold cross-validation whose test folds partition the
//!   data, each with an inner stratified validation split of its training part (leak-free model
//!   selection for the TU protocol).
//!
//! Sizes follow scikit-learn's `train_test_split`: `n_train = ⌊ratio·n⌋`,
//! `n_test = ⌈test_fraction·n_rest⌉`, and per-class counts by largest remainder, so every
//! class holds its proportion within one item. The draws themselves use ChaCha8 from the seed,
//! so they are not sklearn's draws; the hash identifies a split exactly.

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{DataError, Result};

/// Train, validation and test ids (node ids or graph indices), each ascending, plus a SHA-256
/// of the three lists that identifies the split in run records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    /// Training ids.
    pub train: Vec<u32>,
    /// Validation ids.
    pub val: Vec<u32>,
    /// Test ids.
    pub test: Vec<u32>,
    /// Hex SHA-256 of the lists (see [`Split::compute_hash`]).
    pub hash: String,
}

impl Split {
    /// The first `n[0]`, `n[1]`, `n[2]` items of a seeded shuffle of each part (all of a part
    /// when its `n` is `None`): a smaller split of a published one, every part drawn at random.
    pub fn subset(&self, n: [Option<usize>; 3], seed: u64) -> Split {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut take = |part: &[u32], n: Option<usize>| {
            let mut v = part.to_vec();
            if let Some(n) = n {
                v.shuffle(&mut rng);
                v.truncate(n);
            }
            v
        };
        let train = take(&self.train, n[0]);
        let val = take(&self.val, n[1]);
        let test = take(&self.test, n[2]);
        Split::new(train, val, test)
    }

    /// A split from three id lists (each sorted here), with its hash.
    pub fn new(mut train: Vec<u32>, mut val: Vec<u32>, mut test: Vec<u32>) -> Self {
        train.sort_unstable();
        val.sort_unstable();
        test.sort_unstable();
        let hash = Self::compute_hash(&train, &val, &test);
        Self {
            train,
            val,
            test,
            hash,
        }
    }

    /// SHA-256 over `"train"`, the count and the little-endian `u32` ids, then the same for
    /// `"val"` and `"test"`; lower-case hex.
    pub fn compute_hash(train: &[u32], val: &[u32], test: &[u32]) -> String {
        let mut h = Sha256::new();
        for (name, ids) in [("train", train), ("val", val), ("test", test)] {
            h.update(name.as_bytes());
            h.update((ids.len() as u64).to_le_bytes());
            for id in ids {
                h.update(id.to_le_bytes());
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether the stored hash matches the lists.
    pub fn hash_matches(&self) -> bool {
        self.hash == Self::compute_hash(&self.train, &self.val, &self.test)
    }

    /// `[train, val, test]` sizes.
    pub fn sizes(&self) -> [usize; 3] {
        [self.train.len(), self.val.len(), self.test.len()]
    }

    /// Fails if an id appears in two parts (or twice in one).
    pub fn check_disjoint(&self) -> Result<()> {
        let all = self.train.iter().chain(&self.val).chain(&self.test);
        match repeated(all.copied().collect()) {
            Some(id) => Err(DataError::invalid(
                "split",
                format!("id {id} is in more than one part"),
            )),
            None => Ok(()),
        }
    }
}

/// The train/val/test protocol of BWGNN, ET and CDAT.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SplitConfig {
    /// Fraction of the labelled items in the training part (BWGNN `--train_ratio`).
    pub train_ratio: f64,
    /// Fraction of the remainder that goes to test (BWGNN: 0.67, i.e. val:test ≈ 1:2).
    pub test_fraction_of_rest: f64,
    /// Seed (BWGNN fixes 2 for every run).
    pub seed: u64,
}

impl Default for SplitConfig {
    fn default() -> Self {
        Self::bwgnn(0.4)
    }
}

impl SplitConfig {
    /// BWGNN's protocol with the given train ratio (the papers use 0.01 and 0.4): seed 2,
    /// test = 0.67 of the rest.
    pub fn bwgnn(train_ratio: f64) -> Self {
        Self {
            train_ratio,
            test_fraction_of_rest: 0.67,
            seed: 2,
        }
    }

    fn validate(&self) -> Result<()> {
        let ok = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if !ok(self.train_ratio) || !ok(self.test_fraction_of_rest) {
            return Err(DataError::invalid(
                "split config",
                format!(
                    "train_ratio ({}) and test_fraction_of_rest ({}) must lie in [0, 1]",
                    self.train_ratio, self.test_fraction_of_rest
                ),
            ));
        }
        Ok(())
    }
}

/// Items grouped by class (classes in ascending label order), each group shuffled by `rng`.
fn shuffled_classes(ids: &[u32], labels: &[usize], rng: &mut ChaCha8Rng) -> Vec<Vec<u32>> {
    let mut classes = labels.to_vec();
    classes.sort_unstable();
    classes.dedup();
    let mut groups = vec![Vec::new(); classes.len()];
    for (&id, l) in ids.iter().zip(labels) {
        if let Ok(c) = classes.binary_search(l) {
            groups[c].push(id);
        }
    }
    for g in &mut groups {
        g.shuffle(rng);
    }
    groups
}

/// Splits `total` draws over classes with `counts` items in proportion, by largest remainder
/// (ties to the lower class index); each class gets within one item of its exact share.
fn allocate(counts: &[usize], total: usize) -> Vec<usize> {
    let n: usize = counts.iter().sum();
    if n == 0 {
        return vec![0; counts.len()];
    }
    let exact: Vec<f64> = counts
        .iter()
        .map(|&c| c as f64 * total as f64 / n as f64)
        .collect();
    let mut out: Vec<usize> = exact
        .iter()
        .zip(counts)
        .map(|(&x, &c)| (x.floor() as usize).min(c))
        .collect();
    let mut left = total.saturating_sub(out.iter().sum());
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    while left > 0 {
        let before = left;
        for &c in &order {
            if left > 0 && out[c] < counts[c] {
                out[c] += 1;
                left -= 1;
            }
        }
        if left == before {
            break;
        }
    }
    out
}

fn check_inputs(ids: &[u32], labels: &[usize]) -> Result<()> {
    if ids.len() != labels.len() {
        return Err(DataError::invalid(
            "split input",
            format!("{} ids but {} labels", ids.len(), labels.len()),
        ));
    }
    match repeated(ids.to_vec()) {
        Some(id) => Err(DataError::invalid(
            "split input",
            format!("id {id} appears twice"),
        )),
        None => Ok(()),
    }
}

/// The smallest id that stands more than once in `ids`, if any.
fn repeated(mut ids: Vec<u32>) -> Option<u32> {
    ids.sort_unstable();
    ids.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
}

/// Splits the items `ids` (with class `labels[i]` for `ids[i]`) into stratified train,
/// validation and test parts per `cfg` (see the module docs). Deterministic in `cfg.seed`.
pub fn stratified_split(ids: &[u32], labels: &[usize], cfg: &SplitConfig) -> Result<Split> {
    cfg.validate()?;
    check_inputs(ids, labels)?;
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let groups = shuffled_classes(ids, labels, &mut rng);
    let counts: Vec<usize> = groups.iter().map(Vec::len).collect();
    let n = ids.len();
    let n_train = (cfg.train_ratio * n as f64).floor() as usize;
    let per_train = allocate(&counts, n_train.min(n));
    let rest_counts: Vec<usize> = counts.iter().zip(&per_train).map(|(c, t)| c - t).collect();
    let n_rest: usize = rest_counts.iter().sum();
    let n_test = (cfg.test_fraction_of_rest * n_rest as f64).ceil() as usize;
    let per_test = allocate(&rest_counts, n_test.min(n_rest));
    let (mut train, mut val, mut test) = (Vec::new(), Vec::new(), Vec::new());
    for (c, g) in groups.iter().enumerate() {
        let (t, rest) = g.split_at(per_train[c]);
        let (te, va) = rest.split_at(per_test[c]);
        train.extend_from_slice(t);
        test.extend_from_slice(te);
        val.extend_from_slice(va);
    }
    Ok(Split::new(train, val, test))
}

/// Stratified k-fold cross-validation with an inner validation split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KFoldConfig {
    /// Number of folds (test parts).
    pub folds: usize,
    /// Fraction of each fold's training part held out for validation (stratified).
    pub val_ratio: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for KFoldConfig {
    /// 10 folds, validation = one ninth of the training part (one fold's worth), seed 42.
    fn default() -> Self {
        Self {
            folds: 10,
            val_ratio: 1.0 / 9.0,
            seed: 42,
        }
    }
}

/// `cfg.folds` splits whose test parts partition `ids`, stratified (each class is dealt round
/// the folds, so per-class counts differ by at most one between folds); each split's
/// validation part is a stratified `val_ratio` draw from the other folds.
pub fn stratified_kfold(ids: &[u32], labels: &[usize], cfg: &KFoldConfig) -> Result<Vec<Split>> {
    check_inputs(ids, labels)?;
    if cfg.folds < 2 || cfg.folds > ids.len() {
        return Err(DataError::invalid(
            "k-fold config",
            format!(
                "folds = {} must be at least 2 and at most the {} items",
                cfg.folds,
                ids.len()
            ),
        ));
    }
    if !(cfg.val_ratio.is_finite() && (0.0..1.0).contains(&cfg.val_ratio)) {
        return Err(DataError::invalid(
            "k-fold config",
            format!("val_ratio = {} must lie in [0, 1)", cfg.val_ratio),
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let groups = shuffled_classes(ids, labels, &mut rng);
    // Every test fold must hold every class (scikit-learn warns here; a fold without a class
    // silently changes what the fold's accuracy measures).
    if let Some((c, g)) = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| !g.is_empty())
        .min_by_key(|(_, g)| g.len())
        && g.len() < cfg.folds
    {
        let mut distinct = labels.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        return Err(DataError::invalid(
            "k-fold config",
            format!(
                "folds = {} is more than the {} items of class {}, the smallest: some test folds would hold none of it",
                cfg.folds,
                g.len(),
                distinct[c]
            ),
        ));
    }
    let k = cfg.folds;
    // fold_of[class][i]: deal each class round the folds, continuing where the last class
    // stopped so fold sizes stay balanced too.
    let mut folds: Vec<Vec<(u32, usize)>> = vec![Vec::new(); k];
    let mut next = 0usize;
    for (c, g) in groups.iter().enumerate() {
        for &id in g {
            folds[next % k].push((id, c));
            next += 1;
        }
    }
    let mut out = Vec::with_capacity(k);
    for f in 0..k {
        let test: Vec<u32> = folds[f].iter().map(|&(id, _)| id).collect();
        let rest: Vec<(u32, usize)> = folds
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != f)
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        let (rest_ids, rest_labels): (Vec<u32>, Vec<usize>) = rest.into_iter().unzip();
        let inner = stratified_split(
            &rest_ids,
            &rest_labels,
            &SplitConfig {
                train_ratio: 1.0 - cfg.val_ratio,
                test_fraction_of_rest: 0.0,
                seed: cfg.seed.wrapping_add(1 + f as u64),
            },
        )?;
        // With test_fraction_of_rest = 0 the inner "val" is everything not drawn for training.
        out.push(Split::new(inner.train, inner.val, test));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_is_proportional_and_exact() {
        assert_eq!(allocate(&[50, 30, 20], 10), vec![5, 3, 2]);
        let a = allocate(&[7, 7, 7], 10);
        assert_eq!(a.iter().sum::<usize>(), 10);
        assert!(a.iter().all(|&x| x == 3 || x == 4));
        assert_eq!(allocate(&[2, 0], 5), vec![2, 0]);
    }

    #[test]
    fn sizes_follow_sklearn() {
        let ids: Vec<u32> = (0..1000).collect();
        let labels: Vec<usize> = (0..1000).map(|i| usize::from(i % 10 == 0)).collect();
        let s = stratified_split(&ids, &labels, &SplitConfig::bwgnn(0.4)).unwrap();
        // ⌊0.4·1000⌋ = 400; rest 600 → test ⌈0.67·600⌉ = 402 (sklearn: 400/198/402).
        assert_eq!(s.sizes(), [400, 198, 402]);
        assert!(s.hash_matches());
        s.check_disjoint().unwrap();
    }
}
