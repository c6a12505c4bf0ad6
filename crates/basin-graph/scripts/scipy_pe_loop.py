"""Time a scipy `eigh` loop computing the same Laplacian encodings as basin-graph's
`laplacian_pe_many` (the `laplacian_pe/*` criterion benchmarks), on the same machine.

Per graph: the CLS-augmented adjacency A~ = [[1, 1^T], [1, A]] (ET eq. 23), the normalised
Laplacian L = I - D^{-1/2} A~ D^{-1/2}, scipy.linalg.eigh(L), eigenvectors 1..k (zero-padded).
Reports the median of 5 runs of the whole loop ("total") and of the eigh calls alone.

Versions used for the numbers in the report: Python 3.11, numpy 2.4.6, scipy 1.17.1 (OpenBLAS,
threads as numpy's default). No randomness.

Run: /tmp/venv/bin/python crates/basin-graph/scripts/scipy_pe_loop.py [NCI1 DD ...]
(data from $BASIN_DATA_DIR, a relative path taken from the workspace root, else the user cache
$XDG_CACHE_HOME/basin/data or ~/.cache/basin/data: the rule of crates/basin-data/src/datadir.rs).
"""
import os
import statistics
import sys
import time

import numpy as np
import scipy
import scipy.linalg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../.."))
DATA = os.environ.get("BASIN_DATA_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "basin", "data")
if not os.path.isabs(DATA):
    DATA = os.path.join(ROOT, DATA)
K = 15


def load_tu(name):
    d = os.path.join(DATA, "tu", name)
    A = np.loadtxt(f"{d}/{name}_A.txt", delimiter=",", dtype=np.int64) - 1
    gi = np.loadtxt(f"{d}/{name}_graph_indicator.txt", dtype=np.int64) - 1
    starts = np.concatenate([[0], np.cumsum(np.bincount(gi))])
    eg = gi[A[:, 0]]
    order = np.argsort(eg, kind="stable")
    A, eg = A[order], eg[order]
    bounds = np.searchsorted(eg, np.arange(len(starts)))
    return [(int(starts[g + 1] - starts[g]), A[bounds[g] : bounds[g + 1]] - starts[g]) for g in range(len(starts) - 1)]


def encode(graphs, max_nodes=None):
    t_eigh = 0.0
    out = []
    for n, e in graphs:
        if max_nodes is not None and n > max_nodes:
            e = e[(e[:, 0] < max_nodes) & (e[:, 1] < max_nodes)]
            n = max_nodes
        At = np.ones((n + 1, n + 1))
        At[1:, 1:] = 0.0
        np.add.at(At, (e[:, 0] + 1, e[:, 1] + 1), 1.0)
        d = At.sum(axis=1)
        s = 1.0 / np.sqrt(d)
        L = np.eye(n + 1) - s[:, None] * At * s[None, :]
        t = time.perf_counter()
        w, V = scipy.linalg.eigh(L)
        t_eigh += time.perf_counter() - t
        pe = np.zeros((n + 1, K), dtype=np.float32)
        m = min(K, n)
        pe[:, :m] = V[:, 1 : 1 + m]
        out.append(pe)
    return out, t_eigh


def main():
    names = sys.argv[1:] or ["NCI1", "DD"]
    print(f"numpy {np.__version__}, scipy {scipy.__version__}")
    for name in names:
        graphs = load_tu(name)
        for cap in ([None, 500] if name == "DD" else [None]):
            totals, eighs = [], []
            for _ in range(5 if name != "DD" or cap else 1):
                t = time.perf_counter()
                _, te = encode(graphs, cap)
                totals.append(time.perf_counter() - t)
                eighs.append(te)
            label = name + ("" if cap is None else f" cap {cap}")
            print(
                f"{label}: {len(graphs)} graphs, total median {statistics.median(totals):.3f} s, "
                f"eigh median {statistics.median(eighs):.3f} s (runs: {len(totals)})"
            )


if __name__ == "__main__":
    main()
