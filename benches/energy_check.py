"""`basin energy` on the CPU, on CUDA and on CUDA with TF32 against the paper-equation reference
`et_energy_ref.py` (a Python anchor, from CHECKS_DIR, else beside this script; float64), dense
and sparse (`edge_index`).

usage: python energy_check.py BASIN CONFIG WORKDIR [CHECKS_DIR]   (torch and safetensors)
Prints, per form and device, the largest relative error of the energy trace and of x_T against
the reference and whether the energy fell at every step; exits 1 when a run failed or rose.
"""
import os, subprocess, sys
import torch
from safetensors.torch import save_file, load_file
basin, cfg, work = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, sys.argv[4] if len(sys.argv) > 4 else os.path.dirname(os.path.abspath(__file__)))
import et_energy_ref as ref
torch.manual_seed(0)
B, N, D, H, Y, K, T, alpha = 4, 64, 32, 4, 8, 128, 12, 0.1
w = {
    "norm.gamma": torch.tensor(1.0), "norm.delta": torch.randn(D) * 0.1,
    "attention.w_q": torch.randn(H, Y, D) * 0.3, "attention.w_k": torch.randn(H, Y, D) * 0.3,
    "attention.beta": torch.full((H,), Y ** -0.5), "hopfield.xi": torch.randn(K, D) * 0.3,
}
x = torch.randn(B, N, D)
mask = (torch.rand(B, N, N) < 0.3) & ~torch.eye(N, dtype=torch.bool)
src, dst = [], []
for b in range(B):
    q, k = mask[b].nonzero(as_tuple=True)  # mask[b, q, k]: query q attends key k
    dst.append(q + b * N); src.append(k + b * N)
edge_index = torch.stack([torch.cat(src), torch.cat(dst)])
cases = {"dense": {"x": x, **w}, "sparse": {"x": x, "edge_index": edge_index, **w}}
params64 = {"wq": w["attention.w_q"].double(), "wk": w["attention.w_k"].double(),
            "beta": w["attention.beta"].double(), "xi": w["hopfield.xi"].double(),
            "gamma": w["norm.gamma"].double(), "delta": w["norm.delta"].double()}
ok = True
for name, tensors in cases.items():
    path = f"{work}/{name}.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)
    m = None if name == "dense" else mask
    xr, er = ref.descend(x.double(), params64, alpha, T, m)
    outs = {}
    for label, dev, env in [("cpu", "cpu", {}), ("cuda", "cuda", {}), ("cuda-tf32", "cuda", {"BASIN_TF32": "1"})]:
        out = f"{work}/{name}-{label}.safetensors"
        r = subprocess.run([basin, "energy", "--config", cfg, "--input", path, "--output", out,
                            "--device", dev, "--quiet"], env={**os.environ, **env},
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name} {label}: basin energy failed: {r.stderr.strip()}"); ok = False; continue
        o = load_file(out)
        outs[label] = o
        e = o["energy"].double()[:T]
        rel_e = ((e - er).abs() / er.abs()).max().item()
        rel_x = ((o["x_final"].double() - xr).norm() / xr.norm()).item()
        mono = bool((o["energy"][1:] <= o["energy"][:-1] + 1e-5 * o["energy"][:-1].abs()).all())
        ok = ok and mono
        print(f"{name:6} {label:9}: energy vs float64 reference max rel {rel_e:.2e}, x_T rel {rel_x:.2e}, "
              f"energy non-increasing {mono}, E_0 {o['energy'][0].mean():.4f} -> E_T {o['energy'][-1].mean():.4f}")
    if "cpu" in outs and "cuda" in outs:
        g0, g1 = outs["cpu"]["grad_input"], outs["cuda"]["grad_input"]
        print(f"{name:6} grad_input cuda vs cpu rel {((g1 - g0).norm() / g0.norm()).item():.2e}")
print("energy check:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
