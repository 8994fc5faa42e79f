"""Finer chain stages: split blocks into their sequential parts where the data flow allows.

``split_model(blocks, loss_fn, "layer")`` replaces

- a pre-norm transformer block (GPT-2 `GPTBlock`, ViT `EncoderBlock`), x -> x + attn(ln1(x)) ->
  x + mlp(ln2(x)), by two stages: the attention half ``x + drop(proj(attn(ln1(x))))`` and the MLP
  half ``x + drop(fc_out(gelu(fc(ln2(x)))))``; each half's residual is its own input, so the
  chain's activations stay single tensors (a_{i+1} of the attention half is the MLP half's input);
- GPT-2's head (`GPTHead`: final layer norm, then the tied language-model projection) by the norm
  as the last stage, and the projection moved into the loss stage (`ProjectedLMLoss`: logits, then
  the next-token cross-entropy). The (N, T, vocab) logits are the largest tensor of the network,
  and the chain model charges a stage's output in its tape and the loss's input a_L while the
  loss runs: with the logits as a_L they would be counted twice (tape and delta_L) beyond what
  the cross-entropy's backward keeps, while torch frees them once the log-softmax is computed.
  Inside the loss stage they live only while the loss op runs, which runs once (never
  recomputed), so a_L is the (N, T, d) hidden state.

The parts share the original modules (the same parameters, in the same order), and consume the
random generator in the same order (attention dropout, then the projection's, then the MLP's), so
the split chain computes the same function and gradients as the unsplit one, seed for seed.
Other blocks are kept whole; ``"block"`` keeps every block and the loss as they are.

A ResNet bottleneck is not split. Its skip spans the whole main path: split stages would have to
carry it beside the activation, a_{i+1} = (main path, skip), and the chain model, whose tape
contains its stage's output, would count the skip once in a_i and again in every tape of the
bottleneck (the largest tensor of the block, counted up to three times in a backward where it
is held once). A skip spanning stages is a graph, not a chain: export it with
``memsched export-graph`` and use the graph problem (docs/graph.md), whose
solvers keep each tensor once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from memsched.solvers.errors import InputError, flag
from torch import nn

from .common import lm_loss
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


class ProjectedLMLoss(nn.Module):
    """GPT-2's tied language-model projection and the next-token cross-entropy, as one loss stage:
    hidden state (N, T, d) and token ids (N, T) -> mean loss. The logits (N, T, vocab) are a
    temporary of the loss op (freed once the log-softmax has them)."""

    def __init__(self, embedding: nn.Embedding) -> None:
        super().__init__()
        self.embedding = embedding

    def forward(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """``lm_loss(h @ W_emb^T, target)``: the same value as `GPTHead`'s projection then `lm_loss`."""
        return lm_loss(F.linear(h, self.embedding.weight), target)


def split_block(block: nn.Module) -> list[nn.Module]:
    """The sequential parts of one block (the block itself when it has none we split); GPT-2's
    head keeps only its final norm (its projection goes into the loss, `split_model`)."""
    if isinstance(block, (GPTBlock, EncoderBlock)):
        return [AttentionHalf(block), MLPHalf(block)]
    if isinstance(block, GPTHead):
        return [block.ln]
    return [block]


def split_model(blocks: list[nn.Module], loss_fn: Callable[[torch.Tensor, Any], torch.Tensor], granularity: str
                ) -> tuple[list[nn.Module], Callable[[torch.Tensor, Any], torch.Tensor]]:
    """(blocks, loss) of the chain at `granularity`: "block" returns them unchanged; "layer" splits
    each block (`split_block`) and, when the last block is GPT-2's head and the loss `lm_loss`,
    makes the loss `ProjectedLMLoss` (the head's projection, then the cross-entropy)."""
    if granularity not in GRANULARITIES:
        raise InputError(f"unknown granularity {granularity!r} (one of {', '.join(GRANULARITIES)})",
                         field=flag("granularity"))
    if granularity == "block":
        return list(blocks), loss_fn
    head = blocks[-1] if blocks else None
    if isinstance(head, GPTHead) and loss_fn is not lm_loss:
        raise InputError("the layer split of GPT-2's head moves its projection into the loss: the loss must be "
                         "lm_loss", field=flag("granularity"))
    parts = [part for block in blocks for part in split_block(block)]
    if isinstance(head, GPTHead):
        return parts, ProjectedLMLoss(head.embedding)
    return parts, loss_fn
