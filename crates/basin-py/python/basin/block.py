"""``EnergyBlock``: basin's energy block as a ``torch.nn.Module``.

The block's parameters are the very tensors basin's descent reads, registered as
``nn.Parameter``s under their checkpoint names (``attention.wq``, ``norm.gamma``, …), so any
torch optimiser steps them and ``state_dict()`` matches basin's safetensors checkpoints.
"""

import torch

from . import _native, _shared, _toml
from . import dynamics as _dynamics
from . import terms as _terms


def _split_terms(table):
    """``(table, modules, clones)``: the table with basin's own terms only (config tables, and
    those of ``basin.terms``' modules, ``clones``, whose parameters the block copies), and the
    terms written in Python (``nn.Module``s with ``energy(g)``) that its ``terms`` list held."""
    terms = table.get("terms")
    if terms is None:
        return table, [], []
    native, python, clones = [], [], []
    for i, t in enumerate(terms):
        if isinstance(t, dict):
            native.append(t)
        elif isinstance(t, _terms._TermModule):
            native.append(t.table())
            clones.append(t)
        elif isinstance(t, torch.nn.Module) and callable(getattr(t, "energy", None)):
            python.append(t)
        else:
            raise TypeError(f"terms[{i}]: expected a term of basin.terms or an nn.Module with "
                            f"energy(g), got {type(t).__name__}")
    return {**table, "terms": native}, python, clones


def _term_names(modules):
    """Each Python term's name: its ``name`` attribute or its class's, numbered when repeated."""
    names = [getattr(m, "name", None) or type(m).__name__ for m in modules]
    return [f"{n}-{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _config_text(config, fields):
    """``(TOML text, Python terms, cloned term modules)`` of a block given as a config or as
    keyword fields."""
    if config is not None and fields:
        raise TypeError("give a config or keyword fields, not both")
    if config is None or isinstance(config, dict):
        table, python, clones = _split_terms(fields if config is None else config)
        return _toml.dumps(table), python, clones
    return _shared.text_or_file(config)[1], [], []


class EnergyBlock(_shared.NativeModule):
    """An energy block: energy layer norm (ET eq. 1), a weighted sum of energy terms and the
    dynamics that descends it for ``steps`` steps.

    Build it from the TOML of a block config (a run file's ``[architecture.block]``), a path
    to one, a dict, or keyword fields::

        block = basin.EnergyBlock(dim=32, steps=4,
                                  terms=[basin.terms.Attention(heads=4, head_dim=8),
                                         basin.terms.HopfieldMemory(memories=64)],
                                  dynamics=basin.dynamics.GradientFlow(alpha=0.1))
        tokens = block(x)                                    # x, tokens: [B, N, D]
        tokens, energy = block(x, return_energy=True)        # energy: [T + 1, B]

    A term may also be written in Python: any ``nn.Module`` with ``energy(g) → [B]`` of the
    normalised tokens ``g: [B, N, D]`` (and, optionally, a closed-form ``grad(g) → [B, N, D]``;
    without it, autograd's), listed in ``terms`` beside basin's own; its parameters train with
    the block's::

        class Quadratic(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.w = torch.nn.Parameter(torch.eye(dim))
            def energy(self, g):
                return 0.5 * torch.einsum("bnd,de,bne->b", g, self.w, g)

        block = basin.EnergyBlock(dim=32, steps=4, terms=[basin.terms.Attention(4, 8), Quadratic(32)])

    Parameters are initialised by basin (seeded by ``torch.manual_seed``). It behaves as any
    module: ``.to()``, ``state_dict()``, ``pickle``, ``copy.deepcopy`` and ``torch.save`` (its
    config and state, rebuilt on load), ``train()``/``eval()``, a place in ``nn.Sequential``.
    """

    def __init__(self, config=None, *, device="cpu", dtype=torch.float32, **fields):
        super().__init__()
        text, python, clones = _config_text(config, fields)
        self._build(text, python, device, dtype)
        with torch.no_grad():  # basin's term modules: their parameters, copied in
            state = self.state_dict()
            for term in clones:
                for name, value in term.state_dict().items():
                    state[name].copy_(value)

    def _build(self, text, python_terms, device, dtype):
        if dtype not in _shared.DTYPES:
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        self._native = _native.Block(
            text, device=str(torch.device(device)), dtype=_shared.DTYPES[dtype],
            python_terms=list(zip(_term_names(python_terms), python_terms)))
        self._attaching = []  # non-empty while `attach` solves the adjoints itself
        _shared.register(self, self._native.named_parameters())
        if python_terms:  # on the block's device, in its dtype
            self.python_terms = torch.nn.ModuleList(python_terms).to(device, dtype)

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

    def forward(self, x, mask=None, bias=None, edge_index=None, key_padding_mask=None,
                self_attention=None, scale=None, return_energy=False, return_states=False,
                return_term_grads=False, **legacy):
        """The descent from ``x: [B, N, D]``: the settled tokens ``[B, N, D]``.

        ``mask`` ``[B, N, N]`` bool (query, key) pairs allowed, ``bias`` ``[B, H, N, N]``
        added to the logits, or ``edge_index`` ``[2, E]`` over the flattened ``B·N`` tokens
        (PyG's source → target); ``key_padding_mask`` ``[B, N]`` bool, ``True`` where a token
        is padding (``nn.MultiheadAttention``'s convention); ``scale`` ``[B, H, N, N]``
        multiplies each head's scores before β (ET eq. 24's parameterised adjacency; dense
        structures only). Differentiable through every step;
        in ``train()`` mode the dynamics' noise and dropout are on.

        Asked for, more comes back, in this order: ``return_energy=True`` the total energy per
        step ``[T + 1, B]`` (computed only then); ``return_states=True`` the trajectory
        ``x_0 … x_T`` ``[T + 1, B, N, D]`` (its last entry is the tokens);
        ``return_term_grads=True`` a dict of each term's ``∂E_i/∂g`` per step ``[T, B, N, D]``.
        The last three are detached.
        """
        tokens, energy, states, grads = self._native.forward(
            x, **_shared.structure(mask, bias, edge_index, key_padding_mask, self_attention,
                                   scale, legacy), train=self.training, trace=return_energy,
            states=return_states, term_grads=return_term_grads)
        if tokens.is_leaf and tokens.requires_grad:
            # A settling (implicit) training forward: its gradient is the adjoint's, solved
            # when PyTorch's backward reaches these tokens, so `loss.backward()` alone trains.
            # The hook holds a detached alias (basin finds the forward by its storage), not
            # the tokens themselves: a hook that held its own tensor would be a reference cycle,
            # each step's graph kept until Python's cycle collector ran.
            native, attaching, alias = self._native, self._attaching, tokens.detach()

            def owed(grad):
                # Inside `attach` the adjoint is being solved already (and basin holds the
                # block): nothing is owed here then.
                if not attaching:
                    native.backward_settled(alias, grad)
                return grad

            tokens.register_hook(owed)
        out = (tokens,)
        if return_energy:
            out += (energy,)
        if return_states:
            out += (states,)
        if return_term_grads:
            out += (dict(grads),)
        return out[0] if len(out) == 1 else out

    def energy(self, x, mask=None, bias=None, edge_index=None, key_padding_mask=None,
               self_attention=None, scale=None, **legacy):
        """The energy of each sample ``[B]`` at ``x`` (after the block's layer norm); the
        structure as in :meth:`forward`."""
        return self._native.energy(x, **_shared.structure(
            mask, bias, edge_index, key_padding_mask, self_attention, scale, legacy))

    def grad(self, x, mask=None, bias=None, edge_index=None, key_padding_mask=None,
             self_attention=None, scale=None, **legacy):
        """The closed-form ``∂E/∂g`` at ``g = LN(x)``, ``[B, N, D]``; the structure as in
        :meth:`forward`."""
        return self._native.grad(x, **_shared.structure(
            mask, bias, edge_index, key_padding_mask, self_attention, scale, legacy))

    def attach(self, loss):
        """Kept for code written before ``loss.backward()`` alone trained an implicit block:
        ``loss`` with the implicit gradient of this block's pending forwards added (the adjoint
        of ``(I − ∂f/∂x)ᵀ v = ∂L/∂x*`` solved here, and those forwards no longer owed to the
        backward). Not needed: a settling training forward's tokens carry a hook that solves
        the adjoint when ``backward`` reaches them."""
        self._attaching.append(True)
        try:
            return self._native.attach(loss)
        finally:
            self._attaching.pop()

    def take_corrections(self):
        """Fixed-point correction (``gradient = {…, correction_states = k}``): the states the
        training forwards since the last call sampled along their settle, each through the
        phantom steps, as ``[(weight, tokens)]``; add ``weight · loss(tokens)`` to the loss of
        the block's output, as basin's image completion does."""
        return self._native.take_corrections()

    def settle_stats(self):
        """Settling and adjoint statistics since the last call (``settle_steps``,
        ``settle_residual``, ``adjoint_iterations``, …)."""
        return self._native.settle_stats()

    def _apply(self, fn, recurse=True):
        # Terms written in Python convert as any module, then basin's tensors in place.
        if "python_terms" in self._modules:
            self.python_terms._apply(fn, recurse)
        return super()._apply(fn, recurse)

    def __getstate__(self):
        python = list(self.python_terms) if "python_terms" in self._modules else []
        return _shared.snapshot(self, (self.config(), python))

    def __setstate__(self, snap):
        def init(build, device, dtype):
            torch.nn.Module.__init__(self)
            self._build(build[0], list(build[1]) if isinstance(build[1], list) else [], device,
                        dtype)
        _shared.restore(self, snap, init)

    def extra_repr(self):
        """``dim`` and ``steps``, for ``repr``."""
        native = self.__dict__.get("_native")
        return "" if native is None else f"dim={native.dim}, steps={native.steps}"


def et_block(block, dim, heads, head_dim, memories, steps, alpha, beta=None):
    """``block`` as an :class:`EnergyBlock` (a config given as a dict, TOML text or a path is
    built); without one, ET's block: energy attention (ET eq. 3) and the Hopfield memory
    (eq. 5) under gradient flow (eq. 6), of the sizes given."""
    if block is None:
        return EnergyBlock(dim=dim, steps=steps,
                           terms=[_terms.Attention(heads=heads, head_dim=head_dim, beta=beta),
                                  _terms.HopfieldMemory(memories=memories)],
                           dynamics=_dynamics.GradientFlow(alpha=alpha))
    return block if isinstance(block, EnergyBlock) else EnergyBlock(block)
