"""The converter for data served only for PyG or DGL (`crates/basin-graph/scripts/to_basin_npz.py`),
on PyG's generated datasets (no download): what it writes, basin reads and trains on."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import basin

pytest.importorskip("torch_geometric")

SCRIPT = Path(__file__).resolve().parents[2] / "basin-graph" / "scripts" / "to_basin_npz.py"


def convert(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True)


def test_a_generated_graph_set_converts_and_trains(tmp_path):
    out = tmp_path / "mnist-superpixels"
    done = convert("graphs", "--set", "mnist-superpixels", "--fake", 100, "--out", out)
    assert done.returncode == 0, done.stderr
    z = np.load(out / "mnist-superpixels.npz")
    assert z["node_feat"].shape[1] == 3 and z["edge_feat"].shape[1] == 1
    assert z["node_ptr"][-1] == len(z["node_feat"]) and len(z["labels"]) == 100
    split = json.loads((out / "splits.json").read_text())
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(100))
    run = tmp_path / "run.toml"
    run.write_text(basin.example("et-graph"))
    outcome = basin.train(run, tmp_path / "runs", overrides={
        "data": str(out), "protocol.train.epochs": 2, "protocol.folds.folds": 2})
    assert len(outcome["runs"]) == 2
    assert all(0.0 <= m["test_accuracy"] <= 1.0 for _, m in outcome["runs"])


def test_every_layout_converts_to_what_basin_reads(tmp_path):
    for name in ["peptides-struct", "pascalvoc-sp", "coco-sp", "pcqm-contact",
                 "cifar10-superpixels", "zinc"]:
        done = convert("graphs", "--set", name, "--fake", 12, "--out", tmp_path / name)
        assert done.returncode == 0, (name, done.stderr)
        z = np.load(tmp_path / name / f"{name}.npz")
        assert z["edge_index"].shape == (2, len(z["edge_feat"])), name
        # basin's loader reads it back: every graph, its nodes' features as written.
        graphs = basin.datasets.load(str(tmp_path / name), format="numpy")
        assert len(graphs) == 12, name
        first = z["node_ptr"][1]
        np.testing.assert_allclose(graphs[0]["x"], z["node_feat"][:first], err_msg=name)


def test_a_generated_node_graph_converts_and_trains(tmp_path):
    npz = tmp_path / "fake.npz"
    done = convert("nodes", "--fake", 200, "--out", npz)
    assert done.returncode == 0, done.stderr
    z = np.load(npz)
    assert set(np.unique(z["node_labels"])) <= {0, 1}
    assert z["edges"].shape[1] == 2 and z["edges"].max() < len(z["node_labels"])
    run = tmp_path / "run.toml"
    run.write_text(basin.example("et-anomaly"))
    outcome = basin.train(run, tmp_path / "runs", overrides={
        "data": str(npz), "protocol.train.epochs": 2})
    assert "test_auc" in outcome["runs"][0][1]


def test_bad_requests_name_what_is_wrong(tmp_path):
    done = convert("graphs", "--set", "mnist-superpixels", "--out", tmp_path)
    assert done.returncode != 0 and "--fake" in done.stderr
    done = convert("nodes", "--dgl", tmp_path / "absent.bin", "--out", tmp_path / "x.npz")
    assert done.returncode != 0
    assert not (tmp_path / "x.npz").exists()
