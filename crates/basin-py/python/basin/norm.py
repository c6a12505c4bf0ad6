"""ET's energy layer norm as a module of its own."""

import torch

from . import _native, _shared, _toml


class EnergyLayerNorm(_shared.NativeModule):
    """ET's energy layer norm (ET eq. 1), the one every :class:`basin.EnergyBlock` applies
    before its terms: ``g = γ (x − x̄) / sqrt(mean (x − x̄)² + ε) + δ`` per token, with one
    scalar gain ``γ`` (``gamma``) and a bias vector ``δ`` (``delta``)::

        norm = basin.EnergyLayerNorm(32)
        g = norm(x)                                  # x, g: [..., 32]
        lagrangian = norm.lagrangian(x)              # [...]: ∂L/∂x = g (ET eq. 2)

    The scalar gain is what makes ``g`` the gradient of the Lagrangian of eq. 2 and its
    Jacobian symmetric positive semi-definite, the condition under which ET's descent lowers
    the energy. ``per_feature_gain=True`` gives ``nn.LayerNorm``'s gain per feature instead
    (CDAT's anomaly reference code), which has no Lagrangian.
    """

    def __init__(self, dim, eps=1e-5, gamma_init=1.0, per_feature_gain=False, *, device="cpu",
                 dtype=torch.float32):
        super().__init__()
        if dtype not in _shared.DTYPES:
            raise ValueError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
        self.dim = int(dim)
        self._fields = {"eps": float(eps), "gamma_init": float(gamma_init),
                        "per_feature_gain": bool(per_feature_gain)}
        # A block of the smallest term carries the norm; only the norm's tensors are registered.
        config = _toml.dumps({"dim": self.dim, "steps": 1, "norm": self._fields,
                              "terms": [{"kind": "hopfield-memory", "memories": 1}]})
        self._native = _native.Block(config, device=str(torch.device(device)),
                                     dtype=_shared.DTYPES[dtype])
        _shared.register(self, [(n.removeprefix("norm."), t)
                                for n, t in self._native.named_parameters()
                                if n.startswith("norm.")])

    def forward(self, x):
        """``g = LN(x)`` (ET eq. 1), the shape of ``x`` ``[..., D]``."""
        return self._native.layer_norm(x)

    def lagrangian(self, x):
        """The Lagrangian of ET eq. 2 per token, ``[...]``: ``L = D γ sqrt(var + ε) + Σ δ x``,
        whose gradient in ``x`` is :meth:`forward`'s ``g``. A gain per feature has none: an
        error."""
        return self._native.lagrangian(x)

    def __getstate__(self):
        return _shared.snapshot(self, (self.dim, self._fields))

    def __setstate__(self, snap):
        def init(build, device, dtype):
            EnergyLayerNorm.__init__(self, build[0], **build[1], device=device, dtype=dtype)
        _shared.restore(self, snap, init)

    def extra_repr(self):
        """The width and the norm's fields, for ``repr``."""
        return f"{self.dim}, " + ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
