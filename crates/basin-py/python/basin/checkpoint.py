"""basin's safetensors checkpoints as state dicts (what ``basin train`` writes and reads).

A run's ``checkpoint.safetensors`` holds three parts under prefixes: ``best.`` (the weights
of the selected epoch, what ``basin eval`` scores), ``model.`` (the last epoch's, to resume)
and ``adamw.`` (the optimiser's moments).
"""

import os

from . import _native


def load_checkpoint(path, part="auto"):
    """``(state_dict, metadata)``: name → CPU tensor in file order. ``part`` picks one part of
    a run's checkpoint with its prefix removed (``"best"``, ``"model"``, ``"adamw"``);
    ``"auto"`` takes ``best`` where there is one, else ``model``, else every tensor as named;
    ``None`` every tensor as named."""
    tensors, meta = _native.read_checkpoint(os.fspath(path))
    state = dict(tensors)
    if part == "auto":
        part = next((p for p in ("best", "model") if any(k.startswith(p + ".") for k in state)), None)
    if part is not None:
        prefix = part + "."
        picked = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        if not picked:
            raise ValueError(f"{os.fspath(path)}: no tensor under `{prefix}`")
        state = picked
    return state, meta


def save_checkpoint(path, state_dict, metadata=None, part=None):
    """Writes a state dict as a safetensors checkpoint, atomically (a crash leaves the old
    file); with ``part`` (``"best"``, say) its names go under that prefix, as in a run's."""
    prefix = "" if part is None else part + "."
    items = [(prefix + k, v) for k, v in state_dict.items()]
    _native.write_checkpoint(os.fspath(path), items, metadata)
