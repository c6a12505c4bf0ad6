//! Node anomaly detection (ET Section 4, Appendix C; Table 6).

use basin_core::{AttentionConfig, DynamicsConfig};
use basin_graph::features::FeatureScaling;
use basin_tasks::node_anomaly::{NodeAnomalyConfig, RelationPool};
use serde::{Deserialize, Serialize};

/// One row of ET Table 6: the hyperparameters tuned per dataset and training ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table6Row {
    /// Head width Y (the reference code uses Y = D).
    pub y: i64,
    /// Hopfield memories K.
    pub k: i64,
    /// Descent steps T.
    pub t: usize,
    /// Heads H.
    pub h: i64,
}

/// The model of a Table 6 row: D = Y, α = 1 (the reference's explicit update is a unit
/// step), β learned, W_Q and W_K ~ N(0, 0.01²), learned positional embeddings (eq. 14), no
/// added self loops, readout hidden width Y.
pub fn table6(row: Table6Row) -> NodeAnomalyConfig {
    NodeAnomalyConfig {
        block: crate::block(
            row.y,
            AttentionConfig {
                heads: row.h,
                head_dim: row.y,
                learn_beta: true,
                init_std: 0.01,
                ..AttentionConfig::default()
            },
            row.k,
            row.t,
            DynamicsConfig::gradient_flow(1.0),
        ),
        positional: true,
        self_loops: false,
        readout_hidden: row.y,
        heterogeneous: false,
        relation_pool: RelationPool::Max,
        subgraph_ratio: None,
        features: FeatureScaling::Standardize,
        ..NodeAnomalyConfig::default()
    }
}

/// The Table 13 ablations, in the paper's order: the attention alone, the Hopfield memory
/// alone, the full model.
pub const ABLATIONS: [&str; 3] = ["ATT-only", "HN-only", "ET"];

/// The Table 13 ablations of `cfg`, named as [`ABLATIONS`]: `ATT-only` (HN removed),
/// `HN-only` (ATT removed; each node then sees only its own features), `ET` (both).
pub fn ablations(cfg: &NodeAnomalyConfig) -> Vec<(&'static str, NodeAnomalyConfig)> {
    [(true, false), (false, true), (true, true)]
        .into_iter()
        .zip(ABLATIONS)
        .map(|((att, hn), name)| {
            let block = crate::keep_modules(&cfg.block, att, hn);
            (
                name,
                NodeAnomalyConfig {
                    block,
                    ..cfg.clone()
                },
            )
        })
        .collect()
}

/// The model for datasets Table 6 does not list: Y = 64, K = 128, T = 2, H = 1, without the
/// per-node positional embeddings (the reference code's choice; with them the model
/// memorises the training nodes). Chosen on validation AUC on Tolokers at 40 %.
pub fn default_model() -> NodeAnomalyConfig {
    NodeAnomalyConfig {
        positional: false,
        ..table6(Table6Row {
            y: 64,
            k: 128,
            t: 2,
            h: 1,
        })
    }
}
