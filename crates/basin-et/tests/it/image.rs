//! Image completion with an ET block learns to complete synthetic stripes well below the mean predictor, its energy falls
//! along the steps, and its pictures have the expected sizes and content.
//! Every test holds `lock_generator`: they seed libtorch's global generator and compare draws.

use std::collections::BTreeMap;

use basin_core::TraceOptions;
use basin_core::testing::lock_generator;
use basin_et::image::{ablation, cifar10_cpu, imagenet};
use basin_image::{Augment, ImageSet, MaskStrategy, Normalize};
use basin_tasks::image_completion::{
    ImageCompletionConfig, ImageLearner, ImageLoss, PatchBatchOnDevice, summary,
};
use basin_train::TrainError;
use basin_train::optim::OptimConfig;
use basin_train::record::RunRecord;
use basin_train::runner::{Runner, TrainConfig, Validation};
use tch::Device;

fn stripes(n: usize, seed: u64) -> ImageSet {
    basin_image::synthetic::stripes(n, seed).unwrap()
}

fn small_config() -> ImageCompletionConfig {
    ImageCompletionConfig {
        channels: 1,
        height: 16,
        width: 16,
        patch: 4,
        block: basin_core::testing::et_block(32, 2, 8, 64, 6),
        self_attention: false,
        cls_token: false,
        token_init_std: 0.02,
        loss: ImageLoss::MaskedMse,
        recompute: false,
        dense_init: Default::default(),
        vit: None,
    }
}

/// A learner on `n` stripe images drawn with `seed` (5 random patches masked, batch 32).
fn stripes_learner(cfg: &ImageCompletionConfig, n: usize, seed: u64) -> ImageLearner {
    let data = stripes(n, seed);
    let norm = Normalize::of(&data);
    ImageLearner::new(
        cfg,
        std::sync::Arc::new(data),
        norm,
        MaskStrategy::Random { k: 5 },
        Augment::none(),
        32,
        Device::Cpu,
    )
    .unwrap()
}

/// `epochs` epochs at lr 3·10⁻³, seed 1, no files written.
fn stripes_runner(name: &str, epochs: usize) -> Runner {
    Runner {
        name: name.into(),
        train: TrainConfig {
            epochs,
            optim: OptimConfig {
                lr: 3e-3,
                ..OptimConfig::default()
            },
            ..TrainConfig::default()
        },
        seed: 1,
        dir: None,
        device: "cpu".into(),
        config: serde_json::json!({}),
        progress: false,
        restart_damaged: false,
    }
}

/// 8 epochs on the first 512 of 640 stripe images, validated on the next 64, scored on the
/// last 64 over mask seeds 0 and 1; the record and the test items.
fn train_on_stripes(learner: &mut ImageLearner, name: &str) -> (RunRecord, Vec<usize>) {
    let (train, val, test): (Vec<usize>, Vec<usize>, Vec<usize>) = (
        (0..512).collect(),
        (512..576).collect(),
        (576..640).collect(),
    );
    let record = stripes_runner(name, 8)
        .fit(
            learner,
            &train,
            &[("train", &train), ("val", &val), ("test", &test)],
            |l, _, _| val_mse(l, &val),
            |l, _| Ok(summary("test_", &l.evaluate(&test, &[0, 1])?)),
        )
        .unwrap();
    (record, test)
}

/// Validation by the masked-patch MSE of `val` under mask seed 0 (lower is better).
fn val_mse(l: &ImageLearner, val: &[usize]) -> Result<Validation, TrainError> {
    let r = l.evaluate(val, &[0])?;
    Ok(Validation {
        metrics: BTreeMap::from([("val_mse".into(), r.mse)]),
        score: -r.mse,
        ..Validation::default()
    })
}

#[test]
fn etimage_learns_to_complete_stripes_and_descends() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    tch::manual_seed(0);
    let mut learner = stripes_learner(&small_config(), 640, 1);
    let (record, test) = train_on_stripes(&mut learner, "stripes");
    // Predicting the mean (0 after normalisation) costs the variance, ≈ 1.
    let mse = record.summary["test_mse"];
    assert!(
        mse < 0.5,
        "masked MSE {mse} is not well below the mean predictor's ≈1"
    );
    assert!(
        record.summary["test_psnr"] > 12.0 && record.summary["test_ssim"] > 0.3,
        "{:?}",
        record.summary
    );

    // The energy falls along the steps for every image at evaluation.
    let b = PatchBatchOnDevice::new(
        &learner
            .eval_pipe
            .batch(learner.data.as_ref(), &test[..16], 3)
            .unwrap(),
        Device::Cpu,
    );
    let (_, trace) = tch::no_grad(|| {
        learner
            .model
            .forward(&b, false, Some(TraceOptions::default()))
    });
    let e: Vec<Vec<f64>> = Vec::try_from(
        &trace
            .unwrap()
            .total
            .tr()
            .contiguous()
            .to_kind(tch::Kind::Double),
    )
    .unwrap();
    for row in e {
        assert!(
            row.windows(2).all(|w| w[1] <= w[0] + 1e-5 * w[0].abs()),
            "energy rose: {row:?}"
        );
        assert!(row[row.len() - 1] < row[0], "energy did not fall: {row:?}");
    }

    // Pictures: expected sizes, not constant.
    let dir = tempfile::tempdir().unwrap();
    learner
        .write_reconstructions(&test[..5], 0, &dir.path().join("recon.png"))
        .unwrap();
    let img = image::open(dir.path().join("recon.png")).unwrap().to_rgb8();
    assert_eq!(img.dimensions(), (130 + 4 + 5 * (64 + 4), 4 + 3 * (64 + 4)));
    assert!(
        learner
            .write_memories(16, &dir.path().join("memories.png"))
            .unwrap()
    );
    let mem = image::open(dir.path().join("memories.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(mem.dimensions(), (4 + 4 * (24 + 4), 4 + 4 * (24 + 4)));
    let distinct: std::collections::HashSet<_> = mem.pixels().map(|p| p.0).collect();
    assert!(distinct.len() > 8, "decoded memories look constant");
    // Figure 6: a row of Y = 8 decoded patches for K and Q of each of the 2 heads.
    assert!(
        learner
            .write_kernels(&dir.path().join("kernels.png"))
            .unwrap()
    );
    let kernels = image::open(dir.path().join("kernels.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(kernels.dimensions().1, 22 + 4 + 4 * (24 + 4));
    // Figure 7: cosine similarities of the 16 position biases, one 4 × 4 map per patch.
    let sim = learner.model.position_similarity();
    assert_eq!(sim.size(), [16, 16]);
    assert!(
        sim.diagonal(0, 0, 1)
            .allclose(&sim.ones_like().diagonal(0, 0, 1), 1e-5, 1e-5, false)
    );
    assert!(sim.allclose(&sim.tr(), 1e-6, 1e-6, false));
    learner
        .write_positions(&dir.path().join("positions.png"))
        .unwrap();
    let positions = image::open(dir.path().join("positions.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(
        positions.dimensions(),
        (130 + 4 + 4 * (16 + 4), 22 + 4 + 4 * (16 + 4))
    );
    let terms = learner
        .write_dynamics(test[0], 0, &dir.path().join("dynamics.png"))
        .unwrap();
    assert_eq!(terms.len(), 2);
    let dynamics = image::open(dir.path().join("dynamics.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(dynamics.dimensions().1, 22 + 4 + 3 * (64 + 4));

    // The descent step by step: step 0 is the masked input's reconstruction (decoded from the
    // start, no descent), the last step the model's own completion; one picture column and one
    // GIF frame per step, one heat map per update.
    let shown = &test[..3];
    let d = learner.descent(shown, 0).unwrap().unwrap();
    let steps = d.completions.len();
    let b = PatchBatchOnDevice::new(
        &learner
            .eval_pipe
            .batch(learner.data.as_ref(), shown, 0)
            .unwrap(),
        Device::Cpu,
    );
    let fill = |pred: &tch::Tensor| pred.where_self(&b.masked.unsqueeze(-1), &b.patches);
    let start = tch::no_grad(|| {
        learner
            .model
            .decode(&learner.model.encode(&b.patches, &b.masked))
    });
    assert!(d.completions[0].allclose(&fill(&start), 1e-6, 1e-6, false));
    let (answer, _) =
        tch::no_grad(|| learner.run_batch(shown, &learner.eval_pipe, 0, false)).unwrap();
    assert!(d.completions[steps - 1].allclose(&fill(&answer), 1e-5, 1e-5, false));
    assert!(!d.completions[0].allclose(&d.completions[steps - 1], 1e-4, 1e-4, false));
    assert_eq!(d.moves.size(), [steps as i64 - 1, 3, 16]);
    let picks = learner.write_descent(shown, 0, dir.path()).unwrap();
    assert_eq!(picks, (0..steps).collect::<Vec<_>>());
    let descent = image::open(dir.path().join("descent.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(
        descent.dimensions(),
        (4 + (steps as u32 + 2) * (48 + 4), 22 + 4 + 3 * (48 + 4))
    );
    let updates = image::open(dir.path().join("updates.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(
        updates.dimensions(),
        (4 + (steps as u32 - 1) * (48 + 4), 22 + 4 + 3 * (48 + 4))
    );
    {
        use image::AnimationDecoder;
        let gif =
            std::io::BufReader::new(std::fs::File::open(dir.path().join("descent.gif")).unwrap());
        let frames = image::codecs::gif::GifDecoder::new(gif)
            .unwrap()
            .into_frames()
            .collect_frames()
            .unwrap();
        assert_eq!(frames.len(), steps);
    }

    // Figures 8 and 9: the worst and the best images by MSE averaged over the seeds, ranked as
    // the evaluation scores each image.
    let seeds = [0, 1];
    let (worst, best) = learner
        .write_extremes(&test, &seeds, 5, dir.path())
        .unwrap();
    let per = learner.evaluate(&test, &seeds).unwrap().per_image;
    let mse_of = |item: usize| per[test.iter().position(|&t| t == item).unwrap()];
    let (w, b): (Vec<f64>, Vec<f64>) = (
        worst.iter().map(|&i| mse_of(i)).collect(),
        best.iter().map(|&i| mse_of(i)).collect(),
    );
    let max = per.iter().copied().fold(f64::MIN, f64::max);
    let min = per.iter().copied().fold(f64::MAX, f64::min);
    assert_eq!((w[0], b[0]), (max, min));
    assert!(w.windows(2).all(|p| p[0] >= p[1]) && b.windows(2).all(|p| p[0] <= p[1]));
    assert!(w[4] >= b[4], "{w:?} {b:?}");
    for f in ["worst.png", "best.png"] {
        let img = image::open(dir.path().join(f)).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (130 + 4 + 5 * (64 + 4), 4 + 3 * (64 + 4)));
    }
}

#[test]
fn ablations_select_the_terms_and_bad_configs_are_refused() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    let base = cifar10_cpu();
    assert_eq!(base.tokens(), 64);
    assert_eq!(base.patch_len(), 48);
    let nohn = ablation(&base, "nohn+self").unwrap();
    assert!(
        nohn.self_attention
            && nohn.block.terms.len() == 1
            && nohn.block.terms[0].name() == "attention"
    );
    let noatt = ablation(&base, "noatt").unwrap();
    assert!(!noatt.self_attention && noatt.block.terms[0].name() == "hopfield");
    assert!(ablation(&base, "nothing").is_err());
    assert!(
        ImageCompletionConfig {
            patch: 5,
            ..base.clone()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("patch")
    );
    let imagenet = imagenet();
    assert_eq!(
        (imagenet.tokens(), imagenet.patch_len(), imagenet.block.dim),
        (196, 768, 768)
    );
    // A learner refuses data of another geometry.
    let data = stripes(4, 2);
    let err = ImageLearner::new(
        &base,
        std::sync::Arc::new(data.clone()),
        Normalize::of(&data),
        MaskStrategy::Random { k: 2 },
        Augment::none(),
        2,
        Device::Cpu,
    )
    .unwrap_err();
    assert!(err.to_string().contains("32×32×3"), "{err}");
}

/// Training with recomputed activations follows the same path as the unrolled graph: the same
/// seed gives the same losses and validation errors, epoch by epoch (float32, so to rounding).
#[test]
fn recomputed_training_matches_the_unrolled_graph() {
    // Every test here draws from libtorch\'s global generator; one at a time.
    let _generator = lock_generator();
    let fit = |recompute: bool| {
        tch::manual_seed(3);
        let cfg = ImageCompletionConfig {
            recompute,
            ..small_config()
        };
        let mut learner = stripes_learner(&cfg, 96, 2);
        let (train, val): (Vec<usize>, Vec<usize>) = ((0..64).collect(), (64..96).collect());
        let runner = stripes_runner(&format!("recompute-{recompute}"), 2);
        let record = runner
            .fit(
                &mut learner,
                &train,
                &[("val", &val)],
                |l, _, _| val_mse(l, &val),
                |_, _| Ok(BTreeMap::new()),
            )
            .unwrap();
        record
            .epochs
            .iter()
            .flat_map(|e| [e.metrics["train_loss"], e.metrics["val_mse"]])
            .collect::<Vec<f64>>()
    };
    let (plain, recomputed) = (fit(false), fit(true));
    assert_eq!(plain.len(), 4);
    for (p, r) in plain.iter().zip(&recomputed) {
        assert!(
            (p - r).abs() <= 1e-4 * p.abs(),
            "unrolled {plain:?} vs recomputed {recomputed:?}"
        );
    }
}

/// Fixed-point correction reaches the image loss: with a one-step settle the one sampled state
/// is the final one, through the same phantom step as the output, so the loss is
/// `(1 + γ)` times the loss without it (γ = 0.5 here), and the block keeps no state after.
#[test]
fn fixed_point_correction_adds_the_weighted_losses_of_the_sampled_states() {
    use basin_train::runner::Learner;
    use rand::SeedableRng;

    let _generator = lock_generator();
    let loss = |states: usize| {
        tch::manual_seed(3);
        let mut cfg = small_config();
        cfg.block.gradient.mode = basin_core::GradientMode::Phantom;
        cfg.block.gradient.max_steps = 1;
        cfg.block.gradient.phantom_steps = 1;
        cfg.block.gradient.correction_states = states;
        cfg.block.gradient.correction_decay = 0.5;
        let mut learner = stripes_learner(&cfg, 40, 2);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
        let items: Vec<usize> = (0..32).collect();
        let out = learner.train_step(&items, &mut rng).unwrap();
        let left = learner.model.block().map(|b| b.take_corrections().len());
        (out.loss.double_value(&[]), left)
    };
    let ((plain, _), (corrected, left)) = (loss(0), loss(1));
    assert_eq!(
        left,
        Some(0),
        "the learner left the corrections in the block"
    );
    assert!(
        (corrected - 1.5 * plain).abs() <= 1e-6 * plain,
        "{corrected} against 1.5 × {plain}"
    );
}

/// ET Table 16's ViT in ET's frame: its weights under `vit.`, none under `block.`, no energy
/// trace, and it learns to complete the stripes as ET does; a width other than the frame's and
/// recomputation are refused by name.
#[test]
fn a_vit_in_the_same_frame_completes_stripes() {
    use basin_tasks::transformer::TransformerConfig;
    let _generator = lock_generator();
    tch::manual_seed(0);
    let vit = TransformerConfig {
        dim: 32,
        heads: 2,
        layers: 2,
        ffn: 2,
        shared: false,
        bias: true,
    };
    let cfg = ImageCompletionConfig {
        vit: Some(vit.clone()),
        ..small_config()
    };
    let mut learner = stripes_learner(&cfg, 640, 1);
    let names: Vec<String> = learner.vs.variables().into_keys().collect();
    assert!(
        names.iter().any(|n| n.starts_with("vit.layer1.")),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("block.")), "{names:?}");
    let (record, test) = train_on_stripes(&mut learner, "stripes-vit");
    let mse = record.summary["test_mse"];
    assert!(
        mse < 0.5,
        "masked MSE {mse} is not well below the mean predictor's ≈1"
    );
    let b = PatchBatchOnDevice::new(
        &learner
            .eval_pipe
            .batch(learner.data.as_ref(), &test[..4], 3)
            .unwrap(),
        Device::Cpu,
    );
    let (_, trace) = tch::no_grad(|| {
        learner
            .model
            .forward(&b, false, Some(TraceOptions::default()))
    });
    assert!(trace.is_none());
    let dir = tempfile::tempdir().unwrap();
    assert!(
        learner
            .write_dynamics(test[0], 0, &dir.path().join("dynamics.png"))
            .unwrap()
            .is_empty()
    );
    assert!(
        !learner
            .write_kernels(&dir.path().join("kernels.png"))
            .unwrap()
    );
    for (bad, field) in [
        (
            ImageCompletionConfig {
                vit: Some(TransformerConfig {
                    dim: 16,
                    ..vit.clone()
                }),
                ..small_config()
            },
            "vit.dim",
        ),
        (
            ImageCompletionConfig {
                recompute: true,
                ..cfg.clone()
            },
            "recompute",
        ),
    ] {
        let err = bad
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(field), "{err}");
    }
}
