//! Masked image completion (ET Section 3, Appendix B; Tables 4 and 14).

use basin_core::{AttentionConfig, DynamicsConfig};
use basin_tasks::TaskError;
use basin_tasks::image_completion::ImageCompletionConfig;

fn et(dim: i64, heads: i64, head_dim: i64, memories: i64, steps: usize) -> basin_core::BlockConfig {
    crate::block(
        dim,
        AttentionConfig {
            heads,
            head_dim,
            beta: Some(1.0 / (head_dim as f64).sqrt()),
            ..AttentionConfig::default()
        },
        memories,
        steps,
        DynamicsConfig::gradient_flow(0.1),
    )
}

/// The paper's ImageNet model (Table 4): 224² RGB, 16² patches, D = 768, 12 heads of 64,
/// β = 1/8, K = 3072 ReLU memories, T = 12, α = 0.1, the reference's CLS token. Needs an
/// ImageNet-style folder and a GPU.
pub fn imagenet() -> ImageCompletionConfig {
    ImageCompletionConfig {
        channels: 3,
        height: 224,
        width: 224,
        patch: 16,
        block: et(768, 12, 64, 3072, 12),
        // The task's defaults are ET's frame: no self-attention, the CLS token, tokens drawn
        // at σ = 0.002, the masked-patch MSE, tch's dense start, no ViT.
        ..ImageCompletionConfig::default()
    }
}

/// CIFAR-10 at CPU scale: 32² RGB, 4² patches (64 tokens), D = 64, 4 heads of 16,
/// K = 256 (4·D, the paper's ratio), T = 12, α = 0.1 — the paper's architecture shrunk
/// twelvefold in width so that a training run takes minutes on two cores.
pub fn cifar10_cpu() -> ImageCompletionConfig {
    ImageCompletionConfig {
        channels: 3,
        height: 32,
        width: 32,
        patch: 4,
        block: et(64, 4, 16, 256, 12),
        ..imagenet()
    }
}

/// Fashion-MNIST at CPU scale: 28² grey, 4² patches (49 tokens), otherwise as
/// [`cifar10_cpu`].
pub fn fashion_mnist_cpu() -> ImageCompletionConfig {
    ImageCompletionConfig {
        channels: 1,
        height: 28,
        width: 28,
        ..cifar10_cpu()
    }
}

/// [`fashion_mnist_cpu`] trained at its attractor: the descent settles (`gradient =
/// "implicit"`, memory flat in the steps) and the input field ties the fixed point to the
/// masked image it started from (input injection, `E_in = −λ Σ_A ⟨g_A, LN(x₀)_A W⟩`), so the
/// encoder, the mask token and the position biases learn through the block. The settle steps
/// at α = 1 (at a fixed point of the re-standardised step α enters neither the state nor the
/// implicit gradient, only how fast the settle gets there) and stops a training forward at a
/// relative step of 10⁻³, an evaluation one at 10⁻⁴ (deep-equilibrium practice). Not the
/// paper's model: ET trains through its T unrolled steps at α = 0.1.
pub fn fashion_mnist_cpu_implicit() -> ImageCompletionConfig {
    let mut cfg = fashion_mnist_cpu();
    cfg.block.dynamics = DynamicsConfig::gradient_flow(1.0);
    cfg.block.gradient = basin_core::GradientConfig {
        train_tol: Some(1e-3),
        ..basin_core::GradientConfig::implicit()
    };
    cfg.block.terms.push(basin_core::TermConfig::new(
        &basin_core::terms::input_field::InputFieldConfig {
            projection: true,
            ..Default::default()
        },
    ));
    cfg
}

/// ImageNet-1k at CPU scale, for smoke runs of the streamed path: 64² RGB crops, 8² patches
/// (64 tokens), otherwise as [`cifar10_cpu`].
pub fn imagenet_cpu() -> ImageCompletionConfig {
    ImageCompletionConfig {
        height: 64,
        width: 64,
        patch: 8,
        ..cifar10_cpu()
    }
}

/// The Table 14 ablations, in the paper's order.
pub const ABLATIONS: [&str; 5] = ["full", "full+self", "nohn+self", "nohn", "noatt"];

/// The Table 14 ablation `name` of `cfg`: `full`, `full+self`, `nohn`, `nohn+self` (no
/// Hopfield memory), `noatt` (no attention); `+self` lets a patch attend to itself.
pub fn ablation(
    cfg: &ImageCompletionConfig,
    name: &str,
) -> Result<ImageCompletionConfig, TaskError> {
    let (att, hn, selfatt) = match name {
        "full" => (true, true, false),
        "full+self" => (true, true, true),
        "nohn" => (true, false, false),
        "nohn+self" => (true, false, true),
        "noatt" => (false, true, false),
        other => {
            return Err(TaskError::config(
                "ablation",
                format!("one of {}; got `{other}`", ABLATIONS.join(", ")),
            ));
        }
    };
    Ok(ImageCompletionConfig {
        self_attention: selfatt,
        block: crate::keep_modules(&cfg.block, att, hn),
        ..cfg.clone()
    })
}
