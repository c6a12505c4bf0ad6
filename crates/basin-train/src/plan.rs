//! A protocol's plan: the runs (or folds) it will train, each known before anything trains.

use basin_data::split::Split;

/// Split ids as indices.
pub(crate) fn ids(v: &[u32]) -> Vec<usize> {
    v.iter().map(|&i| i as usize).collect()
}

/// One run (or fold) of a protocol, known before anything trains: the directory it writes
/// under the protocol's output directory, its split and its model seed. `make` gets it to
/// build the learner, `basin eval` gets the same list to find each run again; the directory
/// names exist only here.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRun {
    /// Directory under the protocol's output, e.g. `repeat-0/fold-3` or `run-1`.
    pub dir: String,
    /// Train / validation / test items.
    pub split: Split,
    /// Model seed.
    pub seed: u64,
    /// The grid candidate the run trains ([`GridSearch`](crate::protocol::GridSearch)); `None` elsewhere.
    pub candidate: Option<usize>,
}

impl PlannedRun {
    /// A run of no grid candidate.
    pub fn new(dir: impl Into<String>, split: Split, seed: u64) -> Self {
        Self {
            dir: dir.into(),
            split,
            seed,
            candidate: None,
        }
    }

    /// The training items as indices.
    pub fn train(&self) -> Vec<usize> {
        ids(&self.split.train)
    }

    /// The validation items as indices.
    pub fn val(&self) -> Vec<usize> {
        ids(&self.split.val)
    }

    /// The test items as indices.
    pub fn test(&self) -> Vec<usize> {
        ids(&self.split.test)
    }
}
