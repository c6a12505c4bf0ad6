//! # basin-data
//!
//! Where datasets come from, for every crate that reads one: pure Rust, no libtorch.
//!
//! | module | what |
//! |---|---|
//! | [`registry`] | every dataset basin reads, by name (`data/datasets.toml`: files, sha256, public URL, licence, citation, caveats) |
//! | [`fetch`] | downloads and verifies a registered dataset into the data directory (a mirror, archives unpacked, nothing half-written) |
//! | [`datadir`] | the one rule for where the data directory is (`--data-dir`, else `BASIN_DATA_DIR`, else the user cache), and [`require_data!`] for tests |
//! | [`source`] | a dataset named by path or by registered name, resolved to where it is |
//! | [`split`] | seeded stratified splits with a hash (anomaly splits, k-fold cross-validation), for graphs, images and bags alike |
//!
//! ```
//! let mutag = basin_data::registry::find("mutag").expect("registered");
//! assert_eq!(mutag.name, "MUTAG");
//! assert_eq!(
//!     mutag.location(std::path::Path::new("/data")),
//!     std::path::Path::new("/data/tu/MUTAG")
//! );
//! ```

pub mod datadir;
pub mod error;
pub mod fetch;
pub mod registry;
pub mod source;
pub mod split;

pub use error::{DataError, Result};
