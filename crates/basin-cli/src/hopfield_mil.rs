//! `reproduce hopfield-mil`: a HopfieldPooling classifier on the MIL benchmarks, evaluated by
//! repeated stratified 10-fold cross-validation with hyperparameter selection inside the
//! training folds, reported beside the slides' table.
//!
//! Model: instances are standardised with statistics of the training bags only, embedded by
//! an affine map and ReLU (with dropout), pooled per bag by `HopfieldPooling` (one learned
//! query, stored patterns = the bag's instances, padding ignored), and a linear head gives the
//! bag's logit; binary cross-entropy.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use basin_core::hopfield::{AssociationConfig, HopfieldPooling};
use basin_graph::KFoldConfig;
use basin_train::TrainError;
use basin_train::mil::{MilDataset, load_csv, load_prtools_zip};
use basin_train::optim::OptimConfig;
use basin_train::protocol::{Metric, NestedCrossValidation};
use basin_train::runner::{EpochOutput, Learner, Scores, Steps, TrainConfig};
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::nn::{self, Module, ModuleT};
use tch::{Device, Kind, Reduction, Tensor};

const PAPER: &str = include_str!("../../../data/papers/hopfield-mil.toml");

/// One candidate of the hyperparameter grid.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Candidate {
    /// Embedding width.
    pub embed: i64,
    /// Heads of the pooling.
    pub heads: i64,
    /// Dropout on the embeddings.
    pub dropout: f64,
}

struct MilLearner {
    vs: nn::VarStore,
    embed: nn::Linear,
    pool: HopfieldPooling,
    head: nn::Linear,
    dropout: f64,
    data: Arc<MilDataset>,
    mean: Vec<f32>,
    std: Vec<f32>,
    batch: usize,
}

impl MilLearner {
    fn new(
        data: Arc<MilDataset>,
        c: &Candidate,
        train: &[usize],
        seed: u64,
    ) -> Result<Self, TrainError> {
        tch::manual_seed(seed as i64);
        let f = data.features;
        // Standardisation from the training bags' instances only.
        let (mut sum, mut sq, mut n) = (vec![0f64; f], vec![0f64; f], 0usize);
        for &b in train {
            for row in data.bags[b].features.chunks(f) {
                for (j, &v) in row.iter().enumerate() {
                    sum[j] += f64::from(v);
                    sq[j] += f64::from(v) * f64::from(v);
                }
                n += 1;
            }
        }
        let n = n.max(1) as f64;
        let mean: Vec<f32> = sum.iter().map(|s| (s / n) as f32).collect();
        let std: Vec<f32> = sq
            .iter()
            .zip(&mean)
            .map(|(q, &m)| ((q / n - f64::from(m).powi(2)).max(0.0).sqrt().max(1e-6)) as f32)
            .collect();
        let vs = nn::VarStore::new(Device::Cpu);
        let root = vs.root();
        let cfg = AssociationConfig {
            state_size: c.embed,
            stored_size: c.embed,
            heads: c.heads,
            ..AssociationConfig::default()
        };
        let pool = HopfieldPooling::new(&(&root / "pool"), &cfg, 1).map_err(TrainError::from)?;
        Ok(Self {
            embed: nn::linear(&root / "embed", f as i64, c.embed, Default::default()),
            head: nn::linear(&root / "head", cfg.out_size(), 1, Default::default()),
            pool,
            dropout: c.dropout,
            vs,
            data,
            mean,
            std,
            batch: 16,
        })
    }

    /// Padded, standardised instances `[B, L, F]`, the padding mask `[B, L]` and labels `[B]`.
    fn batch_tensors(&self, bags: &[usize]) -> (Tensor, Tensor, Tensor) {
        let f = self.data.features;
        let l = bags
            .iter()
            .map(|&b| self.data.bags[b].len)
            .max()
            .unwrap_or(1);
        let mut x = vec![0f32; bags.len() * l * f];
        let mut pad = vec![true; bags.len() * l];
        for (k, &b) in bags.iter().enumerate() {
            let bag = &self.data.bags[b];
            for (i, row) in bag.features.chunks(f).enumerate() {
                pad[k * l + i] = false;
                for (j, &v) in row.iter().enumerate() {
                    x[(k * l + i) * f + j] = (v - self.mean[j]) / self.std[j];
                }
            }
        }
        let labels: Vec<f32> = bags
            .iter()
            .map(|&b| f32::from(u8::from(self.data.bags[b].label)))
            .collect();
        let b = bags.len() as i64;
        (
            Tensor::from_slice(&x).view([b, l as i64, f as i64]),
            Tensor::from_slice(&pad).view([b, l as i64]),
            Tensor::from_slice(&labels),
        )
    }

    fn logits(&self, x: &Tensor, pad: &Tensor, train: bool) -> Tensor {
        let h = self.embed.forward(x).relu().dropout(self.dropout, train);
        self.head
            .forward_t(&self.pool.forward(&h, Some(pad)), train)
            .squeeze_dim(-1)
    }
}

impl Learner for MilLearner {
    fn vars(&self) -> &nn::VarStore {
        &self.vs
    }
    fn train_epoch(
        &mut self,
        train: &[usize],
        steps: &mut Steps<'_>,
        rng: &mut ChaCha8Rng,
    ) -> Result<EpochOutput, TrainError> {
        let mut order = train.to_vec();
        order.shuffle(rng);
        let (mut total, mut n) = (0.0, 0);
        for chunk in order.chunks(self.batch) {
            let (x, pad, y) = self.batch_tensors(chunk);
            let loss = self
                .logits(&x, &pad, true)
                .binary_cross_entropy_with_logits::<Tensor>(&y, None, None, Reduction::Mean);
            total += steps.step(&loss)?;
            n += 1;
        }
        Ok(EpochOutput {
            loss: total / f64::from(n.max(1)),
            pre_step_scores: None,
        })
    }
    fn predict(&mut self, items: &[usize]) -> Result<Scores, TrainError> {
        let mut rows = Vec::with_capacity(items.len());
        for chunk in items.chunks(64) {
            let (x, pad, _) = self.batch_tensors(chunk);
            let p = tch::no_grad(|| self.logits(&x, &pad, false).sigmoid());
            rows.extend(Scores::from_tensor(&p.to_kind(Kind::Double))?.0);
        }
        Ok(Scores(rows))
    }
}

#[derive(Deserialize)]
struct PaperRow {
    dataset: String,
    value: f64,
    std: f64,
}

#[derive(Deserialize)]
struct PaperTable {
    rows: Vec<PaperRow>,
}

/// Runs the MIL table; returns how many datasets were run.
pub fn run(data_dir: &Path, out: &Path, quick: bool) -> Result<usize> {
    let started = Instant::now();
    std::fs::create_dir_all(out)?;
    let paper: PaperTable = toml::from_str(PAPER).context("data/papers/hopfield-mil.toml")?;
    let dir = data_dir.join("mil");
    let protocol = NestedCrossValidation {
        outer: KFoldConfig {
            folds: if quick { 3 } else { 10 },
            val_ratio: 0.1,
            seed: 0,
        },
        inner_folds: 2,
        repeats: if quick { 1 } else { 3 },
        metric: Metric::RocAuc,
        train: TrainConfig {
            epochs: if quick { 5 } else { 40 },
            optim: OptimConfig {
                lr: 1e-3,
                weight_decay: 1e-4,
                ..OptimConfig::default()
            },
            ..TrainConfig::default()
        },
    };
    let grid: Vec<Candidate> = if quick {
        vec![Candidate {
            embed: 32,
            heads: 2,
            dropout: 0.0,
        }]
    } else {
        vec![
            Candidate {
                embed: 32,
                heads: 4,
                dropout: 0.0,
            },
            Candidate {
                embed: 64,
                heads: 4,
                dropout: 0.5,
            },
        ]
    };
    let mut md = String::from("# Hopfield MIL benchmarks — HopfieldPooling classifier\n\n");
    if quick {
        md.push_str("**`--quick` run: 3 folds, 1 repeat, 5 epochs, one candidate — a smoke test, not a result.**\n\n");
    }
    md.push_str(&format!("Protocol: {} repeat(s) of stratified {}-fold cross-validation; {} hyperparameter candidates ({}) chosen by an inner stratified {}-fold cross-validation of each outer training part; epochs picked on a 10 % validation split of the training part; instances standardised with the training bags' statistics. Training: Adam, lr 1e-3, wd 1e-4, {} epochs, batches of 16 bags. Metric: ROC-AUC (×100) of the bag scores.\n\n",
        protocol.repeats, protocol.outer.folds, grid.len(), serde_json::to_string(&grid)?, protocol.inner_folds, protocol.train.epochs));
    md.push_str("| dataset | bags | instances | slides (Hopfield) | ours: AUC (mean ± std over repeats) | AUC (over folds) | wall (s) |\n|---|---|---|---|---|---|---|\n");
    let names = [
        "tiger",
        "fox",
        "elephant",
        "ucsb_breast_cancer",
        "musk1",
        "musk2",
    ];
    let mut missing = Vec::new();
    let mut ran = 0;
    for name in names {
        let slides = paper
            .rows
            .iter()
            .find(|r| r.dataset == name)
            .map_or("–".to_owned(), |r| {
                format!("{:.2} ± {:.1}", r.value, r.std)
            });
        if quick && ["musk2", "tiger", "fox"].contains(&name) {
            continue;
        }
        // Fox, Tiger and Elephant come from the PRTools files in fte.zip (the slides' data);
        // the others from the CSVs.
        let zip = dir.join("fte.zip");
        let csv = dir.join(format!("{name}.csv"));
        let loaded = if ["tiger", "fox", "elephant"].contains(&name) && zip.exists() {
            load_prtools_zip(&zip, &format!("{name}.mat"))?
        } else if csv.exists() {
            load_csv(&csv)?
        } else {
            missing.push(format!(
                "{name}: neither {} nor fte.zip found",
                csv.display()
            ));
            md.push_str(&format!(
                "| {name} | – | – | {slides} | not run | – | – |\n"
            ));
            continue;
        };
        let t0 = Instant::now();
        let data = Arc::new(loaded);
        let target: Vec<f64> = data
            .labels()
            .iter()
            .map(|&l| f64::from(u8::from(l)))
            .collect();
        let d = data.clone();
        let report = protocol.run(
            name,
            &target,
            &grid,
            |c, train, seed| MilLearner::new(d.clone(), c, train, seed),
            "cpu",
        )?;
        let over_repeats = report.show("test_auc_over_repeats", 100.0);
        let over_folds = report.show("test_auc", 100.0);
        md.push_str(&format!(
            "| {name} | {} | {} | {slides} | {over_repeats} | {over_folds} | {:.0} |\n",
            data.bags.len(),
            data.instances(),
            t0.elapsed().as_secs_f64()
        ));
        std::fs::create_dir_all(out.join(name))?;
        report.write_json(&out.join(name))?;
        println!("{name}: AUC {over_repeats} (slides: {slides})");
        ran += 1;
    }
    if !missing.is_empty() {
        md.push_str("\nNot run:\n");
        for m in &missing {
            md.push_str(&format!("- {m}\n"));
        }
    }
    md.push_str(&format!("\nThe slides do not state their metric or repeat count; compare with care. Wall time {:.0} s on {}.\n", started.elapsed().as_secs_f64(), basin_core::device::describe(Device::Cpu)));
    basin_core::checkpoint::write_atomic(&out.join("report.md"), md.as_bytes())?;
    Ok(ran)
}
