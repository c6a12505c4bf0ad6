"""What the package's modules share: registering basin's own tensors under their checkpoint
names, the dtypes basin runs in, and reading a config given as text or as a path."""

import os

import torch

DTYPES = {torch.float32: "float32", torch.float64: "float64"}


def text_or_file(value):
    """``(label, text)`` of a config or run file given as TOML text or as a path (a path-like,
    or a one-line string)."""
    if isinstance(value, os.PathLike) or (isinstance(value, str) and "\n" not in value):
        with open(value, encoding="utf-8") as f:
            return os.fspath(value), f.read()
    if isinstance(value, str):
        return None, value
    raise TypeError(f"expected TOML text or a path, got {type(value).__name__}")


def register(module, named):
    """Registers each ``(dotted name, tensor)`` of ``named`` on ``module``: trained ones as
    ``nn.Parameter`` (the same tensor made a Parameter in place: ``nn.Parameter(t)`` would be a
    detached alias whose ``.grad`` basin's ops never fill), fixed ones as buffers, under
    sub-modules named by the dots, so that ``state_dict()`` keys are basin's names."""
    for name, tensor in named:
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, torch.nn.Module())
            owner = owner._modules[part]
        if tensor.requires_grad:
            tensor.__class__ = torch.nn.Parameter
            owner.register_parameter(leaf, tensor)
        else:
            owner.register_buffer(leaf, tensor)
