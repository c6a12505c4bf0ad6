//! # basin-train
//!
//! Training and evaluation for basin models: every reproduction is only as honest as this
//! layer, so the papers' protocols are code here, and metrics follow the tools the papers used.
//!
//! - [`optim`]: AdamW with the papers' settings (decay targets, gradient centralisation,
//!   global-norm clipping), its state checkpointable.
//! - [`ema`]: an exponential moving average of the weights for evaluation (off by default).
//! - [`schedule`]: warm-up + cosine and hold + cosine schedules, per step or per epoch.
//! - [`loss`]: label-smoothed and class-weighted cross-entropy (PyTorch semantics), the weighted
//!   BCE of ET eq. 12/22, MSE/MAE, masked patch MSE.
//! - [`metrics`]: accuracy, macro-F1, ROC-AUC, AP, balanced accuracy, MAE and the anomaly
//!   threshold sweep, in f64 with scikit-learn's semantics.
//! - [`context`]: [`context::RunContext`], where and how a protocol's runs train (output,
//!   device, shard, progress).
//! - [`interrupt`]: a stop asked for by SIGINT or SIGTERM, honoured at the next step.
//! - [`runner`]: the shared epoch loop — validation-based selection, test once at the end,
//!   checkpoints after every epoch and exact resume, NaN/Inf guards, progress bars.
//! - [`protocol`]: the [`protocol::Protocol`] contract and the papers' protocols: the anomaly
//!   protocol of BWGNN/ET/CDAT, leak-free k-fold cross-validation, fixed splits, masked image
//!   completion, nested selection, and the reference codes' own procedures under their names.
//! - [`compare`]: two models on the same splits, paired split by split (mean difference ±
//!   standard error, wins / ties / losses).
//! - [`select`]: a hyperparameter chosen per split among candidates' runs on the same folds, by
//!   each split's validation score (never its test score).
//! - [`record`]: JSON run records (config, seeds, split hashes, per-epoch metrics, device, git
//!   revision), written atomically.
//! - [`quartiles`]: a quantity along a descent summarised per group (quartiles per step).
//! - [`plot`]: energy curves, quartile bands, image grids (PNG) and animations (GIF).

pub mod compare;
pub mod context;
pub mod ema;
pub mod image_metrics;
pub mod interrupt;
pub mod loss;
pub mod metrics;
pub mod optim;
pub mod plan;
pub mod plot;
pub mod protocol;
pub mod quartiles;
pub mod record;
pub mod runner;
pub mod schedule;
pub mod select;

mod error;
pub use error::TrainError;
