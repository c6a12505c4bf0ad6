"""The modern Hopfield layers as modules, and implicit gradients of a settling block."""

import pytest
import torch

import basin
from basin import dynamics, terms


def test_hopfield_layers_pass_gradcheck_and_shapes():
    d = torch.float64
    pool = basin.HopfieldPooling(6, 6, quantity=2, heads=2, dtype=d)
    y = torch.randn(3, 5, 6, dtype=d, requires_grad=True)
    assert pool(y).shape == (3, 12)
    assert torch.autograd.gradcheck(lambda y, *p: pool(y), (y, *pool.parameters()))
    hop = basin.Hopfield(6, 4, heads=1, dtype=d, update_steps_max=2)
    r = torch.randn(2, 3, 6, dtype=d, requires_grad=True)
    ys = torch.randn(2, 5, 4, dtype=d)
    assert hop(r, ys).shape == (2, 3, 6)
    assert torch.autograd.gradcheck(lambda r: hop(r, ys), (r,))
    lookup = basin.HopfieldLayer(6, 6, quantity=7, dtype=d)
    assert lookup(r).shape == (2, 3, 6)


def test_ignored_stored_patterns_have_no_effect():
    pool = basin.models.hopfield_pooling(4, quantity=1)
    y = torch.randn(1, 5, 4)
    ignore = torch.tensor([[False, False, True, False, True]])
    out = pool(y, ignore)
    y2 = y.clone()
    y2[0, 2] += 10.0
    y2[0, 4] -= 3.0
    assert torch.allclose(out, pool(y2, ignore))
    assert not torch.allclose(out, pool(y2))


def test_implicit_gradients_equal_a_long_unrolled_descent():
    # CDAT's controlled dynamics settle in x itself: the implicit gradient at the attractor is
    # the limit of the unrolled one.
    def build(**kw):
        torch.manual_seed(0)
        return basin.EnergyBlock(
            # Weights large enough that x* is not tiny (LN's 1/σ would make the step chatter).
            dim=6, terms=[terms.VmfAttention(heads=2, head_dim=3, beta=1.0, init_std=1.0),
                          terms.HopfieldMemory(memories=8, init_std=1.0)],
            dynamics=dynamics.Controlled(alpha=0.1), dtype=torch.float64, **kw).train()

    settling = {"mode": "implicit", "tol": 1e-12, "max_steps": 5000, "solver_tol": 1e-12}
    implicit = build(steps=2, gradient=settling)
    attached = build(steps=2, gradient=settling)
    unrolled = build(steps=3000)
    torch.manual_seed(1)
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    target = torch.randn(2, 3, 6, dtype=torch.float64)
    grads = []
    for block in (implicit, attached, unrolled):
        loss = (block(x) - target).pow(2).sum()
        if block is attached:  # the older spelling, still equal
            loss = block.attach(loss)
        loss.backward()  # alone: the settled tokens' hook solves the adjoint
        grads.append({n: p.grad.clone() for n, p in block.named_parameters()})
    stats = implicit.settle_stats()
    assert stats["settle_unconverged"] == 0, stats
    assert stats["adjoint_unconverged"] == 0 and stats["adjoint_iterations"] > 0, stats
    for name, g in grads[0].items():
        assert g.abs().sum() > 0, name
        assert torch.allclose(g, grads[2][name], rtol=1e-5, atol=1e-8), name
        assert torch.allclose(g, grads[1][name], rtol=1e-10, atol=1e-12), name


def test_an_input_field_passes_the_implicit_gradient_to_the_blocks_input():
    # Without the field the attractor forgets x (no gradient reaches it); with it, x's
    # gradient through loss.backward() alone equals a long unrolled descent's.
    def build(field, **kw):
        torch.manual_seed(0)
        extra = [terms.InputField(strength=0.5)] if field else []
        return basin.EnergyBlock(
            dim=6, terms=[terms.VmfAttention(heads=2, head_dim=3, beta=1.0, init_std=1.0),
                          terms.HopfieldMemory(memories=8, init_std=1.0), *extra],
            dynamics=dynamics.Controlled(alpha=0.1), dtype=torch.float64, **kw).train()

    settling = {"mode": "implicit", "tol": 1e-12, "max_steps": 5000, "solver_tol": 1e-12}
    torch.manual_seed(1)
    target = torch.randn(2, 3, 6, dtype=torch.float64)
    grads = []
    for block in (build(False, steps=2, gradient=settling), build(True, steps=2, gradient=settling),
                  build(True, steps=3000)):
        x = torch.randn(2, 3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        x.requires_grad_(True)
        (block(x) - target).pow(2).sum().backward()
        grads.append(x.grad)
    forgot, implicit, unrolled = grads
    assert forgot is None or forgot.abs().max() == 0
    assert implicit.abs().max() > 1e-3
    torch.testing.assert_close(implicit, unrolled, rtol=1e-5, atol=1e-8)


def test_hflayers_readme_examples_run_on_basins_layers_with_the_same_shapes():
    """The examples of hflayers' README, with only the import changed."""
    torch.manual_seed(0)
    Y, R = torch.randn(2, 5, 4), torch.randn(2, 3, 4)
    hopfield = basin.Hopfield(input_size=4)  # associations within one set
    assert hopfield(Y).shape == (2, 5, 4)
    assert hopfield((Y, R, Y)).shape == (2, 3, 4)  # (stored, state, projected)
    hopfield = basin.Hopfield(input_size=4, hidden_size=8, output_size=6, num_heads=2,
                              scaling=0.25, update_steps_max=3, update_steps_eps=1e-4,
                              normalize_stored_pattern=True, normalize_state_pattern=True,
                              normalize_pattern_projection=True, batch_first=True)
    assert hopfield((Y, R, Y)).shape == (2, 3, 6)
    pooling = basin.HopfieldPooling(input_size=4, quantity=2)
    assert pooling(Y).shape == (2, 2 * 4)
    lookup = basin.HopfieldLayer(input_size=4, quantity=10)
    assert lookup(R).shape == (2, 3, 4)


def test_hflayers_masks_and_batch_first_mean_what_they_mean_there():
    torch.manual_seed(0)
    Y, R = torch.randn(2, 5, 4), torch.randn(2, 3, 4)
    mask = torch.tensor([[False] * 5, [False, False, True, True, True]])
    hopfield = basin.Hopfield(input_size=4, num_heads=2)
    ours = hopfield(R, Y, key_padding_mask=mask)
    torch.testing.assert_close(hopfield((Y, R, Y), stored_pattern_padding_mask=mask), ours)
    torch.testing.assert_close(hopfield(R, Y[:, :2])[1], ours[1])  # padding left out
    late = basin.Hopfield(input_size=4, num_heads=2, batch_first=False)
    late.load_state_dict(hopfield.state_dict())
    torch.testing.assert_close(late((Y.transpose(0, 1), R.transpose(0, 1), Y.transpose(0, 1)),
                                    stored_pattern_padding_mask=mask).transpose(0, 1), ours)
    pooling = basin.HopfieldPooling(input_size=4)
    torch.testing.assert_close(pooling(Y, stored_pattern_padding_mask=mask),
                               pooling(Y, key_padding_mask=mask))


def test_hflayers_options_basin_lacks_are_refused_by_name():
    with pytest.raises(ValueError, match="dropout"):
        basin.Hopfield(input_size=4, dropout=0.1)
    basin.Hopfield(input_size=4, dropout=0.0, input_bias=True)  # their defaults: accepted
    with pytest.raises(ValueError, match="association_mask"):
        basin.Hopfield(input_size=4)(torch.randn(1, 2, 4), association_mask=torch.ones(2, 2))
    with pytest.raises(ValueError, match="torch.float32 or torch.float64"):
        basin.Hopfield(input_size=4, dtype=torch.float16)
