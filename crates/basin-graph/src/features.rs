//! Scaling node and edge attributes with statistics of the training items only.
//!
//! TU attributes are raw measurements (ENZYMES' 18 attributes range from −213 to 762); fed to a
//! linear encoder unscaled they dominate everything downstream. [`Standardizer`] centres and
//! scales every *continuous* column (any value other than 0 and 1) with the mean and standard
//! deviation of the training part of a split — refitted per fold, so no statistic ever sees a
//! test item — and leaves binary columns (one-hot labels) as they are.

use ndarray::{Array2, ArrayView1, Axis};
use serde::{Deserialize, Serialize};

use crate::GraphDataset;
use crate::batch::GraphBatch;

/// How node attributes enter a model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FeatureScaling {
    /// Continuous columns standardised with the training items' statistics (per fold).
    #[default]
    Standardize,
    /// As read from the files (the reference code's way).
    Raw,
}

/// Per-column `(x − mean) / scale`; binary and constant columns keep scale 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    /// Subtracted from each column.
    pub mean: Vec<f32>,
    /// Each column is divided by it.
    pub scale: Vec<f32>,
}

impl Standardizer {
    /// Leaves `width` columns unchanged.
    pub fn identity(width: usize) -> Self {
        Self {
            mean: vec![0.0; width],
            scale: vec![1.0; width],
        }
    }

    /// Fits on `rows` (each of `width` values): continuous columns get their mean and
    /// population standard deviation (floor 1e-6 → scale 1), binary columns the identity.
    pub fn fit<'a>(width: usize, rows: impl IntoIterator<Item = ArrayView1<'a, f32>>) -> Self {
        let (mut sum, mut sq) = (vec![0f64; width], vec![0f64; width]);
        let mut binary = vec![true; width];
        let mut n = 0usize;
        for row in rows {
            for (j, &v) in row.iter().enumerate().take(width) {
                let v = f64::from(v);
                sum[j] += v;
                sq[j] += v * v;
                binary[j] &= v == 0.0 || v == 1.0;
            }
            n += 1;
        }
        let n = n.max(1) as f64;
        let mut s = Self::identity(width);
        for j in 0..width {
            if binary[j] {
                continue;
            }
            let mean = sum[j] / n;
            let std = (sq[j] / n - mean * mean).max(0.0).sqrt();
            s.mean[j] = mean as f32;
            s.scale[j] = if std > 1e-6 { std as f32 } else { 1.0 };
        }
        s
    }

    /// Fits on every node of the graphs `items` of `data`.
    pub fn fit_graphs(data: &GraphDataset, items: &[usize]) -> Self {
        let width = data.graphs.first().map_or(0, |g| g.node_features.ncols());
        Self::fit(
            width,
            items
                .iter()
                .filter_map(|&i| data.graphs.get(i))
                .flat_map(|g| g.node_features.axis_iter(Axis(0))),
        )
    }

    /// Fits on every edge of the graphs `items` of `data`; `None` when it has no edge features.
    pub fn fit_edges(data: &GraphDataset, items: &[usize]) -> Option<Self> {
        let width = data
            .graphs
            .iter()
            .find_map(|g| g.edge_features.as_ref())?
            .ncols();
        Some(Self::fit(
            width,
            items
                .iter()
                .filter_map(|&i| data.graphs.get(i)?.edge_features.as_ref())
                .flat_map(|e| e.axis_iter(Axis(0))),
        ))
    }

    /// Whether it leaves every value as it is (all columns binary, or fitted on nothing).
    pub fn is_identity(&self) -> bool {
        self.mean.iter().all(|&m| m == 0.0) && self.scale.iter().all(|&s| s == 1.0)
    }

    /// `data` with every graph's edge features scaled (a copy; node features untouched).
    pub fn scale_edges(&self, data: &GraphDataset) -> GraphDataset {
        let mut out = data.clone();
        for e in out
            .graphs
            .iter_mut()
            .filter_map(|g| g.edge_features.as_mut())
        {
            self.apply(e);
        }
        out
    }

    /// Fits on the rows `items` of one graph's node features.
    pub fn fit_rows(features: &Array2<f32>, items: &[usize]) -> Self {
        Self::fit(
            features.ncols(),
            items
                .iter()
                .filter(|&&i| i < features.nrows())
                .map(|&i| features.row(i)),
        )
    }

    /// Scales every row of `x` in place.
    pub fn apply(&self, x: &mut Array2<f32>) {
        for mut row in x.axis_iter_mut(Axis(0)) {
            for (j, v) in row.iter_mut().enumerate().take(self.mean.len()) {
                *v = (*v - self.mean[j]) / self.scale[j];
            }
        }
    }

    /// Scales the node rows of a batch in place: real tokens only (padding stays zero), and
    /// not the CLS slot when `cls` (it holds no node).
    pub fn apply_batch(&self, b: &mut GraphBatch, cls: bool) {
        let (graphs, tokens, _) = b.features.dim();
        for g in 0..graphs {
            for t in usize::from(cls)..tokens {
                if !b.padding[[g, t]] {
                    continue;
                }
                for (j, v) in b
                    .features
                    .slice_mut(ndarray::s![g, t, ..])
                    .iter_mut()
                    .enumerate()
                    .take(self.mean.len())
                {
                    *v = (*v - self.mean[j]) / self.scale[j];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuous_columns_are_standardised_and_binary_ones_kept() {
        let x = ndarray::array![[0.0f32, 10.0, 3.0], [1.0, 30.0, 3.0], [0.0, 20.0, 3.0]];
        let s = Standardizer::fit_rows(&x, &[0, 1, 2]);
        assert_eq!((s.mean[0], s.scale[0]), (0.0, 1.0), "one-hot column kept");
        assert!((s.mean[1] - 20.0).abs() < 1e-6);
        assert!((s.scale[1] - (200.0f32 / 3.0).sqrt()).abs() < 1e-4);
        assert_eq!(s.scale[2], 1.0, "a constant column is only centred");
        let mut y = x.clone();
        s.apply(&mut y);
        let col = y.column(1);
        assert!(col.mean().unwrap().abs() < 1e-6);
        assert!((col.mapv(|v| v * v).mean().unwrap() - 1.0).abs() < 1e-5);
        assert_eq!(y.column(0), x.column(0));
        // Fitted on the first two rows only: the third never enters the statistics.
        let s2 = Standardizer::fit_rows(&x, &[0, 1]);
        assert!((s2.mean[1] - 20.0).abs() < 1e-6 && (s2.scale[1] - 10.0).abs() < 1e-5);
    }

    /// Two 2-node graphs whose edges (both directions) carry a one-hot label and a continuous
    /// attribute.
    fn edge_dataset() -> GraphDataset {
        let graph = |label: usize, value: f32| {
            let (adj, _) = crate::Csr::from_edges(2, &[0, 1], &[1, 0]).unwrap();
            let mut g = crate::Graph::new(adj, Array2::ones((2, 1))).unwrap();
            let mut e = Array2::zeros((2, 3));
            e.column_mut(label).fill(1.0);
            e.column_mut(2).fill(value);
            g.edge_features = Some(e);
            g
        };
        GraphDataset {
            name: "edges".into(),
            graphs: vec![graph(0, 10.0), graph(1, 30.0), graph(0, 1000.0)],
            targets: crate::Targets::Classes {
                labels: vec![0, 1, 0],
                num_classes: 2,
            },
            class_values: vec![0, 1],
            official_split: None,
            node_features: None,
        }
    }

    #[test]
    fn edge_attributes_are_standardised_on_the_training_graphs_only() {
        let data = edge_dataset();
        let s = Standardizer::fit_edges(&data, &[0, 1]).unwrap();
        assert_eq!(&s.mean[..2], &[0.0, 0.0], "one-hot edge labels kept");
        assert_eq!(&s.scale[..2], &[1.0, 1.0]);
        // Graph 2's 1000 never enters the statistics.
        assert!((s.mean[2] - 20.0).abs() < 1e-5 && (s.scale[2] - 10.0).abs() < 1e-5);
        assert!(!s.is_identity());
        let scaled = s.scale_edges(&data);
        let e = |d: &GraphDataset, g: usize| d.graphs[g].edge_features.clone().unwrap();
        assert_eq!(e(&scaled, 0).column(2).to_vec(), vec![-1.0, -1.0]);
        assert_eq!(e(&scaled, 2).column(2).to_vec(), vec![98.0, 98.0]);
        assert_eq!(e(&scaled, 1).column(1), e(&data, 1).column(1));
        assert_eq!(scaled.graphs[0].node_features, data.graphs[0].node_features);
        // Labels alone: nothing to scale.
        let mut labels_only = data.clone();
        for g in &mut labels_only.graphs {
            g.edge_features = g
                .edge_features
                .take()
                .map(|e| e.slice(ndarray::s![.., ..2]).to_owned());
        }
        assert!(
            Standardizer::fit_edges(&labels_only, &[0, 1, 2])
                .unwrap()
                .is_identity()
        );
        for g in &mut labels_only.graphs {
            g.edge_features = None;
        }
        assert!(Standardizer::fit_edges(&labels_only, &[0]).is_none());
    }
}
