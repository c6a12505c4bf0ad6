"""ET's graph classifier as a module that takes PyG batches."""

import re

import torch

from . import graph as _graph
from .block import EnergyBlock, et_block


class EnergyGraphClassifier(torch.nn.Module):
    """The Energy Transformer for graph classification (ET §5, eq. 23–25), on PyG batches:
    node features encoded linearly, a CLS token in slot 0 joined to every node (eq. 23),
    Laplacian eigenvector encodings of the CLS-augmented graph projected and added, attention
    restricted to the graph's edges (eq. 25) with each head's scores multiplied by the
    parameterised adjacency ``Â = Conv2D(X ⊗ X) ⊙ A′`` (eq. 24), ``blocks`` energy blocks in
    turn, and a linear readout of CLS::

        model = basin.EnergyGraphClassifier(in_features=7, classes=2)
        logits = model(batch)                  # batch: a torch_geometric Batch; logits [B, 2]
        loss = torch.nn.functional.cross_entropy(logits, batch.y)

    Any object with ``x``, ``edge_index`` and ``batch`` (nodes grouped by graph, in order) is
    taken, as :func:`basin.graph.to_dense` reads it. The default sizes are those of basin's
    CPU-scale MUTAG model (``basin.models.et_graph``: D = 32, 4 heads of 8, 128 memories, T = 2,
    two blocks, k = 8 encodings), under gradient flow and a linear CLS readout (the preset adds
    Langevin noise and a pooled MLP readout); ``block`` replaces each block's config (a dict, TOML text, a path
    or an :class:`basin.EnergyBlock`: the first block, the others built from its config). ``sign_flip`` flips each encoding's
    sign at random in training (eigenvectors have no sign). ``conv_kernel`` > 1 reads
    neighbouring node slots, so, as in the paper, the output depends on the order of the nodes;
    ``conv_kernel=1`` makes the model invariant to it.
    """

    def __init__(self, in_features, classes, dim=32, heads=4, head_dim=8, memories=128, steps=2,
                 blocks=2, alpha=0.1, beta=None, pe=8, conv_kernel=3, sign_flip=True,
                 block=None):
        super().__init__()
        if conv_kernel < 1 or conv_kernel % 2 == 0:
            raise ValueError(f"conv_kernel: an odd size ≥ 1 (the map keeps its size), got "
                             f"{conv_kernel}")
        block = et_block(block, dim, heads, head_dim, memories, steps, alpha, beta)
        heads = _heads(block)
        # Each further block built from the same config, with weights of its own.
        self.blocks = torch.nn.ModuleList(
            [block] + [EnergyBlock(block.config()) for _ in range(blocks - 1)])
        d = block.dim
        self.pe, self.sign_flip = int(pe), bool(sign_flip)
        self.encoder = torch.nn.Linear(in_features, d)
        self.cls = torch.nn.Parameter(torch.randn(d) * 0.02)
        self.pe_proj = torch.nn.Linear(self.pe, d) if self.pe else None
        self.conv = torch.nn.Conv2d(1, heads, conv_kernel, padding=conv_kernel // 2, bias=False)
        self.adj_proj = torch.nn.Linear(1, heads)
        torch.nn.init.zeros_(self.adj_proj.bias)
        self.readout = torch.nn.Linear(d, classes)

    def tokens(self, batch):
        """``(x₀ [B, N + 1, D], allowed [B, N + 1, N + 1], real [B, N + 1], adjacency)``: the
        initial tokens (CLS first), the pairs attention may use (edges and CLS, eq. 23, 25),
        which slots hold CLS or a node, and the adjacency ``[B, N + 1, N + 1]`` as floats."""
        nodes, padding, edges = _graph.to_dense(batch)
        b, n = padding.shape
        real = torch.cat([padding.new_ones(b, 1), ~padding], 1)
        x = torch.cat([self.cls.expand(b, 1, -1), self.encoder(nodes)], 1)
        width = max(n, 1)
        graph, source, target = edges[0] // width, edges[0] % width + 1, edges[1] % width + 1
        adjacency = x.new_zeros(b, n + 1, n + 1)
        adjacency[graph, target, source] = 1.0  # a target node attends its sources (PyG's flow)
        adjacency[:, 0, :] = real.to(x.dtype)
        adjacency[:, :, 0] = real.to(x.dtype)
        if self.pe_proj is not None:
            x = x + self.pe_proj(self._encodings(edges, padding, x))
        return x, adjacency.bool() & real.unsqueeze(1) & real.unsqueeze(2), real, adjacency

    def _encodings(self, edges, padding, x):
        """Each graph's ``k`` Laplacian eigenvectors of its CLS-augmented graph ``[B, N + 1, k]``
        (basin.graph.laplacian_pe, one graph at a time), signs flipped at random in training."""
        b, n = padding.shape
        counts = (~padding).sum(1).tolist()
        graph = edges[0] // max(n, 1)
        out = x.new_zeros(b, n + 1, self.pe)
        for g, count in enumerate(counts):
            local = edges[:, graph == g] % max(n, 1)
            pe = _graph.laplacian_pe(local.cpu(), count, self.pe, cls=True)
            out[g, :count + 1] = pe.to(out)
        if self.training and self.sign_flip:
            out = out * (torch.randint(0, 2, (b, 1, self.pe), device=out.device) * 2 - 1)
        return out

    def forward(self, batch, return_energy=False):
        """Class logits ``[B, C]``; ``return_energy=True`` adds each block's energy per descent
        step, a list of ``[T + 1, B]``."""
        x, allowed, real, adjacency = self.tokens(batch)
        # Â (eq. 24) from the initial tokens, padding zeroed so that a graph's value does not
        # depend on the batch around it.
        xr = x * real.unsqueeze(-1).to(x.dtype)
        scale = self.conv((xr @ xr.transpose(1, 2)).unsqueeze(1))
        scale = scale * self.adj_proj(adjacency.unsqueeze(-1)).permute(0, 3, 1, 2)
        energies = []
        for block in self.blocks:
            out = block(x, mask=allowed, scale=scale, key_padding_mask=~real,
                        return_energy=return_energy)
            x, energy = out if return_energy else (out, None)
            energies.append(energy)
        logits = self.readout(x[:, 0])
        return (logits, energies) if return_energy else logits


def _heads(block):
    """The attention heads of ``block``'s config (the channels of Â)."""
    found = re.search(r"^heads = (\d+)$", block.config(), re.MULTILINE)
    if found:
        return int(found.group(1))
    raise ValueError("block: the graph classifier needs an attention term (Â has one channel "
                     "per head)")
