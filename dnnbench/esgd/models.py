"""Small numpy models with hand-written backward passes: an MLP and a one-conv-layer CNN.

Parameters live in a ``dict[str, np.ndarray]`` keyed by tensor name ("fc1.weight", ...), the
names the compressors keep their state under. Loss: mean softmax cross-entropy over the batch.
Computation follows the parameters' dtype (float32 in training, float64 in gradient checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import checks as v

Params = dict[str, np.ndarray]


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax(logits) and its gradient with respect to the logits."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    prob = exp / exp.sum(axis=1, keepdims=True)
    n = logits.shape[0]
    rows = np.arange(n)
    loss = float(-np.mean(np.log(np.maximum(prob[rows, labels], np.finfo(prob.dtype).tiny))))
    grad = prob
    grad[rows, labels] -= 1.0
    grad /= n
    return loss, grad


def _he(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


@dataclass(frozen=True)
class MLP:
    """Fully connected ReLU network ``n_features -> hidden_units... -> n_classes``."""

    n_features: int
    hidden_units: tuple[int, ...] = (128,)
    n_classes: int = 10

    def __post_init__(self) -> None:
        v.integer("n_features", self.n_features, low=1)
        v.integer("n_classes", self.n_classes, low=2)
        for i, h in enumerate(self.hidden_units):
            v.integer(f"hidden_units[{i}]", h, low=1)

    @property
    def widths(self) -> tuple[int, ...]:
        return (self.n_features, *self.hidden_units, self.n_classes)

    def init_params(self, rng: np.random.Generator) -> Params:
        params: Params = {}
        for i, (fan_in, fan_out) in enumerate(zip(self.widths[:-1], self.widths[1:], strict=True), start=1):
            params[f"fc{i}.weight"] = _he(rng, fan_in, (fan_in, fan_out))
            params[f"fc{i}.bias"] = np.zeros(fan_out, dtype=np.float32)
        return params

    def _layers(self) -> range:
        return range(1, len(self.widths))

    def logits(self, params: Params, x: np.ndarray) -> np.ndarray:
        h = x
        for i in self._layers():
            h = h @ params[f"fc{i}.weight"] + params[f"fc{i}.bias"]
            if i < len(self.widths) - 1:
                h = np.maximum(h, 0.0)
        return h

    def loss_and_grads(self, params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Mean cross-entropy on (x, y) and its gradient for every parameter."""
        activations = [x]
        h = x
        last = len(self.widths) - 1
        for i in self._layers():
            h = h @ params[f"fc{i}.weight"] + params[f"fc{i}.bias"]
            if i < last:
                h = np.maximum(h, 0.0)
            activations.append(h)
        loss, delta = _cross_entropy(h, y)
        grads: Params = {}
        for i in reversed(self._layers()):
            a_in = activations[i - 1]
            grads[f"fc{i}.weight"] = a_in.T @ delta
            grads[f"fc{i}.bias"] = delta.sum(axis=0)
            if i > 1:
                delta = (delta @ params[f"fc{i}.weight"].T) * (a_in > 0)
        return loss, grads

    def accuracy(self, params: Params, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.logits(params, x).argmax(axis=1) == y))


@dataclass(frozen=True)
class SmallCNN:
    """conv k x k (valid, ``channels`` maps) -> ReLU -> max-pool ``pool`` -> fully connected.

    The convolution is an im2col matrix product; being the first layer it needs no input gradient.
    """

    image_side: int
    channels: int = 8
    kernel: int = 3
    pool: int = 2
    n_classes: int = 10

    def __post_init__(self) -> None:
        v.integer("image_side", self.image_side, low=2)
        v.integer("channels", self.channels, low=1)
        v.integer("kernel", self.kernel, low=1, high=self.image_side)
        v.integer("pool", self.pool, low=1, high=self.image_side - self.kernel + 1)
        v.integer("n_classes", self.n_classes, low=2)

    @property
    def conv_side(self) -> int:
        return self.image_side - self.kernel + 1

    @property
    def pooled_side(self) -> int:
        return self.conv_side // self.pool

    @property
    def n_features(self) -> int:
        return self.image_side * self.image_side

    def init_params(self, rng: np.random.Generator) -> Params:
        kk = self.kernel * self.kernel
        flat = self.pooled_side ** 2 * self.channels
        return {
            "conv1.weight": _he(rng, kk, (kk, self.channels)),
            "conv1.bias": np.zeros(self.channels, dtype=np.float32),
            "fc1.weight": _he(rng, flat, (flat, self.n_classes)),
            "fc1.bias": np.zeros(self.n_classes, dtype=np.float32),
        }

    def _forward(self, params: Params, x: np.ndarray) -> tuple[np.ndarray, ...]:
        n, s, k, p, c = x.shape[0], self.image_side, self.kernel, self.pool, self.channels
        cs, ps = self.conv_side, self.pooled_side
        images = x.reshape(n, s, s)
        cols = sliding_window_view(images, (k, k), axis=(1, 2)).reshape(n * cs * cs, k * k)
        conv = (cols @ params["conv1.weight"] + params["conv1.bias"]).reshape(n, cs, cs, c)
        relu = np.maximum(conv, 0.0)
        blocks = (relu[:, :ps * p, :ps * p, :].reshape(n, ps, p, ps, p, c)
                  .transpose(0, 1, 3, 5, 2, 4).reshape(n, ps, ps, c, p * p))
        winner = blocks.argmax(axis=-1)
        pooled = np.take_along_axis(blocks, winner[..., None], axis=-1)[..., 0]
        flat = pooled.reshape(n, -1)
        logits = flat @ params["fc1.weight"] + params["fc1.bias"]
        return cols, conv, winner, flat, logits

    def logits(self, params: Params, x: np.ndarray) -> np.ndarray:
        return self._forward(params, x)[-1]

    def loss_and_grads(self, params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
        """Mean cross-entropy on (x, y) and its gradient for every parameter."""
        cols, conv, winner, flat, logits = self._forward(params, x)
        loss, delta = _cross_entropy(logits, y)
        n, p, c, cs, ps = x.shape[0], self.pool, self.channels, self.conv_side, self.pooled_side
        grads: Params = {"fc1.weight": flat.T @ delta, "fc1.bias": delta.sum(axis=0)}
        d_pooled = (delta @ params["fc1.weight"].T).reshape(n, ps, ps, c)
        d_blocks = np.zeros((n, ps, ps, c, p * p), dtype=delta.dtype)
        np.put_along_axis(d_blocks, winner[..., None], d_pooled[..., None], axis=-1)
        d_relu = np.zeros((n, cs, cs, c), dtype=delta.dtype)
        d_relu[:, :ps * p, :ps * p, :] = (d_blocks.reshape(n, ps, ps, c, p, p)
                                          .transpose(0, 1, 4, 2, 5, 3).reshape(n, ps * p, ps * p, c))
        d_conv = (d_relu * (conv > 0)).reshape(n * cs * cs, c)
        grads["conv1.weight"] = cols.T @ d_conv
        grads["conv1.bias"] = d_conv.sum(axis=0)
        return loss, grads

    def accuracy(self, params: Params, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.logits(params, x).argmax(axis=1) == y))


MODELS: tuple[str, ...] = ("mlp", "cnn")


def build_model(kind: str, n_features: int, image_side: int, n_classes: int,
                hidden_units: int = 128) -> MLP | SmallCNN:
    """The model of ``kind`` ("mlp" or "cnn") for images of ``image_side`` x ``image_side``."""
    v.choice("model", kind, MODELS)
    if kind == "mlp":
        return MLP(n_features, (v.integer("hidden_units", hidden_units, low=1),), n_classes)
    return SmallCNN(image_side, n_classes=n_classes)


__all__ = ["MLP", "MODELS", "Params", "SmallCNN", "build_model"]
