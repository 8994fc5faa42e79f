"""Vision Transformer ViT-B/16 (Dosovitskiy et al. 2021) as a chain: patch embedding (with the class
token and position embeddings), one element per encoder block, head. 86,567,656 parameters at
width 768, depth 12, 224 px, 1000 classes (torchvision's vit_b_16)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from memsched.solvers.errors import InputError, flag
from torch import nn


class PatchEmbedding(nn.Module):
    """Conv patch x patch stride patch -> tokens, class token prepended, position embeddings, dropout:
    images (N, C, H, W) -> (N, 1 + HW / patch^2, d)."""

    def __init__(self, in_channels: int, d: int, patch: int, tokens: int, dropout: float) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.empty(1, tokens + 1, d).normal_(std=0.02))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Image (N, 3, H, W) -> tokens (N, 1 + patches, d): patch projection, class token, positions, dropout."""
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1)
        return self.drop(x + self.pos)


class EncoderBlock(nn.Module):
    """Pre-norm encoder block: x + attn(ln(x)), then x + mlp(ln(x)) (GELU, hidden 4d); full attention."""

    def __init__(self, d: int, heads: int, dropout: float, eps: float = 1e-6) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, eps=eps)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=eps)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}, shape (N, T, d): self-attention then MLP, each pre-norm with a residual."""
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(n, t, d)))
        return x + self.drop(self.fc_out(self.drop(F.gelu(self.fc(self.ln2(x))))))


class ViTHead(nn.Module):
    """Final layer norm, the class token, linear layer to `classes` logits."""

    def __init__(self, d: int, classes: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d, eps=eps)
        self.fc = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens (N, T, d) -> logits from the layer-normed class token."""
        return self.fc(self.ln(x)[:, 0])


def vit_blocks(*, width: int = 768, depth: int = 12, heads: int | None = None, patch: int = 16,
               image_size: tuple[int, int] = (224, 224), classes: int = 1000, in_channels: int = 3,
               dropout: float = 0.0) -> list[nn.Module]:
    """ViT with model dimension `width`, `depth` blocks, `heads` heads (width / 64 by default)."""
    heads = heads or max(1, width // 64)
    if width % heads:
        raise InputError(f"width {width} is not a multiple of the number of heads {heads}", field=flag("width"))
    h, w = image_size
    if h % patch or w % patch:
        raise InputError(f"vit needs image sides multiple of the patch size {patch}", field=flag("image_size"))
    emb = PatchEmbedding(in_channels, width, patch, (h // patch) * (w // patch), dropout)
    return [emb] + [EncoderBlock(width, heads, dropout) for _ in range(depth)] + [ViTHead(width, classes)]
