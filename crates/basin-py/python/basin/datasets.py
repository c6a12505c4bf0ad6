"""Datasets by name (``"MUTAG"``, ``"tolokers"``, ``"pattern"``) or path, read by basin's loaders.

Graphs come as PyG ``Data`` objects where ``torch_geometric`` is installed, as dicts of NumPy
arrays otherwise (``x``, ``edge_index``, ``edge_attr``, ``y``).
"""

import os

from . import _native


class Dataset(list):
    """The graphs of a dataset (a list), with ``name``, ``level``, ``task`` and ``num_classes``."""

    def __init__(self, info, items):
        super().__init__(items)
        self.name = info["name"]
        self.level = info["level"]
        self.task = info["task"]
        self.num_classes = info["num_classes"]

    def __repr__(self):
        return f"Dataset({self.name!r}, {len(self)} graphs, task={self.task!r})"


def load(name, data_dir=None, format="auto"):
    """Loads a dataset. ``data_dir`` defaults to ``BASIN_DATA_DIR``, else basin's cache;
    ``format`` is ``"pyg"``, ``"numpy"``, ``"torch"`` or ``"auto"`` (PyG if installed)."""
    info, items = _native.load_dataset(name, None if data_dir is None else os.fspath(data_dir))
    if format == "auto":
        try:
            import torch_geometric  # noqa: F401

            format = "pyg"
        except ImportError:
            format = "numpy"
    if format == "pyg":
        from torch_geometric.data import Data

        items = [Data(**item) for item in items]
    elif format == "numpy":
        items = [{k: v.numpy() for k, v in item.items()} for item in items]
    elif format != "torch":
        raise ValueError(f"format: expected 'pyg', 'numpy', 'torch' or 'auto', got {format!r}")
    return Dataset(info, items)
