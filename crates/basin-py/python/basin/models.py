"""The models of the four families as modules, built from run files: any run file's planned
run (``Model``), or a family's preset by name (``et_graph``, ``cdat_graph``, ``et_anomaly``,
``cdat_anomaly``, ``sfi_gps``, ``et_image``).

A model holds its data and split; a training loop asks it for each epoch's batches (shuffled
and seeded as ``basin train`` does), the loss of a batch, and scores::

    model = basin.models.et_graph("MUTAG", overrides={"protocol.folds.folds": 2})
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(10):
        for items in model.epoch(epoch):
            opt.zero_grad()
            model.loss(items).backward()
            opt.step()
    probs = model.predict(model.split["test"])
"""

import os

import torch

from . import _native, _shared
from .runs import _set, example


class Model(_shared.NativeModule):
    """Run ``run`` of a run file (its text, or a path to it) with ``overrides`` applied, built
    and untrained: the same data, split, seed and initial weights as ``basin train``'s run.

    ``pickle``, ``copy.deepcopy`` and ``torch.save`` keep the run file, the overrides and the
    weights, and rebuild the model (its data read again) on load; the epoch's generator starts
    again at ``epoch(e)``. ``.to(device)`` rebuilds it there (weights kept; build the optimizer
    after moving); its dtype is its task's (float32), and another is refused."""

    def __init__(self, run_file, run=0, overrides=None, data_dir=None, device="cpu"):
        super().__init__()
        label, text = _shared.text_or_file(run_file)
        label = label or "<run file>"
        data_dir = None if data_dir is None else os.fspath(data_dir)
        self._build_args = (text, label, run, dict(overrides or {}), data_dir)
        sets = [_set(k, v) for k, v in (overrides or {}).items()]
        self._native = _native.Model(text, label, run, sets, data_dir, str(torch.device(device)))
        _shared.register(self, self._native.named_parameters())
        train, val, test = self._native.split()
        self.split = {"train": train, "val": val, "test": test}
        self.run_dir, self.seed, self.runs = self._native.run_info()

    def epoch(self, epoch):
        """Starts epoch ``epoch`` (reseeds basin's generators as the runner does) and returns
        its batches: lists of training items, in order."""
        return self._native.epoch(epoch)

    def loss(self, items):
        """The training-mode loss of a batch of items (the task's loss), with its graph."""
        return self._native.loss(list(items))

    forward = loss

    def after_backward(self):
        """Finishes what ``backward`` does not reach (blocks with recomputed activations)."""
        self._native.after_backward()

    def predict(self, items):
        """Evaluation-mode scores ``[len(items), C]`` float64 (class probabilities, …)."""
        return self._native.predict(list(items))

    def _apply(self, fn, recurse=True):
        # A move rebuilds the model on the new device (its data read again, the weights
        # copied): build an optimizer after moving, as PyTorch advises for ``.cuda()``.
        device, dtype = _shared.placement(self)
        probe = fn(torch.zeros((), dtype=dtype, device=device))
        if probe.dtype != dtype:
            raise TypeError(f"a run's model trains in {dtype} (its task builds data and weights "
                            f"so); .to({probe.dtype}) is refused. basin.EnergyBlock and the "
                            "other modules convert")
        if probe.device != torch.device(device):
            snap = _shared.snapshot(self, self._build_args)
            snap["device"] = str(probe.device)
            self.__setstate__(snap)
        return self

    def __getstate__(self):
        return _shared.snapshot(self, self._build_args)

    def __setstate__(self, snap):
        def init(build, device, dtype):
            text, label, run, overrides, data_dir = build
            Model.__init__(self, text, run, overrides, data_dir, device)
            self._build_args = build
        _shared.restore(self, snap, init)


def _preset(name, data, overrides, **kw):
    sets = dict(overrides or {})
    if data is not None:
        sets["data"] = data
    return Model(example(name), overrides=sets, **kw)


def et_graph(data="MUTAG", overrides=None, **kw):
    """ET's graph classifier (ET Section 5) at CPU scale: CLS token, Laplacian encodings,
    parameterised adjacency, two ET blocks; 10-fold CV."""
    return _preset("et-graph", data, overrides, **kw)


def cdat_graph(data="MUTAG", overrides=None, **kw):
    """CDAT's graph classifier: vMF attention and controlled dynamics."""
    return _preset("cdat-graph", data, overrides, **kw)


def et_anomaly(data="tolokers", overrides=None, **kw):
    """ET's node anomaly detector (ET Section 4): neighbour-restricted attention."""
    return _preset("et-anomaly", data, overrides, **kw)


def cdat_anomaly(data="tolokers", overrides=None, **kw):
    """CDAT's node anomaly detector (CDAT Table 8's row)."""
    return _preset("cdat-anomaly", data, overrides, **kw)


def sfi_gps(data="pattern", overrides=None, **kw):
    """SFi-Former: sparse-flow-induced attention in a GraphGPS model (generated PATTERN)."""
    return _preset("sfi-pattern", data, overrides, **kw)


def et_image(data=None, overrides=None, **kw):
    """ET's masked image completion (ET Section 3) on Fashion-MNIST by default."""
    return _preset("et-image", data, overrides, **kw)


def hopfield_pooling(stored_size, quantity=1, **fields):
    """A ``HopfieldPooling`` layer (the Hopfield MIL model's pooling of a bag of instances)."""
    from .hopfield import HopfieldPooling

    return HopfieldPooling(fields.pop("state_size", stored_size), stored_size, quantity, **fields)
