"""Shared fixtures: the data directory (BASIN_DATA_DIR) and a dataset-or-skip helper."""

import os
from pathlib import Path

import pytest
import torch


def data_dir():
    d = os.environ.get("BASIN_DATA_DIR")
    return Path(d) if d else None


def need(relative):
    """The path of a dataset under the data directory; skips the test when it is absent
    (fails instead under BASIN_REQUIRE_DATA=1, as CI runs)."""
    d = data_dir()
    path = d / relative if d else None
    if path is None or not path.exists():
        if os.environ.get("BASIN_REQUIRE_DATA") == "1":
            pytest.fail(f"dataset {relative} not found under BASIN_DATA_DIR={d}")
        pytest.skip(f"dataset {relative} not found (set BASIN_DATA_DIR)")
    return path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
