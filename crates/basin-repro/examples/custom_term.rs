//! A new energy term in one file: define it, register it, and train a graph classifier from a
//! TOML run file that names it — no change to basin.
//!
//! The term is a learned projection energy, `E = −½ Σ_tokens ‖P g‖²` (it pulls every token
//! towards the span of P's rows). It defines only its energy; basin differentiates it by
//! autograd. `basin_core::register_term!` makes `kind = "projection"` work in every config
//! file of every task.
//!
//! It needs only basin-core (the term) and basin-tasks (the task and its run loop). Run it:
//! `cargo run --release -p basin-repro --example custom_term` (about a minute on two
//! cores). It writes a tiny TU-format dataset (rings and stars, told apart only by structure)
//! into a temporary folder, trains on it with a block of `attention` + `projection`, and prints
//! the cross-validated accuracy.

use std::path::Path;

use basin_core::registry::{BuildContext, TermParams};
use basin_core::{Energy, Structure};
use basin_tasks::graph_classification::GraphRun;
use basin_tasks::run::{RunOutcome, train};
use basin_tasks::task::Task;
use basin_train::context::RunContext;
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

/// The term's parameters as written in a config file (`kind = "projection"`, `rank = 4`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectionConfig {
    /// Rows of P.
    pub rank: i64,
}

/// `E = −½ Σ_tokens ‖P g‖²` over real (unpadded) tokens.
pub struct Projection {
    p: Tensor,
    name: String,
}

impl Projection {
    /// Creates P `[rank, dim]` under `path`.
    pub fn new(path: &nn::Path, dim: i64, cfg: &ProjectionConfig) -> Self {
        let init = nn::Init::Randn {
            mean: 0.0,
            stdev: 0.1,
        };
        Self {
            p: path.var("p", &[cfg.rank, dim], init),
            name: "projection".into(),
        }
    }
}

impl Energy for Projection {
    fn name(&self) -> &str {
        &self.name
    }

    fn energy(&self, g: &Tensor, s: &Structure) -> Tensor {
        let per_token =
            -(g.matmul(&self.p.tr()).square() * 0.5).sum_dim_intlist(-1, false, g.kind());
        // Padded tokens carry no energy.
        let per_token = match s.token_weights(g.kind()) {
            Some(w) => per_token * w,
            None => per_token,
        };
        per_token.sum_dim_intlist(-1, false, g.kind()) // [B]
    }
}

impl TermParams for ProjectionConfig {
    const KIND: &'static str = "projection";
    const ABOUT: &'static str = "−½ Σ ‖P g‖² (the custom_term example)";

    fn validate(&self, field: &str) -> basin_core::Result<()> {
        if self.rank < 1 {
            return Err(basin_core::CoreError::config(
                format!("{field}.rank"),
                "must be ≥ 1",
            ));
        }
        Ok(())
    }

    fn build(&self, ctx: &BuildContext, name: &str) -> basin_core::Result<Box<dyn Energy>> {
        let mut term = Projection::new(ctx.path, ctx.dim, self);
        term.name = name.into();
        Ok(Box::new(term))
    }
}

// The one line that makes `kind = "projection"` usable from every config file.
basin_core::register_term!(ProjectionConfig);

/// The run file: a graph classifier whose blocks are energy attention plus the new term.
pub const RUN_FILE: &str = r#"
data = "SHAPES"

[architecture]
blocks = 1
batch = 16

[architecture.block]
dim = 16
steps = 2

[[architecture.block.terms]]
kind = "attention"
heads = 2
head_dim = 8
learn_beta = true

[[architecture.block.terms]]
kind = "projection"
rank = 4

[architecture.block.dynamics]
kind = "gradient-flow"
alpha = 0.1

[protocol]
repeats = 1

[protocol.folds]
folds = 3
val_ratio = 0.2
seed = 0

[protocol.train]
epochs = 12

[protocol.train.optim]
lr = 0.003
"#;

/// Writes a TU-format dataset `SHAPES` under `dir`: rings (class 0) and stars (class 1) of
/// 5–10 nodes, every node with the same label, so only the structure tells them apart.
pub fn write_shapes(dir: &Path, graphs: usize) -> std::io::Result<()> {
    let d = dir.join("SHAPES");
    std::fs::create_dir_all(&d)?;
    let (mut edges, mut indicator, mut labels, mut node_labels) =
        (String::new(), String::new(), String::new(), String::new());
    let mut first = 1; // TU ids are 1-based
    for g in 0..graphs {
        let n = 5 + g % 6;
        let star = g % 2 == 1;
        for a in 0..n {
            indicator.push_str(&format!("{}\n", g + 1));
            node_labels.push_str("0\n");
            let b = if star { 0 } else { (a + 1) % n };
            if star && a == 0 {
                continue;
            }
            edges.push_str(&format!(
                "{}, {}\n{}, {}\n",
                first + a,
                first + b,
                first + b,
                first + a
            ));
        }
        labels.push_str(&format!("{}\n", usize::from(star)));
        first += n;
    }
    std::fs::write(d.join("SHAPES_A.txt"), edges)?;
    std::fs::write(d.join("SHAPES_graph_indicator.txt"), indicator)?;
    std::fs::write(d.join("SHAPES_graph_labels.txt"), labels)?;
    std::fs::write(d.join("SHAPES_node_labels.txt"), node_labels)
}

/// Writes the dataset under `work/tu`, trains the run file into `work/run` on the CPU.
pub fn run(work: &Path) -> Result<RunOutcome, Box<dyn std::error::Error>> {
    write_shapes(&work.join("tu"), 90)?;
    let run: GraphRun = toml::from_str(RUN_FILE)?;
    run.validate()?;
    let ctx = RunContext::new("custom term")
        .with_out(work.join("run"))
        .with_data_dir(work);
    Ok(train(&run, &ctx, |_| false)?)
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let work = tempfile::tempdir()?;
    let outcome = run(work.path())?;
    for (fold, metrics) in &outcome.runs {
        println!("{fold}: test accuracy {:.3}", metrics["test_accuracy"]);
    }
    println!("energy per step (fold 0): {:?}", outcome.energy);
    Ok(())
}
