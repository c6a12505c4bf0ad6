//! A request to stop, from SIGINT or SIGTERM (`basin` installs the handler): the training loop
//! checks it before every optimiser step and stops with [`crate::TrainError::Interrupted`],
//! leaving the checkpoint of the last finished epoch, so that the same command resumes the run
//! to the records of one never interrupted. Process-wide, as the signals it stands for are.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Asks every training loop of this process to stop at its next step.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}
