"""ET's masked image completion model (Hoover et al. 2023, §3) as a ``torch.nn.Module`` built
from :class:`basin.EnergyBlock`: images and a patch mask in, the completed images out.

Its parameters carry the names of basin's image-completion checkpoints (``encoder.weight``,
``mask_token``, ``cls_token``, ``pos``, ``block.…``, ``decoder_norm.…``, ``decoder.…``), so the
``best.`` weights of a ``basin train`` run of the same architecture load into it.
"""

import torch

from .block import et_block


def patchify(images, patch):
    """``[B, C, H, W]`` images as ``[B, N, C·p·p]`` patches: row-major over the grid, each patch
    channel-first (``c, y, x``), as basin's image crate lays them out."""
    b, c, h, w = images.shape
    if h % patch or w % patch:
        raise ValueError(f"patch: a side that divides {h}×{w}, got {patch}")
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // patch) * (w // patch), c * patch * patch)


def unpatchify(patches, patch, channels, height, width):
    """The inverse of :func:`patchify`: ``[B, N, C·p·p]`` patches as ``[B, C, H, W]`` images."""
    b = patches.shape[0]
    x = patches.reshape(b, height // patch, width // patch, channels, patch, patch)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, channels, height, width)


class EnergyTransformer(torch.nn.Module):
    """The Energy Transformer for masked image completion (ET §3, Figure 2): each ``patch ×
    patch`` patch is encoded linearly to a token, the hidden ones replaced by a learned MASK
    token, a CLS token and learned position embeddings added; the tokens descend an
    :class:`basin.EnergyBlock` (energy attention, ET eq. 3, and the Hopfield memory, eq. 5,
    under gradient flow, eq. 6); a layer norm and a linear map decode each token to its patch::

        model = basin.EnergyTransformer(image_size=32, channels=3, patch=4, dim=64, heads=4,
                                        head_dim=16, memories=256, steps=12)
        mask = torch.rand(8, model.tokens) < 0.5          # True: hidden
        completed = model(images, mask)                   # images, completed: [8, 3, 32, 32]
        loss = model.loss(images, mask)                   # MSE over the hidden patches

    The defaults are ET's CIFAR-10 model (Appendix B: 4 × 4 patches, D = 768, 12 heads of 64,
    K = 3072 memories, T = 12 steps of α = 0.1). ``block`` replaces the block's whole config (a
    dict, TOML text or path, as :class:`basin.EnergyBlock` takes it; its ``dim`` is the token
    width). Images are taken as they come: normalise them as the run files do (per channel).
    """

    def __init__(self, image_size=32, channels=3, patch=4, dim=768, heads=12, head_dim=64,
                 memories=3072, steps=12, alpha=0.1, beta=None, cls_token=True,
                 token_init_std=0.002, block=None):
        super().__init__()
        height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
        if height % patch or width % patch:
            raise ValueError(f"patch: a side that divides {height}×{width}, got {patch}")
        block = et_block(block, dim, heads, head_dim, memories, steps, alpha, beta)
        self.height, self.width, self.channels, self.patch = height, width, channels, patch
        self.tokens = (height // patch) * (width // patch)
        d, p = block.dim, channels * patch * patch
        self.encoder = torch.nn.Linear(p, d)
        self.mask_token = torch.nn.Parameter(torch.randn(d) * token_init_std)
        self.cls_token = torch.nn.Parameter(torch.randn(d) * token_init_std) if cls_token else None
        self.pos = torch.nn.Parameter(torch.randn(self.tokens + int(cls_token), d) * token_init_std)
        self.block = block
        self.decoder_norm = torch.nn.LayerNorm(d)
        self.decoder = torch.nn.Linear(d, p)

    def encode(self, images, mask):
        """The tokens ``x₀`` ``[B, N(+1), D]`` the block descends from: encoded patches, the
        hidden ones (``mask`` ``[B, N]``, ``True`` = hidden) replaced by MASK, CLS first,
        positions added."""
        patches = patchify(images, self.patch)
        if mask.shape != patches.shape[:2]:
            raise ValueError(f"mask: expected {tuple(patches.shape[:2])} (one flag per patch), "
                             f"got {tuple(mask.shape)}")
        x = self.encoder(patches)
        x = torch.where(mask.to(torch.bool).unsqueeze(-1), self.mask_token.expand_as(x), x)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], 1, -1), x], 1)
        return x + self.pos

    def decode(self, tokens):
        """Patches ``[B, N, C·p·p]`` from the descended tokens (CLS dropped)."""
        if self.cls_token is not None:
            tokens = tokens[:, 1:]
        return self.decoder(self.decoder_norm(tokens))

    def forward(self, images, mask, return_energy=False):
        """The completed images ``[B, C, H, W]`` (every patch predicted; the visible ones are
        the model's reconstruction too); ``return_energy=True`` adds the block's energy per
        descent step ``[T + 1, B]``."""
        out = self.block(self.encode(images, mask), return_energy=return_energy)
        tokens, energy = out if return_energy else (out, None)
        completed = unpatchify(self.decode(tokens), self.patch, self.channels, self.height,
                               self.width)
        return (completed, energy) if return_energy else completed

    def loss(self, images, mask):
        """ET's training loss: the mean squared error over the hidden patches' values."""
        pred = self.decode(self.block(self.encode(images, mask)))
        target = patchify(images, self.patch)
        hidden = mask.to(torch.bool).unsqueeze(-1).to(pred.dtype)
        count = hidden.sum() * pred.shape[-1]
        return ((pred - target).square() * hidden).sum() / count.clamp_min(1)
