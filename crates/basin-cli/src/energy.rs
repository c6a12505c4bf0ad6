//! `basin energy`: the descent of one energy block on given tokens, written to safetensors.
//!
//! Inputs (one safetensors file, `--input`): the tokens `x` `[B, N, D]` and optionally
//! `padding` `[B, N]` (nonzero = real token) and one of `mask` `[B, N, N]` (nonzero = query may
//! attend key), `bias` `[B, H, N, N]` (added to the β-scaled logits; -inf blocks a pair) or
//! `edge_index` `[2, E]` int64 (PyG convention over the flattened B·N tokens: row 0 = source =
//! key, row 1 = target = query). The block's weights are read from the same file, or from
//! `--weights`, under their checkpoint names (`norm.gamma`, `norm.delta`, `<term>.w_q`, …).
//!
//! Output (`--output`): `energy` `[T+1, B]`, `energy.<term>` `[T+1, B]` per term, `x_final`
//! `[B, N, D]`, `grad_input` = ∂E/∂g at `g = LN(x)` `[B, N, D]`; with `--states` the
//! trajectory `states` `[T+1, B, N, D]`, with `--term-grads` each term's `grad.<term>`
//! `[T, B, N, D]` (∂E_i/∂g at steps 0 … T−1).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use basin_core::checkpoint::{self, read_tensors, write_tensors};
use basin_core::device::DeviceChoice;
use basin_core::{BlockConfig, CoreError, EnergyBlock, SparseEdges, Structure, TraceOptions};
use tch::{Kind, Tensor, nn::VarStore};

/// Names in the input file that are inputs, not weights.
pub const INPUT_NAMES: [&str; 5] = ["x", "padding", "mask", "bias", "edge_index"];

/// Run an energy block's descent on input tokens and write energies, final tokens and ∂E/∂g.
///
/// To inspect an energy landscape, or to check another implementation against basin's: the
/// block of `--config`, with the weights in `--input` (or `--weights`), descends from the tokens
/// `x` for T steps; the energy of every step and of each term, the final tokens and ∂E/∂g at the
/// input go to `--output`, and the energy per step (mean over the batch) is printed. Bad input
/// (malformed TOML, a missing tensor, a wrong shape) is an error that names the field or tensor
/// and the shapes.
///
/// Example: `basin energy --config data/blocks/et-small.toml --input in.safetensors --output
/// out.safetensors`.
#[derive(clap::Args)]
pub struct Args {
    /// Block config (TOML): dim, steps, `[norm]`, `[[terms]]` (kind = a registered term), `[dynamics]`
    /// (kind = a registered dynamics). `--kinds` lists the registered kinds.
    ///
    /// `data/blocks/et-small.toml` is a complete one. `[norm]`: eps. Each `[[terms]]` has its
    /// `kind`, a `name` (default: the kind), a `weight` (default 1) and its kind's fields, e.g.
    /// `attention`: heads, head_dim, beta (default 1/√head_dim), learn_beta, init_std, …;
    /// `hopfield`: memories, activation (relu, power, exp or softmax), beta (exp, softmax), power
    /// (power), init_std, …. `[dynamics]`: `kind = "gradient-flow"` with alpha, or
    /// `kind = "langevin"` with alpha, sigma, decay, in_eval.
    #[arg(long, required_unless_present = "kinds")]
    config: Option<PathBuf>,
    /// List the registered energy terms and dynamics (the `kind`s a config may name) and exit.
    #[arg(long)]
    kinds: bool,
    /// Safetensors file with the input tokens `x` (and optional padding/mask/bias/edge_index),
    /// plus the weights unless `--weights` is given.
    ///
    /// `x` `[B, N, D]` float: the tokens (required). `padding` `[B, N]` bool or int: nonzero =
    /// a real token. At most one of `mask` `[B, N, N]` bool or int (nonzero: query q may attend
    /// key k), `bias` `[B, H, N, N]` float (added to the β-scaled logits; -inf blocks a pair)
    /// and `edge_index` `[2, E]` int64 (a sparse pattern over the flattened B·N tokens, PyG's
    /// convention: row 0 = source = key, row 1 = target = query); none of them: all pairs.
    ///
    /// The weights go by their checkpoint names (term names from the config; these are the
    /// defaults): `norm.gamma` `[]` and `norm.delta` `[D]` (the layer norm); `attention.w_q`
    /// and `attention.w_k` `[H, Y, D]`, `attention.beta` `[H]`; `hopfield.xi` `[K, D]` (and
    /// `hopfield.beta` `[]` for exp and softmax).
    #[arg(long, required_unless_present = "kinds")]
    input: Option<PathBuf>,
    /// Safetensors file with the block's weights (e.g. a checkpoint), if not in `--input`.
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Where to write the results (safetensors).
    ///
    /// `energy` `[T+1, B]` (entry t: the energy at x_t), `energy.<term>` `[T+1, B]` for each
    /// term, `x_final` `[B, N, D]` and `grad_input` `[B, N, D]`, ∂E/∂g at the input (and the
    /// trajectory with `--states`, each term's gradients with `--term-grads`); the config, the
    /// self-attention switch and the device are in its `__metadata__`.
    #[arg(long, required_unless_present = "kinds")]
    output: Option<PathBuf>,
    /// Also write the trajectory: `states` `[T+1, B, N, D]` (x_0 … x_T; the last equals
    /// `x_final`).
    #[arg(long)]
    states: bool,
    /// Also write each term's gradient along the descent: `grad.<term>` `[T, B, N, D]`
    /// (∂E_i/∂g at steps 0 … T−1).
    #[arg(long)]
    term_grads: bool,
    /// Override the number of descent steps (T) of the config.
    #[arg(long)]
    steps: Option<usize>,
    /// Let tokens attend to themselves (ET eq. 3 excludes it; the image reference code does not).
    #[arg(long)]
    self_attention: bool,
    /// Run the dynamics in training mode (Langevin noise on).
    #[arg(long)]
    train_mode: bool,
    /// Random seed (Langevin noise).
    #[arg(long, default_value_t = 0)]
    seed: i64,
    /// cpu, cuda or auto (default: BASIN_DEVICE, else auto).
    #[arg(long)]
    device: Option<DeviceChoice>,
    /// Compute in float64 instead of float32.
    #[arg(long)]
    double: bool,
}

fn take(map: &mut HashMap<String, Tensor>, name: &str) -> Option<Tensor> {
    map.remove(name)
}

fn as_bool(name: &str, t: Tensor) -> Result<Tensor, CoreError> {
    if t.is_floating_point() && t.kind() != Kind::Bool {
        // Accept 0/1 floats as written by numpy; anything nonzero is true.
        return Ok(t.ne(0.0));
    }
    match t.kind() {
        Kind::Bool => Ok(t),
        Kind::Uint8 | Kind::Int8 | Kind::Int16 | Kind::Int | Kind::Int64 => Ok(t.ne(0)),
        other => Err(CoreError::tensor(
            name,
            "a bool or integer tensor",
            format!("{other:?}"),
        )),
    }
}

/// Builds the structure from the optional inputs, checking their shapes against `x`.
fn structure(
    inputs: &mut HashMap<String, Tensor>,
    b: i64,
    n: i64,
    heads: Option<i64>,
    self_attention: bool,
) -> Result<Structure> {
    let given: Vec<&str> = ["mask", "bias", "edge_index"]
        .into_iter()
        .filter(|k| inputs.contains_key(*k))
        .collect();
    if given.len() > 1 {
        bail!(
            "the input holds {}: give at most one of mask, bias, edge_index",
            given.join(" and ")
        );
    }
    let mut s = if let Some(m) = take(inputs, "mask") {
        Structure::mask(as_bool("mask", m)?)?
    } else if let Some(bias) = take(inputs, "bias") {
        if !bias.is_floating_point() {
            bail!(CoreError::tensor(
                "bias",
                "a float tensor",
                format!("{:?}", bias.kind())
            ));
        }
        Structure::bias(bias)?
    } else if let Some(e) = take(inputs, "edge_index") {
        if e.kind() != Kind::Int64 && e.kind() != Kind::Int {
            bail!(CoreError::tensor(
                "edge_index",
                "an int64 tensor [2, E]",
                format!("{:?}", e.kind())
            ));
        }
        Structure::sparse(SparseEdges::from_edge_index(
            &e.to_kind(Kind::Int64),
            b * n,
        )?)
    } else {
        Structure::full()
    };
    if let Some(p) = take(inputs, "padding") {
        s = s.with_padding(as_bool("padding", p)?)?;
    }
    s = s.with_self_attention(self_attention);
    s.check(b, n, heads)?;
    Ok(s)
}

/// Prints the registered kinds.
fn list_kinds() {
    crate::outln!("energy terms ([[terms]] kind = …):");
    for k in basin_core::registry::term_kinds() {
        let also = if k.aliases.is_empty() {
            String::new()
        } else {
            format!(" (also read as: {})", k.aliases.join(", "))
        };
        crate::outln!("  {:<16} {}{also}", k.kind, k.about);
    }
    crate::outln!("dynamics ([dynamics] kind = …):");
    for k in basin_core::registry::dynamics_kinds() {
        crate::outln!("  {:<16} {}", k.kind, k.about);
    }
}

pub fn run(args: &Args) -> Result<()> {
    let (Some(config), Some(input), Some(output)) = (&args.config, &args.input, &args.output)
    else {
        list_kinds();
        return Ok(());
    };
    let device = crate::device(args.device)?;
    tch::manual_seed(args.seed);
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let mut cfg =
        BlockConfig::from_toml(&text).with_context(|| format!("in {}", config.display()))?;
    if let Some(steps) = args.steps {
        cfg.steps = steps;
    }
    let heads = cfg.heads();

    let mut vs = VarStore::new(device);
    let block = EnergyBlock::new(&vs.root(), &cfg)?;
    if args.double {
        vs.double();
    }
    let kind = if args.double {
        Kind::Double
    } else {
        Kind::Float
    };

    let mut inputs: HashMap<String, Tensor> = read_tensors(input)?
        .into_iter()
        .map(|(n, t)| (n, t.to_device(device)))
        .collect();
    match &args.weights {
        Some(w) => {
            let weights: HashMap<String, Tensor> = read_tensors(w)?.into_iter().collect();
            checkpoint::assign(&vs, &weights, w, &[])?;
            if let Some(extra) = inputs.keys().find(|k| !INPUT_NAMES.contains(&k.as_str())) {
                bail!(
                    "{}: unexpected tensor `{extra}`: with --weights, the input holds only {:?}",
                    input.display(),
                    INPUT_NAMES
                );
            }
        }
        None => checkpoint::assign(&vs, &inputs, input, &INPUT_NAMES)?,
    }
    let x = take(&mut inputs, "x")
        .ok_or_else(|| {
            CoreError::tensor(
                "x",
                "the input tokens [B, N, D] in the input file",
                "nothing",
            )
        })
        .with_context(|| format!("in {}", input.display()))?;
    if !x.is_floating_point() {
        bail!(CoreError::tensor(
            "x",
            format!("a float tensor [B, N, {}]", cfg.dim),
            format!("{:?}", x.kind())
        ));
    }
    let x = x.to_kind(kind).to_device(device);
    let size = x.size();
    if size.len() != 3 {
        bail!(CoreError::tensor(
            "x",
            format!("shape [B, N, {}]", cfg.dim),
            format!("{size:?}")
        ));
    }
    let s = structure(&mut inputs, size[0], size[1], heads, args.self_attention)
        .with_context(|| format!("in {}", input.display()))?;
    block.check(&x, &s)?;

    let (x_final, trace, grad_input) = tch::no_grad(|| {
        let keep = TraceOptions {
            states: args.states,
            term_grads: args.term_grads,
        };
        let (x_final, trace) = block.run(&x, &s, args.train_mode, Some(keep));
        (x_final, trace, block.energy_grad(&x, &s))
    });
    let trace = trace.context("the descent recorded no trace")?;

    let mut out = vec![("energy".to_owned(), trace.total.shallow_clone())];
    for (name, e) in &trace.terms {
        out.push((format!("energy.{name}"), e.shallow_clone()));
    }
    out.push(("x_final".to_owned(), x_final));
    out.push(("grad_input".to_owned(), grad_input));
    if args.states {
        out.push(("states".to_owned(), Tensor::stack(&trace.states, 0)));
    }
    for (name, grads) in &trace.term_grads {
        if !grads.is_empty() {
            out.push((format!("grad.{name}"), Tensor::stack(grads, 0)));
        }
    }
    let meta = HashMap::from([
        ("config".to_owned(), serde_json::to_string(&cfg)?),
        ("self_attention".to_owned(), args.self_attention.to_string()),
        ("device".to_owned(), basin_core::device::describe(device)),
    ]);
    write_tensors(output, &out, Some(meta))?;

    print_table(&trace);
    crate::outln!("wrote {}", output.display());
    Ok(())
}

fn print_table(trace: &basin_core::Trace) {
    let totals = trace.mean_total();
    let terms = trace.mean_terms();
    let mut header = format!("{:>5} {:>14}", "step", "energy");
    for (name, _) in &terms {
        header.push_str(&format!(" {name:>14}"));
    }
    crate::outln!("{header}   (mean over the batch)");
    for (t, e) in totals.iter().enumerate() {
        let mut line = format!("{t:>5} {e:>14.6}");
        for (_, v) in &terms {
            line.push_str(&format!(" {:>14.6}", v[t]));
        }
        crate::outln!("{line}");
    }
}
