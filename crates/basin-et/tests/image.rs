//! `EtImage` learns to complete synthetic stripes well below the mean predictor, its energy falls
//! along the steps, and its pictures have the expected sizes and content.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use basin_core::{BlockConfig, TraceOptions};
use basin_et::image::{EtImageConfig, ImageLoss};
use basin_et::image_train::{ImageLearner, write_energy};
use basin_image::{Augment, ImageSet, MaskStrategy, Normalize};
use basin_train::optim::OptimConfig;
use basin_train::runner::{Runner, TrainConfig, Validation};
use tch::Device;

/// Stripes and checkerboards, 16×16 grey, random widths and phases.
fn stripes(n: usize, seed: u64) -> ImageSet {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |m: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % m
    };
    let mut pixels = Vec::with_capacity(n * 256);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let (family, width, py, px) = (next(3), next(3) + 1, next(6), next(6));
        for y in 0..16u64 {
            for x in 0..16u64 {
                let v = match family {
                    0 => (y + py) / width,
                    1 => (x + px) / width,
                    _ => (x + px) / width + (y + py) / width,
                };
                pixels.push(if v % 2 == 0 { 30u8 } else { 220 });
            }
        }
        labels.push(family as i64);
    }
    ImageSet::new(
        16,
        16,
        1,
        pixels,
        labels,
        vec!["h".into(), "v".into(), "checker".into()],
    )
    .unwrap()
}

fn small_config() -> EtImageConfig {
    EtImageConfig {
        channels: 1,
        height: 16,
        width: 16,
        patch: 4,
        block: BlockConfig::et(32, 2, 8, 64, 6),
        self_attention: false,
        cls_token: false,
        token_init_std: 0.02,
        loss: ImageLoss::MaskedMse,
    }
}

#[test]
fn etimage_learns_to_complete_stripes_and_descends() {
    tch::manual_seed(0);
    let data = stripes(640, 1);
    let norm = Normalize::of(&data);
    let mut learner = ImageLearner::new(
        &small_config(),
        data,
        norm,
        MaskStrategy::Random { k: 5 },
        Augment::none(),
        32,
        Device::Cpu,
    )
    .unwrap();
    let (train, val, test): (Vec<usize>, Vec<usize>, Vec<usize>) = (
        (0..512).collect(),
        (512..576).collect(),
        (576..640).collect(),
    );
    let runner = Runner {
        name: "stripes".into(),
        train: TrainConfig {
            epochs: 8,
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
    };
    let record = runner
        .fit(
            &mut learner,
            &train,
            &[("train", &train), ("val", &val), ("test", &test)],
            |l, _, _| {
                let r = l
                    .evaluate(&val, &[0])
                    .map_err(|e| basin_train::TrainError::State(e.to_string()))?;
                Ok(Validation {
                    metrics: BTreeMap::from([("val_mse".into(), r.mse)]),
                    score: -r.mse,
                    ..Validation::default()
                })
            },
            |l, _| {
                Ok(basin_et::image_train::summary(
                    "test_",
                    &l.evaluate(&test, &[0, 1])
                        .map_err(|e| basin_train::TrainError::State(e.to_string()))?,
                ))
            },
        )
        .unwrap();
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
    let b = basin_et::image::DeviceBatch::new(
        &learner
            .eval_pipe
            .batch(&learner.data, &test[..16], 3)
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
    let terms = learner
        .write_dynamics(test[0], 0, &dir.path().join("dynamics.png"))
        .unwrap();
    assert_eq!(terms.len(), 2);
    let dynamics = image::open(dir.path().join("dynamics.png"))
        .unwrap()
        .to_rgb8();
    assert_eq!(dynamics.dimensions().1, 4 + 3 * (64 + 4));
    write_energy(&terms, "energy", &dir.path().join("energy.png")).unwrap();
}

#[test]
fn ablations_select_the_terms_and_bad_configs_are_refused() {
    let base = EtImageConfig::cifar10_cpu();
    assert_eq!(base.tokens(), 64);
    assert_eq!(base.patch_len(), 48);
    let nohn = base.ablation("nohn+self").unwrap();
    assert!(
        nohn.self_attention
            && nohn.block.terms.len() == 1
            && nohn.block.terms[0].name() == "attention"
    );
    let noatt = base.ablation("noatt").unwrap();
    assert!(!noatt.self_attention && noatt.block.terms[0].name() == "hopfield");
    assert!(base.ablation("nothing").is_err());
    assert!(
        EtImageConfig {
            patch: 5,
            ..base.clone()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("patch")
    );
    let imagenet = EtImageConfig::imagenet();
    assert_eq!(
        (imagenet.tokens(), imagenet.patch_len(), imagenet.block.dim),
        (196, 768, 768)
    );
    // A learner refuses data of another geometry.
    let data = stripes(4, 2);
    let err = ImageLearner::new(
        &base,
        data.clone(),
        Normalize::of(&data),
        MaskStrategy::Random { k: 2 },
        Augment::none(),
        2,
        Device::Cpu,
    )
    .unwrap_err();
    assert!(err.to_string().contains("32×32×3"), "{err}");
}
