//! A batch of graphs on the device, as the model reads it.

use basin_graph::batch::GraphBatch;
use tch::{Device, Kind, Tensor};

use crate::{Result, TaskError};

/// A basin-graph batch on the device: features and encodings `[B, N', F]`, padding `[B, N']`,
/// the CLS-augmented adjacency `[B, N', N']` and, when the batch was built with them, the dense
/// edge features `[B, N', N', P]`.
#[derive(Debug)]
pub struct GraphBatchOnDevice {
    pub(super) features: Tensor,
    pub(super) pe: Option<Tensor>,
    pub(super) padding: Tensor,
    pub(super) mask: Tensor,
    pub(super) edge_features: Option<Tensor>,
}

impl GraphBatchOnDevice {
    /// Moves a basin-graph batch to `device`; errors if its arrays disagree on their shapes.
    pub fn new(b: &GraphBatch, device: Device) -> Result<Self> {
        let (bs, n) = b.padding.dim();
        let (fb, fn_, _) = b.features.dim();
        let (mb, mn, mn2) = b.mask.dim();
        if (fb, fn_) != (bs, n) || (mb, mn, mn2) != (bs, n, n) {
            return Err(TaskError::config(
                "batch",
                format!(
                    "inconsistent graph batch: padding {:?}, features {:?}, mask {:?}",
                    b.padding.dim(),
                    b.features.dim(),
                    b.mask.dim()
                ),
            ));
        }
        if let Some(pe) = &b.pe {
            let (pb, pn, _) = pe.dim();
            if (pb, pn) != (bs, n) {
                return Err(TaskError::config(
                    "batch",
                    format!("encodings {:?} for {bs} graphs of {n} tokens", pe.dim()),
                ));
            }
        }
        let t3 = |a: &ndarray::Array3<f32>| {
            let s = a.shape();
            let v: Vec<f32> = a.iter().copied().collect();
            Tensor::from_slice(&v)
                .view([s[0] as i64, s[1] as i64, s[2] as i64])
                .to_device(device)
        };
        let edge_features = match &b.edge_features {
            Some(e) => {
                let s = e.shape();
                if (s[0], s[1], s[2]) != (bs, n, n) {
                    return Err(TaskError::config(
                        "batch",
                        format!("edge features {:?} for {bs} graphs of {n} tokens", e.dim()),
                    ));
                }
                let v: Vec<f32> = e.iter().copied().collect();
                Some(
                    Tensor::from_slice(&v)
                        .view([s[0] as i64, s[1] as i64, s[2] as i64, s[3] as i64])
                        .to_device(device),
                )
            }
            None => None,
        };
        let (bs, n) = (bs as i64, n as i64);
        let padding: Vec<bool> = b.padding.iter().copied().collect();
        let mask: Vec<bool> = b.mask.iter().copied().collect();
        Ok(Self {
            features: t3(&b.features),
            pe: b.pe.as_ref().map(t3),
            padding: Tensor::from_slice(&padding).view([bs, n]).to_device(device),
            mask: Tensor::from_slice(&mask).view([bs, n, n]).to_device(device),
            edge_features,
        })
    }

    /// Its tensors: features `[B, N', F]`, encodings `[B, N', k]`, padding `[B, N']` (true for
    /// real tokens) and the CLS-augmented adjacency `[B, N', N']`.
    pub fn parts(&self) -> (&Tensor, Option<&Tensor>, &Tensor, &Tensor) {
        (&self.features, self.pe.as_ref(), &self.padding, &self.mask)
    }

    /// The dense edge features `[B, N', N', P]`, if the batch was built with them.
    pub fn edge_features(&self) -> Option<&Tensor> {
        self.edge_features.as_ref()
    }

    /// The same batch with its float tensors (features, encodings, edge features) in `kind`
    /// (e.g. float64 for exact checks; the model's weights must match).
    pub fn to_kind(self, kind: Kind) -> Self {
        Self {
            features: self.features.to_kind(kind),
            pe: self.pe.map(|p| p.to_kind(kind)),
            edge_features: self.edge_features.map(|e| e.to_kind(kind)),
            ..self
        }
    }
}
