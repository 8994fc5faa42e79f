"""Finer chain stages: split blocks into their sequential parts where the data flow allows.

``split_blocks(blocks, "layer")`` replaces

- a pre-norm transformer block (GPT-2 `GPTBlock`, ViT `EncoderBlock`), x -> x + attn(ln1(x)) ->
  x + mlp(ln2(x)), by two stages: the attention half ``x + drop(proj(attn(ln1(x))))`` and the MLP
  half ``x + drop(fc_out(gelu(fc(ln2(x)))))``; each half's residual is its own input, so the
  chain's activations stay single tensors (a_{i+1} of the attention half is the MLP half's input);
- GPT-2's head (`GPTHead`: final layer norm, then the tied language-model projection) by the norm
  and the projection, so the (N, T, vocab) logits are a stage of their own, apart from the loss.

The parts share the original modules (the same parameters, in the same order), and consume the
random generator in the same order (attention dropout, then the projection's, then the MLP's), so
the split chain computes the same function and gradients as the unsplit one, seed for seed.
Other blocks are kept whole; ``"block"`` keeps every block whole. (A ResNet bottleneck's skip
spans its whole main path: splitting it needs the skip carried beside the activation, which
the chain model has no place for; that is the graph problem.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from memsched.solvers.errors import InputError
from torch import nn

from .gpt import GPTBlock, GPTHead
from .vit import EncoderBlock

GRANULARITIES = ("block", "layer")


class AttentionHalf(nn.Module):
    """``x + drop(proj(attn(ln1(x))))`` of a pre-norm transformer block (shares its modules)."""

    def __init__(self, block: GPTBlock | EncoderBlock) -> None:
        super().__init__()
        self.ln1, self.qkv, self.proj, self.drop = block.ln1, block.qkv, block.proj, block.drop
        self.heads = block.heads
        self.causal = isinstance(block, GPTBlock)
        self.attn_dropout = float(block.dropout) if isinstance(block, GPTBlock) else 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}, shape (N, T, d): x + attention(LN(x)), the first half of a transformer block."""
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        p = self.attn_dropout if self.training else 0.0
        att = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=self.causal)
        return x + self.drop(self.proj(att.transpose(1, 2).reshape(n, t, d)))


class MLPHalf(nn.Module):
    """``x + drop(fc_out(gelu(fc(ln2(x)))))`` of a pre-norm transformer block (shares its modules);
    GPT-2's GELU is the tanh approximation, ViT's the exact one with a dropout after it."""

    def __init__(self, block: GPTBlock | EncoderBlock) -> None:
        super().__init__()
        self.ln2, self.fc, self.fc_out, self.drop = block.ln2, block.fc, block.fc_out, block.drop
        self.gpt = isinstance(block, GPTBlock)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}, shape (N, T, d): x + MLP(LN(x)), the second half of a transformer block."""
        if self.gpt:
            return x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))
        return x + self.drop(self.fc_out(self.drop(F.gelu(self.fc(self.ln2(x))))))


class TiedProjection(nn.Module):
    """GPT-2's language-model projection with the token embedding's weight: (N, T, d) -> logits."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features (N, T, d) -> logits (N, T, vocab) with the tied embedding weight."""
        return F.linear(x, self.embedding.weight)


def split_block(block: nn.Module) -> list[nn.Module]:
    """The sequential parts of one block (the block itself when it has none we split)."""
    if isinstance(block, (GPTBlock, EncoderBlock)):
        return [AttentionHalf(block), MLPHalf(block)]
    if isinstance(block, GPTHead):
        return [block.ln, TiedProjection(block.embedding)]
    return [block]


def split_blocks(blocks: list[nn.Module], granularity: str) -> list[nn.Module]:
    """The chain of `blocks` at `granularity` ("block": unchanged; "layer": `split_block` each)."""
    if granularity not in GRANULARITIES:
        raise InputError(f"unknown granularity {granularity!r} (one of {', '.join(GRANULARITIES)})",
                         field="--granularity")
    if granularity == "block":
        return list(blocks)
    return [part for block in blocks for part in split_block(block)]
