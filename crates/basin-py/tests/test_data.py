"""Datasets by name, and Laplacian encodings against NumPy's eigensolver."""

import numpy as np
import pytest
import torch

import basin
from conftest import need


def test_mutag_by_name():
    d = need("tu/MUTAG")
    data = basin.datasets.load("MUTAG", data_dir=d.parent.parent, format="torch")
    assert data.name == "MUTAG" and len(data) == 188 and data.num_classes == 2
    g = data[0]
    assert g["x"].shape[0] == 17 and g["edge_index"].shape[0] == 2
    assert g["edge_index"].max() < g["x"].shape[0]
    assert sorted({int(g["y"]) for g in data}) == [0, 1]
    numpy = basin.datasets.load("MUTAG", data_dir=d.parent.parent, format="numpy")
    assert isinstance(numpy[0]["x"], np.ndarray)


def test_generated_pattern_needs_no_files():
    data = basin.datasets.load("pattern", format="torch")
    assert data.task == "node-classification" and len(data) > 100
    assert data[0]["y"].shape[0] == data[0]["x"].shape[0]


def test_laplacian_pe_spans_the_eigenvectors_numpy_finds():
    torch.manual_seed(0)
    n = 12
    a = (torch.rand(n, n) < 0.3).float().triu(1)
    a = a + a.T
    for i in range(n - 1):  # connected
        a[i, i + 1] = a[i + 1, i] = 1.0
    src, dst = a.nonzero(as_tuple=True)
    k = 4
    pe = basin.graph.laplacian_pe(torch.stack([src, dst]), n, k).numpy()
    deg = a.sum(1).numpy()
    lap = np.eye(n) - a.numpy() / np.sqrt(np.outer(deg, deg))
    w, v = np.linalg.eigh(lap)
    want = v[:, 1:k + 1]  # the constant one dropped
    # Same subspace (signs and ties aside): projecting one on the other keeps it.
    proj = want @ (want.T @ pe)
    assert np.allclose(proj, pe, atol=1e-4)
    assert np.allclose(np.abs(pe.T @ pe), np.eye(k), atol=1e-4)


def test_laplacian_pe_refuses_a_node_out_of_range():
    with pytest.raises(ValueError, match="outside 0..3"):
        basin.graph.laplacian_pe(torch.tensor([[0, 1], [1, 5]]), 3, 2)
