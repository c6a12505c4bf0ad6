//! An exponential moving average of the weights (Polyak averaging; timm's `ModelEma`,
//! `torch.optim.swa_utils.AveragedModel` with an EMA rule): validation, model selection and the
//! test see the average, training steps the live weights.
//!
//! After optimiser step t (counted from 1) each variable's average moves toward it with decay
//! `d_t = min(d, (1 + t) / (10 + t))`, TensorFlow's `ExponentialMovingAverage` with
//! `num_updates`: the first steps forget the initial weights quickly instead of carrying them
//! for 1/(1 − d) steps. The average starts from the weights at the first step. Every floating
//! variable of the store is averaged, buffers (BatchNorm's running statistics) included, as
//! timm does.

use std::collections::HashMap;

use tch::{Tensor, nn::VarStore};

use crate::TrainError;

/// The averaged weights of one model.
pub struct Ema {
    decay: f64,
    /// The store's variables, sorted by name (shallow: they are the model's own tensors).
    live: Vec<(String, Tensor)>,
    /// Their averages, in the same order.
    average: Vec<Tensor>,
}

impl std::fmt::Debug for Ema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ema")
            .field("decay", &self.decay)
            .field("variables", &self.live.len())
            .finish()
    }
}

impl Ema {
    /// An average of `vs`'s variables with decay `decay` (in [0, 1)), starting from their
    /// current values.
    pub fn new(vs: &VarStore, decay: f64) -> Self {
        let mut live: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        live.sort_by(|a, b| a.0.cmp(&b.0));
        let average = tch::no_grad(|| live.iter().map(|(_, t)| t.detach().copy()).collect());
        Self {
            decay,
            live,
            average,
        }
    }

    /// The decay used after optimiser step `step` (from 1).
    pub fn decay_at(&self, step: i64) -> f64 {
        let t = step.max(0) as f64;
        self.decay.min((1.0 + t) / (10.0 + t))
    }

    /// Moves the average toward the live weights after optimiser step `step` (from 1).
    pub fn update(&mut self, step: i64) {
        let weight = 1.0 - self.decay_at(step);
        tch::no_grad(|| {
            for ((_, live), avg) in self.live.iter().zip(&mut self.average) {
                if avg.is_floating_point() {
                    let _ = avg.lerp_(live, weight);
                } else {
                    avg.copy_(live);
                }
            }
        });
    }

    /// Starts the average afresh from the live weights.
    pub fn restart(&mut self) {
        tch::no_grad(|| {
            for ((_, live), avg) in self.live.iter().zip(&mut self.average) {
                avg.copy_(live);
            }
        });
    }

    /// Exchanges the live weights and the average in place: call it before evaluating and
    /// again after, so that training resumes from the live weights.
    pub fn swap(&mut self) {
        tch::no_grad(|| {
            for ((_, live), avg) in self.live.iter().zip(&mut self.average) {
                let held = live.detach().copy();
                live.shallow_clone().copy_(avg);
                avg.copy_(&held);
            }
        });
    }

    /// The average as checkpoint tensors, named `ema.<variable>`.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        self.live
            .iter()
            .zip(&self.average)
            .map(|((n, _), a)| (format!("ema.{n}"), a.shallow_clone()))
            .collect()
    }

    /// Restores the average from checkpoint tensors written by [`Ema::state`].
    pub fn load_state(&mut self, tensors: &HashMap<String, Tensor>) -> Result<(), TrainError> {
        let mut missing = Vec::new();
        tch::no_grad(|| {
            for ((n, _), avg) in self.live.iter().zip(&mut self.average) {
                match tensors.get(&format!("ema.{n}")) {
                    Some(t) if t.size() == avg.size() => {
                        avg.copy_(&t.to_kind(avg.kind()).to_device(avg.device()));
                    }
                    _ => missing.push(format!("ema.{n}")),
                }
            }
        });
        TrainError::restored(&missing, "the weights' average")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tch::Device;

    fn store() -> (VarStore, Tensor) {
        let vs = VarStore::new(Device::Cpu);
        let w = vs.root().zeros("w", &[3]);
        (vs, w)
    }

    #[test]
    fn the_average_follows_the_warm_up_rule_and_swaps_back() {
        let (vs, w) = store();
        let mut ema = Ema::new(&vs, 0.5);
        // (1 + t) / (10 + t) is below 0.5 until t = 8.
        assert!((ema.decay_at(1) - 2.0 / 11.0).abs() < 1e-12);
        assert_eq!(ema.decay_at(100), 0.5);
        let set = |v: f64| {
            let _ = tch::no_grad(|| w.shallow_clone().fill_(v));
        };
        set(1.0);
        ema.update(1);
        let expected = 1.0 - 2.0 / 11.0;
        set(3.0);
        ema.swap();
        let seen = w.double_value(&[0]);
        assert!((seen - expected).abs() < 1e-6, "{seen} vs {expected}");
        ema.swap();
        assert_eq!(w.double_value(&[0]), 3.0, "the live weights come back");
        // Checkpoint round trip, and a checkpoint without the average is refused by name.
        let state: HashMap<String, Tensor> = ema.state().into_iter().collect();
        let mut other = Ema::new(&vs, 0.5);
        other.load_state(&state).unwrap();
        other.swap();
        assert!((w.double_value(&[0]) - expected).abs() < 1e-6);
        let err = other.load_state(&HashMap::new()).unwrap_err().to_string();
        assert!(err.contains("ema.w"), "{err}");
        // A restart takes the live weights as they are.
        set(5.0);
        other.restart();
        set(7.0);
        other.swap();
        assert_eq!(w.double_value(&[0]), 5.0);
    }
}
