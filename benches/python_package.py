"""basin from Python, timed in one run beside the PyTorch anchors (issue: the Python package).

1. The ET step at the foundation size (B32 N128 D128 H12 Y64 K512, T = 4 gradient-flow steps,
   closed-form gradients in the graph): a training step (descent, MSE, backward) and an
   evaluation descent, each three ways in this one process on one libtorch: the PyTorch anchor
   of `bench_et_pytorch.py` (the paper's equations in PyTorch), basin's block called from
   Python (`basin.EnergyBlock`), and the same block timed inside basin (`time_descent`, no
   Python between steps). The wrapper's overhead is (Python − inside) / inside.
2. Laplacian encodings of every graph of NCI1 (k = 8, no CLS): `basin.graph.laplacian_pe`
   per graph against PyG's `AddLaplacianEigenvectorPE` transform (scipy's eigsh / eigh).

Usage: python benches/python_package.py [--anchors DIR] [--data DIR] [--threads 2] [--reps 10]
(DIR holding bench_et_pytorch.py: default $BASIN_CHECKS); prints one JSON object.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

import torch

import basin


def median_ms(f, reps, warm=2):
    for _ in range(warm):
        f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def et_step(anchor_path, reps):
    spec = importlib.util.spec_from_file_location("anchor", anchor_path)
    anchor = importlib.util.module_from_spec(spec)
    sys.argv = [sys.argv[0], "cpu"]
    spec.loader.exec_module(anchor)
    B, N, D, H, Y, K = 32, 128, 128, 12, 64, 512
    ref = anchor.Et(B, N, D, H, Y, K)
    block = basin.EnergyBlock(
        dim=D, steps=4,
        terms=[basin.terms.Attention(heads=H, head_dim=Y, beta=Y ** -0.5, learn_beta=False),
               basin.terms.HopfieldMemory(memories=K)],
        dynamics=basin.dynamics.GradientFlow(alpha=0.1))
    x, target = ref.x, ref.target

    def basin_train():
        y = block(x)
        (y - target).square().mean().backward()

    def basin_eval():
        with torch.no_grad():
            block(x)

    out = {
        "anchor_train_ms": median_ms(lambda: ref.train_step(4, True), reps),
        "python_train_ms": median_ms(basin_train, reps),
        "inside_train_ms": 1e3 * statistics.median(block._native.time_descent(x, reps, target)),
        "python_eval_ms": median_ms(basin_eval, reps),
        "inside_eval_ms": 1e3 * statistics.median(block._native.time_descent(x, reps)),
    }
    # Each way once more, in the other order, so that drift over the run shows.
    out["inside_train_ms_again"] = 1e3 * statistics.median(block._native.time_descent(x, reps, target))
    out["python_train_ms_again"] = median_ms(basin_train, reps)
    for kind in ("train", "eval"):
        out[f"overhead_{kind}"] = out[f"python_{kind}_ms"] / out[f"inside_{kind}_ms"] - 1
    out["basin_vs_anchor_train"] = out["anchor_train_ms"] / out["python_train_ms"]
    return out


def pe(data_dir):
    graphs = basin.datasets.load("NCI1", data_dir=data_dir, format="torch")
    k = 8
    t = time.perf_counter()
    for g in graphs:
        basin.graph.laplacian_pe(g["edge_index"], g["x"].shape[0], k)
    basin_s = time.perf_counter() - t
    out = {"graphs": len(graphs), "k": k, "basin_s": basin_s}
    try:
        from torch_geometric.data import Data
        from torch_geometric.transforms import AddLaplacianEigenvectorPE
    except ImportError:
        out["pyg"] = "torch_geometric not installed"
        return out
    transform = AddLaplacianEigenvectorPE(k, attr_name="pe", is_undirected=True)
    data = [Data(x=g["x"], edge_index=g["edge_index"], num_nodes=g["x"].shape[0]) for g in graphs]
    t = time.perf_counter()
    skipped = 0
    for d in data:
        if d.num_nodes <= k + 1:  # PyG's eigsh needs more nodes than k + 1
            skipped += 1
            continue
        transform(d)
    out["pyg_s"] = time.perf_counter() - t
    out["pyg_skipped_small_graphs"] = skipped
    out["pyg_vs_basin"] = out["pyg_s"] / basin_s
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--anchors", default=os.environ.get("BASIN_CHECKS", ""),
                   help="folder of bench_et_pytorch.py (default: $BASIN_CHECKS)")
    p.add_argument("--data", default=None, help="the data directory (holding tu/NCI1)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    anchor = os.path.join(a.anchors, "bench_et_pytorch.py")
    if not os.path.isfile(anchor):
        p.error(f"{anchor} not found (set BASIN_CHECKS or pass --anchors DIR)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    res = {"torch": torch.__version__, "threads": a.threads, "et_step": et_step(anchor, a.reps)}
    print(json.dumps(res), flush=True)
    res["laplacian_pe"] = pe(a.data)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
