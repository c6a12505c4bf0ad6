//! The Energy Transformer family (Hoover et al., 2023), built on the energy core of basin-core.
//!
//! - [`image::EtImage`]: masked image completion (paper Section 3, Appendix B; Tables 4, 14,
//!   16), with the Table 14 ablations and the reference code's departures as switches.
//! - [`image_train`]: training and evaluation of `EtImage` on image sets, its pictures, and the
//!   reproduction of Table 14 at CPU scale.
//! - [`anomaly::EtAnomaly`]: node anomaly detection (Section 4, Appendix C; Table 1, presets
//!   of Table 6), sparse neighbour attention, heterogeneous pooling, subgraph sampling.
//! - [`graph::EtGraphClassifier`]: graph classification (Section 5, Appendix D; Table 2,
//!   presets of Table 9) with the parameterised adjacency of eq. 24–25.
//! - [`run`]: one run from a config file (`basin train`) and its re-evaluation (`basin eval`).
//! - [`table1`], [`table2`], [`table14`]: the reproductions behind `cargo xtask reproduce`.

pub mod anomaly;
pub mod graph;
pub mod image;
pub mod image_train;
pub mod run;
pub mod table1;
pub mod table14;
pub mod table2;

/// Errors of basin-et.
#[derive(Debug, thiserror::Error)]
pub enum EtError {
    /// A configuration value is invalid.
    #[error("config field `{field}`: {message}")]
    Config {
        /// The field.
        field: String,
        /// What was expected.
        message: String,
    },
    /// From the energy core.
    #[error(transparent)]
    Core(#[from] basin_core::CoreError),
    /// From training and evaluation.
    #[error(transparent)]
    Train(#[from] basin_train::TrainError),
    /// From image loading and preparation.
    #[error(transparent)]
    Image(#[from] basin_image::ImageError),
    /// From a metric (e.g. a single class in the scored part).
    #[error(transparent)]
    Metric(#[from] basin_train::metrics::MetricError),
    /// From libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}
