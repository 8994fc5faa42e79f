"""Join networks in plain PyTorch: Siamese (k copies of one encoder) and cross-modal (CLIP-style).

A join network is k branches, each a chain of ``nn.Module`` blocks (block i of branch b maps
a_i^b to a_{i+1}^b), with its own input a_0^b, joined by a loss over the k branch outputs:
``loss_fn([a_{L_0}^0, ..., a_{L_{k-1}}^{k-1}], target)``. This is the model of
docs/join.md (Beaumont, Herrmann, Pallez, Shilova, Phil. Trans. R. Soc. A 378, 2020).

Models (`JOIN_MODELS`), all sized by parameters so tests build tiny versions:

- ``siamese``: two branches sharing one ResNet encoder (the blocks of `models.zoo.resnet_blocks`
  with the classifier head as an `embed_dim` embedding), contrastive loss of Hadsell, Chopra
  and LeCun (2006) on image pairs labelled same (1) / different (0).
- ``triplet``: three branches sharing one encoder (anchor, positive, negative), triplet margin
  loss (Schroff et al. 2015, FaceNet).
- ``clip``: an image encoder (ResNet blocks, embedding head) and a text encoder (token and
  position embeddings, causal pre-norm transformer blocks of `models.zoo.GPTBlock`, final
  layer norm, last token, linear projection), CLIP's symmetric contrastive loss (Radford et
  al. 2021) over the two L2-normalised embeddings with a fixed temperature.

Shared weights: the branches of ``siamese`` / ``triplet`` are the *same* module objects, so
their parameter gradients accumulate into one ``.grad`` (as in a plain Siamese forward).
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from memsched.models.zoo import GPTBlock, GPTEmbedding, parse_image_size, resnet_blocks
from memsched.models.zoo.registry import check_sizes, checked_device, dtype_suffix
from memsched.solvers.errors import InputError, flag
from torch import nn

__all__ = ["JOIN_MODELS", "JoinModel", "JoinLossFn", "build_join_model", "join_model_names", "contrastive_loss",
           "pair_labels", "triplet_loss", "clip_loss", "TextPoolHead", "text_encoder_blocks", "diagnosed_join"]

JoinLossFn = Callable[[Sequence[torch.Tensor], Any], torch.Tensor]


# --------------------------------------------------------------------------- losses
def contrastive_loss(outputs: Sequence[torch.Tensor], target: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Contrastive loss of two embeddings (N, d) with labels y (N,) in {0, 1} (1: same):
    mean over the pairs of ``y d^2 + (1 - y) max(0, margin - d)^2``, d the Euclidean distance."""
    e1, e2 = outputs
    d = F.pairwise_distance(e1, e2)
    y = target.to(d.dtype)
    return (y * d.pow(2) + (1 - y) * F.relu(margin - d).pow(2)).mean()


def pair_labels(batch: int, gen: torch.Generator) -> torch.Tensor:
    """Same (1) / different (0) labels of `batch` >= 1 image pairs for `contrastive_loss`, drawn
    from `gen` (deterministic per seed), with at least one "same" pair: when every draw is 0 one
    drawn index is set to 1. Invariant: the loss then has a term ``d^2 / batch`` with d > 0 (two
    different random images), so the loss and its gradients are nonzero for any seed and batch;
    all "different" pairs farther apart than the margin would make the loss exactly 0 and the
    gradient check vacuous. A draw that already has a "same" pair is kept as it was."""
    target = torch.randint(0, 2, (batch,), generator=gen)
    if not bool(target.any()):
        target[int(torch.randint(0, batch, (1,), generator=gen))] = 1
    return target


def triplet_loss(outputs: Sequence[torch.Tensor], target: Any = None, margin: float = 1.0) -> torch.Tensor:
    """Triplet margin loss of (anchor, positive, negative) embeddings (N, d); `target` unused."""
    anchor, positive, negative = outputs
    return F.triplet_margin_loss(anchor, positive, negative, margin=margin)


def clip_loss(outputs: Sequence[torch.Tensor], target: Any = None, temperature: float = 0.07) -> torch.Tensor:
    """CLIP's symmetric InfoNCE loss of image and text embeddings (N, d): pair n matches pair n;
    ``(CE(logits, n) + CE(logits^T, n)) / 2`` with ``logits = norm(img) norm(txt)^T / temperature``."""
    img, txt = outputs
    img = F.normalize(img, dim=-1)
    txt = F.normalize(txt, dim=-1)
    logits = img @ txt.t() / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels))


# --------------------------------------------------------------------------- text encoder
class TextPoolHead(nn.Module):
    """Final layer norm, the last token's features (the causal model's summary, CLIP's EOT
    token), linear projection to the embedding: (N, T, d) -> (N, embed_dim)."""

    def __init__(self, d: int, embed_dim: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.proj = nn.Linear(d, embed_dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map token features (N, T, d) to the branch embedding: layer norm, last token, projection."""
        return self.proj(self.ln(x)[:, -1])


def text_encoder_blocks(*, width: int = 512, depth: int = 12, heads: int | None = None, vocab: int = 49408,
                        max_len: int = 77, embed_dim: int = 512, dropout: float = 0.0,
                        width_field: str | None = None) -> list[nn.Module]:
    """CLIP-style text transformer as a chain: embedding, `depth` GPT blocks, pooling head. A `width`
    that is no multiple of `heads` is an `InputError` naming `width_field` (None: the caller's `width`,
    ``--width`` on the command line; `build_join_model` names its ``text_width``)."""
    heads = heads or max(1, width // 64)
    if width % heads:
        raise InputError(f"text width {width} is not a multiple of the number of heads {heads}",
                         field=flag("width") if width_field is None else width_field)
    return ([GPTEmbedding(vocab, max_len, width, dropout)] + [GPTBlock(width, heads, dropout) for _ in range(depth)]
            + [TextPoolHead(width, embed_dim)])


# --------------------------------------------------------------------------- models
@dataclass
class JoinModel:
    """A built join network: per branch its blocks and example input, the joint loss and its target.

    ``branches[b]`` is the list of blocks of branch b (the same objects in every branch when
    ``shared``); ``inputs[b]`` its example input a_0^b; ``loss_fn(outputs, target)`` the loss
    over the k branch outputs.
    """

    branches: list[list[nn.Module]]
    inputs: list[torch.Tensor]
    loss_fn: JoinLossFn
    target: Any
    name: str
    branch_names: list[str]
    shared: bool = False
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        """Number of branches."""
        return len(self.branches)

    @property
    def label(self) -> str:
        """A short name with the sizes, e.g. ``siamese-b32-224-w64`` (join file names)."""
        c = self.config
        extra = "".join(f"-{k[0]}{c[k]}" for k in ("width", "depth") if c.get(k) is not None)
        seq = f"-t{c['seq_len']}" if c.get("seq_len") is not None else ""
        extra += dtype_suffix(c)
        return f"{self.name}-b{c.get('batch')}-{c.get('image_size')}{seq}{extra}"


@contextlib.contextmanager
def diagnosed_join(model: JoinModel) -> Iterator[None]:
    """Inside (profiling or running the join network `model`), a failure that is not an
    `InputError` becomes one when a branch fails the chain path's dry run on its own example input
    (`models.network.diagnosed` on each branch, with the stand-in loss `mean_output_loss`, branch 0
    first): a block that cannot run at these sizes (BatchNorm at batch 1 on a 1x1 feature map) is
    bad input under ``MODEL`` (``model`` in Python) naming the network with its sizes, the branch and
    the block. Any other failure (the joint loss, a bug) is raised as it is. Costs nothing unless something fails."""
    from memsched.models.network import diagnosed, mean_output_loss
    from memsched.models.zoo.registry import ZooModel

    names = list(model.branch_names) if len(model.branch_names) == model.k else [f"branch{b}" for b in range(model.k)]
    with contextlib.ExitStack() as stack:
        for b in reversed(range(model.k)):  # the last entered sees the failure first: branch 0
            branch = ZooModel(list(model.branches[b]), model.inputs[b], mean_output_loss, None,
                              f"{model.name} branch {b} ({names[b]})", dict(model.config))
            stack.enter_context(diagnosed(branch))
        yield


#: name -> defaults (the papers' sizes; tests pass tiny ones)
#: the join networks' own sizes (beside the chain zoo's `SIZE_RANGES`): their (smallest, largest) values
JOIN_SIZE_RANGES = {"embed_dim": (1, 10**6), "text_width": (1, 10**6), "text_depth": (1, 10**4), "encoder": (1, 10**3)}

JOIN_MODELS: dict[str, dict[str, Any]] = {
    "siamese": {"k": 2, "image_size": 224, "width": 64, "batch": 32, "embed_dim": 128, "encoder": 18},
    "triplet": {"k": 3, "image_size": 224, "width": 64, "batch": 32, "embed_dim": 128, "encoder": 18},
    "clip": {"k": 2, "image_size": 224, "width": 64, "batch": 32, "embed_dim": 512, "encoder": 18,
             "seq_len": 77, "text_width": 512, "text_depth": 12, "vocab": 49408},
}


def join_model_names() -> list[str]:
    """Names accepted by `build_join_model`."""
    return list(JOIN_MODELS)


def _image_encoder(variant: int, width: int, embed_dim: int, depth: int | None) -> list[nn.Module]:
    if variant not in (18, 34, 50, 101, 152):
        raise InputError(f"unknown ResNet encoder {variant} (18, 34, 50, 101 or 152)", field="encoder")
    return resnet_blocks(variant, width=width, classes=embed_dim, depth=depth)


def build_join_model(
    name: str,
    *,
    batch: int | None = None,
    image_size: int | tuple[int, int] | str | None = None,
    seq_len: int | None = None,
    width: int | None = None,
    depth: int | None = None,
    embed_dim: int | None = None,
    encoder: int | None = None,
    text_width: int | None = None,
    text_depth: int | None = None,
    vocab: int | None = None,
    dropout: float | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    **_: Any,
) -> JoinModel:
    """Build join model `name` (`JOIN_MODELS`) on `device`, in training mode, with a random batch.

    `width` / `depth`: the image encoder's base channels and cap on residual blocks per stage
    (as `models.zoo.resnet_blocks`); `encoder`: the ResNet variant (18); `embed_dim`: the
    embedding size; for ``clip``, `text_width`, `text_depth`, `seq_len`, `vocab` size the text
    encoder (`dropout`, 0 by default, its dropout). Unset sizes take `JOIN_MODELS`' defaults;
    unknown keyword sizes are ignored (so the chain zoo's options can be passed through).
    Raises `InputError` for an unknown name or impossible sizes (a size that is not an int, a
    bool is not, in the command line's range; a device torch does not know).
    """
    from memsched.models.network import model_field
    from memsched.solvers.units import check_int

    if name not in JOIN_MODELS:
        raise InputError(f"unknown join model {name!r} (one of {', '.join(JOIN_MODELS)})", field=model_field())
    d = JOIN_MODELS[name]
    batch = d["batch"] if batch is None else batch
    width = d["width"] if width is None else width
    hw = parse_image_size(d["image_size"] if image_size is None else image_size)
    assert hw is not None
    embed_dim = d["embed_dim"] if embed_dim is None else embed_dim
    encoder = d["encoder"] if encoder is None else encoder
    check_sizes(batch=batch, width=width, seq_len=seq_len, depth=depth, vocab=vocab)
    for label, v in (("embed_dim", embed_dim), ("text_width", text_width), ("text_depth", text_depth),
                     ("encoder", encoder)):
        if v is not None:
            check_int(v, label, *JOIN_SIZE_RANGES[label])
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise InputError(f"must be an integer, got {seed!r}", field=flag("seed"))
    device = checked_device(device)
    if name == "clip" and batch < 2:
        raise InputError("clip's contrastive loss needs a batch of at least 2", field=flag("batch"))
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    config: dict[str, Any] = {"batch": batch, "image_size": hw[0] if hw[0] == hw[1] else f"{hw[0]}x{hw[1]}",
                              "width": width, "depth": depth,
                              "embed_dim": embed_dim, "encoder": encoder,
                              **({} if dtype == torch.float32 else {"dtype": str(dtype).replace("torch.", "")})}

    def images() -> torch.Tensor:
        return torch.randn(batch, 3, *hw, generator=gen, dtype=torch.float32).to(dtype)

    target: Any
    if name in ("siamese", "triplet"):
        k = d["k"]
        blocks = [b.to(device=device, dtype=dtype).train() for b in _image_encoder(encoder, width, embed_dim, depth)]
        branches = [blocks for _ in range(k)]  # the same modules: shared weights
        inputs = [images().to(device) for _ in range(k)]
        if name == "siamese":
            target = pair_labels(batch, gen).to(device)
            loss_fn: JoinLossFn = contrastive_loss
            names = ["left", "right"]
        else:
            target = None
            loss_fn = triplet_loss
            names = ["anchor", "positive", "negative"]
        return JoinModel(branches, inputs, loss_fn, target, name, names, shared=True, config=config)
    # clip
    seq_len = d["seq_len"] if seq_len is None else seq_len
    text_width = d["text_width"] if text_width is None else text_width
    text_depth = d["text_depth"] if text_depth is None else text_depth
    vocab = d["vocab"] if vocab is None else vocab
    p = 0.0 if dropout is None else float(dropout)
    config.update(seq_len=seq_len, text_width=text_width, text_depth=text_depth, vocab=vocab, dropout=p)
    image = _image_encoder(encoder, width, embed_dim, depth)
    text = text_encoder_blocks(width=text_width, depth=text_depth, vocab=vocab, max_len=seq_len,
                               embed_dim=embed_dim, dropout=p, width_field="text_width")
    branches = [[b.to(device=device, dtype=dtype).train() for b in blocks] for blocks in (image, text)]
    ids = torch.randint(0, vocab, (batch, seq_len), generator=gen)
    inputs = [images().to(device), ids.to(device)]
    return JoinModel(branches, inputs, clip_loss, None, name, ["image", "text"], shared=False, config=config)
