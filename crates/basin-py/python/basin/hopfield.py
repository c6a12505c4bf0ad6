"""The modern Hopfield layers (Ramsauer et al., "Hopfield Networks is All You Need"; the
hopfield-layers package's ``Hopfield``, ``HopfieldPooling`` and ``HopfieldLayer``) as modules.

The update is ``Z = softmax(β R W_Q (Y W_K)ᵀ) Y W_K W_V`` (one step, or iterated up to
``update_steps_max`` times); keyword fields are those of basin's association config
(``heads``, ``hidden_size``, ``beta``, ``input_norms``, ``output_projection``, …).
"""

import torch

from . import _native, _shared, _toml


#: hflayers' argument names that are basin's under another name.
_HFLAYERS_NAMES = {"num_heads": "heads", "scaling": "beta"}

#: hflayers' arguments basin has no counterpart for, with the value that means "as basin does".
_HFLAYERS_DEFAULTS = {
    "dropout": 0.0, "input_bias": True, "concat_bias_pattern": False,
    "add_zero_association": False, "association_activation": None,
    "stored_pattern_as_static": False, "state_pattern_as_static": False,
    "pattern_projection_as_static": False, "pattern_projection_as_connected": False,
    "normalize_hopfield_space": False, "normalize_hopfield_space_affine": False,
    "normalize_pattern_projection_affine": True, "normalize_state_pattern_affine": True,
    "normalize_stored_pattern_affine": True, "trainable": True,
    "lookup_weights_as_separated": False, "lookup_targets_as_trainable": True,
    "stored_pattern_size": None, "pattern_projection_size": None,
}

_NORMS = ("normalize_stored_pattern", "normalize_state_pattern", "normalize_pattern_projection")


def _from_hflayers(state_size, fields):
    """``(state_size, fields)`` with hflayers' spellings (``input_size``, ``num_heads``,
    ``scaling``, ``normalize_*_pattern``, ``disable_out_projection``, ``batch_first``) turned
    into basin's; an hflayers option basin has no counterpart for is refused by name unless it
    has the value that means what basin does."""
    fields = dict(fields)
    if "input_size" in fields:
        if state_size is not None:
            raise TypeError("give state_size or hflayers' input_size, not both")
        state_size = fields.pop("input_size")
    for theirs, ours in _HFLAYERS_NAMES.items():
        if theirs in fields:
            fields[ours] = fields.pop(theirs)
    norms = {fields.pop(n) for n in _NORMS if n in fields}
    if len(norms) > 1:
        raise ValueError("basin normalises the state, stored and projected patterns together: "
                         "give the normalize_*_pattern options one value")
    if norms:
        fields["input_norms"] = norms.pop()
    if "disable_out_projection" in fields:
        fields["output_projection"] = not fields.pop("disable_out_projection")
    for name, neutral in _HFLAYERS_DEFAULTS.items():
        if name in fields:
            value = fields.pop(name)
            if value != neutral:
                raise ValueError(f"{name}={value!r}: basin's Hopfield layers have no such option "
                                 f"(only {neutral!r}, what they do)")
    if state_size is None:
        raise TypeError("missing the pattern width: state_size (hflayers: input_size)")
    return state_size, fields


def _batch_first(tensor, batch_first):
    return tensor if batch_first or tensor is None else tensor.transpose(0, 1)


class _Association(_shared.NativeModule):
    _kind = None

    def __init__(self, state_size=None, stored_size=None, quantity=1, device="cpu",
                 dtype=torch.float32, batch_first=True, **fields):
        super().__init__()
        self._build = (state_size, stored_size, quantity, dict(fields, batch_first=batch_first))
        self.batch_first = batch_first
        state_size, fields = _from_hflayers(state_size, fields)
        if dtype not in _shared.DTYPES:
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        cfg = {"state_size": state_size, "stored_size": stored_size or state_size, **fields}
        self._native = _native.Association(self._kind, _toml.dumps(cfg), quantity,
                                           str(torch.device(device)), _shared.DTYPES[dtype])
        _shared.register(self, self._native.named_parameters())

    def __getstate__(self):
        return _shared.snapshot(self, self._build)

    def __setstate__(self, snap):
        def init(build, device, dtype):
            state, stored, quantity, fields = build
            _Association.__init__(self, state, stored, quantity, device=device, dtype=dtype,
                                  **fields)
        _shared.restore(self, snap, init)


def _mask(key_padding_mask, legacy):
    """The padding mask under basin's name or hflayers' (``stored_pattern_padding_mask``, the
    same convention: ``True`` leaves a stored pattern out); ``association_mask`` refused."""
    theirs = legacy.pop("stored_pattern_padding_mask", None)
    if legacy.pop("association_mask", None) is not None:
        raise ValueError("association_mask: basin's Hopfield layers take a key_padding_mask "
                         "only (a [B, N] mask of stored patterns)")
    if legacy:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(legacy))}")
    if key_padding_mask is not None and theirs is not None:
        raise TypeError("give key_padding_mask or stored_pattern_padding_mask, not both")
    return key_padding_mask if theirs is None else theirs


class Hopfield(_Association):
    """State patterns ``r [B, S, state_size]`` retrieve from stored ``y [B, N, stored_size]``:
    ``forward(r, y, key_padding_mask=None)`` → ``[B, S, out]``; ``key_padding_mask [B, N]``
    is ``True`` for a stored pattern to leave out (``nn.MultiheadAttention``'s convention).

    hflayers' spellings work too, so code written for ``hflayers.Hopfield`` runs unchanged:
    ``Hopfield(input_size=…, num_heads=…, scaling=…, batch_first=…)``, ``forward(x)`` (each
    pattern of ``x`` retrieves from ``x``), ``forward((stored, state, projected))`` (with
    ``projected`` the stored patterns: basin projects its values from them) and
    ``stored_pattern_padding_mask=``."""

    _kind = "hopfield"

    def forward(self, r, y=None, key_padding_mask=None, **hflayers):
        """States ``r`` retrieve from stored ``y`` (``r`` itself when ``y`` is left out, or one
        hflayers tuple ``(stored, state, projected)``): ``[B, S, out]``."""
        mask = _mask(key_padding_mask, hflayers)
        if isinstance(r, (tuple, list)):
            if y is not None or len(r) != 3:
                raise TypeError("hflayers' input is one tuple (stored, state, projected)")
            stored, state, projected = r
            if projected is not stored and not torch.equal(projected, stored):
                raise ValueError("basin's values are projected from the stored patterns: give "
                                 "projected = stored")
            r, y = state, stored
        elif y is None:
            y = r
        first = self.batch_first
        out = self._native.forward(_batch_first(r, first), _batch_first(y, first), mask)
        return _batch_first(out, first)


class HopfieldPooling(_Association):
    """``quantity`` learned queries pool a set ``y [B, N, stored_size]``:
    ``forward(y, key_padding_mask=None)`` → ``[B, quantity · out]`` (the MIL pooling);
    ``key_padding_mask [B, N]`` is ``True`` for an instance to leave out. hflayers'
    spellings (``input_size``, ``num_heads``, ``stored_pattern_padding_mask``, …) work too."""

    _kind = "pooling"

    def forward(self, y, key_padding_mask=None, **hflayers):
        """The set ``y [B, N, stored_size]`` pooled by the learned queries: ``[B, quantity·out]``."""
        mask = _mask(key_padding_mask, hflayers)
        return self._native.forward(_batch_first(y, self.batch_first), None, mask)


class HopfieldLayer(_Association):
    """``quantity`` learned stored patterns answer states ``r [B, S, state_size]``:
    ``forward(r)`` → ``[B, S, out]``. hflayers' spellings (``input_size``, ``num_heads``,
    ``batch_first``, …) work too."""

    _kind = "layer"

    def forward(self, r, **hflayers):
        """States ``r [B, S, state_size]`` answered by the learned stored patterns:
        ``[B, S, out]``."""
        if _mask(None, hflayers) is not None:
            raise ValueError("a HopfieldLayer's stored patterns are its own: there is nothing "
                             "to pad")
        return _batch_first(self._native.forward(_batch_first(r, self.batch_first)),
                            self.batch_first)
