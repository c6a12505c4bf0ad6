//! The run files `basin train --example NAME` prints: each family's model on a task at CPU
//! scale, complete (every field written out), so that a user edits one rather than starts
//! from nothing.

use basin_sfi::task::GpsRun;
use basin_tasks::TaskError;
use basin_tasks::graph_classification::GraphRun;
use basin_tasks::image_completion::ImageRun;
use basin_tasks::node_anomaly::AnomalyRun;
use basin_tasks::run::to_toml;
use basin_train::protocol::{
    AnomalyProtocol, CrossValidation, FixedSplitProtocol, ImageProtocol, Metric,
};

use crate::Result;

#[cfg(test)]
mod tests;

/// The examples: name, one line on what it runs, and how its run file is made.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "et-graph",
        "graph classification with ET blocks at CPU scale on MUTAG, 10-fold CV",
    ),
    (
        "et-anomaly",
        "node anomaly detection with an ET block on tolokers, one run",
    ),
    (
        "cdat-graph",
        "graph classification with CDAT blocks (vMF attention, controlled dynamics) on MUTAG",
    ),
    (
        "cdat-anomaly",
        "node anomaly detection with a CDAT block (Table 8's row) on tolokers, one run",
    ),
    (
        "sfi-pattern",
        "SFi-Former at CPU scale on PATTERN (1,000/200/200 of the generated split, 10 epochs)",
    ),
    (
        "et-image",
        "masked image completion with an ET block on Fashion-MNIST (2,000 images, 3 epochs)",
    ),
    (
        "et-image-implicit",
        "the same, trained at the attractor: implicit gradient and the input field (input injection)",
    ),
];

/// The CPU-scale TU protocol of the graph examples: leak-free 10-fold CV on the TU tables'
/// folds ([`crate::tu_classification::cv_folds`]) with their training ([`crate::tu_classification::tu_train`]) at their CPU
/// budget.
fn cpu_cross_validation() -> CrossValidation {
    CrossValidation {
        folds: crate::tu_classification::cv_folds(10),
        train: crate::tu_classification::tu_train(
            crate::tu_classification::CPU_EPOCHS,
            crate::tu_classification::CPU_LR,
        ),
        ..CrossValidation::default()
    }
}

/// One run of the anomaly protocol's defaults.
fn one_anomaly_run() -> AnomalyProtocol {
    AnomalyProtocol {
        runs: 1,
        ..AnomalyProtocol::default()
    }
}

/// The complete example run file `name` (see [`EXAMPLES`]), as TOML.
pub fn example(name: &str) -> Result<String> {
    let graph = |architecture| {
        to_toml(&GraphRun {
            data: "MUTAG".into(),
            architecture,
            protocol: cpu_cross_validation(),
            node_features: Default::default(),
        })
    };
    let anomaly = |architecture| {
        to_toml(&AnomalyRun {
            data: "tolokers".into(),
            architecture,
            protocol: one_anomaly_run(),
        })
    };
    let text = match name {
        "et-graph" => graph(basin_et::graph::tu_cpu())?,
        "cdat-graph" => graph(basin_cdat::graph::tu_cpu())?,
        "et-anomaly" => anomaly(basin_et::anomaly::default_model())?,
        "cdat-anomaly" => anomaly(basin_cdat::anomaly::model(basin_cdat::anomaly::TABLE8))?,
        "sfi-pattern" => to_toml(&GpsRun {
            data: "pattern".into(),
            subset: Some([1000, 200, 200]),
            architecture: basin_sfi::presets::cpu(
                basin_sfi::presets::Dataset::Pattern,
                basin_sfi::presets::Variant::Sfi,
            ),
            protocol: FixedSplitProtocol {
                runs: 1,
                seed: 0,
                metric: Metric::AccuracySbm,
                train: basin_sfi::presets::warmup_cosine(10, 1, 1e-3, 1e-5),
                curves: false,
            },
        })?,
        "et-image" | "et-image-implicit" => to_toml(&ImageRun {
            data: "fashion-mnist".into(),
            architecture: if name == "et-image" {
                basin_et::image::fashion_mnist_cpu()
            } else {
                basin_et::image::fashion_mnist_cpu_implicit()
            },
            protocol: ImageProtocol::default(),
            on_corrupt: Default::default(),
        })?,
        other => {
            let known: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
            return Err(TaskError::invalid(
                "--example",
                format!("`{other}` is not an example; expected {}", known.join(", ")),
            ));
        }
    };
    // A field at its default of 0 is left out of files (older records lack it), so the graph
    // examples name it in a comment.
    Ok(if name.ends_with("-graph") {
        text.replacen(
            "\n[protocol]\n",
            "\n[protocol]\n# inner_folds = 3   # choose each fold's epoch count on 3 inner folds of its \
             training part instead of its validation split\n",
            1,
        )
    } else {
        text
    })
}
