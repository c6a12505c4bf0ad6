"""``basin.graph.to_dense``: a PyG batch as the padded tensors a block takes, each graph
settling as it does alone (padding invariance through the conversion)."""

from types import SimpleNamespace

import pytest
import torch

import basin
from basin import dynamics, terms


def two_graphs():
    torch.manual_seed(0)
    # A triangle (nodes 0–2) and an edge (nodes 3–4), both directions listed.
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 0, 3, 4], [1, 0, 2, 1, 0, 2, 4, 3]])
    return SimpleNamespace(x=torch.randn(5, 6), edge_index=edge_index,
                           batch=torch.tensor([0, 0, 0, 1, 1]))


def test_to_dense_pads_masks_and_renumbers():
    g = two_graphs()
    x, mask, edges = basin.graph.to_dense(g)
    assert x.shape == (2, 3, 6) and mask.tolist() == [[False] * 3, [False, False, True]]
    torch.testing.assert_close(x[1, :2], g.x[3:])
    assert (x[1, 2] == 0).all()
    assert edges[:, -2:].tolist() == [[3, 4], [4, 3]]  # graph 1's nodes are slots 3 and 4
    x, mask, _ = basin.graph.to_dense(g, max_nodes=4)
    assert x.shape == (2, 4, 6) and mask.sum().item() == 3
    with pytest.raises(ValueError, match="max_nodes=2"):
        basin.graph.to_dense(g, max_nodes=2)
    with pytest.raises(ValueError, match="contiguous"):
        basin.graph.to_dense(SimpleNamespace(x=g.x, edge_index=g.edge_index,
                                             batch=torch.tensor([0, 1, 0, 1, 1])))


def test_each_graph_of_a_dense_batch_settles_as_it_does_alone():
    g = two_graphs()
    torch.manual_seed(0)
    block = basin.EnergyBlock(dim=6, steps=3, terms=[terms.Attention(heads=2, head_dim=3),
                                                     terms.HopfieldMemory(memories=4)],
                              dynamics=dynamics.GradientFlow(alpha=0.1))
    x, mask, edges = basin.graph.to_dense(g)
    together = block(x, edge_index=edges, key_padding_mask=mask)
    for graph, nodes in ((0, slice(0, 3)), (1, slice(3, 5))):
        alone = SimpleNamespace(x=g.x[nodes], edge_index=g.edge_index[:, g.batch[g.edge_index[0]]
                                                                       == graph] - nodes.start)
        xa, ma, ea = basin.graph.to_dense(alone)
        want = block(xa, edge_index=ea, key_padding_mask=ma)[0]
        torch.testing.assert_close(together[graph, :want.shape[0]], want, rtol=1e-5, atol=1e-6)


def test_to_dense_takes_a_pyg_batch():
    pyg = pytest.importorskip("torch_geometric")
    g = two_graphs()
    batch = pyg.data.Batch.from_data_list([
        pyg.data.Data(x=g.x[:3], edge_index=g.edge_index[:, :6]),
        pyg.data.Data(x=g.x[3:], edge_index=g.edge_index[:, 6:] - 3)])
    for got, want in zip(basin.graph.to_dense(batch), basin.graph.to_dense(g)):
        assert torch.equal(got, want)
