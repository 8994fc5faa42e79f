"""The zoo's registry: `MODELS` (names and the papers' default sizes) and `build_model`."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from memsched.solvers.errors import InputError, flag
from torch import nn

from .common import classification_loss, lm_loss, segmentation_loss
from .densenet import densenet121_blocks
from .fcn import fcn8_blocks
from .gpt import gpt2_blocks
from .inception import inception_v3_blocks
from .lstm import lstm_blocks
from .mobilenet import mobilenet_v2_blocks
from .resnet import RESNET_LAYERS, resnet_blocks
from .split import split_model
from .unet import unet_blocks
from .vgg import VGG16, VGG19, vgg_blocks
from .vit import vit_blocks

ImageSize = int | tuple[int, int] | str


@dataclass
class ZooModel:
    """A built model: unpacks as ``blocks, example_input, loss_fn, target``."""

    blocks: list[nn.Module]
    example_input: torch.Tensor
    loss_fn: Callable[[torch.Tensor, Any], torch.Tensor]
    target: torch.Tensor
    name: str
    config: dict[str, Any] = field(default_factory=dict)
    #: the label of a network that is not the zoo's (`models.network`); None: built from the sizes
    title: str | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.blocks, self.example_input, self.loss_fn, self.target))

    @property
    def label(self) -> str:
        """A short name with the sizes, e.g. ``resnet18-b32-224`` or ``unet-b32-416x608`` (chain names)."""
        if self.title is not None:  # a factory's or your own network: its name, the dtype marked as the zoo's
            return self.title + dtype_suffix(self.config)
        c = self.config
        size = c.get("seq_len") if c.get("seq_len") is not None else c.get("image_size")
        extra = "".join(f"-{k[0]}{c[k]}" for k in ("width", "depth") if c.get(k) is not None)
        extra += dtype_suffix(c)
        return f"{self.name}-b{c.get('batch')}-{size}{extra}"


_IMAGE = {"kind": "image", "image_size": 224, "width": 64, "batch": 32}
# name -> kind and the papers' default sizes
MODELS: dict[str, dict[str, Any]] = {
    **{f"resnet{v}": dict(_IMAGE) for v in RESNET_LAYERS},
    "densenet121": dict(_IMAGE),
    "inception_v3": {**_IMAGE, "image_size": 299},
    "vgg16": dict(_IMAGE),
    "vgg19": dict(_IMAGE),
    "mobilenet_v2": dict(_IMAGE),
    "vit_b16": {**_IMAGE, "width": 768, "depth": 12},
    "gpt2": {"kind": "text", "seq_len": 1024, "width": 768, "depth": 12, "batch": 8, "vocab": 50257},
    "gpt2_medium": {"kind": "text", "seq_len": 1024, "width": 1024, "depth": 24, "batch": 8, "vocab": 50257},
    "unet": {"kind": "segmentation", "image_size": 256, "width": 64, "depth": 4, "batch": 8, "classes": 2},
    "fcn8": {"kind": "segmentation", "image_size": (416, 608), "width": 64, "batch": 32, "classes": 21},
    "lstm": {"kind": "sequence", "seq_len": 100, "width": 512, "batch": 32, "classes": 10},
}


#: the sizes a kind of zoo model has no use for (given, they would be ignored)
_UNUSED = {"text": {"image_size"}, "sequence": {"image_size", "vocab"}, "image": {"seq_len", "vocab"}}
#: the zoo models whose builder takes ``depth`` (layers, levels, or a cap on blocks per stage); the
#: others (vgg16/19, inception_v3, mobilenet_v2, fcn8, lstm) have fixed layers and refuse it
_TAKES_DEPTH = {*(f"resnet{v}" for v in RESNET_LAYERS), "densenet121", "vit_b16", "gpt2", "gpt2_medium", "unet"}


def model_names() -> list[str]:
    """Names of the zoo models, in registration order."""
    return list(MODELS)


#: the largest image side in pixels (the command line's sizes: 1..10**6)
MAX_SIDE = 10**6
#: the integer sizes `build_model` takes: (low, high), the command line's ranges (the batch up to
#: max-batch's largest --limit, 2**24)
SIZE_RANGES = {"batch": (1, 2**24), "seq_len": (1, 10**6), "width": (1, 10**6), "depth": (1, 10**4),
               "vocab": (1, 10**7), "classes": (1, 10**7)}
#: the sizes without a command-line option (named as in Python and sweep files everywhere)
_NO_FLAG = {"classes"}


def size_field(key: str) -> str:
    """The field naming size `key` in a message: its option as the caller spells it (``--seq-len``
    on the command line, ``seq_len`` in Python: `errors.flag`), or `key` for a size without one."""
    return key if key in _NO_FLAG else flag(key)


def parse_image_size(value: ImageSize | None) -> tuple[int, int] | None:
    """``224`` -> (224, 224); ``"416x608"`` or ``(416, 608)`` -> (height, width); bad text, a side
    that is not an integer in 1..`MAX_SIDE`, or another type: `InputError`."""
    if value is None:
        return None
    given = value
    if isinstance(value, str):
        parts = value.lower().split("x")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise InputError(f"expected N or HxW pixels, got {value!r}", field=flag("image_size")) from None
        if len(nums) not in (1, 2):
            raise InputError(f"expected N or HxW pixels, got {value!r}", field=flag("image_size"))
        value = tuple(nums) if len(nums) == 2 else nums[0]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (int(value), int(value))
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise InputError(f"expected N or HxW pixels (an int, \"HxW\" or (h, w)), got {value!r}",
                         field=flag("image_size"))
    for side in value:
        if isinstance(side, bool) or not isinstance(side, numbers.Integral) or not 1 <= side <= MAX_SIDE:
            raise InputError(f"each side must be an integer in 1..{MAX_SIDE}, got {given!r}", field=flag("image_size"))
    h, w = value
    return (int(h), int(w))


def _size_label(hw: tuple[int, int]) -> int | str:
    return hw[0] if hw[0] == hw[1] else f"{hw[0]}x{hw[1]}"


def build_model(
    name: str,
    *,
    batch: int | None = None,
    image_size: ImageSize | None = None,
    seq_len: int | None = None,
    width: int | None = None,
    depth: int | None = None,
    classes: int | None = None,
    vocab: int | None = None,
    dropout: float | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | str = torch.float32,
    seed: int = 0,
    granularity: str = "block",
    **unknown: Any,
) -> ZooModel:
    """Build zoo model `name` on `device` in training mode, with a random example batch.

    Unset sizes take the papers' defaults (`MODELS`). `image_size`: pixels, square (224) or
    height x width ("416x608", (416, 608)). `seq_len`: tokens (GPT-2) or time steps (LSTM).
    `width`: base channels, or the model dimension (GPT-2, ViT), or the LSTM's hidden size.
    `depth`: GPT-2 / ViT layers, U-Net levels, or a cap on blocks per stage for ResNet /
    DenseNet (small test models); the models with fixed layers refuse it (`_TAKES_DEPTH`).
    Raises `InputError` for an unknown name or impossible sizes.
    Built inside ``FakeTensorMode`` (`models.costs.shape_exact_model`) it allocates nothing.
    A factory spec (``FILE.py:FUNCTION``, ``package.module:FUNCTION``) builds your own network
    (`models.network.build_network`: the sizes given are the function's keyword arguments).
    `granularity`: "block" (one stage a block) or "layer" (blocks split into their sequential
    parts, GPT-2's projection moved into the loss: `models.zoo.split.split_model`).

    Every size is checked before anything is built (`InputError` naming it): an unknown keyword,
    an integer size that is not an int (a bool is not) in the command line's range
    (`SIZE_RANGES`), a `dropout` outside 0..1, a `seed` that is not an int, a `device` torch
    does not know (or CUDA on a machine without it).
    """
    from memsched.models.network import build_network, is_factory_spec, model_field

    if unknown:
        key = sorted(unknown)[0]
        raise InputError(f"unknown size {key!r} (sizes: batch, image_size, seq_len, width, depth, classes, vocab, "
                         "dropout, device, dtype, seed, granularity)", field=key)
    check_sizes(batch=batch, seq_len=seq_len, width=width, depth=depth, classes=classes, vocab=vocab)
    if image_size is not None:
        parse_image_size(image_size)
    if dropout is not None and (isinstance(dropout, bool) or not isinstance(dropout, numbers.Real)
                                or not 0 <= dropout <= 1):
        raise InputError(f"must be a probability in 0..1, got {dropout!r}", field=flag("dropout"))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not -2**63 <= seed < 2**64:
        raise InputError(f"must be an integer, got {seed!r}", field=flag("seed"))
    device = checked_device(device)
    dtype = parse_dtype(dtype)

    if name not in MODELS and is_factory_spec(name):  # FILE.py:FUNCTION, package.module:FUNCTION
        built = build_network(name, batch=batch, image_size=image_size, seq_len=seq_len, width=width, depth=depth,
                              classes=classes, vocab=vocab, dropout=dropout, device=device,
                              dtype=None if dtype == torch.float32 else dtype, seed=seed, granularity=granularity)
        if dtype != torch.float32:  # its label ends in -bf16 / -fp16 as a zoo model's (`dtype_suffix`)
            built.config["dtype"] = str(dtype).replace("torch.", "")
        return built
    if name not in MODELS:
        raise InputError(f"unknown model {name!r} (one of {', '.join(MODELS)}, or FILE.py:FUNCTION)",
                         field=model_field())
    d = MODELS[name]
    _refuse_unused(name, d["kind"], image_size=image_size, seq_len=seq_len, vocab=vocab, depth=depth)
    batch = d["batch"] if batch is None else batch
    width = d["width"] if width is None else width
    hw = parse_image_size(image_size)  # sizes checked above: ints >= 1
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    config: dict[str, Any] = {"batch": batch, "width": width}
    kind = d["kind"]
    if kind == "text":
        seq_len = seq_len or d["seq_len"]
        depth = depth or d["depth"]
        vocab = vocab or d["vocab"]
        p = 0.1 if dropout is None else dropout
        blocks = gpt2_blocks(width=width, depth=depth, vocab=vocab, max_len=seq_len, dropout=p)
        x = torch.randint(0, vocab, (batch, seq_len), generator=gen)
        target = torch.randint(0, vocab, (batch, seq_len), generator=gen)
        loss_fn: Callable[..., torch.Tensor] = lm_loss
        config.update(seq_len=seq_len, depth=depth, vocab=vocab, dropout=p)
    elif kind == "sequence":
        seq_len = seq_len or d["seq_len"]
        classes = classes or d["classes"]
        data = torch.randn(batch, seq_len, width, generator=gen)
        blocks = lstm_blocks(data.to(dtype), hidden=width, classes=classes)
        x = torch.zeros(batch, 2 * width)
        target = torch.randint(0, classes, (batch,), generator=gen)
        loss_fn = classification_loss
        config.update(seq_len=seq_len, classes=classes)
    else:
        hw = hw or parse_image_size(d["image_size"])
        assert hw is not None
        h, w = hw
        classes = classes or d.get("classes", 1000)
        config.update(image_size=_size_label(hw), classes=classes)
        blocks, extra = _image_blocks(name, hw, width, depth, classes, dropout)
        config.update(extra)
        x = torch.randn(batch, 3, h, w, generator=gen, dtype=torch.float32).to(dtype)
        if kind == "segmentation":
            target = torch.randint(0, classes, (batch, h, w), generator=gen)
            loss_fn = segmentation_loss
        else:
            target = torch.randint(0, classes, (batch,), generator=gen)
            loss_fn = classification_loss
    if granularity != "block":
        blocks, loss_fn = split_model(blocks, loss_fn, granularity)
        config["granularity"] = granularity
    device = torch.device(device)
    blocks = [moved_to(b, device, dtype).train() for b in blocks]
    if dtype != torch.float32:
        config["dtype"] = str(dtype).replace("torch.", "")
    x = x.to(device=device, dtype=dtype) if x.is_floating_point() else x.to(device)
    return ZooModel(blocks, x, loss_fn, target.to(device), name, config)


def _refuse_unused(name: str, kind: str, **sizes: Any) -> None:
    """`InputError` naming the first size given (not None) that zoo model `name` of `kind` has no
    use for (`_UNUSED`; ``depth`` for a model not in `_TAKES_DEPTH`): it would be ignored."""
    for key, value in sizes.items():
        if value is None:
            continue
        option = size_field(key)
        if key == "depth" and name not in _TAKES_DEPTH:
            raise InputError(f"{name} takes no {option} (its layers are fixed)", field=option)
        if key in _UNUSED.get(kind, _UNUSED["image"]):
            raise InputError(f"{name} takes no {option} ({'an' if kind[0] in 'aeiou' else 'a'} {kind} model)",
                             field=option)


def _image_blocks(name: str, hw: tuple[int, int], width: int, depth: int | None, classes: int,
                  dropout: float | None) -> tuple[list[nn.Module], dict[str, Any]]:
    """The blocks of an image or segmentation model and what its config records."""
    h, w = hw
    side = min(h, w)
    if name.startswith("resnet"):
        return resnet_blocks(int(name[6:]), width=width, classes=classes, depth=depth), {"depth": depth}
    if name == "densenet121":
        return densenet121_blocks(width=width, classes=classes, depth=depth), {"depth": depth}
    if name in ("vgg16", "vgg19"):
        if side < 32:
            raise InputError(f"{name} needs images of at least 32 pixels", field=flag("image_size"))
        p = 0.5 if dropout is None else dropout
        cfg = VGG16 if name == "vgg16" else VGG19
        return vgg_blocks(cfg, width=width, classes=classes, image_size=side, dropout=p), {"dropout": p}
    if name == "inception_v3":
        if side < 75:
            raise InputError("inception_v3 needs images of at least 75 pixels", field=flag("image_size"))
        p = 0.5 if dropout is None else dropout
        return inception_v3_blocks(width=width, classes=classes, dropout=p), {"dropout": p}
    if name == "mobilenet_v2":
        p = 0.2 if dropout is None else dropout
        return mobilenet_v2_blocks(width=width, classes=classes, dropout=p), {"dropout": p}
    if name == "vit_b16":
        depth = depth or MODELS[name]["depth"]
        p = 0.0 if dropout is None else dropout
        return vit_blocks(width=width, depth=depth, image_size=hw, classes=classes, dropout=p), {"depth": depth}
    if name == "fcn8":
        if h % 32 or w % 32:
            raise InputError("fcn8 needs image sides multiple of 32", field=flag("image_size"))
        p = 0.5 if dropout is None else dropout
        return fcn8_blocks(width=width, classes=classes, dropout=p), {"dropout": p}
    depth = depth or MODELS[name]["depth"]  # unet
    if h % 2 ** depth or w % 2 ** depth:
        raise InputError(f"unet with {depth} levels needs image sides multiple of {2 ** depth}",
                         field=flag("image_size"))
    return unet_blocks(width=width, depth=depth, classes=classes), {"depth": depth}


#: the precisions a network may be built in (`build_model`'s dtype, ``--dtype``)
DTYPES = ("float32", "bfloat16", "float16")


def dtype_suffix(config: dict[str, Any]) -> str:
    """The label's mark of a half-precision network ("-bf16", "-fp16"; "" for float32)."""
    return {"bfloat16": "-bf16", "float16": "-fp16"}.get(str(config.get("dtype")), "")


def check_sizes(**sizes: Any) -> None:
    """Each size given (not None) is an int (not a bool) in its `SIZE_RANGES` range, or `InputError`."""
    from memsched.solvers.units import check_int

    for key, value in sizes.items():
        if value is not None:
            low, high = SIZE_RANGES[key]
            check_int(value, size_field(key), low, high)


def checked_device(device: Any) -> torch.device:
    """`device` (a ``torch.device`` or its text) as a ``torch.device``: text torch does not parse,
    another type, or CUDA on a machine without it is `InputError` naming ``--device``."""
    if isinstance(device, torch.device):
        parsed = device
    elif isinstance(device, str):
        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError):
            raise InputError(f"unknown device {device!r} (cpu or cuda)", field=flag("device")) from None
    else:
        raise InputError(f"expected a device (\"cpu\", \"cuda\", a torch.device), got {device!r}",
                         field=flag("device"))
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise InputError("CUDA is not available on this machine", field=flag("device"))
    return parsed


def parse_dtype(value: str | torch.dtype) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16`` (a torch dtype as is); another name is `InputError`."""
    if isinstance(value, torch.dtype):
        return value
    if value not in DTYPES:
        raise InputError(f"unknown dtype {value!r} (one of {', '.join(DTYPES)})", field=flag("dtype"))
    return getattr(torch, value)


def moved_to(block: nn.Module, device: torch.device, dtype: torch.dtype | None = None) -> nn.Module:
    """``block.to(device, dtype)`` (dtype None: kept; only floating tensors change dtype), skipped
    when nothing would change. A block holding fake tensors (built inside
    `models.costs.shape_exact_model`) is converted by `_fake_moved_to`: ``Module.to`` would swap its
    parameters, which torch refuses for fake tensors."""
    from memsched.models.costs import is_fake

    tensors = list(block.parameters()) + list(block.buffers())
    if all(t.device == device and (dtype is None or t.dtype == dtype or not t.is_floating_point()) for t in tensors):
        return block
    if any(is_fake(t) for t in tensors):
        return _fake_moved_to(tensors, block, device, dtype)
    return block.to(device=device, dtype=dtype) if dtype is not None else block.to(device=device)


def _fake_moved_to(tensors: list[torch.Tensor], block: nn.Module, device: torch.device,
                   dtype: torch.dtype | None) -> nn.Module:
    """`moved_to` for a block of fake tensors: each parameter and buffer (`tensors`) converted in
    place (``t.data = ...``), so every tensor keeps its identity: weights tied across blocks stay
    tied, and modules that hold their parameters elsewhere too (``nn.LSTM``'s flat weights) see the
    converted ones. The result's dtypes and shapes are those ``block.to`` gives."""
    with torch.no_grad():
        for t in tensors:
            want = dtype if dtype is not None and t.is_floating_point() else t.dtype
            if t.device != device or t.dtype != want:
                t.data = t.data.to(device=device, dtype=want)
    return block


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
        raise InputError(f"unknown device {text!r} (cpu or cuda)", field=flag("device")) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError("CUDA is not available on this machine", field=flag("device"))
    if device.type not in ("cpu", "cuda"):
        raise InputError(f"unsupported device {text!r} (cpu or cuda)", field=flag("device"))
    return device
