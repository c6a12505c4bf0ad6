//! Losses with PyTorch's semantics (the anomaly and image references are PyTorch/optax code).
//!
//! Cross-entropies call libtorch's own `cross_entropy`, so label smoothing and class weights
//! behave exactly as in `torch.nn.functional.cross_entropy`: with weights, the mean divides
//! by the sum of the weights of the batch's targets, not by the batch size.

use tch::{Kind, Reduction, Tensor};

/// Mean cross-entropy of `logits: [N, C]` against class indices `targets: [N]`, with label
/// smoothing ε (targets become `(1 − ε)·onehot + ε/C`; graph ET: ε = 0.05).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor, label_smoothing: f64) -> Tensor {
    logits.cross_entropy_loss::<Tensor>(targets, None, Reduction::Mean, -100, label_smoothing)
}

/// Class-weighted cross-entropy, PyTorch mean: `Σ_i w[y_i] ℓ_i / Σ_i w[y_i]`.
pub fn weighted_cross_entropy(
    logits: &Tensor,
    targets: &Tensor,
    weights: &Tensor,
    label_smoothing: f64,
) -> Tensor {
    let w = weights.to_kind(logits.kind()).to_device(logits.device());
    logits.cross_entropy_loss(targets, Some(&w), Reduction::Mean, -100, label_smoothing)
}

/// ω of ET eq. 12/22: the number of normal labels over the number of anomalous ones (1 when
/// there are no anomalies).
pub fn anomaly_weight(labels: &[bool]) -> f64 {
    let pos = labels.iter().filter(|&&l| l).count();
    let neg = labels.len() - pos;
    if pos == 0 {
        1.0
    } else {
        neg as f64 / pos as f64
    }
}

/// Weighted binary cross-entropy of ET eq. 12/22 on anomaly logits `[N]` and labels `[N]`
/// (0/1): `−Σ [ω l log p + (1 − l) log(1 − p)] / Σ [ω l + (1 − l)]`, `p = σ(logit)`. The
/// normalisation is PyTorch's weighted mean, which makes it equal to the reference code's
/// two-class `cross_entropy(weight=[1, ω])`.
pub fn weighted_bce(logits: &Tensor, labels: &Tensor, omega: f64) -> Tensor {
    let l = labels.to_kind(logits.kind());
    let w = &l * (omega - 1.0) + 1.0;
    let total =
        logits.binary_cross_entropy_with_logits::<&Tensor>(&l, Some(&w), None, Reduction::Sum);
    total / w.sum(logits.kind())
}

/// Mean squared error over every element.
pub fn mse(pred: &Tensor, target: &Tensor) -> Tensor {
    (pred - target).square().mean(pred.kind())
}

/// Mean absolute error over every element.
pub fn mae(pred: &Tensor, target: &Tensor) -> Tensor {
    (pred - target).abs().mean(pred.kind())
}

/// MSE over the scored patches only: `pred, target: [B, N, P]`, `scored: [B, N]` bool; the
/// mean is over the scored patches' values (the paper's loss on the occluded patches).
pub fn masked_mse(pred: &Tensor, target: &Tensor, scored: &Tensor) -> Tensor {
    let m = scored.unsqueeze(-1).to_kind(pred.kind());
    let per_value = pred.size().last().copied().unwrap_or(1) as f64;
    ((pred - target).square() * &m).sum(pred.kind())
        / (m.sum(Kind::Double).clamp_min(1.0) * per_value).to_kind(pred.kind())
}

/// Multi-label binary cross-entropy with logits, the mean over labelled entries only: `targets`
/// `[N, T]` holds 0/1 or NaN for a missing label (LRGB's `multilabel_classification_loss`).
pub fn masked_bce_with_logits(logits: &Tensor, targets: &Tensor) -> Tensor {
    let t = targets.to_kind(logits.kind());
    let labelled = t.isnan().logical_not();
    let w = labelled.to_kind(logits.kind());
    let t = t.nan_to_num(0.0, None, None);
    let total =
        logits.binary_cross_entropy_with_logits::<&Tensor>(&t, Some(&w), None, Reduction::Sum);
    total / w.sum(logits.kind()).clamp_min(1.0)
}

/// The GraphGPS `weighted_cross_entropy` with weights from the batch itself (PATTERN, CLUSTER):
/// `w_c = (V − n_c)/V` for `V` targets of which `n_c` are of class `c`. Multi-class logits
/// `[V, C]`: PyTorch's weighted mean `Σ w_{y_i} ℓ_i / Σ w_{y_i}`. Binary logits `[V, 1]`: the
/// GPS code's `binary_cross_entropy_with_logits(weight = w[y])`, which divides by `V`, not by
/// `Σ w` (`weighted_cross_entropy.py`).
pub fn batch_weighted_cross_entropy(logits: &Tensor, targets: &Tensor) -> Tensor {
    let kind = logits.kind();
    let v = targets.size()[0].max(1) as f64;
    let classes = logits.size()[1].max(2);
    let counts = targets.bincount::<Tensor>(None, classes).to_kind(kind);
    let weights = (counts.neg() + v) / v;
    if logits.size()[1] == 1 {
        let w = weights.index_select(0, targets);
        let y = targets.to_kind(kind);
        logits
            .squeeze_dim(1)
            .binary_cross_entropy_with_logits::<&Tensor>(&y, Some(&w), None, Reduction::Mean)
    } else {
        logits.cross_entropy_loss(targets, Some(&weights), Reduction::Mean, -100, 0.0)
    }
}
