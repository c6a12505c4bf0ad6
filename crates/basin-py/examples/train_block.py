"""An energy block inside a plain PyTorch training loop: denoising small token sets.

A linear encoder feeds an ``EnergyBlock`` (ET's energy attention and Hopfield memory plus a
term written here in Python), whose settled tokens a linear decoder reads; Adam trains all of
it with ``loss.backward()``. Run: ``python crates/basin-py/examples/train_block.py``.
"""

import torch
from torch import nn

import basin
from basin import dynamics, terms


class Smoothness(nn.Module):
    """A new energy, in Python: E(g) = λ/2 Σ_C ‖g_C − mean_C g‖² pulls tokens together."""

    def __init__(self, strength=0.1):
        super().__init__()
        self.log_strength = nn.Parameter(torch.tensor(strength).log())

    def energy(self, g):
        spread = g - g.mean(dim=1, keepdim=True)
        return 0.5 * self.log_strength.exp() * spread.pow(2).sum(dim=(1, 2))


def main():
    torch.manual_seed(0)
    dim, tokens, width = 16, 8, 4
    model = nn.Sequential(
        nn.Linear(width, dim),
        basin.EnergyBlock(dim=dim, steps=4,
                          terms=[terms.Attention(heads=2, head_dim=8),
                                 terms.HopfieldMemory(memories=32), Smoothness()],
                          dynamics=dynamics.GradientFlow(alpha=0.1)),
        nn.Linear(dim, width),
    )
    clean = torch.randn(256, tokens, width).cumsum(dim=1) / 4  # smooth sequences
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for epoch in range(8):
        for batch in clean.split(32):
            noisy = batch + 0.3 * torch.randn_like(batch)
            loss = (model(noisy) - batch).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: loss {sum(losses[-8:]) / 8:.4f}")
    assert losses[-1] < losses[0], "the model did not learn"
    print(f"ok: loss {losses[0]:.3f} → {losses[-1]:.3f}")


if __name__ == "__main__":
    main()
