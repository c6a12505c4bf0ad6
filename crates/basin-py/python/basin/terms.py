"""Energy terms: as config tables by keyword (``Attention``, ``HopfieldMemory``,
``VmfAttention``, ``term``: the fields of their TOML tables, basin's defaults for the rest) and
as modules of their own (``EnergyAttention``, ``HopfieldEnergy``, ``VmfEnergyAttention``:
``energy(g)`` and the closed-form ``grad(g)``). Either goes into an ``EnergyBlock``'s ``terms``;
any term a crate registers can be named directly: ``term("my-kind", weight=0.5, ...)``.
"""

import torch

from . import _native, _shared, _toml


def term(kind, weight=None, **fields):
    """The table of a term of registered kind ``kind`` (see :func:`kinds`)."""
    t = {"kind": kind}
    if weight is not None:
        t["weight"] = weight
    t.update({k: v for k, v in fields.items() if v is not None})
    return t


def Attention(heads, head_dim, beta=None, **fields):
    """ET's energy attention (ET eq. 3): ``-1/β Σ_h Σ_C log Σ_{B≠C} exp(β K_B·Q_C)``."""
    return term("attention", heads=heads, head_dim=head_dim, beta=beta, **fields)


def HopfieldMemory(memories, activation=None, **fields):
    """ET's Hopfield memory energy (ET eq. 5): ``-½ Σ_C Σ_μ r(ξ_μ·g_C)²`` with ReLU ``r``, or softmax memories."""
    return term("hopfield-memory", memories=memories, activation=activation, **fields)


#: The memory energy's name before it was told apart from the Hopfield layers (``basin.Hopfield``).
Hopfield = HopfieldMemory


def VmfAttention(heads, head_dim, beta=None, **fields):
    """CDAT's von Mises–Fisher attention energy (cosine similarities of normalised keys and queries)."""
    return term("vmf-attention", heads=heads, head_dim=head_dim, beta=beta, **fields)


def InputField(strength=None, projection=None, **fields):
    """The external field of the block's own input, ``-λ Σ_A <g_A, LN(x₀)_A W>`` (input
    injection): the fixed point remembers where its descent started, so what computed ``x₀``
    learns through an implicit block. ``λ`` learned and positive; ``W`` with ``projection``."""
    return term("input-field", strength=strength, projection=projection, **fields)


def kinds():
    """Every registered term kind, ``{kind: one line on what it is}``."""
    return dict(_native.term_kinds())


class _TermModule(_shared.NativeModule):
    """One of basin's energy terms as a module of its own: ``energy(g) → [B]`` and the closed
    form ``grad(g) → [B, N, D]`` at normalised tokens ``g: [B, N, D]`` (no layer norm first),
    under the structure keywords of :meth:`basin.EnergyBlock.forward`.

    Listed in an :class:`basin.EnergyBlock`'s ``terms``, it is cloned into the block (its
    config and its current parameters), as ``nn.TransformerEncoder`` clones its layer: the
    block's descent then runs it natively, masks and all.
    """

    def __init__(self, dim, table, device="cpu", dtype=torch.float32):
        super().__init__()
        if dtype not in _shared.DTYPES:
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        self.dim, self._table = int(dim), dict(table)
        config = _toml.dumps({"dim": self.dim, "steps": 1, "terms": [self._table]})
        self._native = _native.Block(config, device=str(torch.device(device)),
                                     dtype=_shared.DTYPES[dtype])
        _shared.register(self, [(n, t) for n, t in self._native.named_parameters()
                                if not n.startswith("norm.")])

    def table(self):
        """The term's config table (what ``basin.terms.Attention(…)`` and its kin return)."""
        return dict(self._table)

    def energy(self, g, mask=None, bias=None, edge_index=None, key_padding_mask=None,
               self_attention=None, scale=None, **legacy):
        """The term's energy of each sample ``[B]`` at ``g``."""
        return self._native.energy(g, normalised=True, **_shared.structure(
            mask, bias, edge_index, key_padding_mask, self_attention, scale, legacy))

    def grad(self, g, mask=None, bias=None, edge_index=None, key_padding_mask=None,
             self_attention=None, scale=None, **legacy):
        """``∂E/∂g`` ``[B, N, D]`` in closed form (basin's, as the descent uses it)."""
        return self._native.grad(g, normalised=True, **_shared.structure(
            mask, bias, edge_index, key_padding_mask, self_attention, scale, legacy))

    forward = energy

    def __getstate__(self):
        return _shared.snapshot(self, (self.dim, self._table))

    def __setstate__(self, snap):
        def init(build, device, dtype):
            _TermModule.__init__(self, build[0], build[1], device=device, dtype=dtype)
        _shared.restore(self, snap, init)

    def extra_repr(self):
        """The width and the term's table, for ``repr``."""
        return f"dim={self.dim}, " + ", ".join(f"{k}={v!r}" for k, v in self._table.items())


class EnergyAttention(_TermModule):
    """ET's energy attention (ET eq. 3) as a module: ``EnergyAttention(dim, heads, head_dim)``."""

    def __init__(self, dim, heads, head_dim, beta=None, *, device="cpu", dtype=torch.float32,
                 **fields):
        super().__init__(dim, Attention(heads, head_dim, beta=beta, **fields), device, dtype)


class HopfieldEnergy(_TermModule):
    """ET's Hopfield memory energy (ET eq. 5) as a module: ``HopfieldEnergy(dim, memories)``."""

    def __init__(self, dim, memories, activation=None, *, device="cpu", dtype=torch.float32,
                 **fields):
        super().__init__(dim, HopfieldMemory(memories, activation=activation, **fields), device,
                         dtype)


class VmfEnergyAttention(_TermModule):
    """CDAT's von Mises–Fisher attention energy as a module: ``VmfEnergyAttention(dim, heads,
    head_dim)``."""

    def __init__(self, dim, heads, head_dim, beta=None, *, device="cpu", dtype=torch.float32,
                 **fields):
        super().__init__(dim, VmfAttention(heads, head_dim, beta=beta, **fields), device, dtype)
