"""Energy terms of a block config, by keyword (the fields of their TOML tables).

Each function returns the term's table; fields left out take basin's defaults. Any term a
crate registers can be named directly: ``term("my-kind", weight=0.5, ...)``.
"""


def term(kind, weight=None, **fields):
    """The table of a term of registered kind ``kind`` (see :func:`kinds`)."""
    t = {"kind": kind}
    if weight is not None:
        t["weight"] = weight
    t.update({k: v for k, v in fields.items() if v is not None})
    return t


def Attention(heads, head_dim, beta=None, **fields):
    """ET's energy attention (ET eq. 3): ``-1/β Σ_h Σ_C log Σ_{B≠C} exp(β K_B·Q_C)``."""
    return term("attention", heads=heads, head_dim=head_dim, beta=beta, **fields)


def HopfieldMemory(memories, activation=None, **fields):
    """ET's Hopfield memory energy (ET eq. 5): ``-½ Σ_C Σ_μ r(ξ_μ·g_C)²`` with ReLU ``r``, or softmax memories."""
    return term("hopfield-memory", memories=memories, activation=activation, **fields)


#: The memory energy's name before it was told apart from the Hopfield layers (``basin.Hopfield``).
Hopfield = HopfieldMemory


def VmfAttention(heads, head_dim, beta=None, **fields):
    """CDAT's von Mises–Fisher attention energy (cosine similarities of normalised keys and queries)."""
    return term("vmf-attention", heads=heads, head_dim=head_dim, beta=beta, **fields)


def kinds():
    """Every registered term kind, ``{kind: one line on what it is}``."""
    from . import _native

    return dict(_native.term_kinds())
