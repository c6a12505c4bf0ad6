//! basin-train
