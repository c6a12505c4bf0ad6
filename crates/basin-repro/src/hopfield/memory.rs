//! `reproduce hopfield-memory`: the claims of the Hopfield slides, measured and plotted —
//! retrieval in one update with an error exponential in the separation, metastable states and
//! the global fixed point, storage capacity of classical, polynomial, exponential and continuous
//! modern memories, and the energy along the updates.

use std::time::Instant;

use basin_train::plot::{Series, line_panels};

use super::claims::{self as hopfield_demos, Memory};
use crate::report::{self, Report};
use crate::{Context, Override, Preset, ReproError, Reproduction, Result};

/// The Hopfield slides' claims.
#[derive(Debug)]
pub struct HopfieldMemory;

impl Reproduction for HopfieldMemory {
    fn id(&self) -> &'static str {
        "hopfield-memory"
    }
    fn title(&self) -> &'static str {
        "Hopfield slides: retrieval, metastability, capacity, energy"
    }
    fn paper(&self) -> &'static str {
        "hopfield-networks-is-all-you-need-slides.txt (Theorems 2, 4, 5; capacity)"
    }
    fn datasets(&self) -> &'static [&'static str] {
        &[]
    }
    fn presets(&self) -> &'static [Preset] {
        &[Preset::Cpu, Preset::Quick]
    }
    fn accepts(&self) -> &'static [Override] {
        &[]
    }
    fn run(&self, ctx: &Context) -> Result<Report> {
        run(ctx)
    }
}

fn plot_err(e: impl std::fmt::Display) -> ReproError {
    ReproError::config("plot", e.to_string())
}

/// Measures and plots the claims into `ctx.out` (on the CPU: the computations are small).
pub fn run(ctx: &Context) -> Result<Report> {
    let started = Instant::now();
    let (out, quick) = (&ctx.out, ctx.preset == Preset::Quick);
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
        }),
        1,
    )?
    .with_headline(headline))
}
