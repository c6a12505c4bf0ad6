"""JAX anchor for the ET step and training step (performance issue 15): the ET reference code's
way — `jax.jit` of `jax.grad` of the energy, and of `value_and_grad` of a loss through T = 4
descent steps whose inner gradients are themselves autograd of the energy — at the foundation
size of `benches/benches/energy.rs` (B = 32, N = 128, D = 128, H = 12, Y = 64, K = 512, float32,
no self-attention). Written from the ET paper's equations (eq. 1 LayerNorm with a scalar γ,
eq. 3–4 attention energy, eq. 5 ReLU Hopfield energy, eq. 6 descent with α = 0.1).

Usage: python benches/et_step_jax.py   (threads: XLA's CPU client uses every core it is given;
run under `taskset -c 0,1` to match two threads). Prints one JSON line (milliseconds).
"""
import json
import statistics
import time

import jax
import jax.numpy as jnp

B, N, D, H, Y, K = 32, 128, 128, 12, 64, 512
ALPHA, STEPS = 0.1, 4
BETA = Y ** -0.5


def layer_norm(x, gamma, delta, eps=1e-5):
    xm = x - x.mean(-1, keepdims=True)
    return gamma * xm / jnp.sqrt((xm ** 2).mean(-1, keepdims=True) + eps) + delta


def energy(g, p):
    q = jnp.einsum("bnd,hyd->bhny", g, p["wq"])
    k = jnp.einsum("bnd,hyd->bhny", g, p["wk"])
    logits = BETA * q @ jnp.swapaxes(k, -1, -2)
    logits = jnp.where(jnp.eye(N, dtype=bool), -jnp.inf, logits)
    e_att = -jax.scipy.special.logsumexp(logits, -1).sum() / BETA
    e_hn = -0.5 * (jax.nn.relu(g @ p["xi"].T) ** 2).sum()
    return e_att + e_hn


@jax.jit
def step(x, p):
    g = layer_norm(x, p["gamma"], p["delta"])
    return jax.value_and_grad(energy)(g, p)


def loss(p, x, target):
    for _ in range(STEPS):
        g = layer_norm(x, p["gamma"], p["delta"])
        x = x - ALPHA * jax.grad(energy)(g, p)
    return ((x - target) ** 2).mean()


train_step = jax.jit(jax.value_and_grad(loss))


def bench(f, reps=30, warm=5):
    for _ in range(warm):
        jax.block_until_ready(f())
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        jax.block_until_ready(f())
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    key = jax.random.PRNGKey(0)
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    p = {
        "wq": jax.random.normal(k1, (H, Y, D)) * 0.02,
        "wk": jax.random.normal(k2, (H, Y, D)) * 0.02,
        "xi": jax.random.normal(k3, (K, D)) * 0.02,
        "gamma": jnp.ones(()),
        "delta": jnp.zeros(D),
    }
    x = jax.random.normal(k4, (B, N, D))
    target = jax.random.normal(k5, (B, N, D))
    print(json.dumps({
        "jax": jax.__version__,
        "devices": str(jax.devices()),
        "step_ms": bench(lambda: step(x, p)),
        "train_step_ms": bench(lambda: train_step(p, x, target), reps=10, warm=2),
    }))


if __name__ == "__main__":
    main()
