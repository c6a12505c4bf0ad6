"""Models from run files trained by a plain PyTorch loop, against `basin train` of the same file."""

import json

import pytest
import torch

import basin
from conftest import need

# Same data, split, seed and batches; an optimiser torch's Adam equals (no gradient
# centralisation, no weight decay, a constant rate): the losses must agree epoch by epoch.
SETS = {
    "protocol.folds.folds": 2,
    "protocol.train.epochs": 2,
    "protocol.train.optim.centralize": False,
    "protocol.train.optim.weight_decay": 0.0,
    "protocol.train.schedule": {"kind": "constant", "lr": 0.003},
}


def torch_loop(model, epochs):
    opt = torch.optim.Adam(model.parameters(), lr=0.003, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for epoch in range(epochs):
        batch_losses = []
        for items in model.epoch(epoch):
            opt.zero_grad()
            loss = model.loss(items)
            loss.backward()
            model.after_backward()
            opt.step()
            batch_losses.append(loss.item())
        losses.append(sum(batch_losses) / len(batch_losses))
    return losses


def test_a_torch_loop_trains_the_et_graph_classifier_as_basin_train_does(tmp_path):
    data = need("tu/MUTAG")
    run_file = tmp_path / "run.toml"
    run_file.write_text(basin.example("et-graph"))
    out = tmp_path / "out"
    outcome = basin.train(run_file, out, overrides=SETS, data_dir=data.parent.parent)
    assert outcome["task"] == "graph-classification"
    model = basin.models.et_graph(overrides=SETS, data_dir=data.parent.parent)
    assert model.runs == 2 and len(model.split["train"]) > 50
    record = json.loads((out / model.run_dir / "record.json").read_text())
    basin_losses = [e["metrics"]["train_loss"] for e in record["epochs"]]
    mine = torch_loop(model, 2)
    assert mine == pytest.approx(basin_losses, rel=1e-4), (mine, basin_losses)
    assert mine[1] < mine[0]
    probs = model.predict(model.split["test"])
    assert probs.shape == (len(model.split["test"]), 2)
    assert torch.allclose(probs.sum(1), torch.ones(len(probs), dtype=torch.float64))


def test_a_basin_checkpoint_loads_into_the_python_model_and_back(tmp_path):
    data = need("tu/MUTAG")
    sets = {**SETS, "protocol.train.epochs": 1}
    run_file = tmp_path / "run.toml"
    run_file.write_text(basin.example("cdat-graph"))
    out = tmp_path / "out"
    basin.train(run_file, out, overrides=sets, data_dir=data.parent.parent)
    model = basin.models.Model(run_file, overrides=sets, data_dir=data.parent.parent)
    ckpt = out / model.run_dir / "checkpoint.safetensors"
    state, meta = basin.load_checkpoint(ckpt)  # the selected epoch's weights ("best.")
    assert "record" in meta
    mine = model.state_dict()
    assert set(mine) == set(state), set(mine) ^ set(state)
    before = model.predict(model.split["test"])
    model.load_state_dict(state)
    after = model.predict(model.split["test"])
    assert not torch.allclose(before, after)  # trained weights, not the initial ones
    # basin's own score of the selected weights on the test fold, from the Python model.
    record = json.loads((out / model.run_dir / "record.json").read_text())
    labels = torch.tensor([int(g["y"]) for g in basin.datasets.load(
        "MUTAG", data_dir=data.parent.parent, format="torch")])[model.split["test"]]
    accuracy = (after.argmax(1) == labels).double().mean().item()
    assert accuracy == pytest.approx(record["summary"]["test_accuracy"], abs=1e-9)
    # Written back from Python under a run's prefix, read by basin: the same tensors.
    again = tmp_path / "again.safetensors"
    basin.save_checkpoint(again, model.state_dict(), {"from": "python"}, part="best")
    back, meta = basin.load_checkpoint(again)
    assert meta["from"] == "python"
    for k, v in model.state_dict().items():
        assert torch.equal(back[k], v.detach().cpu()), k
    with pytest.raises(ValueError, match="no tensor under `adamw.`"):
        basin.load_checkpoint(again, part="adamw")


def test_a_run_index_outside_the_plan_is_a_value_error():
    data = need("tu/MUTAG")
    with pytest.raises(ValueError, match="plans 2 runs"):
        basin.models.et_graph(overrides=SETS, run=5, data_dir=data.parent.parent)


def test_every_family_preset_builds_and_takes_a_step(tmp_path):
    data = need("tu/MUTAG")
    for build, kw in [(basin.models.cdat_graph, {}),
                      (basin.models.sfi_gps, {"overrides": {"subset": [40, 10, 10]}})]:
        model = build(data_dir=data.parent.parent, **kw)
        items = model.epoch(0)[0]
        loss = model.loss(items)
        loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert torch.isfinite(loss) and grads, build.__name__


def test_a_model_steps_from_another_thread():
    import threading

    data = need("tu/MUTAG")
    model = basin.models.et_graph(overrides=SETS, data_dir=data.parent.parent)
    items = model.epoch(0)[0]
    want = model.loss(items).item()
    out, errors = [], []

    def work():
        try:
            assert model.epoch(0)[0] == items  # the same draws again
            loss = model.loss(items)
            loss.backward()
            out.append((loss.item(), model.predict(model.split["test"][:4])))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    assert out[0][0] == pytest.approx(want, rel=1e-6) and out[0][1].shape == (4, 2)
    assert any(p.grad is not None for p in model.parameters())


def test_a_model_pickles_with_its_weights_and_refuses_assign():
    import copy
    import pickle

    data = need("tu/MUTAG")
    model = basin.models.et_graph(overrides=SETS, data_dir=data.parent.parent)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)  # weights that are not the initial ones
    want = model.predict(model.split["test"][:6])
    for other in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        assert torch.equal(other.predict(other.split["test"][:6]), want)
        assert other.split == model.split and other.run_dir == model.run_dir
    with pytest.raises(ValueError, match="assign"):
        model.load_state_dict(model.state_dict(), assign=True)


def test_a_model_stays_on_its_device_and_refuses_another_dtype():
    # A move to another device rebuilds through __setstate__, which the pickling test runs;
    # without a second device here, .to() of its own device must keep the model as it is.
    data = need("tu/MUTAG")
    model = basin.models.et_graph(overrides=SETS, data_dir=data.parent.parent)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    want = model.predict(model.split["test"][:4])
    assert model.to("cpu") is model and model.cpu() is model
    assert torch.equal(model.predict(model.split["test"][:4]), want)
    with pytest.raises(TypeError, match="float32"):
        model.to(torch.float64)
