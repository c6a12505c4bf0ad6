"""The modern Hopfield layers (Ramsauer et al., "Hopfield Networks is All You Need"; the
hopfield-layers package's ``Hopfield``, ``HopfieldPooling`` and ``HopfieldLayer``) as modules.

The update is ``Z = softmax(β R W_Q (Y W_K)ᵀ) Y W_K W_V`` (one step, or iterated up to
``update_steps_max`` times); keyword fields are those of basin's association config
(``heads``, ``hidden_size``, ``beta``, ``input_norms``, ``output_projection``, …).
"""

import torch

from . import _native, _shared, _toml


class _Association(torch.nn.Module):
    _kind = None

    def __init__(self, state_size, stored_size=None, quantity=1, device="cpu",
                 dtype=torch.float32, **fields):
        super().__init__()
        cfg = {"state_size": state_size, "stored_size": stored_size or state_size, **fields}
        self._native = _native.Association(self._kind, _toml.dumps(cfg), quantity,
                                           str(torch.device(device)), _shared.DTYPES[dtype])
        _shared.register(self, self._native.named_parameters())

    def _apply(self, fn, recurse=True):
        raise NotImplementedError("build the layer with device=… and dtype=…")


class Hopfield(_Association):
    """State patterns ``r [B, S, state_size]`` retrieve from stored ``y [B, N, stored_size]``:
    ``forward(r, y, ignore=None)`` → ``[B, S, out]``."""

    _kind = "hopfield"

    def forward(self, r, y, ignore=None):
        return self._native.forward(r, y, ignore)


class HopfieldPooling(_Association):
    """``quantity`` learned queries pool a set ``y [B, N, stored_size]``:
    ``forward(y, ignore=None)`` → ``[B, quantity · out]`` (the MIL pooling)."""

    _kind = "pooling"

    def forward(self, y, ignore=None):
        return self._native.forward(y, None, ignore)


class HopfieldLayer(_Association):
    """``quantity`` learned stored patterns answer states ``r [B, S, state_size]``:
    ``forward(r)`` → ``[B, S, out]``."""

    _kind = "layer"

    def forward(self, r):
        return self._native.forward(r)
