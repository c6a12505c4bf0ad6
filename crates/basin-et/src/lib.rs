//! The Energy Transformer family (Hoover et al., 2023), built on the energy core of basin-core.
//!
//! - [`image::EtImage`]: masked image completion (paper Section 3, Appendix B; Tables 4, 14,
//!   16), with the Table 14 ablations and the reference code's departures as switches.
//! - [`image_train`]: training and evaluation of `EtImage` on image sets, its pictures, and the
//!   reproduction of Table 14 at CPU scale.
//!
//! Still to come (issue "ET on graphs end to end"): `EtAnomaly` (Section 4, Appendix C) and
//! `EtGraphClassifier` (Section 5, Appendix D) with presets for Tables 1 and 2.

pub mod anomaly;
pub mod graph;
pub mod image;
pub mod image_train;
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
    /// From libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}
