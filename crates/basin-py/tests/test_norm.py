"""``basin.EnergyLayerNorm``: ET eq. 1 as the block applies it, and its Lagrangian (eq. 2)
whose gradient is the norm."""

import pytest
import torch

import basin


def test_the_norm_is_the_gradient_of_its_lagrangian():
    norm = basin.EnergyLayerNorm(6, dtype=torch.float64)
    with torch.no_grad():
        norm.gamma.fill_(1.7)
        norm.delta.copy_(torch.randn(6, dtype=torch.float64))
    x = torch.randn(3, 4, 6, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(norm.lagrangian(x).sum(), x)
    assert norm.lagrangian(x).shape == (3, 4)
    assert torch.allclose(grad, norm(x), atol=1e-10)
    want = 1.7 * (x - x.mean(-1, keepdim=True)) / (x.var(-1, unbiased=False, keepdim=True)
                                                   + 1e-5).sqrt() + norm.delta
    assert torch.allclose(norm(x), want, atol=1e-10)
    assert torch.autograd.gradcheck(lambda t: norm(t), (x[:1, :2].detach().requires_grad_(),))


def test_the_norm_is_the_one_a_block_applies():
    torch.manual_seed(0)
    block = basin.EnergyBlock(dim=6, steps=1, terms=[basin.terms.HopfieldMemory(memories=4)])
    with torch.no_grad():
        block.norm.gamma.fill_(0.8)
        block.norm.delta.normal_()
    norm, term = basin.EnergyLayerNorm(6), basin.terms.HopfieldEnergy(6, 4)
    state = block.state_dict()
    norm.load_state_dict({"gamma": state["norm.gamma"], "delta": state["norm.delta"]})
    term.load_state_dict({k: v for k, v in state.items() if not k.startswith("norm.")})
    x = torch.randn(2, 5, 6)
    assert torch.allclose(block.energy(x), term.energy(norm(x)), atol=1e-6)
    assert torch.allclose(block.grad(x), term.grad(norm(x)), atol=1e-6)


def test_a_gain_per_feature_has_no_lagrangian_and_widths_are_checked():
    norm = basin.EnergyLayerNorm(4, per_feature_gain=True)
    assert norm.gamma.shape == (4,)
    with pytest.raises(ValueError, match="per_feature_gain"):
        norm.lagrangian(torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"x: expected \[\.\.\., 4\]"):
        norm(torch.randn(2, 5))
