//! Image data and patching for basin; pure Rust, no libtorch.
//!
//! What will live here (issue "Image patching and ET masked image completion"):
//! - loaders for IDX (MNIST / Fashion-MNIST, gzipped or not), folders and tars of JPEG/PNG
//!   files with class sub-folders (CIFAR-10), each failing with an error that names the file;
//! - per-channel normalisation and the seeded augmentations of ET Table 4 (flip, random
//!   resized crop, colour jitter);
//! - patchify / unpatchify for any patch size that divides the image, with an exact round trip;
//! - masking strategies: k random patches, the paper's 90/10 mix of masked and visible-but-scored
//!   patches, block masks.
