//! Splits: sizes as scikit-learn's (fixture), class proportions within one item per class,
//! no overlap, determinism in the seed, a hash that identifies the split, k-fold test folds
//! that partition the data.

use basin_data::split::{KFoldConfig, SplitConfig, stratified_kfold, stratified_split};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    counts: Vec<usize>,
    train_ratio: f64,
    train: Vec<usize>,
    val: Vec<usize>,
    test: Vec<usize>,
}

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

fn labelled(counts: &[usize]) -> (Vec<u32>, Vec<usize>) {
    // Ids deliberately not 0..n (Amazon's labelled ids start at 3305) and classes interleaved.
    let mut labels: Vec<usize> = counts
        .iter()
        .enumerate()
        .flat_map(|(c, &n)| std::iter::repeat_n(c, n))
        .collect();
    let third = labels.len() / 3;
    labels.rotate_left(third);
    let ids = (0..labels.len() as u32).map(|i| 3305 + 2 * i).collect();
    (ids, labels)
}

fn per_class(part: &[u32], ids: &[u32], labels: &[usize], classes: usize) -> Vec<usize> {
    let mut c = vec![0; classes];
    for id in part {
        let pos = ids.binary_search(id).unwrap();
        c[labels[pos]] += 1;
    }
    c
}

#[test]
fn bwgnn_split_sizes_and_proportions() {
    let fx: Fixture =
        serde_json::from_str(include_str!("../fixtures/splits/sklearn_sizes.json")).unwrap();
    for case in &fx.cases {
        let (ids, labels) = labelled(&case.counts);
        let k = case.counts.len();
        let cfg = SplitConfig::bwgnn(case.train_ratio);
        let s = stratified_split(&ids, &labels, &cfg).unwrap();
        s.check_disjoint().unwrap();
        assert!(s.hash_matches());
        let n: usize = case.counts.iter().sum();
        assert_eq!(
            s.train.len() + s.val.len() + s.test.len(),
            n,
            "covers everything"
        );
        let parts = [
            (&s.train, &case.train, "train"),
            (&s.val, &case.val, "val"),
            (&s.test, &case.test, "test"),
        ];
        for (part, sk, name) in parts {
            let ours = per_class(part, &ids, &labels, k);
            // Same total as sklearn; per class within one item of sklearn's and of the share.
            assert_eq!(
                ours.iter().sum::<usize>(),
                sk.iter().sum::<usize>(),
                "{name} size"
            );
            for c in 0..k {
                assert!(
                    ours[c].abs_diff(sk[c]) <= 1,
                    "{name} class {c}: {ours:?} vs {sk:?}"
                );
                let share = case.counts[c] as f64 * part.len() as f64 / n as f64;
                assert!(
                    (ours[c] as f64 - share).abs() <= 1.0 + 1e-9,
                    "{name} class {c}"
                );
            }
        }
        // Same seed, same split; another seed, another split with the same sizes.
        assert_eq!(stratified_split(&ids, &labels, &cfg).unwrap(), s);
        let other = stratified_split(
            &ids,
            &labels,
            &SplitConfig {
                seed: 3,
                ..cfg.clone()
            },
        )
        .unwrap();
        assert_ne!(other.hash, s.hash);
        assert_eq!(other.sizes(), s.sizes());
    }
}

#[test]
fn hash_pins_the_split() {
    let (ids, labels) = labelled(&[90, 10]);
    let mut s = stratified_split(&ids, &labels, &SplitConfig::bwgnn(0.4)).unwrap();
    assert_eq!(s.hash.len(), 64);
    s.val.swap(0, 1);
    assert!(!s.hash_matches());
    // Bad input is an error, not a panic.
    assert!(stratified_split(&ids, &labels[1..], &SplitConfig::default()).is_err());
    assert!(stratified_split(&ids, &labels, &SplitConfig::bwgnn(1.5)).is_err());
    let dup = vec![1u32, 1];
    assert!(stratified_split(&dup, &[0, 1], &SplitConfig::default()).is_err());
}

#[test]
fn kfold_partitions_and_stratifies() {
    let (ids, labels) = labelled(&[125, 63]); // MUTAG's classes
    let cfg = KFoldConfig::default();
    let folds = stratified_kfold(&ids, &labels, &cfg).unwrap();
    assert_eq!(folds.len(), 10);
    let mut all_test: Vec<u32> = folds.iter().flat_map(|f| f.test.clone()).collect();
    all_test.sort_unstable();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(all_test, sorted, "test folds partition the data");
    for f in &folds {
        f.check_disjoint().unwrap();
        assert!(f.hash_matches());
        assert_eq!(f.train.len() + f.val.len() + f.test.len(), ids.len());
        let t = per_class(&f.test, &ids, &labels, 2);
        assert!(
            t[0].abs_diff(125 / 10) <= 1 && t[1].abs_diff(63 / 10) <= 1,
            "{t:?}"
        );
        // Inner validation: about a ninth of the training part, stratified.
        let v = per_class(&f.val, &ids, &labels, 2);
        let rest = f.train.len() + f.val.len();
        assert!((f.val.len() as f64 - rest as f64 / 9.0).abs() <= 1.0);
        assert!(v[1] >= 1);
    }
    let sizes: Vec<usize> = folds.iter().map(|f| f.test.len()).collect();
    assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
    assert_eq!(stratified_kfold(&ids, &labels, &cfg).unwrap(), folds);
    assert!(stratified_kfold(&ids, &labels, &KFoldConfig { folds: 1, ..cfg }).is_err());
}
