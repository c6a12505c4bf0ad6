//! `et-table15`: the parameter counts of ET Table 15 (Appendix G), built and counted. ET is
//! `basin_et::image::imagenet` (224² RGB, 16² patches, D = 768, 12 heads of 64, K = 3072) as
//! the image task builds it; ViT-Base and its ALBERT form (one block shared by the 12 layers)
//! are `basin_tasks::transformer` stacks at D = 768, 12 heads, MLP 3072, in the same frame
//! (the ET model's patch encoder, MASK and CLS tokens, position biases, decoder norm and
//! decoder), so the three rows differ only in their blocks. As the paper says, no biases are
//! counted: the linear maps' biases and every LayerNorm shift (ET's δ_norm) are left out; the
//! LayerNorm scales and the position biases δ_pos (ViT's position embedding) are counted.

use std::collections::BTreeMap;

use basin_tasks::image_completion::ImageCompletion;
use basin_tasks::transformer::{Transformer, TransformerConfig};
use serde::Serialize;
use tch::{Device, nn};

use crate::papers;
use crate::report::{self, Report};
use crate::{Context, Reproduction, Result, Table, TaskError};

/// ET Table 15.
#[derive(Debug)]
pub struct EtTable15;

/// One model's counts, biases excluded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counted {
    /// The row's name, as the paper prints it.
    pub model: String,
    /// Every parameter.
    pub total: i64,
    /// One block's (ET's energy block; one Transformer layer).
    pub per_block: i64,
    /// The frame shared by the three rows (encoder, tokens, positions, decoder).
    pub frame: i64,
}

/// Whether a variable is a bias: a linear map's or a LayerNorm's shift (`bias`), ET's norm
/// shift (`delta`, the paper's δ_norm).
fn is_bias(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    last == "bias" || last == "delta"
}

/// Trainable variables of `vs` that are not biases, by name.
pub fn weights(vs: &nn::VarStore) -> BTreeMap<String, i64> {
    vs.variables()
        .into_iter()
        .filter(|(name, t)| t.requires_grad() && !is_bias(name))
        .map(|(name, t)| (name, t.numel() as i64))
        .collect()
}

fn sum_under(w: &BTreeMap<String, i64>, prefix: &str) -> i64 {
    w.iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(_, c)| c)
        .sum()
}

/// What [`count`] finds.
#[derive(Clone, Debug)]
pub struct Counts {
    /// The three rows of Table 15: ViT-Base, ALBERT ViT-Base and ET.
    pub rows: Vec<Counted>,
    /// The ET model's weights by name.
    pub et: BTreeMap<String, i64>,
    /// One ViT layer's weights by name.
    pub vit_layer: BTreeMap<String, i64>,
}

/// The three rows of Table 15, built, and the named weights of the ET model and of one ViT
/// layer, for the breakdown.
pub fn count() -> Result<Counts> {
    let cfg = basin_et::image::imagenet();
    let et_vs = nn::VarStore::new(Device::Cpu);
    ImageCompletion::new(&et_vs.root(), &cfg)?;
    let et = weights(&et_vs);
    let block = sum_under(&et, "block.");
    let frame = et.values().sum::<i64>() - block;
    let vit = |shared: bool| -> Result<(i64, i64, BTreeMap<String, i64>)> {
        let vs = nn::VarStore::new(Device::Cpu);
        Transformer::new(
            &vs.root(),
            &TransformerConfig {
                dim: cfg.block.dim,
                shared,
                bias: false,
                ..TransformerConfig::vit_base()
            },
        )
        .map_err(|e| TaskError::invalid("transformer", e.to_string()))?;
        let w = weights(&vs);
        let layer: BTreeMap<String, i64> = w
            .iter()
            .filter(|(n, _)| n.starts_with("layer0."))
            .map(|(n, c)| (n.clone(), *c))
            .collect();
        Ok((w.values().sum(), layer.values().sum(), layer))
    };
    let (vit_total, vit_layer, layer) = vit(false)?;
    let (albert_total, albert_layer, _) = vit(true)?;
    let row = |model: &str, backbone: i64, per_block: i64| Counted {
        model: model.into(),
        total: frame + backbone,
        per_block,
        frame,
    };
    Ok(Counts {
        rows: vec![
            row("ViT-Base", vit_total, vit_layer),
            row("ALBERT ViT-Base", albert_total, albert_layer),
            row("ET", block, block),
        ],
        et,
        vit_layer: layer,
    })
}

/// `n` in millions at the paper's precision.
fn millions(n: i64) -> String {
    format!("{:.2}M", n as f64 / 1e6)
}

/// The drop of `n` against `base`, in percent at the paper's precision.
fn drop(n: i64, base: i64) -> f64 {
    100.0 * (1.0 - n as f64 / base as f64)
}

impl Reproduction for EtTable15 {
    fn run(&self, _table: &Table, ctx: &Context) -> Result<Report> {
        // The paper's rows: each model's total, ▼ total, per block and ▼ per block.
        let paper: Vec<(String, [f64; 4])> = papers::rows("et-table15")?
            .iter()
            .map(|r| {
                let counts = r.columns(["total", "total_drop", "per_block", "per_block_drop"])?;
                Ok((r.text("model")?.to_owned(), counts))
            })
            .collect::<Result<_>>()?;
        let published = |model: &str| paper.iter().find(|(m, _)| m == model).map(|(_, c)| *c);
        let Counts {
            rows,
            et,
            vit_layer: layer,
        } = count()?;
        let base = &rows[0];
        let mut md =
            String::from("# ET Table 15 — parameters of ViT-Base, ALBERT ViT-Base and ET\n\n");
        md.push_str(&format!(
            "Each model is built (no data needed) and its trainable weights counted without biases: the linear maps' biases and every LayerNorm shift (ET's δ_norm) are left out, the LayerNorm scales and the position biases are counted. ET is `basin_et::image::imagenet` as the image task builds it; ViT-Base is a `basin_tasks::transformer` stack (D = 768, 12 heads, MLP 3072, 12 layers; ALBERT: one layer's weights at all 12 depths) in ET's frame — its patch encoder, MASK and CLS tokens, position biases, decoder norm and decoder ({} weights) — so the rows differ only in their blocks. A cell matches when ours, rounded as the paper prints it, is the paper's.\n\n",
            base.frame
        ));
        let mut t = report::Table::new([
            "model",
            "built",
            "paper",
            "▼ vs ViT-Base (built / paper)",
            "per block, built",
            "paper",
            "▼ per block (built / paper)",
            "matches",
        ]);
        let mut matched = 0;
        let mut cells = 0;
        let mut json_rows = Vec::new();
        for r in &rows {
            let p = published(&r.model);
            let (total_drop, block_drop) =
                (drop(r.total, base.total), drop(r.per_block, base.per_block));
            let checks = p.map(|[total, p_total_drop, per_block, p_block_drop]| {
                [
                    millions(r.total) == format!("{total:.2}M"),
                    format!("{total_drop:.2}") == format!("{p_total_drop:.2}"),
                    millions(r.per_block) == format!("{per_block:.2}M"),
                    format!("{block_drop:.2}") == format!("{p_block_drop:.2}"),
                ]
            });
            // How far a built total lies outside the counts the printed figure stands for.
            let outside = p.map_or(0, |[total, ..]| {
                let (lo, hi) = ((total * 1e6) as i64 - 5_000, (total * 1e6) as i64 + 5_000);
                if r.total >= hi {
                    r.total - hi + 1
                } else if r.total < lo {
                    r.total - lo
                } else {
                    0
                }
            });
            let verdict = match checks {
                Some(c) => {
                    let names = ["total", "▼ total", "per block", "▼ per block"];
                    matched += c.iter().filter(|&&ok| ok).count();
                    cells += c.len();
                    let off: Vec<&str> = names
                        .iter()
                        .zip(c)
                        .filter(|(_, ok)| !ok)
                        .map(|(n, _)| *n)
                        .collect();
                    match (off.is_empty(), outside) {
                        (true, _) => "all four".to_owned(),
                        (false, 0) => format!("not {}", off.join(", ")),
                        (false, o) => format!(
                            "not {} (total {} {} the printed figure's range)",
                            off.join(", "),
                            o.abs(),
                            if o > 0 { "above" } else { "below" }
                        ),
                    }
                }
                None => "not in the paper".into(),
            };
            t.row([
                r.model.clone(),
                format!("{} ({})", millions(r.total), r.total),
                p.map_or("–".into(), |[total, ..]| format!("{total:.2}M")),
                format!(
                    "{total_drop:.2} % / {}",
                    p.map_or("–".into(), |[_, drop, ..]| format!("{drop:.2} %"))
                ),
                format!("{} ({})", millions(r.per_block), r.per_block),
                p.map_or("–".into(), |[.., per_block, _]| {
                    format!("{per_block:.2}M")
                }),
                format!(
                    "{block_drop:.2} % / {}",
                    p.map_or("–".into(), |[.., drop]| format!("{drop:.2} %"))
                ),
                verdict,
            ]);
            json_rows.push(serde_json::json!({
                "model": r.model,
                "total": r.total,
                "per_block": r.per_block,
                "frame": r.frame,
                "total_drop": total_drop,
                "per_block_drop": block_drop,
                "outside_printed_range": outside,
                "paper": p.map(|[total, total_drop, per_block, per_block_drop]| serde_json::json!({
                    "total": total, "total_drop": total_drop,
                    "per_block": per_block, "per_block_drop": per_block_drop,
                })),
            }));
        }
        md.push_str(&t.to_markdown());
        md.push_str(&format!(
            "\n{matched} of {cells} printed cells match. The paper does not list which weights it counted, and a figure printed in millions stands for any count within ±5,000 of it; the parts a count may or may not include are of that size: the MASK and CLS tokens and the decoder norm's scale (768 each), the LayerNorm scales of a ViT layer (2 × 768), ET's γ (1). A percentage is computed from the built counts, not from the rounded figures.\n\n"
        ));
        // The paper's percentages against its own rounded figures.
        if let Some(vit) = published("ViT-Base") {
            let again: Vec<String> = paper
                .iter()
                .skip(1)
                .map(|(model, [total, total_drop, per_block, per_block_drop])| {
                    format!(
                        "{model}: ▼ total {:.2} % (printed {total_drop:.2} %), ▼ per block {:.2} % (printed {per_block_drop:.2} %)",
                        100.0 * (1.0 - total / vit[0]),
                        100.0 * (1.0 - per_block / vit[2]),
                    )
                })
                .collect();
            md.push_str(&format!(
                "The paper's percentages recomputed from its own printed figures: {}.\n\n",
                again.join("; ")
            ));
        }
        md.push_str("What is counted (ET, then one ViT layer):\n\n");
        let mut b = report::Table::new(["weight", "count"]);
        for (name, n) in et.iter().chain(layer.iter()) {
            b.row([format!("`{name}`"), n.to_string()]);
        }
        md.push_str(&b.to_markdown());
        md.push_str(&report::footer(ctx, None, ""));
        let et_row = &rows[2];
        let headline = vec![
            report::Headline::new(
                "ET parameters, no biases",
                millions(et_row.total),
                published("ET").map(|[total, ..]| format!("{total:.2}M")),
            ),
            report::Headline::new("printed cells matching", format!("{matched}/{cells}"), None),
        ];
        Ok(Report::new(
            md,
            &serde_json::json!({ "rows": json_rows, "et_weights": et, "vit_layer_weights": layer }),
            1,
        )?
        .with_headline(headline))
    }
}
crate::register_table!(EtTable15, "et-table15", &[]);

#[cfg(test)]
mod tests {
    use super::*;

    /// The built counts, from the architecture: ET's block is W_Q, W_K (2·12·64·768), ξ
    /// (3072·768) and the norm's scalar γ; a ViT layer 4·768² + 2·3072·768 + two LayerNorm
    /// scales; the frame two 768×768 maps, MASK, CLS, 197 position biases and the decoder
    /// norm's scale. ET's total, both per-block counts and ALBERT's total round to the paper's.
    #[test]
    fn the_counts_follow_from_the_architectures() {
        let Counts { rows, et, .. } = count().unwrap();
        let d = 768;
        let frame = 2 * d * d + d + d + 197 * d + d;
        let et_block = 2 * 12 * 64 * d + 3072 * d + 1;
        let vit_layer = 4 * d * d + 2 * 3072 * d + 2 * d;
        let by = |m: &str| rows.iter().find(|r| r.model == m).unwrap().clone();
        assert_eq!(by("ET").per_block, et_block);
        assert_eq!(by("ET").total, frame + et_block);
        assert_eq!(by("ViT-Base").per_block, vit_layer);
        assert_eq!(by("ViT-Base").total, frame + 12 * vit_layer);
        assert_eq!(by("ALBERT ViT-Base").total, frame + vit_layer);
        for (m, total, block) in [
            ("ET", "4.87M", "3.54M"),
            ("ALBERT ViT-Base", "8.41M", "7.08M"),
        ] {
            assert_eq!(millions(by(m).total), total, "{m}");
            assert_eq!(millions(by(m).per_block), block, "{m}");
        }
        // No bias and no norm shift is counted.
        assert!(
            et.keys()
                .all(|n| !n.ends_with("bias") && !n.ends_with("delta"))
        );
        assert!(et.contains_key("block.norm.gamma"), "{:?}", et.keys());
    }
}
