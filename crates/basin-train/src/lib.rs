//! # basin-train
//!
//! Training and evaluation for basin models. Today it holds the [`plot`] module (energy curves
//! and image grids written as PNG). What will live here (issue "Training and evaluation"):
//! AdamW with the papers' settings, gradient centralisation, clipping and warm-up + cosine
//! schedules; losses (label-smoothed and class-weighted cross-entropy, weighted BCE, MSE/MAE,
//! masked patch MSE); metrics with scikit-learn semantics in f64; the evaluation protocols of
//! the papers as runners that own their splits; run records, checkpoints, resume and progress.

pub mod loss;
pub mod metrics;
pub mod optim;
pub mod plot;
pub mod protocol;
pub mod record;
pub mod runner;
pub mod schedule;

mod error;
pub use error::TrainError;
