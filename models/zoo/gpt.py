"""GPT-2 (Radford et al. 2019) as a chain: embedding, transformer blocks, tied head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from memsched.solvers.errors import InputError, flag
from torch import nn


# --------------------------------------------------------------------------- GPT-2
class GPTEmbedding(nn.Module):
    """Token + learned position embeddings, then dropout: ids (N, T) -> (N, T, d)."""

    def __init__(self, vocab: int, max_len: int, d: int, dropout: float) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_len, d)
        self.drop = nn.Dropout(dropout)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.01)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids (N, T) -> a_1 (N, T, d): token plus position embeddings, dropout."""
        pos = torch.arange(ids.shape[1], device=ids.device)
        return self.drop(self.wte(ids) + self.wpe(pos))


class GPTBlock(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x)); causal attention."""

    def __init__(self, d: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)
        self.dropout = dropout
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """a_i -> a_{i+1}, shape (N, T, d): causal self-attention then MLP, each pre-norm with a residual."""
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(n, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                             is_causal=True)
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(n, t, d)))
        return x + self.drop(self.fc_out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPTHead(nn.Module):
    """Final layer norm and the language-model head (weights tied to the token embedding)."""

    def __init__(self, d: int, embedding: nn.Embedding) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.embedding = embedding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Final features (N, T, d) -> logits (N, T, vocab) with the embedding weight tied."""
        return F.linear(self.ln(x), self.embedding.weight)


def gpt2_blocks(*, width: int = 768, depth: int = 12, heads: int | None = None, vocab: int = 50257,
                max_len: int = 1024, dropout: float = 0.1) -> list[nn.Module]:
    """GPT-2 (Radford et al. 2019): embedding, `depth` transformer blocks, head. 124M at defaults."""
    heads = heads or max(1, width // 64)
    if width % heads:
        raise InputError(f"width {width} is not a multiple of the number of heads {heads}", field=flag("width"))
    emb = GPTEmbedding(vocab, max_len, width, dropout)
    return [emb] + [GPTBlock(width, heads, dropout) for _ in range(depth)] + [GPTHead(width, emb.wte)]
