"""``basin train`` and ``basin reproduce`` as calls."""

import json
import os

from . import _native


def _set(key, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, str):
        value = json.dumps(value)
    elif isinstance(value, (list, tuple)):
        value = "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return f"{key}={value}"


def train(run_file, out, overrides=None, data_dir=None, device="cpu", progress=False):
    """Trains a run file into ``out`` as ``basin train RUN --out OUT --set K=V …`` does, and
    returns its outcome: ``{"task", "spec", "runs": [[dir, {metric: value}], …], "energy"}``.
    ``overrides`` maps dotted keys to values (``{"protocol.train.epochs": 2}``)."""
    sets = [_set(k, v) for k, v in (overrides or {}).items()]
    return json.loads(_native.train(os.fspath(run_file), os.fspath(out), sets,
                                    None if data_dir is None else os.fspath(data_dir),
                                    str(device), progress))


def reproduce(table, preset="quick", out="reports", data_dir=None, device="cpu", progress=False):
    """Reproduces a paper table (``basin reproduce TABLE --quick|--cpu|--paper``) into ``out``
    and returns its report (``report.json``) as a dict."""
    return json.loads(_native.reproduce(table, preset, os.fspath(out),
                                        None if data_dir is None else os.fspath(data_dir),
                                        str(device), progress))


def tables():
    """Every registered table: ``{id: title}``."""
    return dict(_native.tables())


def example(name):
    """The text of an example run file (``basin train --example NAME``): ``et-graph``,
    ``et-anomaly``, ``cdat-graph``, ``cdat-anomaly``, ``sfi-pattern``, ``et-image``."""
    return _native.example(name)
