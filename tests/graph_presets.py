"""The graph presets (resnet50, mobilenet-v2, vit-b16, gpt2-small, bert-base), imported from their PyTorch
definitions: torchvision's (without weights) for the vision networks, tests/transformer_nets.py for the
transformers. tests/specs/test_graph_presets.py checks that the stored files equal a fresh import.
Regenerate after an importer change that alters them:

    python3 tests/graph_presets.py --write
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torchvision_models import models
from transformer_nets import GPT2, Bert

import dnnbench

FOLDER = Path(__file__).resolve().parents[1] / "dnnbench" / "presets" / "networks"

#: preset name -> (module factory, one sample's input shape, description, source)
PRESETS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], str, str]] = {
    "resnet50": (
        lambda: models().resnet50(weights=None), (3, 224, 224),
        "ResNet-50 (bottleneck residual blocks, batch normalisation), 224x224 ImageNet input, 1,000 classes.",
        "He, Zhang, Ren, Sun, 'Deep Residual Learning for Image Recognition', CVPR 2016, Table 1 (50-layer); "
        "layer for layer as torchvision.models.resnet50 (stride on the 3x3 convolution, 'ResNet v1.5'), "
        "25,557,032 parameters as listed in torchvision's model documentation.",
    ),
    "mobilenet-v2": (
        lambda: models().mobilenet_v2(weights=None), (3, 224, 224),
        "MobileNetV2 (inverted residual blocks with depthwise convolutions, ReLU6), width 1.0, 224x224 input.",
        "Sandler, Howard, Zhu, Zhmoginov, Chen, 'MobileNetV2: Inverted Residuals and Linear Bottlenecks', CVPR "
        "2018, Table 2; layer for layer as torchvision.models.mobilenet_v2, 3,504,872 parameters as listed in "
        "torchvision's model documentation.",
    ),
    "vit-b16": (
        lambda: models().vit_b_16(weights=None), (3, 224, 224),
        "Vision Transformer ViT-B/16: 16x16 patches of a 224x224 image, 12 layers of width 768 with 12 heads, "
        "a class token, 1,000 classes.",
        "Dosovitskiy et al., 'An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale', ICLR "
        "2021, Table 1 (ViT-Base); layer for layer as torchvision.models.vit_b_16, 86,567,656 parameters as "
        "listed in torchvision's model documentation.",
    ),
    "gpt2-small": (
        GPT2, (1024,),
        "GPT-2 small: a decoder-only transformer of 12 pre-norm layers of width 768 with 12 causal heads, "
        "vocabulary 50,257, context 1,024 tokens. One sample is one sequence; its length is a parameter "
        "(gpt2-small:seq_len=256).",
        "Radford, Wu, Child, Luan, Amodei, Sutskever, 'Language Models are Unsupervised Multitask Learners', "
        "OpenAI 2019, Table 2 (117M row: 12 layers, d_model 768) and section 2.3 (vocabulary 50,257, context "
        "1,024). The output head is tied to the token embedding, as in the released model: 124,439,808 "
        "parameters.",
    ),
    "bert-base": (
        Bert, (512,),
        "BERT-base: a transformer encoder of 12 post-norm layers of width 768 with 12 heads, vocabulary 30,522, "
        "512 positions, 2 token types, a tanh pooler. One sample is one sequence; its length is a parameter "
        "(bert-base:seq_len=128).",
        "Devlin, Chang, Lee, Toutanova, 'BERT: Pre-training of Deep Bidirectional Transformers for Language "
        "Understanding', NAACL 2019, section 3 (L=12, H=768, A=12, feed-forward 4H) and appendix A.2 (512 "
        "positions); vocabulary 30,522 as in the released uncased model. The pre-training heads (masked "
        "language model, next sentence) are not included.",
    ),
}


def build(name: str) -> dict[str, Any]:
    factory, shape, description, source = PRESETS[name]
    with torch.device("meta"):
        module = factory()
    net = dnnbench.from_torch(module, shape, name=name, description=description)
    data = net.to_dict()
    data["source"] = source
    return data


def dumps(data: dict[str, Any]) -> str:
    """The JSON text of a preset: one layer per line, so a diff shows which layers changed."""
    head = {k: v for k, v in data.items() if k != "layers"}
    lines = ",\n".join("    " + json.dumps(layer) for layer in data["layers"])
    text = json.dumps(head, indent=2)[:-2]
    return f'{text},\n  "layers": [\n{lines}\n  ]\n}}\n'


if __name__ == "__main__":
    if "--write" not in sys.argv:
        sys.exit("usage: python3 tests/graph_presets.py --write")
    for preset in PRESETS:
        path = FOLDER / f"{preset}.json"
        path.write_text(dumps(build(preset)), encoding="utf-8")
        print(f"wrote {path.name}")
