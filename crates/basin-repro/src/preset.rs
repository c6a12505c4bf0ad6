//! How much of a table runs ([`Preset`]) and the flags that change it ([`Overrides`]).

use serde::{Deserialize, Serialize};

/// How much of a table to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// Minutes: checks the whole path on tiny subsets, says nothing about the model (CI).
    Quick,
    /// The documented CPU scale (smaller models, fewer runs or epochs; hours at most).
    Cpu,
    /// The paper's protocol and models (a GPU).
    Paper,
}

impl Preset {
    /// The flag that selects it.
    pub fn flag(self) -> &'static str {
        match self {
            Self::Quick => "--quick",
            Self::Cpu => "--cpu",
            Self::Paper => "--paper",
        }
    }
}

/// Overrides a table may accept (each table says which; the others are refused).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    /// Number of epochs.
    pub epochs: Option<usize>,
    /// Only these datasets.
    pub datasets: Vec<String>,
    /// Number of training images.
    pub train_images: Option<usize>,
    /// Repeats of the cross-validation (each with its own fold seed), baselines included.
    pub repeats: Option<usize>,
    /// How the cross-validation picks each fold's epoch, baselines included.
    pub selection: Option<basin_train::protocol::Selection>,
    /// Choose each fold's number of epochs on this many inner folds of its training part
    /// ([`basin_train::protocol::CrossValidation::inner_folds`]), baselines included.
    pub inner_folds: Option<usize>,
    /// Evaluate an exponential moving average of the weights with this decay
    /// ([`basin_train::runner::TrainConfig::ema`]), baselines included.
    pub ema: Option<f64>,
}

/// One override, for [`Table::accepts`](crate::Table::accepts) (in a table's TOML:
/// `epochs`, `dataset`, `train-images`, `repeats`, `selection`, `inner-folds`, `ema`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Override {
    /// `--epochs`.
    Epochs,
    /// `--dataset`.
    Dataset,
    /// `--train-images`.
    TrainImages,
    /// `--repeats`.
    Repeats,
    /// `--selection`.
    Selection,
    /// `--inner-folds`.
    InnerFolds,
    /// `--ema`.
    Ema,
}

impl Override {
    pub(crate) fn flag(self) -> &'static str {
        match self {
            Self::Epochs => "--epochs",
            Self::Dataset => "--dataset",
            Self::TrainImages => "--train-images",
            Self::Repeats => "--repeats",
            Self::Selection => "--selection",
            Self::InnerFolds => "--inner-folds",
            Self::Ema => "--ema",
        }
    }
}
