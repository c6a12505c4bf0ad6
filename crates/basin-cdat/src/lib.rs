//! CDAT: von Mises–Fisher attention energy with Hopfield refinement and controlled
//! excitation–inhibition dynamics (W = PᵀQP, damping ω), built on basin-core.
//!
//! What will live here: the vMF attention energy (CDAT eq. 10–11, L2-normalised queries and
//! keys), the weighted energy of eq. 9, the controlled dynamics of eq. 2–4 as a
//! `basin_core::Dynamics`, and the anomaly-detection and graph-classification models with
//! presets for the paper's tables. The public reference code departs from the paper (it ascends
//! the energy in its anomaly version); such behaviour is offered only as a named switch.
