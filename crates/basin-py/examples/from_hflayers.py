"""hflayers code switched to basin: the import changes, the rest does not.

Multiple-instance learning with ``HopfieldPooling`` (the "Hopfield Networks is All You Need"
bag classifier) written as for ml-jku's hflayers: ``input_size``, ``num_heads``, ``scaling``,
``stored_pattern_padding_mask``. Run: ``python crates/basin-py/examples/from_hflayers.py``.
"""

import torch
from torch import nn

# from hflayers import HopfieldPooling   # before
from basin import HopfieldPooling        # after


HIDDEN = 2 * torch.randn(8, generator=torch.Generator().manual_seed(7))


def bags(count, size=10, width=8, generator=None):
    """Bags of instances; a bag is positive when it holds an instance near a hidden pattern."""
    x = torch.randn(count, size, width, generator=generator)
    labels = torch.randint(0, 2, (count,), generator=generator)
    hidden = HIDDEN
    x[labels == 1, 0] = hidden + 0.3 * torch.randn(int(labels.sum()), width, generator=generator)
    lengths = torch.randint(size // 2, size + 1, (count,), generator=generator)
    padding = torch.arange(size)[None, :] >= lengths[:, None]  # True: not an instance
    return x, padding, labels.float()


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    x, padding, y = bags(512, generator=generator)
    pooling = HopfieldPooling(input_size=8, hidden_size=8, num_heads=2, scaling=0.5,
                              update_steps_max=0, batch_first=True)
    head = nn.Linear(8, 1)
    opt = torch.optim.Adam([*pooling.parameters(), *head.parameters()], lr=1e-2)
    for epoch in range(15):
        for idx in torch.randperm(len(x)).split(64):
            logits = head(pooling(x[idx], stored_pattern_padding_mask=padding[idx])).squeeze(-1)
            loss = nn.functional.binary_cross_entropy_with_logits(logits, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    tx, tpad, ty = bags(256, generator=generator)
    with torch.no_grad():
        accuracy = ((head(pooling(tx, stored_pattern_padding_mask=tpad)).squeeze(-1) > 0).float()
                    == ty).float().mean().item()
    print(f"test accuracy {accuracy:.3f} (chance 0.5)")
    assert accuracy > 0.8, "the bag classifier did not learn"
    print("ok")


if __name__ == "__main__":
    main()
