"""Dynamics of a block config, by keyword (the fields of their TOML tables)."""


def dynamics(kind, **fields):
    """The table of a dynamics of registered kind ``kind`` (see :func:`kinds`)."""
    d = {"kind": kind}
    d.update({k: v for k, v in fields.items() if v is not None})
    return d


def GradientFlow(alpha=None, **fields):
    """``x ← x − α ∂E/∂g`` (ET eq. 6, discretised)."""
    return dynamics("gradient-flow", alpha=alpha, **fields)


def Langevin(alpha=None, sigma=None, **fields):
    """The gradient flow plus Gaussian noise of scale ``sigma`` (the ET graph code's descent)."""
    return dynamics("langevin", alpha=alpha, sigma=sigma, **fields)


def Controlled(**fields):
    """CDAT's controlled excitation–inhibition dynamics (decay, drive, low-rank coupling)."""
    return dynamics("controlled", **fields)


def kinds():
    """Every registered dynamics kind, ``{kind: one line on what it is}``."""
    from . import _native

    return dict(_native.dynamics_kinds())
