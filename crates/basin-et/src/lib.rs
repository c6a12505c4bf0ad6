//! The Energy Transformer family (Hoover et al., 2023), built on the energy core of basin-core.
//!
//! What will live here:
//! - `EtImage`: masked image completion (paper Section 3, Appendix B; Tables 4, 14, 16);
//! - `EtAnomaly`: node anomaly detection with neighbour-restricted energy attention
//!   (Section 4, Appendix C; Table 1);
//! - `EtGraphClassifier`: CLS token, Laplacian positional encodings, stacked ET blocks and the
//!   parameterised adjacency of eq. 24–25 (Section 5, Appendix D; Table 2);
//! - presets holding the papers' hyperparameters, with every departure of the public reference
//!   code available as an explicit, documented switch.
