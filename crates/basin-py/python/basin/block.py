"""``EnergyBlock``: basin's energy block as a ``torch.nn.Module``.

The block's parameters are the very tensors basin's descent reads, registered as
``nn.Parameter``s under their checkpoint names (``attention.wq``, ``norm.gamma``, …), so any
torch optimiser steps them and ``state_dict()`` matches basin's safetensors checkpoints.
"""

import torch

from . import _native, _shared, _toml


def _config_text(config, fields):
    if config is None:
        return _toml.dumps(fields)
    if fields:
        raise TypeError("give a config or keyword fields, not both")
    if isinstance(config, dict):
        return _toml.dumps(config)
    return _shared.text_or_file(config)[1]


class EnergyBlock(torch.nn.Module):
    """An energy block: energy layer norm (ET eq. 1), a weighted sum of energy terms and the
    dynamics that descends it for ``steps`` steps.

    Build it from the TOML of a block config (a run file's ``[architecture.block]``), a path
    to one, a dict, or keyword fields::

        block = basin.EnergyBlock(dim=32, steps=4,
                                  terms=[basin.terms.Attention(heads=4, head_dim=8),
                                         basin.terms.HopfieldMemory(memories=64)],
                                  dynamics=basin.dynamics.GradientFlow(alpha=0.1))
        tokens, energy = block(x)           # x: [B, N, D]; energy: [T + 1, B]

    Parameters are initialised by basin (seeded by ``torch.manual_seed``).
    """

    def __init__(self, config=None, *, device="cpu", dtype=torch.float32, **fields):
        super().__init__()
        if dtype not in _shared.DTYPES:
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        self._native = _native.Block(
            _config_text(config, fields), device=str(torch.device(device)), dtype=_shared.DTYPES[dtype]
        )
        _shared.register(self, self._native.named_parameters())

    @property
    def dim(self):
        """The token width D."""
        return self._native.dim

    @property
    def steps(self):
        """The number of descent steps T."""
        return self._native.steps

    def config(self):
        """The block's config as TOML text."""
        return self._native.config_toml()

    def forward(self, x, mask=None, bias=None, edge_index=None, padding=None,
                self_attention=None, trace=True, return_states=False, return_term_grads=False):
        """The descent from ``x: [B, N, D]``: ``(tokens, energy)``, ``energy`` the total
        energy per step ``[T + 1, B]`` (``None`` with ``trace=False``, which skips it).

        ``mask`` ``[B, N, N]`` bool (query, key) pairs allowed, ``bias`` ``[B, H, N, N]``
        added to the logits, or ``edge_index`` ``[2, E]`` over the flattened ``B·N`` tokens
        (PyG's source → target); ``padding`` ``[B, N]`` bool, ``True`` for real tokens.
        Differentiable through every step; in ``train()`` mode the dynamics' noise and
        dropout are on.

        ``return_states=True`` appends the trajectory ``x_0 … x_T`` as one tensor
        ``[T + 1, B, N, D]`` (its last entry is ``tokens``); ``return_term_grads=True`` appends a
        dict of each term's ``∂E_i/∂g`` per step ``[T, B, N, D]``. Both are detached and off by
        default (they cost memory).
        """
        tokens, energy, states, grads = self._native.forward(
            x, mask=mask, bias=bias, edge_index=edge_index, padding=padding,
            self_attention=self_attention, train=self.training, trace=trace,
            states=return_states, term_grads=return_term_grads)
        out = (tokens, energy)
        if return_states:
            out += (states,)
        if return_term_grads:
            out += (dict(grads),)
        return out

    def energy(self, x, **structure):
        """The energy of each sample ``[B]`` at ``x`` (after the block's layer norm)."""
        return self._native.energy(x, **structure)

    def grad(self, x, **structure):
        """The closed-form ``∂E/∂g`` at ``g = LN(x)``, ``[B, N, D]``."""
        return self._native.grad(x, **structure)

    def attach(self, loss):
        """``loss`` with the implicit gradient of this block's forwards since the last call
        added (``gradient = "implicit"`` or ``"phantom"``: the forward settles without a
        graph, and the adjoint of ``(I − ∂f/∂x)ᵀ v = ∂L/∂x*`` is solved here); backward the
        result. Only forwards in ``train()`` mode with grad enabled are pending (evaluation
        settles and returns plain values); an unrolled block returns ``loss`` unchanged."""
        return self._native.attach(loss)

    def settle_stats(self):
        """Settling and adjoint statistics since the last call (``settle_steps``,
        ``settle_residual``, ``adjoint_iterations``, …)."""
        return self._native.settle_stats()

    def _apply(self, fn, recurse=True):
        # .to(), .double(), .cuda(), …: converted by basin in place, so that the tensors the
        # descent reads and the registered ones stay the same objects.
        first = next(iter(self._native.named_parameters()), None)
        if first is None:
            return self
        probe = fn(torch.zeros((), dtype=first[1].dtype, device=first[1].device))
        if probe.dtype not in _shared.DTYPES:
            raise TypeError(f"basin blocks run in float32 or float64, not {probe.dtype}")
        self._native.set_dtype(_shared.DTYPES[probe.dtype])
        self._native.set_device(str(probe.device))
        return self

    def extra_repr(self):
        native = self.__dict__.get("_native")
        return "" if native is None else f"dim={native.dim}, steps={native.steps}"
