"""Registers basin's own tensors on a module under their checkpoint names."""

import torch


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
