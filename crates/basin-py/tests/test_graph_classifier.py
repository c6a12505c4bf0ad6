"""``basin.EnergyGraphClassifier``: ET's graph classifier on PyG batches — logits per graph,
invariant to the batch around a graph and (with a 1 × 1 kernel) to the order of its nodes,
and a model that learns."""

import pytest
import torch

import basin
from conftest import need


def graphs(count=6, seed=0):
    """``count`` small random undirected graphs of 3–7 nodes, 5 features, a label each: the
    label is whether the graph holds a triangle, a structural question."""
    pyg = pytest.importorskip("torch_geometric")
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        n = int(torch.randint(3, 8, (), generator=gen))
        pairs = torch.triu_indices(n, n, 1)
        keep = torch.rand(pairs.shape[1], generator=gen) < 0.4
        pairs = pairs[:, keep]
        edge_index = torch.cat([pairs, pairs.flip(0)], 1)
        adj = torch.zeros(n, n)
        adj[edge_index[0], edge_index[1]] = 1
        label = int(torch.trace(adj @ adj @ adj) > 0)
        out.append(pyg.data.Data(x=torch.randn(n, 5, generator=gen), edge_index=edge_index,
                                 y=torch.tensor([label])))
    return out


def batch_of(data):
    return pytest.importorskip("torch_geometric").data.Batch.from_data_list(data)


def small(**kw):
    torch.manual_seed(0)
    fields = dict(in_features=5, classes=2, dim=8, heads=2, head_dim=4, memories=6, steps=2,
                  blocks=2, pe=3)
    fields.update(kw)
    return basin.EnergyGraphClassifier(**fields).eval()


def test_logits_per_graph_and_energy_per_block():
    model = small()
    data = graphs()
    logits, energies = model(batch_of(data), return_energy=True)
    assert logits.shape == (len(data), 2) and torch.isfinite(logits).all()
    assert len(energies) == 2 and all(e.shape == (3, len(data)) for e in energies)


def test_a_graph_scores_alone_as_in_any_batch():
    model = small()
    data = graphs(8)
    together = model(batch_of(data))
    for i, g in enumerate(data):
        assert torch.allclose(model(batch_of([g])), together[i:i + 1], atol=1e-5), i


def test_node_order_does_not_matter_with_a_one_by_one_kernel():
    model = small(conv_kernel=1, pe=0)
    data = graphs(4)
    want = model(batch_of(data))
    torch.manual_seed(1)
    shuffled = []
    for g in data:
        perm = torch.randperm(g.num_nodes)
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(g.num_nodes)
        shuffled.append(type(g)(x=g.x[perm], edge_index=inverse[g.edge_index], y=g.y))
    assert torch.allclose(model(batch_of(shuffled)), want, atol=1e-5)


def test_gradients_reach_every_parameter_and_the_loss_falls():
    model = small().train()
    batch = batch_of(graphs(12))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(batch), batch.y)
        loss.backward()
        losses.append(loss.item())
        if len(losses) == 1:
            missing = [n for n, p in model.named_parameters() if p.grad is None]
            assert not missing, missing
        opt.step()
    assert losses[-1] < 0.5 * losses[0], losses


def test_mutag_from_basin_datasets_beats_the_majority_class():
    pyg = pytest.importorskip("torch_geometric")
    need("tu/MUTAG")
    data = list(basin.datasets.load("MUTAG", data_dir=basin_data_dir()))
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(len(data), generator=gen).tolist()
    train, test = [data[i] for i in order[:150]], [data[i] for i in order[150:]]
    torch.manual_seed(0)
    model = basin.EnergyGraphClassifier(in_features=data[0].x.shape[1], classes=2)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = pyg.loader.DataLoader(train, batch_size=32, shuffle=True, generator=gen)
    for _ in range(15):
        model.train()
        for batch in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(batch), batch.y.view(-1)).backward()
            opt.step()
    model.eval()
    test_batch = batch_of(test)
    with torch.no_grad():
        accuracy = (model(test_batch).argmax(1) == test_batch.y.view(-1)).float().mean().item()
    majority = max(test_batch.y.float().mean().item(), 1 - test_batch.y.float().mean().item())
    assert accuracy > majority + 0.1, (accuracy, majority)


def test_the_classifier_copies_saves_and_converts_as_a_module():
    import copy
    import io
    import pickle

    model = small()
    batch = batch_of(graphs())
    want = model(batch)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    for other in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model),
                  torch.load(buf, weights_only=False)):
        assert torch.equal(other(batch), want)
    assert model.double() is model
    assert all(p.dtype == torch.float64 for p in model.parameters())
    batch.x = batch.x.double()
    got = model(batch)
    assert got.dtype == torch.float64 and torch.allclose(got.float(), want, atol=1e-4)


def basin_data_dir():
    from conftest import data_dir

    return data_dir()
