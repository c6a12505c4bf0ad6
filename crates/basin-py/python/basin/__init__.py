"""basin: energy-based attractor transformers as PyTorch modules.

The native extension runs on the libtorch of the installed ``torch`` (2.11.0): tensors cross
without copies, and the descent's ops are recorded on PyTorch's autograd tape, so
``loss.backward()`` reaches basin's parameters and the caller's tensors.

- :class:`EnergyBlock`: an energy block (layer norm, energy terms, dynamics) as a module;
  :mod:`basin.terms` and :mod:`basin.dynamics` build its config from keyword arguments.
- :class:`EnergyLayerNorm`: ET's energy layer norm and its Lagrangian.
- :class:`EnergyTransformer`: ET's masked image completion model, images and a patch mask in.
- :class:`EnergyGraphClassifier`: ET's graph classifier, PyG batches in, class logits out.
- :class:`Hopfield`, :class:`HopfieldPooling`, :class:`HopfieldLayer`: modern Hopfield layers.
- :mod:`basin.datasets`: datasets by name or path (PyG ``Data`` where PyG is installed).
- :mod:`basin.models`: the families' models, from run files or presets, for a torch loop.
- :mod:`basin.graph`: Laplacian positional encodings; PyG batches as padded tensors.
- :func:`train`, :func:`reproduce`, :func:`tables`: ``basin train`` and ``basin reproduce``.
- :func:`load_checkpoint`, :func:`save_checkpoint`: basin's safetensors checkpoints.
"""

import torch  # noqa: F401  (loads libtorch before the extension that links it)

from . import _native
from .block import EnergyBlock
from .image import EnergyTransformer
from .graph_classifier import EnergyGraphClassifier
from .norm import EnergyLayerNorm
from .hopfield import Hopfield, HopfieldLayer, HopfieldPooling
from .checkpoint import load_checkpoint, save_checkpoint
from .runs import example, reproduce, tables, train
from . import datasets, dynamics, graph, image, models, terms

__all__ = [
    "EnergyBlock",
    "EnergyGraphClassifier",
    "EnergyLayerNorm",
    "EnergyTransformer",
    "Hopfield",
    "HopfieldLayer",
    "HopfieldPooling",
    "datasets",
    "dynamics",
    "example",
    "graph",
    "image",
    "load_checkpoint",
    "models",
    "reproduce",
    "save_checkpoint",
    "tables",
    "terms",
    "train",
]
__version__ = "0.1.0"
del _native
