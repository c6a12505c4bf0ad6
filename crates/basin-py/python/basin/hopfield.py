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
        self._build = (state_size, stored_size, quantity, dict(fields))
        cfg = {"state_size": state_size, "stored_size": stored_size or state_size, **fields}
        self._native = _native.Association(self._kind, _toml.dumps(cfg), quantity,
                                           str(torch.device(device)), _shared.DTYPES[dtype])
        _shared.register(self, self._native.named_parameters())

    def _apply(self, fn, recurse=True):
        # .to(), .double(), .cuda(), …: converted by basin in place.
        return _shared.apply_natively(self, fn)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        _shared.refuse_assign(assign)
        return super().load_state_dict(state_dict, strict=strict)

    def __getstate__(self):
        return _shared.snapshot(self, self._build)

    def __setstate__(self, snap):
        def init(build, device, dtype):
            state, stored, quantity, fields = build
            _Association.__init__(self, state, stored, quantity, device=device, dtype=dtype,
                                  **fields)
        _shared.restore(self, snap, init)


class Hopfield(_Association):
    """State patterns ``r [B, S, state_size]`` retrieve from stored ``y [B, N, stored_size]``:
    ``forward(r, y, key_padding_mask=None)`` → ``[B, S, out]``; ``key_padding_mask [B, N]``
    is ``True`` for a stored pattern to leave out (``nn.MultiheadAttention``'s convention)."""

    _kind = "hopfield"

    def forward(self, r, y, key_padding_mask=None):
        return self._native.forward(r, y, key_padding_mask)


class HopfieldPooling(_Association):
    """``quantity`` learned queries pool a set ``y [B, N, stored_size]``:
    ``forward(y, key_padding_mask=None)`` → ``[B, quantity · out]`` (the MIL pooling);
    ``key_padding_mask [B, N]`` is ``True`` for an instance to leave out."""

    _kind = "pooling"

    def forward(self, y, key_padding_mask=None):
        return self._native.forward(y, None, key_padding_mask)


class HopfieldLayer(_Association):
    """``quantity`` learned stored patterns answer states ``r [B, S, state_size]``:
    ``forward(r)`` → ``[B, S, out]``."""

    _kind = "layer"

    def forward(self, r):
        return self._native.forward(r)
