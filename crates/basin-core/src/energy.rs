//! The energy contract: a scalar energy per sample of the normalised tokens `g: [B, N, D]`.
//!
//! A new energy term is a struct that implements [`Energy::energy`]; the gradient then comes
//! from autograd. Terms with a closed form override [`Energy::grad`] (and, when the energy and
//! the gradient share work, [`Energy::energy_and_grad`]); the test suite holds every override
//! equal to the autograd gradient.

use tch::Tensor;

use crate::structure::Structure;

/// A scalar energy of normalised tokens under a [`Structure`].
///
/// Gradients follow one rule: they are differentiable (part of the autograd graph, as needed to
/// train through the unrolled descent) exactly when `g.requires_grad()`; otherwise they are
/// plain values. A term is `Send` (tensors and settings), so a block can move to and be called from
/// any thread (data loaders, `DataParallel`, Python threads).
pub trait Energy: Send {
    /// Short name used in traces, plots and checkpoint names (e.g. `attention`).
    fn name(&self) -> &str;

    /// The energy of each sample, `[B]`.
    fn energy(&self, g: &Tensor, structure: &Structure) -> Tensor;

    /// `∂E/∂g`, `[B, N, D]`. The default differentiates [`Energy::energy`] by autograd.
    fn grad(&self, g: &Tensor, structure: &Structure) -> Tensor {
        autograd_grad(self, g, structure)
    }

    /// Energy `[B]` and gradient `[B, N, D]` together. The default takes both from one
    /// autograd pass; a term with a closed-form [`Energy::grad`] overrides this too.
    fn energy_and_grad(&self, g: &Tensor, structure: &Structure) -> (Tensor, Tensor) {
        autograd_energy_and_grad(self, g, structure)
    }

    /// The energy split into named parts, each `[B]`, that sum to [`Energy::energy`]
    /// (one part for a single term; one per term for an [`EnergySum`]).
    fn parts(&self, g: &Tensor, structure: &Structure) -> Vec<(String, Tensor)> {
        vec![(self.name().to_owned(), self.energy(g, structure))]
    }

    /// `∂/∂g` of each part of [`Energy::parts`], in the same order (per-module gradients, as in
    /// ET Figure 4).
    fn part_grads(&self, g: &Tensor, structure: &Structure) -> Vec<(String, Tensor)> {
        vec![(self.name().to_owned(), self.grad(g, structure))]
    }

    /// The energy split over the tokens, `[B, N]`, summing over `N` to [`Energy::energy`],
    /// for a term that is a sum over tokens (ET's attention is one over queries, eq. 2, its
    /// Hopfield memory one over tokens, eq. 4): which tokens (nodes, patches) settle low.
    /// `None`, the default, for a term that does not split so.
    fn token_energy(&self, _g: &Tensor, _structure: &Structure) -> Option<Tensor> {
        None
    }

    /// Whether the term reads the descent's input ([`Structure::input`]): then the block hands
    /// it `LN(x₀)` and the fixed point depends on `x₀` (input injection). Default false.
    fn uses_input(&self) -> bool {
        false
    }
}

/// `∂E/∂g` by autograd of `energy.energy(g)`, with a graph exactly when `g.requires_grad()`.
pub fn autograd_grad<E: Energy + ?Sized>(energy: &E, g: &Tensor, structure: &Structure) -> Tensor {
    autograd_energy_and_grad(energy, g, structure).1
}

/// Energy `[B]` and `∂E/∂g` from a single forward pass and autograd; the gradient carries a
/// graph exactly when `g.requires_grad()` (then the energy does too).
pub fn autograd_energy_and_grad<E: Energy + ?Sized>(
    energy: &E,
    g: &Tensor,
    structure: &Structure,
) -> (Tensor, Tensor) {
    let create_graph = g.requires_grad();
    tch::with_grad(|| {
        let input = if create_graph {
            g.shallow_clone()
        } else {
            g.detach().set_requires_grad(true)
        };
        let e = energy.energy(&input, structure);
        let mut grads =
            Tensor::run_backward(&[e.sum(g.kind())], &[&input], create_graph, create_graph);
        let grad = match grads.pop() {
            Some(grad) if grad.defined() => grad,
            // The energy does not depend on g (e.g. every token is masked).
            _ => g.zeros_like(),
        };
        (if create_graph { e } else { e.detach() }, grad)
    })
}

/// One weighted term of an [`EnergySum`].
pub struct Weighted {
    /// The factor in front of the term (CDAT eq. 9's λ).
    pub weight: f64,
    /// The term.
    pub term: Box<dyn Energy>,
}

/// A weighted sum of energy terms, `E = Σ_i w_i E_i` (ET: attention + Hopfield; CDAT eq. 9).
/// Its gradient is the weighted sum of the terms' own (closed-form where they have one).
#[derive(Default)]
pub struct EnergySum {
    terms: Vec<Weighted>,
}

impl EnergySum {
    /// An empty sum (energy 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `weight · term`.
    pub fn push(&mut self, weight: f64, term: Box<dyn Energy>) {
        self.terms.push(Weighted { weight, term });
    }

    /// Builder form of [`EnergySum::push`].
    pub fn with(mut self, weight: f64, term: impl Energy + 'static) -> Self {
        self.push(weight, Box::new(term));
        self
    }

    /// The terms, in order.
    pub fn terms(&self) -> &[Weighted] {
        &self.terms
    }

    fn scaled(weight: f64, t: Tensor) -> Tensor {
        if weight == 1.0 { t } else { t * weight }
    }
}

impl Energy for EnergySum {
    fn name(&self) -> &str {
        "total"
    }

    fn energy(&self, g: &Tensor, structure: &Structure) -> Tensor {
        let b = g.size()[0];
        self.terms
            .iter()
            .fold(Tensor::zeros([b], (g.kind(), g.device())), |acc, w| {
                acc + Self::scaled(w.weight, w.term.energy(g, structure))
            })
    }

    fn grad(&self, g: &Tensor, structure: &Structure) -> Tensor {
        let mut grads = self
            .terms
            .iter()
            .map(|w| Self::scaled(w.weight, w.term.grad(g, structure)));
        match grads.next() {
            Some(first) => grads.fold(first, |acc, d| acc + d),
            None => g.zeros_like(),
        }
    }

    fn energy_and_grad(&self, g: &Tensor, structure: &Structure) -> (Tensor, Tensor) {
        let b = g.size()[0];
        let mut energy = Tensor::zeros([b], (g.kind(), g.device()));
        let mut grad = g.zeros_like();
        for w in &self.terms {
            let (e, d) = w.term.energy_and_grad(g, structure);
            energy = energy + Self::scaled(w.weight, e);
            grad = grad + Self::scaled(w.weight, d);
        }
        (energy, grad)
    }

    fn token_energy(&self, g: &Tensor, structure: &Structure) -> Option<Tensor> {
        let size = g.size();
        self.terms.iter().try_fold(
            Tensor::zeros([size[0], size[1]], (g.kind(), g.device())),
            |acc, w| Some(acc + Self::scaled(w.weight, w.term.token_energy(g, structure)?)),
        )
    }

    fn uses_input(&self) -> bool {
        self.terms.iter().any(|w| w.term.uses_input())
    }

    fn parts(&self, g: &Tensor, structure: &Structure) -> Vec<(String, Tensor)> {
        self.terms
            .iter()
            .flat_map(|w| {
                w.term
                    .parts(g, structure)
                    .into_iter()
                    .map(|(n, e)| (n, Self::scaled(w.weight, e)))
            })
            .collect()
    }

    fn part_grads(&self, g: &Tensor, structure: &Structure) -> Vec<(String, Tensor)> {
        self.terms
            .iter()
            .flat_map(|w| {
                w.term
                    .part_grads(g, structure)
                    .into_iter()
                    .map(|(n, d)| (n, Self::scaled(w.weight, d)))
            })
            .collect()
    }
}
