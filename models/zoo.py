"""Networks as chains of blocks, in plain PyTorch (no torchvision).

Each model is a list of ``nn.Module`` blocks: block i maps the tensor a_i to a_{i+1}, the
last block produces the network output; the loss ``loss_fn(output, target)`` is separate.
Skip connections stay inside blocks: a ResNet block is a residual block, a DenseNet block a
dense layer returning ``cat([x, new_features])``, an Inception block a whole mixed module;
for the U-Net (whose skips span the network) the encoder, the inner levels and the decoder
are nested inside one block, as rotor does, so its chain is short: in-conv, U, out-conv.

Sizes are parameters so that tests build tiny versions:
``build_model(name, batch=..., image_size=..., seq_len=..., width=..., depth=..., device=...)``
returns a `ZooModel` that unpacks as ``blocks, example_input, loss_fn, target``.
``width`` is the base channel count (64 in the papers' ResNet, VGG, U-Net; it scales DenseNet's
growth rate and Inception's channels by width/64) or GPT-2's model dimension (768).
Any ``nn.Sequential`` or list of blocks also works as a chain (`models.chain.executor.as_blocks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from memsched.solvers.errors import InputError
from torch import nn

__all__ = ["MODELS", "ZooModel", "build_model", "model_names", "resolve_device", "count_parameters",
           "classification_loss", "lm_loss", "segmentation_loss"]


# --------------------------------------------------------------------------- losses
def classification_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of logits (N, C) against class indices (N,)."""
    return F.cross_entropy(output, target)


def lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of logits (N, T, V) against token ids (N, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def segmentation_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean per-pixel cross-entropy of logits (N, C, H, W) against labels (N, H, W)."""
    return F.cross_entropy(output, target)


# --------------------------------------------------------------------------- helpers
class ConvBNReLU(nn.Sequential):
    """conv (no bias) -> batch norm -> ReLU."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int] = 3, stride: int = 1,
                 padding: int | tuple[int, int] = 0, eps: float = 1e-5) -> None:
        super().__init__(nn.Conv2d(cin, cout, kernel, stride, padding, bias=False), nn.BatchNorm2d(cout, eps=eps),
                         nn.ReLU())
        self.out_channels = cout


class ClassifierHead(nn.Module):
    """Global average pool, (dropout,) flatten, linear layer to `classes` logits."""

    def __init__(self, cin: int, classes: int, dropout: float = 0.0, pre: nn.Module | None = None) -> None:
        super().__init__()
        self.pre = pre if pre is not None else nn.Identity()
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pre(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(self.drop(x))


# --------------------------------------------------------------------------- ResNet
class ResNetStem(nn.Module):
    """conv 7x7 stride 2, BN, ReLU, max-pool 3x3 stride 2."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = ConvBNReLU(cin, cout, 7, 2, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(self.conv(x), 3, 2, 1)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and the identity (or 1x1 projection) shortcut."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), and the shortcut."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.shortcut = _projection(cin, cout, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def _projection(cin: int, cout: int, stride: int) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


RESNET_LAYERS = {
    18: (BasicBlock, (2, 2, 2, 2)), 34: (BasicBlock, (3, 4, 6, 3)), 50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)), 152: (Bottleneck, (3, 8, 36, 3)),
}


def resnet_blocks(variant: int, *, width: int = 64, classes: int = 1000, in_channels: int = 3,
                  depth: int | None = None) -> list[nn.Module]:
    """ResNet-`variant` (He et al. 2016): stem, one chain element per residual block, head.

    `depth` (optional) caps the number of residual blocks per stage (tiny test models).
    """
    kind, counts = RESNET_LAYERS[variant]
    if depth is not None:
        counts = tuple(min(c, depth) for c in counts)
    blocks: list[nn.Module] = [ResNetStem(in_channels, width)]
    cin = width
    for stage, n in enumerate(counts):
        planes = width * 2 ** stage
        for b in range(n):
            block = kind(cin, planes, 2 if (b == 0 and stage > 0) else 1)
            blocks.append(block)
            cin = planes * kind.expansion
    blocks.append(ClassifierHead(cin, classes))
    return blocks


# --------------------------------------------------------------------------- VGG-16
VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGGConv(nn.Module):
    """3x3 conv + ReLU, followed by a 2x2 max-pool when `pool`."""

    def __init__(self, cin: int, cout: int, pool: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv(x))
        return F.max_pool2d(x, 2) if self.pool else x


class VGGFC(nn.Module):
    """(Adaptive pool + flatten,) linear, and ReLU + dropout unless last."""

    def __init__(self, cin: int, cout: int, *, pool: int | None = None, last: bool = False,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.pool = pool
        self.fc = nn.Linear(cin, cout)
        self.last = last
        self.drop = nn.Dropout(dropout) if dropout and not last else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pool is not None:
            x = F.adaptive_avg_pool2d(x, self.pool).flatten(1)
        x = self.fc(x)
        return x if self.last else self.drop(F.relu(x))


def vgg16_blocks(*, width: int = 64, classes: int = 1000, image_size: int = 224, in_channels: int = 3,
                 dropout: float = 0.5) -> list[nn.Module]:
    """VGG-16 (Simonyan & Zisserman 2015): 13 conv blocks (pools merged), 3 linear blocks.

    Channels scale by width/64; the classifier's hidden size is 64 * width (4096 at width 64)
    and the pooled map is min(7, image_size // 32) squared.
    """
    blocks: list[nn.Module] = []
    cin = in_channels
    cfg = list(VGG16)
    for k, v in enumerate(cfg):
        if v == "M":
            continue
        cout = max(1, int(v) * width // 64)
        blocks.append(VGGConv(cin, cout, pool=k + 1 < len(cfg) and cfg[k + 1] == "M"))
        cin = cout
    pool = max(1, min(7, image_size // 32))
    hidden = 64 * width
    blocks.append(VGGFC(cin * pool * pool, hidden, pool=pool, dropout=dropout))
    blocks.append(VGGFC(hidden, hidden, dropout=dropout))
    blocks.append(VGGFC(hidden, classes, last=True))
    return blocks


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
        return F.linear(self.ln(x), self.embedding.weight)


def gpt2_blocks(*, width: int = 768, depth: int = 12, heads: int | None = None, vocab: int = 50257,
                max_len: int = 1024, dropout: float = 0.1) -> list[nn.Module]:
    """GPT-2 (Radford et al. 2019): embedding, `depth` transformer blocks, head. 124M at defaults."""
    heads = heads or max(1, width // 64)
    if width % heads:
        raise InputError(f"width {width} is not a multiple of the number of heads {heads}", field="--width")
    emb = GPTEmbedding(vocab, max_len, width, dropout)
    return [emb] + [GPTBlock(width, heads, dropout) for _ in range(depth)] + [GPTHead(width, emb.wte)]


# --------------------------------------------------------------------------- DenseNet-121
class DenseLayer(nn.Module):
    """BN-ReLU-conv1x1 (bn_size*k) - BN-ReLU-conv3x3 (k); returns cat([x, new]) (C + k channels)."""

    def __init__(self, cin: int, growth: int, bn_size: int = 4) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(bn_size * growth)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        new = self.conv1(F.relu(self.bn1(x)))
        new = self.conv2(F.relu(self.bn2(new)))
        return torch.cat([x, new], 1)


class Transition(nn.Module):
    """BN-ReLU-conv1x1 halving the channels, then 2x2 average pool."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


def densenet121_blocks(*, width: int = 64, classes: int = 1000, in_channels: int = 3,
                       depth: int | None = None) -> list[nn.Module]:
    """DenseNet-121 (Huang et al. 2017): stem, one chain element per dense layer and transition.

    Growth rate 32 * width / 64, initial features 2x that; `depth` caps layers per dense block.
    """
    growth = max(1, 32 * width // 64)
    config = (6, 12, 24, 16)
    if depth is not None:
        config = tuple(min(c, depth) for c in config)
    c = 2 * growth
    blocks: list[nn.Module] = [ResNetStem(in_channels, c)]
    for b, n in enumerate(config):
        for _ in range(n):
            blocks.append(DenseLayer(c, growth))
            c += growth
        if b + 1 < len(config):
            blocks.append(Transition(c, c // 2))
            c //= 2
    blocks.append(ClassifierHead(c, classes, pre=nn.Sequential(nn.BatchNorm2d(c), nn.ReLU())))
    return blocks


# --------------------------------------------------------------------------- Inception-v3
class _Branches(nn.Module):
    """Runs branches on the same input and concatenates their outputs along channels."""

    def __init__(self, branches: list[nn.Module]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


class _Pool(nn.Module):
    def __init__(self, kind: str, stride: int, then: nn.Module | None = None) -> None:
        super().__init__()
        self.kind, self.stride = kind, stride
        self.then = then if then is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "avg":
            x = F.avg_pool2d(x, 3, self.stride, 1 if self.stride == 1 else 0)
        else:
            x = F.max_pool2d(x, 3, self.stride)
        return self.then(x)


class _Split(nn.Module):
    """A stem conv then two parallel convolutions whose outputs are concatenated."""

    def __init__(self, stem: nn.Module, a: nn.Module, b: nn.Module) -> None:
        super().__init__()
        self.stem, self.a, self.b = stem, a, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        return torch.cat([self.a(x), self.b(x)], 1)


def _cbr(cin: int, cout: int, k: Any = 1, stride: int = 1, padding: Any = 0) -> ConvBNReLU:
    return ConvBNReLU(cin, cout, k, stride, padding, eps=1e-3)


def _inception_a(cin: int, pool: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b1 = _cbr(cin, c(64))
    b5 = nn.Sequential(_cbr(cin, c(48)), _cbr(c(48), c(64), 5, padding=2))
    b3 = nn.Sequential(_cbr(cin, c(64)), _cbr(c(64), c(96), 3, padding=1), _cbr(c(96), c(96), 3, padding=1))
    bp = _Pool("avg", 1, _cbr(cin, c(pool)))
    return _Branches([b1, b5, b3, bp]), c(64) + c(64) + c(96) + c(pool)


def _inception_b(cin: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b3 = _cbr(cin, c(384), 3, 2)
    bd = nn.Sequential(_cbr(cin, c(64)), _cbr(c(64), c(96), 3, padding=1), _cbr(c(96), c(96), 3, 2))
    return _Branches([b3, bd, _Pool("max", 2)]), c(384) + c(96) + cin


def _inception_c(cin: int, c7: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b1 = _cbr(cin, c(192))
    b7 = nn.Sequential(_cbr(cin, c7), _cbr(c7, c7, (1, 7), padding=(0, 3)), _cbr(c7, c(192), (7, 1), padding=(3, 0)))
    bd = nn.Sequential(_cbr(cin, c7), _cbr(c7, c7, (7, 1), padding=(3, 0)), _cbr(c7, c7, (1, 7), padding=(0, 3)),
                       _cbr(c7, c7, (7, 1), padding=(3, 0)), _cbr(c7, c(192), (1, 7), padding=(0, 3)))
    bp = _Pool("avg", 1, _cbr(cin, c(192)))
    return _Branches([b1, b7, bd, bp]), 4 * c(192)


def _inception_d(cin: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b3 = nn.Sequential(_cbr(cin, c(192)), _cbr(c(192), c(320), 3, 2))
    b7 = nn.Sequential(_cbr(cin, c(192)), _cbr(c(192), c(192), (1, 7), padding=(0, 3)),
                       _cbr(c(192), c(192), (7, 1), padding=(3, 0)), _cbr(c(192), c(192), 3, 2))
    return _Branches([b3, b7, _Pool("max", 2)]), c(320) + c(192) + cin


def _inception_e(cin: int, c: Callable[[int], int]) -> tuple[nn.Module, int]:
    b1 = _cbr(cin, c(320))
    b3 = _Split(_cbr(cin, c(384)), _cbr(c(384), c(384), (1, 3), padding=(0, 1)),
                _cbr(c(384), c(384), (3, 1), padding=(1, 0)))
    bd = _Split(nn.Sequential(_cbr(cin, c(448)), _cbr(c(448), c(384), 3, padding=1)),
                _cbr(c(384), c(384), (1, 3), padding=(0, 1)), _cbr(c(384), c(384), (3, 1), padding=(1, 0)))
    bp = _Pool("avg", 1, _cbr(cin, c(192)))
    return _Branches([b1, b3, bd, bp]), c(320) + 2 * c(384) + 2 * c(384) + c(192)


class _ConvPool(nn.Sequential):
    """A stem convolution optionally followed by a 3x3 stride-2 max-pool."""

    def __init__(self, conv: nn.Module, pool: bool) -> None:
        super().__init__(conv, _Pool("max", 2) if pool else nn.Identity())


def inception_v3_blocks(*, width: int = 64, classes: int = 1000, in_channels: int = 3,
                        dropout: float = 0.5) -> list[nn.Module]:
    """Inception-v3 (Szegedy et al. 2016) without the auxiliary classifier: 5 stem convs (pools
    merged), mixed 5b-5d, 6a-6e, 7a-7c, head. Channels scale by width/64; images >= 75 pixels."""
    def c(n: int) -> int:
        return max(1, round(n * width / 64))

    blocks: list[nn.Module] = [
        _ConvPool(_cbr(in_channels, c(32), 3, 2), False),
        _ConvPool(_cbr(c(32), c(32), 3), False),
        _ConvPool(_cbr(c(32), c(64), 3, padding=1), True),
        _ConvPool(_cbr(c(64), c(80), 1), False),
        _ConvPool(_cbr(c(80), c(192), 3), True),
    ]
    cin = c(192)
    for pool in (32, 64, 64):
        block, cin = _inception_a(cin, pool, c)
        blocks.append(block)
    block, cin = _inception_b(cin, c)
    blocks.append(block)
    for c7 in (128, 160, 160, 192):
        block, cin = _inception_c(cin, c(c7), c)
        blocks.append(block)
    block, cin = _inception_d(cin, c)
    blocks.append(block)
    for _ in range(2):
        block, cin = _inception_e(cin, c)
        blocks.append(block)
    blocks.append(ClassifierHead(cin, classes, dropout=dropout))
    return blocks


# --------------------------------------------------------------------------- U-Net
class DoubleConv(nn.Sequential):
    """(3x3 conv, BN, ReLU) twice."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(ConvBNReLU(cin, cout, 3, padding=1), ConvBNReLU(cout, cout, 3, padding=1))


class UNetLevel(nn.Module):
    """One U-Net level with everything inside it: encoder convs, 2x2 max-pool, the inner levels
    (or the bottleneck), 2x2 transposed conv up, concatenation with the skip, decoder convs."""

    def __init__(self, cin: int, c: int, levels: int) -> None:
        super().__init__()
        self.enc = DoubleConv(cin, c)
        self.inner: nn.Module = UNetLevel(c, 2 * c, levels - 1) if levels > 1 else DoubleConv(c, 2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, 2, stride=2)
        self.dec = DoubleConv(2 * c, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = self.enc(x)
        y = self.up(self.inner(F.max_pool2d(skip, 2)))
        return self.dec(torch.cat([skip, y], 1))


def unet_blocks(*, width: int = 64, depth: int = 4, classes: int = 2, in_channels: int = 3) -> list[nn.Module]:
    """U-Net (Ronneberger et al. 2015) with `depth` pooling levels: chain of three blocks:
    input conv (in -> width), the nested U (all skips inside), 1x1 output conv. Image sizes
    must be multiples of 2**depth."""
    return [ConvBNReLU(in_channels, width, 3, padding=1), UNetLevel(width, width, depth),
            nn.Conv2d(width, classes, 1)]


# --------------------------------------------------------------------------- registry
@dataclass
class ZooModel:
    """A built model: unpacks as ``blocks, example_input, loss_fn, target``."""

    blocks: list[nn.Module]
    example_input: torch.Tensor
    loss_fn: Callable[[torch.Tensor, Any], torch.Tensor]
    target: torch.Tensor
    name: str
    config: dict[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.blocks, self.example_input, self.loss_fn, self.target))

    @property
    def label(self) -> str:
        """A short name with the sizes, e.g. ``resnet18-b32-224`` (chain names)."""
        c = self.config
        size = c.get("seq_len") if c.get("seq_len") is not None else c.get("image_size")
        extra = "".join(f"-{k[0]}{c[k]}" for k in ("width", "depth") if c.get(k) is not None)
        return f"{self.name}-b{c.get('batch')}-{size}{extra}"


# name -> (kind, defaults)
MODELS: dict[str, dict[str, Any]] = {
    **{f"resnet{v}": {"kind": "image", "image_size": 224, "width": 64, "batch": 32} for v in RESNET_LAYERS},
    "densenet121": {"kind": "image", "image_size": 224, "width": 64, "batch": 32},
    "inception_v3": {"kind": "image", "image_size": 299, "width": 64, "batch": 32},
    "vgg16": {"kind": "image", "image_size": 224, "width": 64, "batch": 32},
    "gpt2": {"kind": "text", "seq_len": 1024, "width": 768, "depth": 12, "batch": 8, "vocab": 50257},
    "unet": {"kind": "segmentation", "image_size": 256, "width": 64, "depth": 4, "batch": 8, "classes": 2},
}


def model_names() -> list[str]:
    return list(MODELS)


def build_model(
    name: str,
    *,
    batch: int | None = None,
    image_size: int | None = None,
    seq_len: int | None = None,
    width: int | None = None,
    depth: int | None = None,
    classes: int | None = None,
    vocab: int | None = None,
    dropout: float | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> ZooModel:
    """Build zoo model `name` on `device` in training mode, with a random example batch.

    Unset sizes take the papers' defaults (`MODELS`). `depth`: GPT-2 layers, U-Net levels, or
    a cap on blocks per stage for ResNet / DenseNet (small test models). Raises `InputError`
    for an unknown name or impossible sizes.
    """
    if name not in MODELS:
        raise InputError(f"unknown model {name!r} (one of {', '.join(MODELS)})", field="MODEL")
    d = MODELS[name]
    batch = d["batch"] if batch is None else batch
    width = d["width"] if width is None else width
    for label, v in (("--batch", batch), ("--width", width), ("--image-size", image_size), ("--seq-len", seq_len),
                     ("--depth", depth)):
        if v is not None and v <= 0:
            raise InputError(f"must be positive, got {v}", field=label)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    config: dict[str, Any] = {"batch": batch, "width": width}
    if d["kind"] == "text":
        seq_len = seq_len or d["seq_len"]
        depth = depth or d["depth"]
        vocab = vocab or d["vocab"]
        p = 0.1 if dropout is None else dropout
        blocks = gpt2_blocks(width=width, depth=depth, vocab=vocab, max_len=seq_len, dropout=p)
        x = torch.randint(0, vocab, (batch, seq_len), generator=gen)
        target = torch.randint(0, vocab, (batch, seq_len), generator=gen)
        loss_fn: Callable[..., torch.Tensor] = lm_loss
        config.update(seq_len=seq_len, depth=depth, vocab=vocab, dropout=p)
    else:
        image_size = image_size or d["image_size"]
        classes = classes or d.get("classes", 1000)
        config.update(image_size=image_size, classes=classes)
        if name.startswith("resnet"):
            blocks = resnet_blocks(int(name[6:]), width=width, classes=classes, depth=depth)
            config["depth"] = depth
        elif name == "densenet121":
            blocks = densenet121_blocks(width=width, classes=classes, depth=depth)
            config["depth"] = depth
        elif name == "vgg16":
            if image_size < 32:
                raise InputError("vgg16 needs images of at least 32 pixels", field="--image-size")
            p = 0.5 if dropout is None else dropout
            blocks = vgg16_blocks(width=width, classes=classes, image_size=image_size, dropout=p)
            config["dropout"] = p
        elif name == "inception_v3":
            if image_size < 75:
                raise InputError("inception_v3 needs images of at least 75 pixels", field="--image-size")
            p = 0.5 if dropout is None else dropout
            blocks = inception_v3_blocks(width=width, classes=classes, dropout=p)
            config["dropout"] = p
        else:  # unet
            depth = depth or d["depth"]
            if image_size % 2 ** depth:
                raise InputError(f"unet with {depth} levels needs an image size multiple of {2 ** depth}",
                                 field="--image-size")
            blocks = unet_blocks(width=width, depth=depth, classes=classes)
            config["depth"] = depth
        x = torch.randn(batch, 3, image_size, image_size, generator=gen, dtype=torch.float32).to(dtype)
        if d["kind"] == "segmentation":
            target = torch.randint(0, classes, (batch, image_size, image_size), generator=gen)
            loss_fn = segmentation_loss
        else:
            target = torch.randint(0, classes, (batch,), generator=gen)
            loss_fn = classification_loss
    device = torch.device(device)
    blocks = [b.to(device=device, dtype=dtype).train() for b in blocks]
    return ZooModel(blocks, x.to(device), loss_fn, target.to(device), name, config)


def count_parameters(blocks: list[nn.Module]) -> int:
    """Distinct parameters (tied weights once)."""
    seen: dict[int, int] = {}
    for b in blocks:
        for p in b.parameters():
            seen[id(p)] = p.numel()
    return sum(seen.values())


def resolve_device(text: str | None) -> torch.device:
    """``None`` -> cuda when present, else cpu; "cuda" without a GPU is an `InputError`."""
    if text is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise InputError(f"unknown device {text!r} (cpu or cuda)", field="--device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("CUDA is not available on this machine", field="--device")
    if device.type not in ("cpu", "cuda"):
        raise InputError(f"unsupported device {text!r} (cpu or cuda)", field="--device")
    return device
