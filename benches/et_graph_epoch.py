"""One training epoch of ET graph classification in PyTorch + PyG, timed by phase, to compare
with `basin train` on the same data and model (performance issue 15, goal 3).

The model is basin's `basin_et::graph` classifier written again in PyTorch: a linear node
encoder, a learned CLS token, a linear projection of k = 15 CLS-augmented Laplacian
eigenvectors added to every token, the parameterised adjacency Â = Conv2D(X Xᵀ) ⊙ Linear(A)
(ET eq. 24), then `blocks` ET blocks of `steps` Langevin steps each (energy LayerNorm with a
scalar γ; energy attention masked by the graph with β learned per head and the scores
multiplied by Â, eq. 25; ReLU Hopfield memory; x ← x − α ∂E/∂g + √α σ ε), the CLS token and
the mean node token into a linear readout, cross-entropy with label smoothing 0.05, AdamW.
The data pipeline is the reference code's way (the public ET graph code's `batchify`/`get_adjs`):
PyG `TUDataset` and `DataLoader(shuffle=True)`, `to_dense_batch` / `to_dense_adj` per batch
with the CLS row and column prepended; the encodings either per batch with a batched
`torch.linalg.eigh` of each graph's own CLS-augmented Laplacian (`--pe per-batch`, the
reference computes them per batch) or once per graph beforehand (`--pe precomputed`, basin's
way). Energy gradients by autograd with `create_graph` (the reference's way) or the closed
form (`--closed-form`).

Phases per epoch: data (loader, densifying, standardising), pe, forward (including the loss),
backward, optimiser. Prints one JSON line.

Usage: python benches/et_graph_epoch.py --data DIR/tu --name NCI1 [--preset cpu|paper]
       [--pe per-batch|precomputed] [--closed-form] [--train-graphs N] [--threads 2]
"""
import argparse
import json
import math
import os
import shutil
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_geometric.datasets import TUDataset
from torch_geometric.loader import DataLoader
from torch_geometric.utils import to_dense_adj, to_dense_batch

PRESETS = {
    # basin_et::graph::tu_cpu_k15: D 32, 4 heads of 8, K 128, 2 blocks x 2 steps, alpha 0.1.
    "cpu": dict(d=32, heads=4, y=8, k_mem=128, blocks=2, steps=2, alpha=0.1, sigma=0.02),
    # basin_et::graph::tu_paper (Table 9): D 128, 12 heads of 64, K 512, 4 blocks x 1 step.
    "paper": dict(d=128, heads=12, y=64, k_mem=512, blocks=4, steps=1, alpha=0.01, sigma=0.02),
}
BLOCKED = -1e30


def load(data_dir, name):
    """TUDataset from local text files (PyG expects ROOT/NAME/raw/NAME_*.txt)."""
    root = tempfile.mkdtemp(prefix="et_graph_epoch_")
    raw = os.path.join(root, name, "raw")
    os.makedirs(raw)
    for f in os.listdir(os.path.join(data_dir, name)):
        if f.endswith(".txt"):
            os.symlink(os.path.abspath(os.path.join(data_dir, name, f)), os.path.join(raw, f))
    ds = TUDataset(root, name, use_node_attr=True)
    return ds, root


def cls_laplacian_pe(adj, real, k):
    """Eigenvectors 1..k of I − D^-1/2 Ã D^-1/2 of each graph's CLS-augmented adjacency
    ([B, N', N'] with the CLS in slot 0; padded tokens isolated and their rows zeroed)."""
    a = adj.clone()
    a[:, 0, :] = real.float()
    a[:, :, 0] = real.float()
    a[:, 0, 0] = 0.0
    deg = a.sum(-1)
    dinv = torch.where(deg > 0, deg.clamp_min(1e-12).rsqrt(), torch.zeros_like(deg))
    # Padded tokens get eigenvalue 10, above the normalised spectrum [0, 2]: their vectors
    # come last and never mix with a graph's own (each graph's spectrum is then its own).
    pad = (~real).float() * 10.0
    lap = torch.diag_embed(real.float() + pad) - dinv.unsqueeze(-1) * a * dinv.unsqueeze(-2)
    _, v = torch.linalg.eigh(lap)
    pe = v[:, :, 1 : 1 + k] * real.unsqueeze(-1)
    # A graph of n nodes (n + 1 tokens with the CLS) has n vectors after the trivial one.
    cols = torch.arange(pe.shape[-1]).view(1, 1, -1)
    pe = pe * (cols < (real.sum(1) - 1).view(-1, 1, 1))
    if pe.shape[-1] < k:
        pe = F.pad(pe, (0, k - pe.shape[-1]))
    return pe


class EtBlock(nn.Module):
    def __init__(self, d, heads, y, k_mem):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(()))
        self.delta = nn.Parameter(torch.zeros(d))
        self.wq = nn.Parameter(torch.randn(heads, y, d) * 0.002)
        self.wk = nn.Parameter(torch.randn(heads, y, d) * 0.002)
        self.beta = nn.Parameter(torch.full((heads,), y ** -0.5))
        self.xi = nn.Parameter(torch.randn(k_mem, d) * 0.02)

    def norm(self, x):
        xm = x - x.mean(-1, keepdim=True)
        return self.gamma * xm / torch.sqrt(xm.square().mean(-1, keepdim=True) + 1e-5) + self.delta

    def logits(self, g, scale, keys):
        q = torch.einsum("bnd,hyd->bhny", g, self.wq) * self.beta.view(1, -1, 1, 1)
        k = torch.einsum("bnd,hyd->bhny", g, self.wk)
        s = (q @ k.transpose(-1, -2)) * scale
        return s.masked_fill(~keys.unsqueeze(1), BLOCKED), q, k

    def energy(self, g, scale, keys, has, real):
        s, _, _ = self.logits(g, scale, keys)
        e_att = -(torch.logsumexp(s, -1) * has.unsqueeze(1) / self.beta.view(1, -1, 1)).sum((1, 2))
        e_hn = -0.5 * (F.relu(g @ self.xi.T).square().sum(-1) * real).sum(-1)
        return e_att + e_hn

    def grad_closed(self, g, scale, keys, has, real):
        s, q, k = self.logits(g, scale, keys)
        w = torch.softmax(s, -1) * has.unsqueeze(1).unsqueeze(-1) * scale
        tq = w @ k
        tk = w.transpose(-1, -2) @ q
        ga = -(torch.einsum("bhny,hyd->bnd", tq, self.wq)
               + torch.einsum("bhny,hyd->bnd", tk, self.wk / self.beta.view(-1, 1, 1)))
        gh = -(F.relu(g @ self.xi.T) @ self.xi) * real.unsqueeze(-1)
        return ga + gh


class EtGraph(nn.Module):
    def __init__(self, feats, classes, pe_k, p):
        super().__init__()
        d, h = p["d"], p["heads"]
        self.p = p
        self.encoder = nn.Linear(feats, d)
        self.cls = nn.Parameter(torch.randn(d) * 0.02)
        self.pe_proj = nn.Linear(pe_k, d)
        self.conv = nn.Conv2d(1, h, 3, padding=1, bias=False)
        self.adj_proj = nn.Linear(1, h)
        nn.init.zeros_(self.adj_proj.bias)
        self.blocks = nn.ModuleList(EtBlock(d, h, p["y"], p["k_mem"]) for _ in range(p["blocks"]))
        self.readout = nn.Linear(2 * d, classes)

    def forward(self, feats, pe, adj, real, closed):
        x = self.encoder(feats)
        n = x.shape[1]
        is_cls = (torch.arange(n) == 0).view(1, n, 1)
        x = torch.where(is_cls, self.cls.view(1, 1, -1), x) + self.pe_proj(pe)
        xr = x * real.unsqueeze(-1)
        outer = (xr @ xr.transpose(1, 2)).unsqueeze(1)
        scale = self.conv(outer) * self.adj_proj(adj.unsqueeze(-1)).permute(0, 3, 1, 2)
        keys = (adj > 0) & real.unsqueeze(1) & real.unsqueeze(2)
        keys = keys & ~torch.eye(n, dtype=torch.bool).unsqueeze(0)
        has = keys.any(-1).float()
        realf = real.float()
        a, sigma = self.p["alpha"], self.p["sigma"]
        for blk in self.blocks:
            for _ in range(self.p["steps"]):
                g = blk.norm(x)
                if closed:
                    gr = blk.grad_closed(g, scale, keys, has, realf)
                else:
                    if not g.requires_grad:
                        g.requires_grad_(True)
                    e = blk.energy(g, scale, keys, has, realf)
                    (gr,) = torch.autograd.grad(e.sum(), g, create_graph=self.training)
                x = x - a * gr
                if self.training:
                    x = x + math.sqrt(a) * sigma * torch.randn_like(x) * realf.unsqueeze(-1)
        nodes = realf * (torch.arange(n) > 0).float().view(1, -1)
        mean = (x * nodes.unsqueeze(-1)).sum(1) / nodes.sum(1, keepdim=True).clamp_min(1)
        return self.readout(torch.cat([x[:, 0], mean], 1))


def densify(batch, mean, std, max_nodes=500):
    """CLS-prepended dense tensors of a PyG batch: features [B, N', F], adjacency [B, N', N']
    (CLS connected to every real node), real-token mask [B, N']."""
    x = (batch.x - mean) / std
    xd, real = to_dense_batch(x, batch.batch, max_num_nodes=None)
    adj = to_dense_adj(batch.edge_index, batch.batch, max_num_nodes=xd.shape[1])
    xd, real, adj = xd[:, :max_nodes], real[:, :max_nodes], adj[:, :max_nodes, :max_nodes]
    b, n, f = xd.shape
    feats = torch.cat([torch.zeros(b, 1, f), xd], 1)
    real = torch.cat([torch.ones(b, 1, dtype=torch.bool), real], 1)
    a = torch.zeros(b, n + 1, n + 1)
    a[:, 1:, 1:] = adj
    a[:, 0, 1:] = real[:, 1:].float()
    a[:, 1:, 0] = real[:, 1:].float()
    return feats, a, real


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder of TU sets (NAME/NAME_A.txt, …)")
    ap.add_argument("--name", default="NCI1")
    ap.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    ap.add_argument("--pe", default="per-batch", choices=["per-batch", "precomputed"])
    ap.add_argument("--closed-form", action="store_true")
    ap.add_argument("--train-graphs", type=int, default=0, help="graphs per epoch (0: all)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    p = PRESETS[args.preset]
    k = 15

    t = time.perf_counter()
    ds, root = load(args.data, args.name)
    load_s = time.perf_counter() - t
    try:
        idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(args.seed))
        if args.train_graphs:
            idx = idx[: args.train_graphs]
        train = [ds[int(i)] for i in idx]
        xs = torch.cat([d.x for d in train])
        mean, std = xs.mean(0), xs.std(0).clamp_min(1e-6)
        classes = int(ds.y.max()) + 1
        pre_s = 0.0
        if args.pe == "precomputed":
            # Once per graph, as basin does: the CLS row as a graph attribute, node rows as
            # node attributes, so that PyG batches them with the graph.
            t = time.perf_counter()
            for d in train:
                n = d.num_nodes
                a = torch.zeros(1, n + 1, n + 1)
                a[:, 1:, 1:] = to_dense_adj(d.edge_index, max_num_nodes=n)
                v = cls_laplacian_pe(a, torch.ones(1, n + 1, dtype=torch.bool), k)[0]
                d.pe_cls, d.pe_nodes = v[:1], v[1:]
            pre_s = time.perf_counter() - t
        model = EtGraph(ds.num_features, classes, k, p)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        loader = DataLoader(train, batch_size=args.batch, shuffle=True)
        ph = dict(data=0.0, pe=0.0, forward=0.0, backward=0.0, optimiser=0.0)
        model.train()
        t_epoch = time.perf_counter()
        it = iter(loader)
        losses = []
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            feats, adj, real = densify(batch, mean, std)
            t1 = time.perf_counter()
            if args.pe == "per-batch":
                pe = cls_laplacian_pe(adj, real, k)
            else:
                nodes, _ = to_dense_batch(batch.pe_nodes, batch.batch)
                pe = torch.cat([batch.pe_cls.unsqueeze(1), nodes], 1)[:, : feats.shape[1]]
            t2 = time.perf_counter()
            logits = model(feats, pe, adj, real, args.closed_form)
            loss = F.cross_entropy(logits, batch.y, label_smoothing=0.05)
            t3 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            t4 = time.perf_counter()
            opt.step()
            t5 = time.perf_counter()
            losses.append(loss.item())
            for key, dt in zip(["data", "pe", "forward", "backward", "optimiser"], [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4]):
                ph[key] += dt
        epoch_s = time.perf_counter() - t_epoch
        print(json.dumps({
            "side": "pytorch+pyg", "torch": torch.__version__, "threads": torch.get_num_threads(),
            "dataset": args.name, "preset": args.preset, "pe": args.pe, "closed_form": args.closed_form,
            "train_graphs": len(train), "epoch_seconds": epoch_s, "phases": ph,
            "pe_precompute_seconds": pre_s, "load_seconds": load_s,
            "mean_loss": float(np.mean(losses)),
            "parameters": sum(q.numel() for q in model.parameters()),
        }))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
