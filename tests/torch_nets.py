"""Plain PyTorch definitions of the five preset networks, layer for layer as in dnnbench/presets/networks.

torchvision is not needed (its builds for torch 2.13 are not available here): AlexNet and VGG-16 follow
torchvision's definitions (features / adaptive avgpool / classifier), with the preset's final softmax.
The forward passes deliberately mix modules and functional calls (torch.flatten, F.relu, x.view) so the
importer's torch.fx handling of both is exercised. Build big ones under ``torch.device("meta")``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LeNet5(nn.Module):
    """LeCun et al. 1998, the common modern variant (preset ``lenet5``): input 1x32x32."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(), nn.Linear(84, 10),
        )
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.features(x), 1)
        return self.softmax(self.classifier(x))


class DigitPair(nn.Module):
    """Two digits in, whether they match out: LeNet-5's features on each (shared), a head on both. A
    network of two inputs (not a preset)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = LeNet5().features
        self.head = nn.Linear(2 * 16 * 5 * 5, 2)

    def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.features(left).flatten(1), self.features(right).flatten(1)], dim=1))


class AlexNet(nn.Module):
    """torchvision's single-tower AlexNet plus the preset's softmax (preset ``alexnet``): input 3x224x224."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))  # an identity on the 6x6 maps of a 224x224 input
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        x = torch.flatten(x, 1)
        return self.softmax(self.classifier(x))


class VGG16(nn.Module):
    """torchvision's VGG-16 (configuration D) plus the preset's softmax (preset ``vgg16``): input 3x224x224."""

    CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(c_in, int(v), kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                c_in = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))  # identity on 7x7 maps
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=0.5),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=0.5),
            nn.Linear(4096, num_classes),
        )
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.softmax(self.classifier(x))


class MnistAdam(nn.Module):
    """The reconstructed Adam-style MNIST network (preset ``mnist-adam``, model.md §8): input 1x28x28."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5)
        self.pool1 = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(32, 64, 5)
        self.pool2 = nn.MaxPool2d(2, 2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(64 * 4 * 4, 1500)
        self.fc2 = nn.Linear(1500, 1500)
        self.output = nn.Linear(1500, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(F.relu(self.conv1(x)))
        x = self.pool2(F.relu(self.conv2(x)))
        x = self.flatten(x)
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        return F.softmax(self.output(x), dim=1)


class ImageNet22kAdam(nn.Module):
    """The reconstructed Adam-style ImageNet-22K network, 2.1 B weights (preset ``imagenet22k-adam``).

    Build it under ``torch.device("meta")``: on the CPU its weights take 8.4 GB.
    """

    def __init__(self, num_classes: int = 21841) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 120, kernel_size=11, stride=4, padding=2)
        self.conv2 = nn.Conv2d(120, 256, kernel_size=5, padding=2)
        self.conv3 = nn.Conv2d(256, 512, kernel_size=3, padding=1)
        self.conv4 = nn.Conv2d(512, 512, kernel_size=3, padding=1)
        self.conv5 = nn.Conv2d(512, 512, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2)  # used three times: three pool layers
        self.relu = nn.ReLU()
        self.fc6 = nn.Linear(512 * 6 * 6, 30000)
        self.fc7 = nn.Linear(30000, 30000)
        self.output = nn.Linear(30000, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.relu(self.conv5(self.relu(self.conv4(self.relu(self.conv3(x))))))
        x = self.pool(x)
        x = x.view(x.size(0), -1)
        x = self.relu(self.fc7(self.relu(self.fc6(x))))
        return torch.softmax(self.output(x), dim=1)


#: preset name -> (module class, per-sample input shape)
PRESET_MODULES: dict[str, tuple[type[nn.Module], tuple[int, ...]]] = {
    "lenet5": (LeNet5, (1, 32, 32)),
    "alexnet": (AlexNet, (3, 224, 224)),
    "vgg16": (VGG16, (3, 224, 224)),
    "mnist-adam": (MnistAdam, (1, 28, 28)),
    "imagenet22k-adam": (ImageNet22kAdam, (3, 224, 224)),
}


def build(name: str, device: str = "meta") -> tuple[nn.Module, tuple[int, ...]]:
    """The torch mirror of preset ``name`` (on the meta device by default: no weight memory) and its input."""
    cls, shape = PRESET_MODULES[name]
    with torch.device(device):
        return cls(), shape
