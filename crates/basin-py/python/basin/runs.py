"""``basin train`` and ``basin reproduce`` as calls."""

import json
import os

from . import _native


def _literal(value):
    """A Python value as a TOML literal (inline tables for dicts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"override value {value!r} of type {type(value).__name__}")


def _set(key, value):
    return f"{key}={_literal(value)}"


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
