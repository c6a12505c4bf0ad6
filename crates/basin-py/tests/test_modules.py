"""basin's modules behave as every other ``nn.Module``: ``.to()``, pickling, ``deepcopy``,
``torch.save``/``torch.load``, ``nn.Sequential``, ``state_dict`` (``assign=True`` refused by
name) and one mask convention, ``key_padding_mask`` with ``True`` = ignore."""

import copy
import io
import pickle

import pytest
import torch

import basin
from basin import dynamics, terms


def energy_block():
    torch.manual_seed(0)
    return basin.EnergyBlock(dim=6, steps=3,
                             terms=[terms.Attention(heads=2, head_dim=3),
                                    terms.HopfieldMemory(memories=5)],
                             dynamics=dynamics.GradientFlow(alpha=0.1))


def layers():
    torch.manual_seed(0)
    return {
        "block": (energy_block(), lambda m, x: m(x)),
        "hopfield": (basin.Hopfield(6, 6, heads=2),
                     lambda m, x: m(x, x.flip(1))),
        "pooling": (basin.HopfieldPooling(6, 6, quantity=2), lambda m, x: m(x)),
        "layer": (basin.HopfieldLayer(6, 6, quantity=4), lambda m, x: m(x)),
        "norm": (basin.EnergyLayerNorm(6), lambda m, x: m(x)),
    }


NAMES = ["block", "hopfield", "pooling", "layer", "norm"]


@pytest.mark.parametrize("name", NAMES)
def test_copies_and_saves_rebuild_an_equal_module(name):
    module, call = layers()[name]
    module.eval()
    x = torch.randn(2, 4, 6)
    want = call(module, x)
    buf = io.BytesIO()
    torch.save(module, buf)
    buf.seek(0)
    copies = [pickle.loads(pickle.dumps(module)), copy.deepcopy(module),
              torch.load(buf, weights_only=False)]
    for other in copies:
        assert type(other) is type(module) and not other.training
        assert torch.equal(call(other, x), want)
        # A copy is its own: training it leaves the original alone.
        with torch.no_grad():
            for p in other.parameters():
                p.add_(torch.randn_like(p))
        assert torch.equal(call(module, x), want)
        assert not torch.equal(call(other, x), want)


@pytest.mark.parametrize("name", NAMES)
def test_to_float64_converts_in_place_and_keeps_training(name):
    module, call = layers()[name]
    x = torch.randn(2, 4, 6)
    want = call(module, x).double()
    assert module.to(torch.float64) is module
    assert all(p.dtype == torch.float64 for p in module.parameters())
    native = {id(t) for _, t in module._native.named_parameters()}
    assert all(id(p) in native for p in module.parameters())  # the same tensors
    got = call(module, x.double())
    assert got.dtype == torch.float64 and torch.allclose(got, want, atol=1e-5)
    got.sum().backward()
    assert all(p.grad is not None for p in module.parameters())
    with pytest.raises(TypeError, match="float32 or float64"):
        module.to(torch.float16)


def test_a_block_sits_in_a_sequential():
    block = energy_block()
    seq = torch.nn.Sequential(torch.nn.Linear(6, 6), block, torch.nn.LayerNorm(6))
    x = torch.randn(2, 4, 6)
    y = seq(x)
    assert y.shape == (2, 4, 6)
    y.sum().backward()
    assert block.norm.gamma.grad is not None and seq[0].weight.grad is not None
    seq.double()
    assert seq(x.double()).dtype == torch.float64


def test_load_state_dict_copies_in_and_refuses_assign():
    a, b = energy_block(), energy_block()
    with torch.no_grad():
        for p in b.parameters():
            p.add_(0.5)
    x = torch.randn(2, 4, 6)
    a.load_state_dict(b.state_dict())
    assert torch.equal(a(x), b(x))
    with pytest.raises(ValueError, match="assign=True"):
        a.load_state_dict(b.state_dict(), assign=True)


def test_one_mask_convention_true_is_ignored():
    block = energy_block().eval()
    x = torch.randn(2, 4, 6)
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    y = block(x, key_padding_mask=pad)
    x2 = x.clone()
    x2[0, 3] += 10.0 * torch.randn(6)  # only the padded token changes (not by a constant: LN)
    assert torch.allclose(block(x2, key_padding_mask=pad)[0, :3], y[0, :3], atol=1e-6)
    assert not torch.allclose(block(x2)[0, :3], block(x)[0, :3], atol=1e-6)
    assert torch.allclose(block.energy(x, key_padding_mask=pad),
                          block.energy(x2, key_padding_mask=pad), atol=1e-5)
    with pytest.raises(TypeError, match="key_padding_mask"):
        block(x, padding=~pad)
    pool = basin.HopfieldPooling(6, 6)
    out = pool(x, key_padding_mask=pad)
    assert torch.allclose(pool(x2, key_padding_mask=pad), out, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_calls_from_other_threads(name):
    import threading

    module, call = layers()[name]
    module.eval()
    x = torch.randn(2, 4, 6)
    want = call(module, x)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(call(module, x))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 15 and all(torch.equal(r, want) for r in results)
    # And the gradient of a call made elsewhere reaches the module's parameters here.
    out = []
    t = threading.Thread(target=lambda: out.append(call(module, x)))
    t.start()
    t.join()
    out[0].sum().backward()
    assert all(p.grad is not None for p in module.parameters())


DDP_SCRIPT = r'''
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import basin
from basin import dynamics, terms


def work(rank, world, folder, port):
    # A TCP store: the file store's rendezvous fails often on some virtual machines' disks.
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + port, rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    block = basin.EnergyBlock(dim=6, steps=3, terms=[terms.Attention(heads=2, head_dim=3),
                                                     terms.HopfieldMemory(memories=5)],
                              dynamics=dynamics.GradientFlow(alpha=0.1))
    torch.manual_seed(100 + rank)  # each rank its own batch
    x = torch.randn(2, 4, 6)
    # The rank's own gradient, then DDP's.
    block(x).pow(2).mean().backward()
    local = torch.cat([p.grad.flatten() for p in block.parameters()])
    block.zero_grad()
    ddp = torch.nn.parallel.DistributedDataParallel(block)
    ddp(x).pow(2).mean().backward()
    synced = torch.cat([p.grad.flatten() for p in block.parameters()])
    both = torch.stack([local, synced])
    gathered = [torch.zeros_like(both) for _ in range(world)]
    dist.all_gather(gathered, both)
    if rank == 0:
        torch.save(gathered, os.path.join(folder, "grads.pt"))
    dist.destroy_process_group()
    # Leave without the interpreter's teardown: Gloo's threads sometimes abort in it
    # ("terminate called without an active exception"), with plain torch modules too.
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(work, args=(2, sys.argv[1], sys.argv[2]), nprocs=2)
'''


def test_distributed_data_parallel_averages_the_gradients_over_gloo(tmp_path):
    import socket
    import subprocess
    import sys

    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    with socket.socket() as probe:  # a free port for the rendezvous
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    done = subprocess.run([sys.executable, str(script), str(tmp_path), port], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (local0, synced0), (local1, synced1) = torch.load(tmp_path / "grads.pt")
    assert not torch.allclose(local0, local1)  # the ranks' batches differ
    assert torch.allclose(synced0, synced1, atol=1e-7)  # DDP made them one
    assert torch.allclose(synced0, (local0 + local1) / 2, atol=1e-6)  # their mean


def test_the_package_is_typed_and_its_native_stubs_name_every_native_callable():
    import ast
    import pathlib

    from basin import _native

    folder = pathlib.Path(basin.__file__).parent
    assert (folder / "py.typed").exists()
    stubs = ast.parse((folder / "_native.pyi").read_text())
    stubbed = {n.name: n for n in stubs.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    native = {n for n in dir(_native) if not n.startswith("_")}
    assert native == set(stubbed)
    for name, node in stubbed.items():
        if isinstance(node, ast.ClassDef):
            methods = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
            public = {m for m in dir(getattr(_native, name)) if not m.startswith("_")}
            assert public == methods - {"__init__"}, name


@pytest.mark.parametrize("name", NAMES)
def test_swapped_tensors_are_refused_by_name(name):
    module, call = layers()[name]
    x = torch.randn(2, 4, 6)
    swapped = {n: p.detach() + 1 for n, p in module.named_parameters()}
    with pytest.raises(RuntimeError, match="functional_call"):
        torch.func.functional_call(module, swapped, (x,) if name != "hopfield" else (x, x))
    call(module, x)  # the module's own tensors are back: it runs


def test_torch_func_transforms_agree_with_autograd_and_a_loop():
    block = energy_block().eval()
    x = torch.randn(2, 4, 6)
    g = torch.func.grad(lambda t: block(t).pow(2).sum())(x)
    xr = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(block(xr).pow(2).sum(), xr)
    assert torch.allclose(g, want, atol=1e-6)
    mapped = torch.func.vmap(lambda t: block(t.unsqueeze(0)).squeeze(0))(x)
    assert torch.allclose(mapped, torch.cat([block(x[i:i + 1]) for i in range(2)]), atol=1e-6)


def test_torch_compile_breaks_around_basin_and_fullgraph_names_why():
    block = energy_block().eval()
    x = torch.randn(2, 4, 6)
    seq = torch.nn.Sequential(torch.nn.Linear(6, 6), block)
    compiled = torch.compile(seq, backend="eager")
    assert torch.allclose(compiled(x), seq(x), atol=1e-6)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="native extension"):
        torch.compile(seq, backend="eager", fullgraph=True)(x)
