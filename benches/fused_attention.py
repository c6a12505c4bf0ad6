"""PyTorch anchor of the energy attention's gradient without autograd (one descent step of the
attention term, ET eq. 3-4, all pairs but the diagonal) in its two forms, as basin's criterion
group `attention_kernels` times them: explicit (logits, softmax, two weighted sums) and on
PyTorch's fused scaled-dot-product attention (the query side SDPA(bQ, K, K); the key side an
SDPA over the queries whose logits carry -lse, scaled back by its own log-sum-exp).

usage: python benches/fused_attention.py   (CPU, B=32 N=128 D=128 H=12 Y=64, float32; threads
from OMP_NUM_THREADS or torch's default)
"""
import statistics
import time

import torch

dev = torch.device("cpu")
B, N, D, H, Y = 32, 128, 128, 12, 64
beta = Y ** -0.5
torch.manual_seed(0)
wq = torch.randn(H, Y, D, device=dev) * 0.02
wk = torch.randn(H, Y, D, device=dev) * 0.02
g = torch.randn(B, N, D, device=dev)
blocked = torch.eye(N, dtype=torch.bool, device=dev)
mask = torch.zeros(N, N, device=dev).masked_fill(blocked, -1e30)


def project(g):
    q = torch.einsum("bnd,hyd->bhny", g, wq) * beta
    k = torch.einsum("bnd,hyd->bhny", g, wk)
    return q, k


def back(tq, tk):
    return -torch.einsum("bhny,hyd->bnd", tq, wq) - torch.einsum("bhny,hyd->bnd", tk, wk) / beta


def explicit(g):
    q, k = project(g)
    w = (q @ k.transpose(-1, -2) + mask).softmax(-1)
    return back(w @ k, w.transpose(-1, -2) @ q)


def fused(g):
    q, k = project(g)
    tq, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, k, attn_mask=mask, scale=1.0)
    ones = torch.ones(B, H, N, 1, device=dev)
    kq = torch.cat([k, ones], -1)
    qk = torch.cat([q, -lse.unsqueeze(-1)], -1)
    v = torch.cat([q, torch.zeros_like(ones)], -1)
    mean, lse_k = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        kq, qk, v, attn_mask=mask.t(), scale=1.0)
    return back(tq, mean[..., :Y] * lse_k.exp().unsqueeze(-1))


def bench(f, reps=20, warm=3):
    with torch.no_grad():
        for _ in range(warm):
            f(g)
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            f(g)
            ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


with torch.no_grad():
    err = ((fused(g) - explicit(g)).abs().max() / explicit(g).abs().max()).item()
print(f"torch {torch.__version__} on {dev} x{torch.get_num_threads()}: B{B} N{N} D{D} H{H} Y{Y}, "
      f"fused vs explicit rel {err:.1e}")
print(f"attention gradient: explicit {bench(explicit):.2f} ms | fused {bench(fused):.2f} ms")
