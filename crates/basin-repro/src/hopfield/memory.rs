//! `reproduce hopfield-memory`: the claims of the Hopfield slides, measured and plotted —
//! retrieval in one update with an error exponential in the separation, metastable states and
//! the global fixed point, storage capacity of classical, polynomial, exponential and continuous
//! modern memories beside the capacity theorem, the energy along the updates, masked images
//! retrieved at large and small β (Fashion-MNIST) and the classical network's spurious states.

use std::time::Instant;

use basin_train::plot::{Picture, Series, image_grid, line_panels};
use tch::{Kind, Tensor};

use super::claims::{self as hopfield_demos, Memory};
use crate::report::{self, Missing, Report};
use crate::{Context, Preset, Reproduction, Result, Table, TaskError};

/// The Hopfield slides' claims.
#[derive(Debug)]
pub struct HopfieldMemory;

impl Reproduction for HopfieldMemory {
    fn run(&self, _table: &Table, ctx: &Context) -> Result<Report> {
        run(ctx)
    }
}
crate::register_table!(HopfieldMemory, "hopfield-memory", &["fashion-mnist"]);

fn plot_err(e: impl std::fmt::Display) -> TaskError {
    TaskError::invalid("plot", e.to_string())
}

/// Measures and plots the claims into `ctx.out()` (on the CPU: the computations are small).
pub fn run(ctx: &Context) -> Result<Report> {
    let started = Instant::now();
    let (out, quick) = (ctx.out(), ctx.preset == Preset::Quick);
    tch::manual_seed(0);
    std::fs::create_dir_all(out).map_err(|e| basin_core::CoreError::io(out, e))?;
    let mut md = String::from("# Hopfield memories: the slides' claims, measured\n\n");
    if quick {
        md.push_str("**`--quick` run: small sizes.**\n\n");
    }

    // 1. Retrieval in one update; error against the separation Δ.
    let radii: Vec<f64> = (0..12).map(|i| 0.75 + 0.35 * i as f64).collect();
    let curve = hopfield_demos::one_update_error(20, 64, &radii, 0.1, 1.0);
    let log_err: Vec<f64> = curve.iter().map(|(_, e)| e.max(1e-300).log10()).collect();
    line_panels(
        &out.join("one_update.png"),
        "one update from a noisy query: log10 error against the separation (x: radius index; Δ in the report)",
        "radius index",
        &[
            Series::new("log10 ‖f(ξ) − xᵢ‖ after one update", log_err.clone()),
            Series::new("mean separation Δ", curve.iter().map(|c| c.0).collect()),
        ],
    )
    .map_err(plot_err)?;
    md.push_str("## Retrieval in one update (Theorem 4/5)\n\n20 patterns on a sphere of growing radius in d = 64, β = 1, query = pattern + N(0, 0.1²) noise; error after **one** update.\n\n");
    let mut t = report::Table::new(["Δ", "error"]);
    for (d, e) in &curve {
        t.row([format!("{d:.2}"), format!("{e:.3e}")]);
    }
    md.push_str(&t.to_markdown());
    let n = curve.len();
    let slope = (log_err[n - 1] - log_err[n / 2]) / (curve[n - 1].0 - curve[n / 2].0)
        * std::f64::consts::LN_10;
    md.push_str(&format!("\nSlope of ln(error) against Δ over the upper half: {slope:.2} (exponential decay at rate ≈ β = 1). Plot: `one_update.png`.\n\n"));

    // 2. Metastable states and the global fixed point.
    let (to_mean, to_member) = hopfield_demos::metastable(32, 3, 5, 0.05, 1.0);
    let (far, mean_norm) = hopfield_demos::global_fixed_point(20, 16, 0.01);
    md.push_str(&format!(
        "## Metastable states and the global fixed point\n\n- Three groups of five nearly identical patterns (d = 32, β = 1): from a query near a group the iteration stops at {to_mean:.3} from the group's mean and {to_member:.3} from its nearest member — a metastable state averaging the group.\n- β = 0.01: from random starts every fixed point lies within {far:.4} of the mean of all patterns (‖mean‖ = {mean_norm:.2}) — the global fixed point.\n\n"
    ));

    // 3. Capacity.
    let d = if quick { 32 } else { 64 };
    let counts: Vec<i64> = [2, 4, 6, 9, 12, 16, 24, 32, 64, 128, 256]
        .iter()
        .map(|&c| c * d / 64)
        .filter(|&c| c > 0)
        .collect();
    let mut panels = Vec::new();
    md.push_str(&format!("## Storage capacity (d = {d})\n\nFraction of patterns not retrieved from a query with 10 % of the bits flipped (binary) or noise of norm 0.2 (continuous, β = 32), against the number of stored patterns N:\n\n"));
    let curves: Vec<(&str, Vec<(i64, f64)>)> = vec![
        (
            "classical",
            hopfield_demos::capacity(Memory::Classical, d, &counts, 0.1),
        ),
        (
            "dense F = z³",
            hopfield_demos::capacity(Memory::Polynomial(3), d, &counts, 0.1),
        ),
        (
            "dense F = exp",
            hopfield_demos::capacity(Memory::Exponential, d, &counts, 0.1),
        ),
        (
            "continuous modern",
            hopfield_demos::capacity(Memory::Modern(32.0), d, &counts, 0.2),
        ),
    ];
    let mut t = report::Table::new([
        "N",
        "N/d",
        "classical",
        "F = z³",
        "F = exp",
        "continuous modern",
    ]);
    for (i, &c) in counts.iter().enumerate() {
        let mut cells = vec![c.to_string(), format!("{:.2}", c as f64 / d as f64)];
        cells.extend(curves.iter().map(|(_, curve)| format!("{:.2}", curve[i].1)));
        t.row(cells);
    }
    md.push_str(&t.to_markdown());
    for (name, curve) in &curves {
        panels.push(Series::new(
            format!("{name}: error vs N index"),
            curve.iter().map(|c| c.1).collect(),
        ));
    }
    line_panels(
        &out.join("capacity.png"),
        &format!("retrieval error against stored patterns (N = {counts:?}, d = {d})"),
        "N index",
        &panels,
    )
    .map_err(plot_err)?;
    md.push_str("\nThe classical network breaks down between 0.14·d and 0.25·d; the dense and modern memories keep retrieving far beyond d. Plot: `capacity.png`.\n\n");
    let ln_d = (d as f64).ln();
    md.push_str(&format!(
        "The known estimates at d = {d}, for comparison: classical d/(2 ln d) = {:.1} patterns without error (McEliece et al., 1987) and 0.138·d = {:.1} with a small fraction of errors (Amit, Gutfreund and Sompolinsky, 1985); F = z³ d²/(2·3!!·ln d) = {:.0} (Krotov and Hopfield, 2016); the exponential memories grow exponentially in d (the slides' Theorem 3, evaluated below).\n\n",
        d as f64 / (2.0 * ln_d),
        0.138 * d as f64,
        (d * d) as f64 / (6.0 * ln_d)
    ));
    let theorem = capacity_theorem_section(quick, &mut md);

    // 4. Energy along the updates.
    let energies = hopfield_demos::energy_along_updates(32, 20, 10, 2.0);
    let monotone = energies.iter().all(|(_, e)| {
        e.windows(2)
            .all(|w| w[1] <= w[0] + 1e-9 * w[0].abs().max(1.0))
    });
    line_panels(
        &out.join("energy.png"),
        "energy along the updates (mean over 16 starts)",
        "update",
        &energies
            .iter()
            .map(|(n, e)| Series::new(*n, e.clone()))
            .collect::<Vec<_>>(),
    )
    .map_err(plot_err)?;
    md.push_str(&format!("## Energy along the updates (Theorem 2)\n\nNever rises for any of the four memories: **{monotone}**. Plot: `energy.png`.\n\n"));
    let spurious = hopfield_demos::spurious_states(100, 5, if quick { 100 } else { 1000 });
    md.push_str(&format!(
        "## Spurious states of the classical network\n\n5 random ±1 patterns of d = 100 bits (0.05·d, below capacity), {} random states swept asynchronously to a fixed point: {:.1} % end on a stored pattern, {:.1} % on a negated one, {:.1} % on a mixture sgn(±x_a ± x_b ± x_c) of three, {:.1} % on another spurious state.\n\n",
        if quick { 100 } else { 1000 },
        spurious.stored * 100.0,
        spurious.reversed * 100.0,
        spurious.mixtures * 100.0,
        spurious.other * 100.0
    ));
    let mut missing = Missing::default();
    let images = image_section(ctx, quick, &mut md, &mut missing)?;
    md.push_str(&missing.to_markdown());
    md.push_str(&format!(
        "Wall time: {:.1} s on {}.\n",
        started.elapsed().as_secs_f64(),
        basin_core::device::describe(tch::Device::Cpu)
    ));
    let headline = vec![report::Headline::new(
        "energy never rises (four memories)",
        monotone.to_string(),
        None,
    )];
    Ok(Report::new(
        md,
        &serde_json::json!({
            "one_update": curve,
            "metastable": { "to_mean": to_mean, "to_member": to_member },
            "global_fixed_point": { "farthest": far, "mean_norm": mean_norm },
            "capacity": curves,
            "energy_monotone": monotone,
            "energy": energies,
            "capacity_theorem": theorem,
            "spurious_states": spurious,
            "images": images,
            "missing": missing,
        }),
        1,
    )?
    .with_headline(headline))
}

/// The capacity theorem at the slides' two settings, each beside the stored fraction measured
/// at its β, K and d (N from the bound up); the JSON of both.
fn capacity_theorem_section(quick: bool, md: &mut String) -> serde_json::Value {
    md.push_str("## The capacity theorem beside the measurement (Theorem 3)\n\nThe slides' settings (β = 1, p = 0.001): random patterns on the sphere of radius M = K√(d−1); a pattern counts as stored when the fixed point iterated from it lies within the theorem's sphere 1/(βNM) of it.\n\n");
    let mut t = report::Table::new([
        "K",
        "d",
        "a + ln b",
        "c",
        "c needed",
        "N guaranteed",
        "stored fraction at N = …",
    ]);
    let mut json = Vec::new();
    for (k, d) in [(3.0, 20), (1.0, 75)] {
        let bound = hopfield_demos::capacity_theorem(1.0, k, d, 0.001);
        let counts: &[i64] = if quick { &[16, 256] } else { &[16, 256, 4096] };
        let measured = hopfield_demos::stored_fraction(1.0, k, d, counts);
        t.row([
            format!("{k}"),
            d.to_string(),
            format!("{:.2}", bound.a + bound.b.ln()),
            format!("{:.4}", bound.c),
            format!("{:.4}", bound.c_min),
            format!("{:.1}", bound.patterns),
            measured
                .iter()
                .map(|(n, f)| format!("{n}: {f:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
        json.push(serde_json::json!({ "k": k, "d": d, "bound": bound, "holds": bound.holds(), "measured": measured }));
    }
    md.push_str(&t.to_markdown());
    md.push_str("\nThe slides print c ≥ 3.1546 (K = 3, d = 20) and c ≥ 1.3718 (K = 1, d = 75). The theorem is a lower bound with probability 1 − p; the measured fractions show how far above it random patterns are still stored.\n\n");
    serde_json::Value::Array(json)
}

/// `images[..n]` of a grey set as patterns `[n, h·w]` in [−1, 1].
fn patterns(set: &basin_image::ImageSet, n: usize) -> Tensor {
    let size = set.width * set.height * set.channels;
    let n = n.min(set.labels.len());
    Tensor::from_slice(&set.pixels[..n * size])
        .to_kind(Kind::Double)
        .view([n as i64, size as i64])
        / 127.5
        - 1.0
}

/// A pattern in [−1, 1] as a grey picture.
fn picture(x: &Tensor, width: usize, height: usize) -> Result<Picture> {
    let data: Vec<f32> = Vec::<f64>::try_from((x.to_kind(Kind::Double) + 1.0) / 2.0)
        .map_err(plot_err)?
        .into_iter()
        .map(|v| v as f32)
        .collect();
    Ok(Picture {
        width: width as u32,
        height: height as u32,
        channels: 1,
        data,
    })
}

/// The slides' "masked test image" retrieval on Fashion-MNIST test images: the modern network at
/// β = 8 and β = 0.5 stores the first N images and retrieves each from its upper half in one
/// update; the classical network stores the first six, binarised, and is swept from the same
/// half (beside six random patterns, its control). Writes `retrieval.png`; `None` without data.
fn image_section(
    ctx: &Context,
    quick: bool,
    md: &mut String,
    missing: &mut Missing,
) -> Result<Option<serde_json::Value>> {
    let test = match basin_image::source::open("fashion-mnist", Some(ctx.data_dir())) {
        Ok((_, test)) => test,
        Err(e) => {
            missing.push("fashion-mnist", e);
            return Ok(None);
        }
    };
    if test.channels != 1 || test.labels.len() < 6 {
        return Err(TaskError::invalid(
            "fashion-mnist",
            "expected at least six grey images",
        ));
    }
    let (w, h) = (test.width, test.height);
    let n = if quick { 200 } else { 1000 };
    let x = patterns(&test, n);
    let (stored, d) = (x.size()[0], x.size()[1]);
    let visible = d / 2;
    let retrieval: Vec<_> = [8.0, 0.5]
        .iter()
        .map(|&beta| hopfield_demos::masked_retrieval(&x, visible, beta))
        .collect();
    // Binarised: no pixel maps to exactly 0 (p/127.5 − 1 for integer p).
    let six = x.narrow(0, 0, 6).sign();
    let (exact, overlap, classical) = hopfield_demos::classical_masked(&six, visible);
    let random = hopfield_demos::binary(6, d);
    let (random_exact, random_overlap, _) = hopfield_demos::classical_masked(&random, visible);
    // The figure: six stored images, their queries, and what each memory returns.
    let query = x.narrow(0, 0, 6).copy();
    let _ = query.narrow(1, visible, d - visible).fill_(0.0);
    let mut rows = Vec::new();
    for i in 0..6 {
        let mut row = vec![picture(&x.get(i), w, h)?, picture(&query.get(i), w, h)?];
        for (_, out) in &retrieval {
            row.push(picture(&out.get(i), w, h)?);
        }
        row.push(picture(&classical.get(i), w, h)?);
        rows.push(row);
    }
    image_grid(
        &ctx.out().join("retrieval.png"),
        &rows,
        &[],
        &["stored", "query", "β = 8", "β = 0.5", "classical"],
        3,
    )
    .map_err(plot_err)?;
    md.push_str(&format!("## Retrieving masked images (the slides' β = 8 and β = 0.5)\n\nFashion-MNIST test images {w}×{h}, pixels in [−1, 1]; the modern network stores the first {stored} and is queried with each image's upper half (the lower half set to 0), one update ξ ← X softmax(βXᵀξ):\n\n"));
    let mut t = report::Table::new([
        "β",
        "retrieved (nearest is its own image)",
        "largest score its own",
        "mean largest weight",
        "patterns averaged, 1/Σp²",
        "metastable (largest weight < ½)",
    ]);
    for (r, _) in &retrieval {
        t.row([
            format!("{}", r.beta),
            format!("{:.1} %", r.retrieved * 100.0),
            format!("{:.1} %", r.own_score * 100.0),
            format!("{:.3}", r.max_weight),
            format!("{:.1}", r.averaged),
            format!("{:.1} %", r.metastable * 100.0),
        ]);
    }
    md.push_str(&t.to_markdown());
    md.push_str("\nThe update scores the stored images by the dot product xⱼᵀξ, which favours an image brighter in the upper half over the query's own: where the largest score is another image's, no β retrieves the own image in one update.\n");
    md.push_str(&format!("\nThe classical network storing the first six images binarised (sign of the pixel), swept from the same upper halves (lower half −1): {:.0} % retrieved exactly, mean overlap ξᵀx/d {:.2}. Six random ±1 patterns of the same length under the same masking: {:.0} % exactly, overlap {:.2}. The images are correlated, so the classical network's minima are spurious mixtures even at six patterns.\n\n`retrieval.png`, one row per image: stored, query, modern β = 8, modern β = 0.5, classical.\n\n",
        exact * 100.0, overlap, random_exact * 100.0, random_overlap));
    Ok(Some(serde_json::json!({
        "stored": stored,
        "modern": retrieval.iter().map(|(r, _)| r).collect::<Vec<_>>(),
        "classical": { "patterns": 6, "exact": exact, "overlap": overlap },
        "classical_random": { "patterns": 6, "exact": random_exact, "overlap": random_overlap },
    })))
}
