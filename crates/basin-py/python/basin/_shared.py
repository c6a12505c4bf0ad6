"""What the package's modules share: registering basin's own tensors under their checkpoint
names, the dtypes basin runs in, reading a config given as text or as a path, and what makes a
module backed by basin behave as any other ``nn.Module`` (``.to()``, pickling, masks)."""

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
    sub-modules named by the dots, so that ``state_dict()`` keys are basin's names. A call
    with any of them swapped for another tensor is refused (see :func:`_refuse_swapped`)."""
    slots = []
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
        slots.append((name, owner, leaf, tensor))
    module._native_slots = slots
    if _refuse_swapped not in module._forward_pre_hooks.values():
        module.register_forward_pre_hook(_refuse_swapped)


def _refuse_swapped(module, args):
    """A forward pre-hook: refuses a call in which one of basin's tensors is no longer the
    registered one (``torch.func.functional_call``, a parametrization or ``assign=True`` swapped
    it), since the native side would go on reading its own, silently."""
    for name, owner, leaf, tensor in module._native_slots:
        current = owner._parameters.get(leaf, owner._buffers.get(leaf))
        if current is not tensor:
            raise RuntimeError(
                f"`{name}` is not the tensor basin's native side reads: "
                "torch.func.functional_call, a parametrization or load_state_dict(assign=True) "
                "swapped it, and basin would compute with its own. Copy values in instead "
                "(load_state_dict, or tensor.copy_ under torch.no_grad())")


def placement(module):
    """``(device, dtype)`` of a module's tensors (cpu, float32 without any)."""
    first = next(iter(module._native.named_parameters()), None)
    if first is None:
        return "cpu", torch.float32
    return str(first[1].device), first[1].dtype


def snapshot(module, build):
    """What pickling a basin-backed module keeps: the arguments that rebuild it (``build``),
    its device, dtype, mode and a copy of its state."""
    device, dtype = placement(module)
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    return {"build": build, "device": device, "dtype": dtype, "training": module.training,
            "state": state}


def restore(module, snap, init):
    """Rebuilds a module from :func:`snapshot` (``init(build, device, dtype)`` calls its
    ``__init__``), then copies the state into basin's tensors."""
    init(snap["build"], snap["device"], snap["dtype"])
    with torch.no_grad():
        module.load_state_dict(snap["state"])
    module.train(snap["training"])


COMPILE_REASON = ("basin's descent runs in its native extension, which torch.compile cannot "
                  "trace: compile without fullgraph=True (the call is a graph break)")
NATIVE_CALLS = ("forward", "energy", "grad", "lagrangian", "loss", "predict")


class NativeModule(torch.nn.Module):
    """A module whose tensors basin's native side holds (``self._native``): ``.to()``,
    ``.double()`` and ``.cuda()`` convert them in place, so the tensors the native side reads
    and the registered ones stay the same objects, and ``load_state_dict`` copies values in.
    Its calls into the native side are excluded from ``torch.compile`` with the reason said
    (``fullgraph=True`` then fails naming it; without it, they are graph breaks)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in NATIVE_CALLS:
            if name in cls.__dict__:
                setattr(cls, name, torch.compiler.disable(cls.__dict__[name],
                                                          reason=COMPILE_REASON))

    def _apply(self, fn, recurse=True):
        first = next(iter(self._native.named_parameters()), None)
        if first is None:
            return self
        probe = fn(torch.zeros((), dtype=first[1].dtype, device=first[1].device))
        if probe.dtype not in DTYPES:
            raise TypeError(f"basin runs in float32 or float64, not {probe.dtype}")
        self._native.set_dtype(DTYPES[probe.dtype])
        self._native.set_device(str(probe.device))
        return self

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """``nn.Module.load_state_dict``, values copied into basin's tensors; ``assign=True``,
        which would swap in tensors basin's native side never sees, is refused."""
        if assign:
            raise ValueError("load_state_dict(assign=True) would replace the tensors basin "
                             "reads with others it never sees; load without assign (values "
                             "are copied in)")
        return super().load_state_dict(state_dict, strict=strict)


def structure(mask, bias, edge_index, key_padding_mask, self_attention, scale, legacy):
    """The structure keywords of a native call (``padding`` from ``key_padding_mask``)."""
    return {"mask": mask, "bias": bias, "edge_index": edge_index,
            "padding": padding_from(key_padding_mask, legacy), "self_attention": self_attention,
            "scale": scale}


def padding_from(key_padding_mask, kwargs):
    """basin's native ``padding`` (True = a real token) from ``key_padding_mask`` (True = ignore
    the key, as ``nn.MultiheadAttention``'s); ``padding=`` itself is refused by name."""
    if "padding" in kwargs:
        raise TypeError("padding= is gone: pass key_padding_mask, True where a token is padding "
                        "(the convention of nn.MultiheadAttention)")
    if kwargs:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(kwargs))}")
    if key_padding_mask is None:
        return None
    return key_padding_mask.logical_not()
