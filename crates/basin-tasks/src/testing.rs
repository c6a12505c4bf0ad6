//! What the tests of learners built on this crate share: toy datasets, a trained classifier's
//! test accuracy, the size-bucket check, and a fingerprint of a model's starting parameters.

use std::sync::Arc;

use basin_graph::{Csr, Graph, GraphDataset, Split, Targets};
use basin_train::context::RunContext;
use basin_train::optim::OptimConfig;
use basin_train::protocol::{FixedSplitProtocol, Metric, Protocol, PublishedSplit};
use basin_train::runner::{Learner, TrainConfig};
use rand::SeedableRng;
use tch::Device;

use crate::graph_classification::{GraphClassifierConfig, GraphClassifierLearner, dataset_pe};

/// A fingerprint of the parameters of a model: a golden copy of it pins where a recorded
/// configuration starts. One extra draw from libtorch's generator before a layer, or a layer
/// started another way, moves `weighted_sum` far beyond the 10⁻⁶ of `weighted_abs_sum` that
/// [`Self::matches`] allows (another seed moves ET's CPU preset's by 97, a thousand times its
/// tolerance of 0.096); rounding (another CPU's vectorised kernels) moves it by a few float32
/// ulps of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fingerprint {
    /// Variables, buffers included.
    pub variables: usize,
    /// Their entries.
    pub entries: i64,
    /// `Σ_k (k + 1) Σ_i x_ki (1 + i mod 7)` over the variables sorted by name (float64).
    pub weighted_sum: f64,
    /// The same sum of `|x_ki|`: the scale that rounding is measured against.
    pub weighted_abs_sum: f64,
}

impl Fingerprint {
    /// The fingerprint of every variable in `vs`.
    pub fn of(vs: &tch::nn::VarStore) -> Self {
        let mut vars: Vec<(String, tch::Tensor)> = vs.variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Self {
            variables: vars.len(),
            entries: 0,
            weighted_sum: 0.0,
            weighted_abs_sum: 0.0,
        };
        for (k, (_, t)) in vars.iter().enumerate() {
            let x = t.flatten(0, -1).to_kind(tch::Kind::Double);
            let n = x.size()[0];
            let w = (tch::Tensor::arange(n, (tch::Kind::Int64, x.device())).remainder(7) + 1)
                * (k + 1) as f64;
            let sum = |x: &tch::Tensor| (x * &w).sum(tch::Kind::Double).double_value(&[]);
            out.weighted_sum += sum(&x);
            out.weighted_abs_sum += sum(&x.abs());
            out.entries += n;
        }
        out
    }

    /// The same variables and entries, and weighted sums within 10⁻⁶ of the scale.
    pub fn matches(&self, recorded: &Self) -> bool {
        let tol = 1e-6 * recorded.weighted_abs_sum.max(1e-12);
        self.variables == recorded.variables
            && self.entries == recorded.entries
            && (self.weighted_sum - recorded.weighted_sum).abs() <= tol
            && (self.weighted_abs_sum - recorded.weighted_abs_sum).abs() <= tol
    }
}

/// A graph-classification dataset: `graphs` with classes `labels` in `0..num_classes`.
pub fn classified(
    name: &str,
    graphs: Vec<Graph>,
    labels: Vec<usize>,
    num_classes: usize,
) -> GraphDataset {
    GraphDataset {
        name: name.into(),
        graphs,
        targets: Targets::Classes {
            labels,
            num_classes,
        },
        class_values: (0..num_classes as i64).collect(),
        official_split: None,
        node_features: None,
    }
}

/// Rings (class 0, even items) and stars (class 1) of 6–11 nodes, every node feature 1: only
/// the structure tells them apart.
pub fn rings_and_stars(count: usize) -> GraphDataset {
    let (graphs, labels) = (0..count)
        .map(|i| {
            let n = 6 + (i % 6) as u32;
            let class = i % 2;
            let (src, dst): (Vec<u32>, Vec<u32>) = if class == 0 {
                (0..n)
                    .flat_map(|a| [(a, (a + 1) % n), ((a + 1) % n, a)])
                    .unzip()
            } else {
                (1..n).flat_map(|a| [(0, a), (a, 0)]).unzip()
            };
            let (adj, _) = Csr::from_edges(n as usize, &src, &dst).expect("valid edges");
            let x = ndarray::Array2::ones((n as usize, 1));
            (Graph::new(adj, x).expect("valid graph"), class)
        })
        .unzip();
    classified("shapes", graphs, labels, 2)
}

/// The cross-entropy of the untrained classifier `cfg` (seed `seed`, evaluation mode, no
/// label smoothing) on the graphs `items` of `data`, with attributes standardised on `items`:
/// where training starts. ln C for a classifier that has no opinion yet.
pub fn untrained_loss(
    data: &Arc<GraphDataset>,
    cfg: &GraphClassifierConfig,
    items: &[usize],
    seed: u64,
) -> f64 {
    let pe = dataset_pe(data, &cfg.batching)
        .expect("encodings")
        .map(Arc::new);
    let mut learner = GraphClassifierLearner::new(data.clone(), pe, cfg, items, seed, Device::Cpu)
        .expect("learner");
    let labels = data.targets.classes().expect("class targets");
    let scores = learner.predict(items).expect("predict");
    let nll: f64 = items
        .iter()
        .zip(&scores.0)
        .map(|(&i, p)| -p[labels[i]].ln())
        .sum();
    nll / items.len() as f64
}

/// Test accuracy of the graph classifier `cfg` trained on `split` of `data` for `epochs` epochs
/// (one run, seed 0, CPU, AdamW at lr 3·10⁻³): what the learning tests of each family assert on.
pub fn graph_classifier_accuracy(
    data: &Arc<GraphDataset>,
    cfg: &GraphClassifierConfig,
    split: &Split,
    epochs: usize,
) -> f64 {
    let target: Vec<f64> = data
        .targets
        .classes()
        .expect("class targets")
        .iter()
        .map(|&c| c as f64)
        .collect();
    let pe = dataset_pe(data, &cfg.batching)
        .expect("encodings")
        .map(Arc::new);
    let protocol = FixedSplitProtocol {
        runs: 1,
        seed: 0,
        metric: Metric::Accuracy,
        curves: false,
        train: TrainConfig {
            epochs,
            optim: OptimConfig {
                lr: 3e-3,
                ..OptimConfig::et_graph()
            },
            ..TrainConfig::default()
        },
    };
    let report = protocol
        .run(
            PublishedSplit {
                split,
                target: (&target).into(),
            },
            |run| {
                Ok(GraphClassifierLearner::new(
                    data.clone(),
                    pe.clone(),
                    cfg,
                    &run.train(),
                    run.seed,
                    Device::Cpu,
                )?)
            },
            |_, _| Ok(()),
            &RunContext::new(&data.name),
        )
        .expect("training");
    report.aggregate["test_accuracy"].0
}

/// The largest absolute difference between two score tables of the same shape.
fn max_gap(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Panics unless a graph learner gives the same answers whether its batches run in size buckets
/// or whole (`learner_for(size_buckets)` builds it, seeded alike both times): predictions of
/// `items` equal each item predicted alone (rows in the order asked) and across both layouts,
/// and so does one training step's loss (noise off). Returns the number of prediction rows.
pub fn assert_bucket_layout_invariant<L: Learner>(
    mut learner_for: impl FnMut(bool) -> L,
    items: &[usize],
) -> usize {
    let mut run = |size_buckets: bool| {
        let mut learner = learner_for(size_buckets);
        let scores = learner.predict(items).expect("predict").0;
        let alone: Vec<Vec<f64>> = items
            .iter()
            .flat_map(|&i| learner.predict(&[i]).expect("predict one").0)
            .collect();
        let gap = max_gap(&scores, &alone);
        assert!(
            gap < 1e-5,
            "size_buckets = {size_buckets}: rows out of order or padded differently ({gap})"
        );
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let loss = tch::no_grad(|| learner.train_step(items, &mut rng).expect("step").loss);
        (scores, loss.double_value(&[]))
    };
    let (whole, loss_whole) = run(false);
    let (parts, loss_parts) = run(true);
    assert_eq!(whole.len(), parts.len(), "row counts differ");
    let diff = max_gap(&whole, &parts);
    assert!(diff < 1e-5, "predictions differ by {diff}");
    let rel = (loss_whole - loss_parts).abs() / loss_whole.abs().max(1e-6);
    assert!(rel < 1e-5, "losses {loss_whole} and {loss_parts}");
    whole.len()
}
