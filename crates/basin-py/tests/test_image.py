"""basin.EnergyTransformer: ET's image-completion model composed from an EnergyBlock."""

import copy
import pickle

import pytest
import torch

import basin
from basin.image import patchify, unpatchify
from conftest import need

SMALL = dict(image_size=8, channels=2, patch=2, dim=12, heads=2, head_dim=4, memories=16,
             steps=3)


def test_patches_are_row_major_and_channel_first_and_round_trip():
    images = torch.arange(2 * 2 * 4 * 6, dtype=torch.float32).reshape(2, 2, 4, 6)
    p = patchify(images, 2)
    assert p.shape == (2, 6, 8)
    # Patch 1 is the grid's second column of the first row: channel 0's 2×2, then channel 1's.
    want = torch.cat([images[0, 0, 0:2, 2:4].flatten(), images[0, 1, 0:2, 2:4].flatten()])
    assert torch.equal(p[0, 1], want)
    assert torch.equal(unpatchify(p, 2, 2, 4, 6), images)
    with pytest.raises(ValueError, match="patch"):
        patchify(images, 4)


def test_hidden_pixels_do_not_reach_the_output_and_the_model_learns():
    model = basin.EnergyTransformer(**SMALL)
    images = torch.randn(6, 2, 8, 8)
    mask = torch.rand(6, model.tokens) < 0.5
    out = model(images, mask)
    assert out.shape == images.shape
    # What lies under the mask is replaced by the MASK token: changing it changes nothing.
    hidden = unpatchify(mask.float().unsqueeze(-1).expand(-1, -1, 8), 2, 2, 8, 8).bool()
    scrambled = torch.where(hidden, torch.randn_like(images), images)
    assert torch.allclose(model(scrambled, mask), out, atol=1e-6)
    with pytest.raises(ValueError, match="one flag per patch"):
        model(images, mask[:, 1:])
    # Smooth images: the hidden patches are predictable from the visible ones.
    grid = torch.linspace(-1, 1, 8)
    smooth = torch.stack([torch.outer(grid * a, grid * b).expand(2, 8, 8)
                          for a, b in torch.randn(32, 2)])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        m = torch.rand(32, model.tokens) < 0.5
        opt.zero_grad()
        loss = model.loss(smooth, m)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-10:]) / 10 < 0.5 * losses[0], losses
    params = dict(model.named_parameters())
    for name in ["encoder.weight", "mask_token", "pos", "block.attention.w_q", "decoder.weight"]:
        assert params[name].grad is not None, name


def test_it_behaves_as_a_module_and_returns_the_energy():
    model = basin.EnergyTransformer(**SMALL).eval()
    images, mask = torch.randn(2, 2, 8, 8), torch.rand(2, 16) < 0.5
    out, energy = model(images, mask, return_energy=True)
    assert energy.shape == (4, 2) and bool((energy[1:] <= energy[:-1] + 1e-5).all())
    for other in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert torch.equal(other(images, mask), out)
    assert model.double()(images.double(), mask).dtype == torch.float64


def test_its_parameters_are_those_of_basins_image_checkpoints():
    data = need("images/fashion-mnist")
    small = {"protocol.train_images": 64, "protocol.val_images": 16, "protocol.test_images": 16}
    run = basin.models.et_image(overrides=small, data_dir=data.parent.parent)
    mine = basin.EnergyTransformer(image_size=28, channels=1, patch=4, dim=64, heads=4,
                                   head_dim=16, memories=256, steps=12)
    theirs = {k: tuple(v.shape) for k, v in run.state_dict().items()}
    ours = {k: tuple(v.shape) for k, v in mine.state_dict().items()}
    assert ours == theirs
    mine.load_state_dict(run.state_dict())
