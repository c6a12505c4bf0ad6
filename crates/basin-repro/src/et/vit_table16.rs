//! `et-table16`: ET against a ViT of about its size on masked image completion (ET Appendix G,
//! Table 16): at the paper's scale on ImageNet-1k (streamed from its folder, Table 4's training),
//! at CPU scale on CIFAR-10 and Fashion-MNIST, beside the paper's ImageNet numbers.
//! Both models sit in the same frame (patch encoder, MASK and CLS tokens, position biases,
//! decoder norm and decoder: `basin_tasks::image_completion`) and are trained and scored on the
//! same draw with the same protocol and budget as `et-table14`; the ViT
//! ([`vit_for`]: one pre-norm softmax Transformer layer of the block's width and heads, MLP
//! 2·D) has about 1.3 times ET's block parameters, as the paper's ViT has 1.29 times ET's.

use basin_tasks::image_completion::ImageCompletionConfig;
use basin_tasks::transformer::TransformerConfig;

use crate::et::ablation_table14::{AblationResult, Table14Options, train_models};
use crate::papers;
use crate::report::{self, Missing, Report};
use crate::{Context, Reproduction, Result, Table};

/// ET Table 16.
#[derive(Debug)]
pub struct EtTable16;

/// The ViT of `cfg`'s size: one layer of the block's width and attention heads, MLP 2·D.
pub fn vit_for(cfg: &ImageCompletionConfig) -> ImageCompletionConfig {
    let heads = cfg
        .block
        .term::<basin_core::AttentionConfig>()
        .map_or(1, |a| a.heads);
    ImageCompletionConfig {
        vit: Some(TransformerConfig {
            dim: cfg.block.dim,
            heads,
            layers: 1,
            ffn: 2,
            shared: false,
            bias: true,
        }),
        ..cfg.clone()
    }
}

impl Reproduction for EtTable16 {
    fn run(&self, table: &Table, ctx: &Context) -> Result<Report> {
        let mut opts = Table14Options::for_context(table, ctx);
        opts.ablations.clear();
        // Each model's published parameters (millions), PSNR and SSIM.
        let paper: Vec<(String, [f64; 3])> = papers::rows("et-table16")?
            .iter()
            .map(|r| {
                Ok((
                    r.text("model")?.to_owned(),
                    r.columns(["params", "psnr", "ssim"])?,
                ))
            })
            .collect::<Result<_>>()?;
        let mut missing = Missing::default();
        let results = train_models(
            &opts,
            ctx,
            |base| {
                Ok(vec![
                    ("ViT".into(), vit_for(base)),
                    ("ET".into(), base.clone()),
                ])
            },
            &mut missing,
        )?;
        let mut md = String::from("# ET Table 16 — ET against a ViT of about its size\n\n");
        md.push_str(&report::banner(
            ctx.preset,
            &format!(
                "{} training images, {} epochs",
                opts.train_images, opts.epochs
            ),
        ));
        md.push_str(&format!(
            "Protocol: as `et-table14` — {} training images and {} validation images drawn from the training split (the best validation epoch kept), {} test images scored over {} masking seeds, {} epochs of AdamW at peak lr {} (warm-up, cosine), batch {}; both models on the same draw and masks. ET is Table 4's model at `--paper` (ImageNet-1k), else the dataset's CPU-scale model (T = {} descent steps with tied weights); the ViT is one pre-norm softmax Transformer layer of the same width and heads with W_V and an MLP of 2·D (`et::vit_table16::vit_for`), in the same frame of encoder, tokens and decoder. PSNR and SSIM on the completed images in [0, 1]; MSE on the masked patches in normalised pixels, mean ± std over images, beside two floors on the same masks: every masked pixel predicted as the training mean, or as the image's mean over its visible patches. The paper's numbers are ImageNet-1k's.\n\n",
            opts.train_images, opts.val_images, opts.test_images, opts.mask_seeds, opts.epochs, opts.lr, opts.batch, opts.steps
        ));
        let mut t = report::Table::new([
            "dataset",
            "model",
            "params",
            "block or ViT params",
            "params / ET's",
            "PSNR",
            "SSIM",
            "test MSE",
            "floor MSE: training mean / visible mean",
            "paper params",
            "paper PSNR",
            "paper SSIM",
            "wall (s)",
        ]);
        let get =
            |r: &AblationResult, k: &str| r.record.summary.get(k).copied().unwrap_or(f64::NAN);
        let mut headline = Vec::new();
        for r in &results {
            let et = results
                .iter()
                .find(|e| e.dataset == r.dataset && e.ablation == "ET");
            let p = paper
                .iter()
                .find(|(m, _)| *m == r.ablation)
                .map(|(_, p)| *p);
            t.row([
                r.dataset.clone(),
                r.ablation.clone(),
                r.params.to_string(),
                r.block_params.to_string(),
                et.map_or("–".into(), |e| {
                    format!("{:.2}", r.params as f64 / e.params as f64)
                }),
                format!("{:.2}", get(r, "test_psnr")),
                format!("{:.3}", get(r, "test_ssim")),
                format!(
                    "{:.3} ± {:.2}",
                    get(r, "test_mse"),
                    get(r, "test_mse_std_images")
                ),
                format!(
                    "{:.3} / {:.3}",
                    get(r, "test_mse_mean_predictor"),
                    get(r, "test_mse_visible_mean")
                ),
                p.map_or("–".into(), |[params, ..]| format!("{params:.2}M")),
                p.map_or("–".into(), |[_, psnr, _]| format!("{psnr:.2}")),
                p.map_or("–".into(), |[.., ssim]| format!("{ssim:.3}")),
                format!("{:.0}", r.record.wall_seconds),
            ]);
            headline.push(report::Headline::new(
                format!("{} {} PSNR", r.dataset, r.ablation),
                format!("{:.2}", get(r, "test_psnr")),
                p.map(|[_, psnr, _]| format!("{psnr:.2} (IN1K)")),
            ));
        }
        md.push_str(&t.to_markdown());
        md.push_str(&missing.to_markdown());
        md.push_str("\nPictures per run: `<dataset>/<model>/run-<r>/reconstructions.png`, `worst.png`, `best.png`, `positions.png`; ET's also `energy.png`, `dynamics.png`, `memories.png`, `kernels.png`.\n");
        let seconds: f64 = results.iter().map(|r| r.record.wall_seconds).sum();
        md.push_str(&report::footer(ctx, Some(seconds), ""));
        let ran = results.len();
        Ok(Report::new(
            md,
            &serde_json::json!({ "options": opts, "results": results, "missing": missing }),
            ran,
        )?
        .with_headline(headline))
    }
}
crate::register_table!(
    EtTable16,
    "et-table16",
    &["imagenet-1k", "cifar10", "fashion-mnist"]
);
