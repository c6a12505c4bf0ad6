"""EnergyBlock as a torch module: gradients (gradcheck), shared tensors, descent, dtype and device."""

import pytest
import torch

import basin
from basin import dynamics, terms

EVERY_TERM = [
    terms.Attention(heads=2, head_dim=3),
    terms.HopfieldMemory(memories=5),
    terms.VmfAttention(heads=2, head_dim=3),
]


def small(dyn=None, steps=3, dtype=torch.float64, **kw):
    return basin.EnergyBlock(dim=6, steps=steps, terms=EVERY_TERM,
                             dynamics=dyn or dynamics.GradientFlow(alpha=0.1),
                             dtype=dtype, **kw)


@pytest.mark.parametrize("dyn", [dynamics.GradientFlow(alpha=0.1),
                                 dynamics.Controlled(alpha=0.1, coupling={"rank": 2})],
                         ids=["gradient-flow", "controlled"])
def test_gradcheck_through_the_descent_with_every_term(dyn):
    block = small(dyn).eval()
    params = [p for p in block.parameters()]
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)

    def f(x, *ps):
        return block(x)

    assert torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_gradcheck_under_a_mask_and_padding():
    block = small().eval()
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 4, 4) > 0.3
    padding = torch.tensor([[True, True, True, False], [True, True, True, True]])
    f = lambda x: block(x, mask=mask, key_padding_mask=~padding)
    assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_parameters_are_basins_own_tensors():
    block = small(dtype=torch.float32)
    native = dict(block._native.named_parameters())
    mine = dict(block.named_parameters())
    fixed = dict(block.named_buffers())  # basin's untrained variables (a fixed β, say)
    assert set(native) == set(mine) | set(fixed)
    assert set(block.state_dict()) == set(native)
    for name, p in {**mine, **fixed}.items():
        assert isinstance(p, torch.nn.Parameter) == (name in mine), name
        assert native[name] is p, name
        assert native[name].data_ptr() == p.data_ptr(), name


def test_tensors_cross_without_copies():
    block = small(dtype=torch.float32)
    x = torch.randn(2, 4, 6, requires_grad=True)
    y = block(x)
    (y ** 2).sum().backward()
    # The caller's tensor itself received the gradient: basin's ops ran on it, not a copy.
    assert x.grad is not None and x.grad.abs().sum() > 0
    for name, p in block.named_parameters():
        assert p.grad is not None, name
    # An in-place change in Python is seen by the descent (same storage).
    before = block(x).detach()
    with torch.no_grad():
        block.hopfield.xi.mul_(2.0)
    assert not torch.allclose(before, block(x).detach())


def test_descent_lowers_the_energy():
    block = small(steps=6)
    x = torch.randn(3, 5, 6, dtype=torch.float64)
    _, energy = block(x, return_energy=True)
    assert energy.shape == (7, 3)
    assert (energy[1:] <= energy[:-1] + 1e-9).all(), energy
    assert torch.allclose(energy[0], block.energy(x))


def test_grad_is_the_energy_gradient_at_the_normalised_tokens():
    block = small()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    # ∂E/∂x = J_LNᵀ ∂E/∂g: check the closed form against autograd through the layer norm.
    x_ = x.clone().requires_grad_(True)
    e = block.energy(x_).sum()
    (dx,) = torch.autograd.grad(e, x_)
    g = block.grad(x)
    x2 = x.clone().requires_grad_(True)
    gamma, delta = block.norm.gamma, block.norm.delta
    mu = x2.mean(-1, keepdim=True)
    sd = ((x2 - mu).pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
    ln = gamma * (x2 - mu) / sd + delta
    (vjp,) = torch.autograd.grad(ln, x2, grad_outputs=g)
    assert torch.allclose(vjp, dx, atol=1e-8), (vjp - dx).abs().max()


def test_a_torch_optimiser_trains_the_block():
    block = small(dtype=torch.float32, steps=2)
    x = torch.randn(8, 4, 6)
    target = torch.randn(8, 4, 6)
    opt = torch.optim.Adam(block.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = (block(x) - target).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.95 * losses[0], losses


def test_double_keeps_the_shared_tensors():
    block = small(dtype=torch.float32)
    ids = {n: id(p) for n, p in block.named_parameters()}
    block.double()
    for n, p in block.named_parameters():
        assert p.dtype == torch.float64 and id(p) == ids[n], n
    y = block(torch.randn(1, 3, 6, dtype=torch.float64))
    assert y.dtype == torch.float64


def test_config_round_trips_through_toml():
    block = small()
    again = basin.EnergyBlock(block.config())
    assert again.config() == block.config()
    assert [n for n, _ in again.named_parameters()] == [n for n, _ in block.named_parameters()]


def test_sparse_edges_equal_the_dense_mask():
    block = small()
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    mask = torch.rand(2, 4, 4) > 0.4
    mask |= torch.eye(4, dtype=torch.bool)  # every query has a key
    b, q, k = mask.nonzero(as_tuple=True)
    edge_index = torch.stack([b * 4 + k, b * 4 + q])  # source = key, target = query
    dense = block(x, mask=mask, self_attention=True)
    sparse = block(x, edge_index=edge_index, self_attention=True)
    assert torch.allclose(dense, sparse, atol=1e-10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_cross_without_copies():
    block = small(dtype=torch.float32, device="cuda")
    x = torch.randn(2, 4, 6, device="cuda", requires_grad=True)
    y = block(x)
    assert y.device.type == "cuda"
    y.sum().backward()
    assert x.grad is not None
    native = dict(block._native.named_parameters())
    for n, p in block.named_parameters():
        assert native[n].data_ptr() == p.data_ptr()


def test_the_trajectory_on_request():
    block = small(steps=4).eval()
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    tokens = block(x)  # a tensor: nothing more unless asked
    assert isinstance(tokens, torch.Tensor)
    tokens2, energy, states, grads = block(x, return_energy=True, return_states=True,
                                           return_term_grads=True)
    assert states.shape == (5, 2, 5, 6)
    assert torch.equal(states[0], x)
    assert torch.allclose(states[-1], tokens, rtol=0, atol=1e-12)
    assert torch.allclose(tokens2, tokens, rtol=0, atol=0)
    # The energy of each state is the trace's energy at that step.
    for t in range(5):
        assert torch.allclose(block.energy(states[t]), energy[t], rtol=1e-10, atol=1e-10)
    assert len(grads) == 3
    for g in grads.values():
        assert g.shape == (4, 2, 5, 6)
    # The first step's gradients sum to the block's force at the start.
    assert torch.allclose(sum(g[0] for g in grads.values()), block.grad(x), atol=1e-10)
    _, only_states = block(x, return_states=True)
    assert torch.equal(only_states, states)


def test_fixed_point_correction_states_come_back_with_their_weights():
    block = basin.EnergyBlock(dim=6, steps=1, terms=[terms.HopfieldMemory(memories=4)],
                              gradient={"mode": "phantom", "max_steps": 8, "tol": 1e-12,
                                        "correction_states": 2, "correction_decay": 0.5})
    x = torch.randn(2, 3, 6)
    block.eval()
    block(x)
    assert block.take_corrections() == []
    block.train()
    out = block(x)
    kept = block.take_corrections()
    assert [w for w, _ in kept] == [0.25, 0.5] and block.take_corrections() == []
    loss = out.square().sum() + sum(w * s.square().sum() for w, s in kept)
    loss.backward()
    assert all(p.grad is not None for p in block.parameters())


def test_an_implicit_forward_leaves_no_reference_cycle():
    import gc
    import weakref

    block = basin.EnergyBlock(dim=6, steps=1, terms=[terms.HopfieldMemory(memories=4)],
                              gradient={"mode": "implicit", "max_steps": 50, "tol": 1e-6})
    block.train()
    gc.disable()  # what is freed must be freed by reference counts alone
    try:
        tokens = block(torch.randn(2, 3, 6))
        alive = weakref.ref(tokens)
        tokens.square().sum().backward()
        del tokens
        assert alive() is None, "the settled tokens outlived their step (a reference cycle)"
    finally:
        gc.enable()
    assert all(p.grad is not None for p in block.parameters())
