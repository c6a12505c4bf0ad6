"""Energy terms written in Python inside a basin block: their gradient (autograd's or their
own closed form) drives the descent, their parameters train with the block's, gradcheck passes,
their exceptions reach the caller unchanged, and the block still copies and pickles."""

import copy
import pickle

import pytest
import torch

import basin
from basin import dynamics, terms


class Quadratic(torch.nn.Module):
    """E(g) = ½ Σ_C g_Cᵀ W g_C: a new energy, differentiated by autograd."""

    def __init__(self, dim, scale=0.3):
        super().__init__()
        self.w = torch.nn.Parameter(scale * torch.eye(dim))

    def energy(self, g):
        return 0.5 * torch.einsum("bnd,de,bne->b", g, self.w, g)


class QuadraticClosedForm(Quadratic):
    """The same energy with its gradient written out: ∂E/∂g = ½ g (W + Wᵀ)."""

    def grad(self, g):
        return 0.5 * g @ (self.w + self.w.T)


def block_with(term, dtype=torch.float32):
    torch.manual_seed(0)
    return basin.EnergyBlock(dim=6, steps=3, dtype=dtype,
                             terms=[terms.Attention(heads=2, head_dim=3), term],
                             dynamics=dynamics.GradientFlow(alpha=0.1))


def test_a_python_term_changes_the_descent_and_its_parameters_learn():
    torch.manual_seed(1)
    x, target = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    torch.manual_seed(0)
    plain = basin.EnergyBlock(dim=6, steps=3, terms=[terms.Attention(heads=2, head_dim=3)],
                              dynamics=dynamics.GradientFlow(alpha=0.1))
    block = block_with(Quadratic(6))
    assert not torch.allclose(plain(x), block(x))  # the term moves the tokens
    assert set(dict(block.named_parameters())) >= {"python_terms.0.w", "attention.w_q"}
    opt = torch.optim.Adam(block.parameters(), lr=0.05)
    w0 = block.python_terms[0].w.detach().clone()
    losses = []
    for _ in range(15):
        loss = (block(x) - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        assert block.python_terms[0].w.grad.abs().sum() > 0
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert not torch.equal(w0, block.python_terms[0].w)


def test_a_closed_form_gradient_gives_the_descent_autograd_gives():
    x = torch.randn(2, 4, 6)
    auto, closed = block_with(Quadratic(6)), block_with(QuadraticClosedForm(6))
    torch.testing.assert_close(auto(x), closed(x))
    e_auto = auto(x, return_energy=True)[1]
    torch.testing.assert_close(e_auto, closed(x, return_energy=True)[1])
    assert (e_auto[1:] <= e_auto[:-1] + 1e-6).all()  # the descent lowers the energy


def test_the_descent_through_a_python_term_passes_gradcheck():
    block = block_with(Quadratic(6, scale=0.2), dtype=torch.float64)
    x = torch.randn(1, 3, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: block(x), (x,), eps=1e-6, atol=1e-5)
    # The term's own parameter, swapped in by a functional call (a Python term's tensors are
    # read by its own `energy`, so the swap reaches the descent).
    w = block.python_terms[0].w.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda w: torch.func.functional_call(block, {"python_terms.0.w": w}, (x.detach(),)),
        (w,), eps=1e-6, atol=1e-5)


def test_only_python_terms_and_a_term_with_no_energy_refused():
    torch.manual_seed(0)
    block = basin.EnergyBlock(dim=6, steps=2, terms=[Quadratic(6)])
    assert block(torch.randn(2, 3, 6)).shape == (2, 3, 6)
    with pytest.raises(TypeError, match=r"terms\[1\]"):
        basin.EnergyBlock(dim=6, steps=2, terms=[Quadratic(6), torch.nn.Linear(6, 6)])


def test_a_python_terms_exception_and_a_wrong_shape_reach_the_caller():
    class Broken(torch.nn.Module):
        def energy(self, g):
            raise KeyError("no such memory")

    class WrongShape(torch.nn.Module):
        def energy(self, g):
            return g.sum(-1)

    with pytest.raises(KeyError, match="no such memory"):
        block_with(Broken())(torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match=r"WrongShape.*shape \[2\]"):
        block_with(WrongShape())(torch.randn(2, 4, 6))


def test_a_block_with_a_python_term_copies_pickles_and_moves():
    block = block_with(Quadratic(6)).eval()
    x = torch.randn(2, 4, 6)
    want = block(x)
    for other in (copy.deepcopy(block), pickle.loads(pickle.dumps(block))):
        torch.testing.assert_close(other(x), want)
    block.double()
    assert block.python_terms[0].w.dtype == torch.float64
    torch.testing.assert_close(block(x.double()), want.double(), rtol=1e-5, atol=1e-6)


def test_basins_terms_as_modules_give_their_energy_and_closed_form_gradient():
    torch.manual_seed(0)
    g = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[False] * 4, [False, False, False, True]])
    for term in (terms.EnergyAttention(6, heads=2, head_dim=3, dtype=torch.float64),
                 terms.HopfieldEnergy(6, memories=5, dtype=torch.float64),
                 terms.VmfEnergyAttention(6, heads=2, head_dim=3, dtype=torch.float64)):
        assert not any(n.startswith("norm.") for n, _ in term.named_parameters())
        e = term(g, key_padding_mask=mask)
        assert e.shape == (2,)
        want, = torch.autograd.grad(e.sum(), g)
        torch.testing.assert_close(term.grad(g, key_padding_mask=mask), want)
        back = pickle.loads(pickle.dumps(term))
        torch.testing.assert_close(back(g, key_padding_mask=mask), e)


def test_a_block_of_term_modules_clones_them():
    torch.manual_seed(0)
    att, hop = terms.EnergyAttention(6, heads=2, head_dim=3), terms.HopfieldEnergy(6, memories=5)
    block = basin.EnergyBlock(dim=6, steps=3, terms=[att, hop])
    state = block.state_dict()
    for term in (att, hop):
        for name, value in term.state_dict().items():
            assert torch.equal(state[name], value)  # the block starts from the modules' values
    torch.manual_seed(5)
    by_config = basin.EnergyBlock(dim=6, steps=3, terms=[att.table(), hop.table()])
    by_config.load_state_dict(state)
    x = torch.randn(2, 4, 6)
    torch.testing.assert_close(block(x), by_config(x))
