"""Training epochs of ET node anomaly detection in PyTorch + PyG, timed by phase, to compare
with `basin train` on the same data and model (performance issue 15, goal 3).

The model is basin's `basin_et::anomaly::default_model()` (the `basin train --example
et-anomaly` run file) written again in PyTorch: a linear encoder of the standardised node
features, then T = 2 steps of gradient flow x ← x − α ∂E/∂g (α = 1) of one ET block over the
whole graph (energy LayerNorm with a scalar γ; energy attention restricted to each node's
neighbours, one head of width 64, β learned; ReLU Hopfield memory of 128 patterns), an MLP on
the first and last normalised states g¹ ‖ gᵀ (eq. 21), and the class-weighted binary
cross-entropy (eq. 22), Adam at lr 10⁻³, full batch, as the reference code trains
(the public ET anomaly code's `main_subsample.py`). After each step every node is scored without
gradients and the validation AUC and the macro-F1 threshold are found (the BWGNN protocol:
thresholds 0.05 … 0.95), as basin's `score = "eval-after-step"` does.

The energy gradient is the explicit message-passing form of the reference code
(`graph_transformer_layer.py`): ω = softmax over each node's incoming edges of β ⟨K_j, Q_i⟩, then
∂E/∂g_i = −W_Qᵀ Σ_j ω_ij K_j − W_Kᵀ Σ_j ω_ji Q_j, both sums as PyG computes messages
(`--spmm scatter`: per-edge messages gathered and summed with `index_add`, as
`MessagePassing` and the reference's DGL UDF do), as sparse × dense products of a COO matrix
of ω (`--spmm sparse`, `torch.sparse.mm`), or basin's way (`--spmm csr`: the logits by a
sampled matmul over a CSR pattern, the softmax by segment reductions, both sums by weighted
`embedding_bag`s over the CSR rows); `--grad autograd` takes it by autograd of the energy
with `create_graph` instead.

Phases per epoch: data (nothing: full batch, features standardised once), forward (including
the loss), backward, optimiser, evaluation. Prints one JSON line with every epoch's phases.

Usage: python benches/et_anomaly_epoch.py --data DIR/anomaly/tolokers.npz [--epochs 5]
       [--spmm scatter|sparse|csr] [--grad closed-form|autograd] [--threads 2]
"""
import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.metrics import f1_score, roc_auc_score
from torch_geometric.utils import softmax, to_undirected

# basin_et::anomaly::default_model(): D = Y = 64, one head, K = 128, T = 2, α = 1.
D, HEADS, Y, K_MEM, STEPS, ALPHA, EPS = 64, 1, 64, 128, 2, 1.0, 1e-5


class EnergyLayerNorm(nn.Module):
    """ET eq. 1: g = γ (x − mean) / sqrt(var + ε) + δ, with a scalar γ."""

    def __init__(self, d):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(()))
        self.delta = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        x = x - x.mean(-1, keepdim=True)
        return self.gamma * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + EPS) + self.delta


class Block(nn.Module):
    """ET energy attention over the graph's edges (eq. 20) plus a ReLU Hopfield memory."""

    def __init__(self, spmm, grad):
        super().__init__()
        self.norm = EnergyLayerNorm(D)
        self.wq = nn.Parameter(torch.randn(HEADS, Y, D) * 0.01)
        self.wk = nn.Parameter(torch.randn(HEADS, Y, D) * 0.01)
        self.beta = nn.Parameter(torch.full((HEADS,), 1.0 / math.sqrt(Y)))
        self.xi = nn.Parameter(torch.randn(K_MEM, D) * 0.02)
        self.spmm, self.grad_mode = spmm, grad

    def qk(self, g):
        return torch.einsum("nd,hyd->nhy", g, self.wq), torch.einsum("nd,hyd->nhy", g, self.wk)

    def energy(self, g, query, key, n):
        """E_att + E_hop (eq. 20 and 5); a node without neighbours adds nothing to E_att."""
        q, k = self.qk(g)
        logits = self.beta * (q[query] * k[key]).sum(-1)  # [E, H]
        peak = torch.full((n, HEADS), -1e30).index_reduce_(0, query, logits.detach(), "amax")
        s = torch.zeros(n, HEADS).index_add_(0, query, torch.exp(logits - peak[query]))
        has = s > 0
        lse = torch.where(has, peak + torch.log(torch.where(has, s, torch.ones_like(s))), torch.zeros_like(s))
        e_att = -(lse / self.beta).sum()
        e_hop = -0.5 * F.relu(g @ self.xi.T).pow(2).sum()
        return e_att + e_hop

    def grad(self, g, query, key, n):
        """∂E/∂g by the closed form (the reference's `graph_transformer_layer.py`) or autograd."""
        if self.grad_mode == "autograd":
            training = torch.is_grad_enabled()
            with torch.enable_grad():
                if not g.requires_grad:
                    g = g.detach().requires_grad_()
                d = torch.autograd.grad(self.energy(g, query, key, n), g, create_graph=training)[0]
            return d if training else d.detach()
        q, k = self.qk(g)
        if self.spmm == "csr":
            return self.grad_csr(g, q, k, n) - F.relu(g @ self.xi.T) @ self.xi
        w = softmax(self.beta * (q[query] * k[key]).sum(-1), query, num_nodes=n)  # ω [E, H]
        if self.spmm == "scatter":
            # Messages [E, H, Y], summed per node (PyG MessagePassing's aggr="add").
            to_query = torch.zeros(n, HEADS, Y).index_add_(0, query, w.unsqueeze(-1) * k[key])
            to_key = torch.zeros(n, HEADS, Y).index_add_(0, key, w.unsqueeze(-1) * q[query])
        else:
            idx = torch.stack([query, key])
            heads_q, heads_k = [], []
            for h in range(HEADS):
                a = torch.sparse_coo_tensor(idx, w[:, h], (n, n)).coalesce()
                heads_q.append(torch.sparse.mm(a, k[:, h]))
                heads_k.append(torch.sparse.mm(a.t(), q[:, h]))
            to_query, to_key = torch.stack(heads_q, 1), torch.stack(heads_k, 1)
        att = -(torch.einsum("nhy,hyd->nd", to_query, self.wq) + torch.einsum("nhy,hyd->nd", to_key, self.wk))
        hop = -F.relu(g @ self.xi.T) @ self.xi
        return att + hop

    def grad_csr(self, g, q, k, n):
        """The attention gradient with query-major CSR matrices (`self.csr`: row offsets, keys,
        the key-major permutation and its offsets and queries): logits by a sampled matmul
        and both sums by weighted `embedding_bag`s, basin's way."""
        crow, col, perm, ccol, row = self.csr
        out_q, out_k = [], []
        for h in range(HEADS):
            pattern = torch.sparse_csr_tensor(crow, col, torch.zeros(col.numel()), (n, n))
            s = torch.sparse.sampled_addmm(pattern, q[:, h], k[:, h].T, beta=0.0).values() * self.beta[h]
            # Softmax over each row's entries: segment max and sum over the CSR rows.
            lengths = crow[1:] - crow[:-1]
            peak = torch.segment_reduce(s.detach(), "max", lengths=lengths, unsafe=True)
            ex = torch.exp(s - torch.repeat_interleave(peak.nan_to_num(0.0), lengths))
            z = torch.segment_reduce(ex, "sum", lengths=lengths, unsafe=True)
            w = ex / torch.repeat_interleave(z, lengths)
            # Both sums as weighted bags of rows: Σ_j ω_ij K_j per query, Σ_i ω_ij Q_i per key.
            out_q.append(F.embedding_bag(col, k[:, h], crow, mode="sum", per_sample_weights=w, include_last_offset=True))
            out_k.append(F.embedding_bag(row, q[:, h], ccol, mode="sum", per_sample_weights=w[perm], include_last_offset=True))
        to_query, to_key = torch.stack(out_q, 1), torch.stack(out_k, 1)
        return -(torch.einsum("nhy,hyd->nd", to_query, self.wq) + torch.einsum("nhy,hyd->nd", to_key, self.wk))

    def forward(self, x, query, key, n):
        for _ in range(STEPS):
            x = x - ALPHA * self.grad(self.norm(x), query, key, n)
        return x


class Model(nn.Module):
    def __init__(self, features, spmm, grad):
        super().__init__()
        self.encoder = nn.Linear(features, D)
        self.block = Block(spmm, grad)
        self.readout = nn.Sequential(nn.Linear(2 * D, D), nn.ReLU(), nn.Linear(D, 1))

    def forward(self, x, query, key):
        x0 = self.encoder(x)
        xt = self.block(x0, query, key, x.shape[0])
        return self.readout(torch.cat([self.block.norm(x0), self.block.norm(xt)], -1)).squeeze(-1)


def split(labels, rng, train_ratio=0.4, test_of_rest=0.67):
    """Stratified train / validation / test node ids (basin's default split sizes)."""
    parts = [[], [], []]
    for c in np.unique(labels):
        ids = rng.permutation(np.flatnonzero(labels == c))
        a = int(round(train_ratio * len(ids)))
        b = a + int(round((1 - test_of_rest) * (len(ids) - a)))
        for p, s in zip(parts, [ids[:a], ids[a:b], ids[b:]]):
            p.extend(s.tolist())
    return [torch.tensor(sorted(p)) for p in parts]


def evaluate(p, y, val, test):
    """Validation AUC, the macro-F1 threshold chosen on validation, test metrics."""
    pv, yv = p[val], y[val]
    best = max(((f1_score(yv, pv > t, average="macro"), t) for t in np.arange(0.05, 1.0, 0.05)))
    pt, yt = p[test], y[test]
    return {"val_auc": roc_auc_score(yv, pv), "val_macro_f1": best[0], "threshold": float(best[1]),
            "test_auc": roc_auc_score(yt, pt), "test_macro_f1": f1_score(yt, pt > best[1], average="macro")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="tolokers.npz (node_features, node_labels, edges)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--spmm", default="scatter", choices=["scatter", "sparse", "csr"])
    ap.add_argument("--grad", default="closed-form", choices=["closed-form", "autograd"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    t0 = time.perf_counter()
    z = np.load(args.data)
    x = torch.from_numpy(z["node_features"]).float()
    y = z["node_labels"]
    edge_index = to_undirected(torch.from_numpy(z["edges"]).T.contiguous(), num_nodes=x.shape[0])
    key, query = edge_index[0], edge_index[1]  # edge j → i: i is the query
    train, val, test = split(y, rng)
    mean, std = x[train].mean(0), x[train].std(0, unbiased=False).clamp_min(1e-12)
    x = (x - mean) / std
    labels = torch.from_numpy(y).float()
    omega = float((labels[train] == 0).sum() / (labels[train] == 1).sum())
    weight = labels[train] * (omega - 1) + 1
    model = Model(x.shape[1], args.spmm, args.grad)
    if args.spmm == "csr":
        # Edges sorted by query (CSR rows) once; the key-major order for the transposed sum.
        n = x.shape[0]
        order = torch.argsort(query * n + key)
        query, key = query[order], key[order]
        crow = torch.ops.aten._convert_indices_from_coo_to_csr(query, n)
        perm = torch.argsort(key * n + query)
        ccol = torch.ops.aten._convert_indices_from_coo_to_csr(key[perm], n)
        model.block.csr = (crow, key, perm, ccol, query[perm])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    setup = time.perf_counter() - t0

    epochs = []
    for epoch in range(args.epochs):
        ph = {}
        t = time.perf_counter()
        logits = model(x, query, key)
        loss = F.binary_cross_entropy_with_logits(logits[train], labels[train], weight=weight, reduction="sum") / weight.sum()
        ph["forward"] = time.perf_counter() - t
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        ph["backward"] = time.perf_counter() - t
        t = time.perf_counter()
        opt.step()
        ph["optimiser"] = time.perf_counter() - t
        t = time.perf_counter()
        with torch.no_grad():
            p = torch.sigmoid(model(x, query, key)).numpy()
        metrics = evaluate(p, y, val.numpy(), test.numpy())
        ph["evaluation"] = time.perf_counter() - t
        epochs.append({"phases": ph, "loss": loss.item(), **metrics})
    print(json.dumps({"nodes": x.shape[0], "directed_edges": int(edge_index.shape[1]), "spmm": args.spmm,
                      "grad": args.grad, "threads": args.threads, "setup": setup, "epochs": epochs}))


if __name__ == "__main__":
    main()
