"""Quantising baselines (docs/esgd.md §3-§4): EF-signSGD and QSGD, their exact bits, unbiasedness, training."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnbench.compression.methods import NO_DROP_RATIO_METHODS, QUANTISER_METHODS
from dnnbench.esgd import QSGD, ClusterConfig, QuantisedUpdate, SignSGD, make_compressor, simulate, wire
from dnnbench.specs import Compression


def _grads(seed: int, d: int, steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        g = rng.standard_normal(d).astype(np.float32)
        g[rng.random(d) < 0.2] = 0.0
        out.append(g)
    return out


# -- bits on the wire --------------------------------------------------------------------------------

def test_bits_formulas_by_hand() -> None:
    assert wire.sign_bits(1000) == 1000 + 32  # one sign bit per element + one fp32 scale
    assert wire.sign_bits(1000, bucket_size=256) == 1000 + 4 * 32
    assert [wire.level_bits(s) for s in (1, 2, 3, 7, 8, 255)] == [1, 2, 2, 3, 4, 8]
    assert wire.qsgd_fixed_bits(1000, 7, 512) == 2 * 32 + 1000 * (1 + 3)  # 2 norms; sign + 3 level bits
    assert wire.qsgd_fixed_bits(1000, 1, None) == 32 + 1000 * 2
    # Elias omega: 1 -> "0", 2 -> "10 0", 4 -> "10 100 0", 16 -> "10 100 10000 0", 100 -> 13 bits
    np.testing.assert_array_equal(wire.elias_omega_bits(np.array([1, 2, 3, 4, 7, 8, 16, 100])),
                                  [1, 3, 3, 6, 6, 7, 11, 13])
    # levels [0, 0, 3, 0, -1], one bucket: norm 32 + omega(nnz + 1 = 3) 3
    #   + position 2: omega(gap 3) 3, sign 1, omega(3) 3 + position 4: omega(gap 2) 3, sign 1, omega(1) 1
    assert wire.qsgd_elias_bits(np.array([0, 0, 3, 0, -1]), None) == 32 + 3 + (3 + 1 + 3) + (3 + 1 + 1)
    assert wire.qsgd_elias_bits(np.zeros(10, dtype=np.int64), 4) == 3 * 32 + 1  # all zero: norms and nnz = 0


def test_method_bits_per_element_for_the_performance_model() -> None:
    assert wire.method_bits_per_element("signsgd", "pairs32", 1.0) == 1.0  # the per-tensor scale is left out
    assert wire.method_bits_per_element("signsgd", "pairs32", 1.0, bucket_size=64) == 1.5
    assert wire.method_bits_per_element("qsgd", "bitmap", 1.0) == 1 + 3 + 32 / 512  # 4.0625
    assert wire.method_bits_per_element("qsgd", "bitmap", 1.0, levels=1, bucket_size=None) == 2.0
    for method in ("esgd", "topk_ef", "randk", "dense"):  # sparsifiers: the encoding at the density
        assert wire.method_bits_per_element(method, "bitmap", 0.125) == wire.bits_per_element("bitmap", 0.125)
    out = wire.method_bits_per_element("qsgd", "pairs32", np.array([[1.0, 0.5]]))
    assert isinstance(out, np.ndarray) and out.shape == (1, 2) and np.all(out == 4.0625)  # density ignored
    with pytest.raises(ValueError, match="^encoding: 'zip' is not one of"):
        wire.method_bits_per_element("qsgd", "zip", 1.0)
    assert wire.selection_ops_per_element("signsgd") > 0 and wire.selection_ops_per_element("qsgd") > 0


def test_pull_bits_per_element() -> None:
    assert wire.pull_bits_per_element("qsgd", "pairs32", 1.0, 4) == 32.0  # the average is sent dense
    assert wire.pull_bits_per_element("esgd", "bitmap", 0.125, 4) == pytest.approx(1 + 32 * (1 - 0.875 ** 4))
    assert wire.pull_bits_per_element("randk", "values_only", 0.125, 4) == 4.0  # one shared support
    assert wire.pull_bits_per_element("esgd", "pairs32", 0.5, 4) == 32.0  # capped at dense
    np.testing.assert_allclose(wire.pull_bits_per_element("esgd", "bitmap", 0.5, np.array([1.0, 2.0])),
                               [17.0, 1 + 32 * 0.75])


@pytest.mark.parametrize("bucket", [None, 7, 64])
def test_updates_report_their_exact_bits(bucket: int | None) -> None:
    g = _grads(0, 100, 1)[0]
    sign = SignSGD(bucket_size=bucket)
    update = sign.compress(g, "w")
    assert isinstance(update, QuantisedUpdate) and update.nnz == 100
    assert sign.bits(update, "sign") == wire.sign_bits(100, bucket)
    assert sign.bits(update, "dense") == 3200
    qsgd = QSGD(levels=3, bucket_size=bucket, seed=5)
    update = qsgd.compress(g, "w")
    levels, _ = QSGD(levels=3, bucket_size=bucket, seed=5).quantise(g, "w", 0)
    assert qsgd.bits(update, "qsgd_fixed") == wire.qsgd_fixed_bits(100, 3, bucket) == (
        32 * (1 if bucket is None else -(-100 // bucket)) + 100 * 3)
    assert qsgd.bits(update, "qsgd_elias") == wire.qsgd_elias_bits(levels.ravel()[:100], bucket)
    assert qsgd.encodings == ("qsgd_fixed", "qsgd_elias", "dense")
    with pytest.raises(ValueError, match="^encoding: 'bitmap' is not a format of this quantised update"):
        qsgd.bits(update, "bitmap")


# -- signSGD -----------------------------------------------------------------------------------------

def test_sign_sends_the_mean_magnitude_times_the_sign() -> None:
    g = np.array([[3.0, -1.0], [0.0, -4.0]], dtype=np.float32)
    update = SignSGD(error_feedback=False).compress(g, "w")
    assert update.shape == (2, 2)
    np.testing.assert_array_equal(update.densify(), [[2.0, -2.0], [2.0, -2.0]])  # mean |g| = 2; sign(0) = +1
    buckets = SignSGD(error_feedback=False, bucket_size=3).compress(np.array([3, -3, 0, 1], np.float32), "w")
    np.testing.assert_array_equal(buckets.values, [2.0, -2.0, 2.0, 1.0])  # buckets [3, -3, 0] and [1]


@given(d=st.integers(1, 300), seed=st.integers(0, 2**16), bucket=st.sampled_from([None, 1, 5, 64]))
def test_sign_error_feedback_invariant(d: int, seed: int, bucket: int | None) -> None:
    comp = SignSGD(bucket_size=bucket)
    grads = _grads(seed, d, 10)
    sent = np.zeros(d)
    for g in grads:
        update = comp.compress(g, "w")
        assert np.all(np.abs(update.values) == np.abs(update.values[0])) or bucket is not None
        sent += update.densify(np.float64)
    np.testing.assert_allclose(sent + comp.residual_of("w"), np.sum(grads, axis=0, dtype=np.float64),
                               rtol=1e-5, atol=1e-4)


def test_sign_error_feedback_residual_stays_bounded() -> None:
    comp = SignSGD()
    for g in _grads(1, 500, 200):
        comp.compress(g, "w")
    # a contraction (EF-SignSGD's delta = |p|_1^2 / (d |p|_2^2) > 0): the residual does not grow with t
    assert np.linalg.norm(comp.residual_of("w")) < 10 * np.linalg.norm(_grads(1, 500, 1)[0])


# -- QSGD --------------------------------------------------------------------------------------------

def test_qsgd_is_unbiased() -> None:
    g = _grads(2, 40, 1)[0] * np.float32(3.0)
    n = 4000
    comp = QSGD(levels=2, bucket_size=16, seed=11)  # coarse on purpose: large variance
    draws = np.array([comp.compress(g, "w").values for _ in range(n)], dtype=np.float64)  # a new draw per step
    stderr = draws.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(draws.mean(axis=0) - g) <= 5 * stderr + 1e-6)
    assert draws.std(axis=0).max() > 0.1  # it is random, not exact
    seeds = np.array([QSGD(levels=2, bucket_size=16, seed=s).compress(g, "w").values for s in range(n)])
    assert np.all(np.abs(seeds.mean(axis=0) - g) <= 5 * seeds.std(axis=0) / np.sqrt(n) + 1e-6)


def test_qsgd_levels_and_values() -> None:
    g = _grads(3, 1000, 1)[0]
    comp = QSGD(levels=5, bucket_size=100, seed=1)
    levels, norms = comp.quantise(g, "w", 0)
    assert levels.shape == (10, 100) and norms.shape == (10,) and norms.dtype == np.float32
    assert np.abs(levels).max() <= 5 and np.all(np.sign(levels) * np.sign(g.reshape(10, 100)) >= 0)
    np.testing.assert_allclose(norms, np.linalg.norm(g.reshape(10, 100), axis=1), rtol=1e-6)
    # each value is norm * level / s, rounded from the level below or above s |g| / norm
    ratio = 5 * np.abs(g.reshape(10, 100)) / norms[:, None]
    assert np.all((np.abs(levels) == np.floor(ratio)) | (np.abs(levels) == np.ceil(ratio)))
    update = QSGD(levels=5, bucket_size=100, seed=1).compress(g, "w")
    np.testing.assert_allclose(update.values, (norms[:, None] * levels / 5).ravel(), rtol=1e-6)
    assert not np.any(QSGD().compress(np.zeros(10, np.float32), "w").values)  # a zero norm sends zeros


def test_qsgd_is_seeded_per_tensor_and_step() -> None:
    g = _grads(4, 300, 1)[0]

    def draws(seed: int, names: tuple[str, ...]) -> dict[str, list[np.ndarray]]:
        comp = QSGD(levels=1, seed=seed)
        out: dict[str, list[np.ndarray]] = {n: [] for n in names}
        for _ in range(3):
            for n in names:
                out[n].append(comp.compress(g, n).values)
        return out

    a, b = draws(1, ("w", "v")), draws(1, ("v", "w"))  # the order of tensors does not matter
    for n in ("w", "v"):
        for x, y in zip(a[n], b[n], strict=True):
            np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a["w"][0], a["w"][1])  # a new draw every step
    assert not np.array_equal(a["w"][0], draws(2, ("w",))["w"][0])


@given(d=st.integers(1, 200), seed=st.integers(0, 2**16))
def test_qsgd_error_feedback_invariant(d: int, seed: int) -> None:
    comp = QSGD(levels=4, bucket_size=32, seed=seed, error_feedback=True)
    grads = _grads(seed, d, 8)
    sent = sum(comp.compress(g, "w").densify(np.float64) for g in grads)
    np.testing.assert_allclose(sent + comp.residual_of("w"), np.sum(grads, axis=0, dtype=np.float64),
                               rtol=1e-5, atol=1e-4)


# -- registration and training -----------------------------------------------------------------------

def test_registered_like_every_other_method() -> None:
    assert QUANTISER_METHODS <= NO_DROP_RATIO_METHODS and set(wire.QUANTISED_ENCODINGS) == QUANTISER_METHODS
    assert isinstance(make_compressor("signsgd"), SignSGD) and isinstance(make_compressor("qsgd", levels=3), QSGD)
    assert Compression(method="qsgd").method == "qsgd"  # the performance model's spec accepts them
    with pytest.raises(ValueError, match=r"^drop_ratio: 0\.5 must be None for SignSGD"):
        make_compressor("signsgd", 0.5)
    with pytest.raises(ValueError, match=r"^levels: 0 is not in \[1, "):
        make_compressor("qsgd", levels=0)
    with pytest.raises(ValueError, match=r"^bucket_size: 0 is not in \[1, "):
        make_compressor("signsgd", bucket_size=0)


@pytest.mark.parametrize("method", ["signsgd", "qsgd"])
def test_reset_gives_a_fresh_quantiser(method: str) -> None:
    comp = make_compressor(method, seed=3, error_feedback=True)
    grads = _grads(5, 50, 4)
    first = [comp.compress(g, "w").values.copy() for g in grads]
    comp.reset()
    for g, x in zip(grads, first, strict=True):
        np.testing.assert_array_equal(comp.compress(g, "w").values, x)


DIGITS = ClusterConfig(method="signsgd", drop_ratio=None, dataset="digits", n_workers=4, rounds=150, eval_every=10,
                       seed=0)


@pytest.fixture(scope="module")
def runs() -> dict[str, object]:
    return {"signsgd": simulate(dataclasses.replace(DIGITS, method="signsgd")),
            "qsgd": simulate(dataclasses.replace(DIGITS, method="qsgd")),
            "qsgd1": simulate(dataclasses.replace(DIGITS, method="qsgd", options={"levels": 1}))}


def test_quantised_training_on_digits_reaches_the_stated_accuracy(runs) -> None:
    # Measured with seed 0 (dnnbench 0.1.0, 4 workers, 150 rounds): EF-signSGD 93.6 %, QSGD (s = 7, B = 512)
    # 93.9 %, QSGD s = 1 94.7 %; dense SGD 94.4 % (test_esgd_training). Chance is 10 %.
    assert runs["signsgd"].final_accuracy >= 0.91
    assert runs["qsgd"].final_accuracy >= 0.91
    assert runs["qsgd1"].final_accuracy >= 0.91
    for run in runs.values():
        assert np.mean(run.train_loss[-10:]) < 0.5 * np.mean(run.train_loss[:10])


def test_quantised_runs_count_their_bits(runs) -> None:
    sign, qsgd = runs["signsgd"], runs["qsgd"]
    sizes = list(sign.tensor_sizes.values())
    assert sign.encodings == ("sign", "dense") and qsgd.encodings == ("qsgd_fixed", "qsgd_elias", "dense")
    assert np.all(sign.bits_up("sign") == sum(wire.sign_bits(d) for d in sizes))
    assert np.all(qsgd.bits_up("qsgd_fixed") == sum(wire.qsgd_fixed_bits(d, 7, 512) for d in sizes))
    assert np.all(qsgd.bits_up("qsgd_elias") < qsgd.bits_up("qsgd_fixed"))
    assert np.all(qsgd.bits_up("best_lossless") == np.minimum(qsgd.bits_up("qsgd_elias"), qsgd.bits_up("dense")))
    assert np.all(sign.bits_down("sign") == 32 * sign.n_params)  # the PS broadcasts the average dense
    assert np.all(sign.nnz_up == np.array(sizes))
    with pytest.raises(ValueError, match="^encoding: 'bitmap' does not apply to method 'signsgd'"):
        sign.bits_up("bitmap")
