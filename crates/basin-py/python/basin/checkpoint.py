"""basin's safetensors checkpoints as state dicts (what ``basin train`` writes and reads)."""

import os

from . import _native


def load_checkpoint(path):
    """``(state_dict, metadata)`` of a safetensors checkpoint: name → CPU tensor, in file order."""
    tensors, meta = _native.read_checkpoint(os.fspath(path))
    return dict(tensors), meta


def save_checkpoint(path, state_dict, metadata=None):
    """Writes a state dict as a safetensors checkpoint, atomically (a crash leaves the old file)."""
    _native.write_checkpoint(os.fspath(path), list(state_dict.items()), metadata)
