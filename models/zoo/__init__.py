"""Networks as chains of blocks, in plain PyTorch (no torchvision), one module per family.

Each model is a list of ``nn.Module`` blocks: block i maps the tensor a_i to a_{i+1}, the
last block produces the network output; the loss ``loss_fn(output, target)`` is separate.
Skip connections stay inside blocks: a ResNet / MobileNet block is a residual block, a
DenseNet block a dense layer returning ``cat([x, new_features])``, an Inception block a whole
mixed module; for the U-Net and FCN-8s (whose skips span the network) the skipped levels are
nested inside one block, as rotor does. An LSTM is unrolled over time, one block per step
(Revolve's backpropagation through time).

Families (`MODELS` holds the names and the papers' default sizes): resnet18..152,
densenet121, inception_v3, vgg16, vgg19, mobilenet_v2, vit_b16, gpt2, gpt2_medium, unet,
fcn8, lstm. Sizes are parameters so that tests build tiny versions:
``build_model(name, batch=..., image_size=..., seq_len=..., width=..., depth=..., device=...)``
returns a `ZooModel` that unpacks as ``blocks, example_input, loss_fn, target``.
``width`` is the base channel count (64 in the papers' ResNet, VGG, U-Net, FCN, MobileNet; it
scales DenseNet's growth rate and Inception's channels by width/64), the model dimension
(GPT-2: 768, GPT-2 medium: 1024, ViT-B: 768) or the LSTM's hidden size. Built inside
``FakeTensorMode`` a model allocates nothing (`models.costs.shape_exact_model`).
Any ``nn.Sequential`` or list of blocks also works as a chain (`models.chain.executor.as_blocks`).
"""

from __future__ import annotations

from .common import ClassifierHead, ConvBNReLU, classification_loss, lm_loss, segmentation_loss
from .densenet import DenseLayer, Transition, densenet121_blocks
from .fcn import FCNHead, fcn8_blocks
from .gpt import GPTBlock, GPTEmbedding, GPTHead, gpt2_blocks
from .inception import inception_v3_blocks
from .lstm import LSTMHead, LSTMStep, lstm_blocks
from .mobilenet import InvertedResidual, mobilenet_v2_blocks
from .registry import MODELS, ZooModel, build_model, count_parameters, model_names, parse_image_size, resolve_device
from .resnet import RESNET_LAYERS, BasicBlock, Bottleneck, ResNetStem, resnet_blocks
from .unet import DoubleConv, UNetLevel, unet_blocks
from .vgg import VGG16, VGG19, VGGFC, VGGConv, vgg16_blocks, vgg19_blocks, vgg_blocks
from .vit import EncoderBlock, PatchEmbedding, ViTHead, vit_blocks

__all__ = ["MODELS", "ZooModel", "build_model", "model_names", "resolve_device", "count_parameters",
           "parse_image_size", "classification_loss", "lm_loss", "segmentation_loss", "ClassifierHead",
           "ConvBNReLU", "DenseLayer", "Transition", "densenet121_blocks", "FCNHead", "fcn8_blocks", "GPTBlock",
           "GPTEmbedding", "GPTHead", "gpt2_blocks", "inception_v3_blocks", "LSTMHead", "LSTMStep", "lstm_blocks",
           "InvertedResidual", "mobilenet_v2_blocks", "RESNET_LAYERS", "BasicBlock", "Bottleneck", "ResNetStem",
           "resnet_blocks", "DoubleConv", "UNetLevel", "unet_blocks", "VGG16", "VGG19", "VGGConv", "VGGFC",
           "vgg16_blocks", "vgg19_blocks", "vgg_blocks", "EncoderBlock", "PatchEmbedding", "ViTHead",
           "vit_blocks"]
