//! Small seeded graph sets in the layout of any [`LrgbSet`], with a target a model can learn
//! from the graph: what tests train the LRGB, superpixel and ZINC front ends on where the real
//! files are absent (written with [`crate::lrgb::save`], they stand in for a data directory).
//!
//! Each graph is a cycle of 6–13 nodes with one chord; every node has a colour in {0, 1, 2}.
//! Integer-featured sets (the OGB atom/bond columns, ZINC's types) carry the colour in column 0
//! and its parity elsewhere (inside every OGB vocabulary); real-featured ones carry
//! `colour − 1` plus noise in column 0 and noise elsewhere. The targets read the colours: graph classes and real targets from the colours' shares,
//! node classes from the next node's colour along the cycle (so a node's own features do not
//! give it away), link labels from whether the two nodes share a colour.

use ndarray::Array2;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::Result;
use crate::lrgb::{LrgbSet, LrgbTask};
use crate::{Csr, Graph, GraphDataset, LinkTargets, Targets};
use basin_data::split::Split;

/// `graphs` graphs in `set`'s layout drawn with `seed`, split 70 / 15 / 15 in order.
pub fn lrgb_like(set: LrgbSet, graphs: usize, seed: u64) -> Result<GraphDataset> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (fw, pw) = set.feature_widths();
    let integer = matches!(
        set,
        LrgbSet::PeptidesFunc | LrgbSet::PeptidesStruct | LrgbSet::PcqmContact | LrgbSet::Zinc
    );
    let (mut out, mut colours) = (Vec::with_capacity(graphs), Vec::with_capacity(graphs));
    for _ in 0..graphs {
        let n = rng.random_range(6..14usize);
        let colour: Vec<usize> = (0..n).map(|_| rng.random_range(0..3)).collect();
        let mut pairs: Vec<(u32, u32)> = (0..n as u32).map(|v| (v, (v + 1) % n as u32)).collect();
        pairs.push((0, (n / 2) as u32));
        let adjacency = Csr::from_undirected(n, &pairs)?;
        let x = Array2::from_shape_fn((n, fw), |(v, c)| {
            if integer {
                // OGB's smallest atom vocabularies have two entries.
                (if c == 0 { colour[v] } else { colour[v] % 2 }) as f32
            } else if c == 0 {
                colour[v] as f32 - 1.0 + 0.1 * rng.random::<f32>()
            } else {
                rng.random::<f32>() - 0.5
            }
        });
        let mut g = Graph::new(adjacency.clone(), x)?;
        g.edge_features = Some(Array2::from_shape_fn((adjacency.nnz(), pw), |_| {
            if integer {
                rng.random_range(0..2) as f32
            } else {
                rng.random::<f32>()
            }
        }));
        out.push(g);
        colours.push(colour);
    }
    let share =
        |c: &[usize], k: usize| c.iter().filter(|&&v| v == k).count() as f32 / c.len() as f32;
    let targets = match set.task() {
        LrgbTask::GraphClasses(k) => Targets::Classes {
            labels: colours
                .iter()
                .map(|c| ((share(c, 2) * k as f32) as usize).min(k - 1))
                .collect(),
            num_classes: k,
        },
        LrgbTask::Regression(t) => {
            Targets::Regression(Array2::from_shape_fn((graphs, t), |(i, j)| {
                share(&colours[i], j % 3)
            }))
        }
        LrgbTask::MultiLabel(t) => {
            Targets::MultiLabel(Array2::from_shape_fn((graphs, t), |(i, j)| {
                f32::from(share(&colours[i], j % 3) > 1.0 / 3.0)
            }))
        }
        LrgbTask::NodeClasses(k) => {
            for (g, c) in out.iter_mut().zip(&colours) {
                let n = c.len();
                g.node_labels = Some((0..n).map(|v| (c[(v + 1) % n] % k) as i64).collect());
            }
            Targets::NodeClasses { num_classes: k }
        }
        LrgbTask::Links => Targets::Links(
            colours
                .iter()
                .map(|c| {
                    let n = c.len() as u32;
                    let mut l = LinkTargets::default();
                    for a in 0..n {
                        let b = (a + 2) % n;
                        l.pairs.push([a, b]);
                        l.labels.push(f32::from(c[a as usize] == c[b as usize]));
                    }
                    l
                })
                .collect(),
        ),
    };
    let ids: Vec<u32> = (0..graphs as u32).collect();
    let (a, b) = (graphs * 70 / 100, graphs * 85 / 100);
    let ds = GraphDataset {
        name: set.name().into(),
        graphs: out,
        targets,
        class_values: Vec::new(),
        official_split: Some(Split::new(
            ids[..a].to_vec(),
            ids[a..b].to_vec(),
            ids[b..].to_vec(),
        )),
        node_features: None,
    };
    ds.validate()?;
    Ok(ds)
}
