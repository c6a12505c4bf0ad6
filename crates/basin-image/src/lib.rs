//! # basin-image
//!
//! Image data and patching for basin; pure Rust (no libtorch), so its tests run in seconds.
//!
//! - [`set::ImageSet`]: 8-bit images with labels, in memory; [`stream::ImageFolder`]: files of
//!   any size read as batches need them (ImageNet-1k); both behind [`images::Images`].
//! - Loaders: [`idx`] (MNIST / Fashion-MNIST, gzipped or not), [`folder`] (JPEG/PNG files in
//!   class sub-folders, from a directory or a tar archive such as CIFAR-10's). Malformed or
//!   truncated files give errors that name the file; [`source::open`] opens both splits of a
//!   dataset by path or by registered name.
//! - [`transform`]: per-channel normalisation and the seeded augmentations of ET Table 4.
//! - [`patch::Grid`]: patchify / unpatchify, exact round trip.
//! - [`mask::MaskStrategy`]: k random patches, the paper's masked/visible-but-scored mix, blocks.
//! - [`batch::Pipeline`]: augment → normalise → patchify → mask, in parallel and deterministic.
//! - [`synthetic::stripes`]: a toy set (stripes, checkerboards) that needs no download.

pub mod batch;
pub mod error;
pub mod folder;
pub mod idx;
pub mod images;
pub mod mask;
pub mod patch;
pub mod set;
pub mod source;
pub mod stream;
pub mod synthetic;
pub mod transform;

pub use batch::{PatchBatch, Pipeline};
pub use error::{ImageError, Result};
pub use images::{Images, Parts};
pub use mask::{MaskPlan, MaskStrategy};
pub use patch::Grid;
pub use set::ImageSet;
pub use transform::{Augment, ColorJitter, FloatImage, Normalize, ResizedCrop};
