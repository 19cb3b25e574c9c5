"""Compressors behind the common interface (docs/esgd.md §2-§3): exact k, error feedback, variants."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnbench.compression.dgc import DGCLite
from dnnbench.compression.methods import kept_count
from dnnbench.esgd import ESGDCompressor, RandomK, SparseUpdate, TopKEF, average, make_compressor

FIXED_K = ("topk_ef", "randk", "esgd", "esgd_no_residual", "topk_esgd_residual", "dgc")

drops = st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.75, 0.875, 0.95, 0.99])
sizes = st.integers(1, 600)
seeds = st.integers(0, 2**16)


def _gradients(seed: int, d: int, steps: int, zero_fraction: float = 0.3) -> list[np.ndarray]:
    """Gradients with exact zeros and repeated values, like dead ReLUs and blank pixels."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        g = rng.standard_normal(d).astype(np.float32)
        g[rng.random(d) < zero_fraction] = 0.0
        g[rng.random(d) < 0.1] = 0.5
        out.append(g)
    return out


def _losses(seed: int, steps: int) -> list[float]:
    return list(np.random.default_rng(seed + 1).uniform(0.5, 2.0, steps))


def test_k_is_the_ceiling_of_the_kept_fraction() -> None:
    assert kept_count(0.5, 101) == 51
    assert kept_count(0.7, 10) == 3  # (1 - 0.7) * 10 = 3.0000000000000004 in floats
    assert kept_count(0.875, 8) == 1
    assert kept_count(0.99, 10) == 1  # at least one coordinate
    assert kept_count(0.0, 7) == 7


@given(method=st.sampled_from(FIXED_K), drop=drops, d=sizes, seed=seeds)
def test_exactly_k_sorted_unique_coordinates_are_sent(method: str, drop: float, d: int, seed: int) -> None:
    comp = make_compressor(method, drop, seed=seed)
    k = math.ceil(round((1 - drop) * d, 9))
    for g, loss in zip(_gradients(seed, d, 6), _losses(seed, 6), strict=True):
        comp.observe_loss(loss)
        update = comp.compress(g.reshape(-1, 1) if d % 2 == 0 else g, "w")
        assert update.nnz == max(1, k)
        assert np.all(np.diff(update.indices) > 0) and update.indices[0] >= 0 and update.indices[-1] < d
        assert update.shape == ((d, 1) if d % 2 == 0 else (d,))


def _sent_plus_residual(comp, grads, losses, name="w"):
    total_sent = np.zeros(grads[0].size, dtype=np.float64)
    for g, loss in zip(grads, losses, strict=True):
        comp.observe_loss(loss)
        total_sent += comp.compress(g, name).densify(np.float64)
    return total_sent + comp.residual_of(name).astype(np.float64), np.sum(grads, axis=0, dtype=np.float64)


@pytest.mark.parametrize(("method", "options"), [
    ("topk_ef", {}), ("randk", {}), ("threshold", {"tau": 0.7}),
    ("esgd", {"beta": 1.0, "tau": 0.5, "swap_fraction": 0.5}),  # swap-ins happen: they must not double count
    ("esgd", {"beta": 1.0, "tau": 0.5, "swap_fraction": 0.5, "variant": "B"}),
    ("esgd", {"beta": 1.0, "tau": 0.5, "swap_fraction": 0.5, "variant": "C"}),
    ("topk_esgd_residual", {"beta": 1.0, "tau": 0.5, "swap_fraction": 1.0}),
])
@given(drop=st.sampled_from([0.5, 0.75, 0.9]), d=st.integers(2, 300), seed=seeds)
def test_error_feedback_invariant_sent_plus_residual_is_the_gradient_sum(method, options, drop, d, seed) -> None:
    comp = make_compressor(method, None if method == "threshold" else drop, seed=seed, **options)
    grads = _gradients(seed, d, 12)
    got, want = _sent_plus_residual(comp, grads, _losses(seed, 12))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_esgd_swaps_happen_in_the_invariant_test_setting() -> None:
    comp = make_compressor("esgd", 0.75, beta=1.0, tau=0.5, swap_fraction=0.5)
    _sent_plus_residual(comp, _gradients(3, 200, 12), _losses(3, 12))
    assert comp.stats()["swapped_per_call"] > 1  # the invariant above covered the swap-in path


def test_discounted_residual_of_a_coordinate_never_sent() -> None:
    # k = 1 and coordinate 0 dominates; no swap-in (tau = inf): r_j = sum_s beta^(t-s) g_j,s for j >= 1
    comp = ESGDCompressor(0.75, beta=0.5, tau=math.inf)
    grads = [np.array([10.0, 1.0, -2.0, 0.0], dtype=np.float32), np.array([10.0, 3.0, 2.0, 1.0], dtype=np.float32),
             np.array([10.0, 0.0, 4.0, 1.0], dtype=np.float32)]
    for i, g in enumerate(grads):
        comp.observe_loss(1.0 - 0.1 * i)
        update = comp.compress(g, "w")
        assert update.indices.tolist() == [0]
    expected = 0.25 * grads[0] + 0.5 * grads[1] + grads[2]
    np.testing.assert_allclose(comp.residual_of("w")[1:], expected[1:], rtol=1e-6)
    assert comp.residual_of("w")[0] == 0.0


def test_swap_in_sends_the_residual_once_and_keeps_the_dropped_gradient() -> None:
    # d = 4, k = 2, beta = 0.5, tau = 0.8: step 1 picks {0, 1} by |g|; coordinate 2's residual 1.0 > tau is
    # swapped in and replaces the member with the smallest |g + r| (coordinate 1, credit ties at 0).
    comp = ESGDCompressor(0.5, beta=0.5, tau=0.8, swap_fraction=1.0)
    comp.observe_loss(1.0)
    update = comp.compress(np.array([4.0, 3.0, 1.0, 0.5], dtype=np.float32), "w")
    assert update.indices.tolist() == [0, 2]
    assert update.values.tolist() == [4.0, 1.0]  # g_2 is sent once, not g_2 + r_2 = 2
    np.testing.assert_allclose(comp.residual_of("w"), [0.0, 3.0, 0.0, 0.5])


def test_a_swapped_in_residual_is_discounted_while_it_waited() -> None:
    # beta = 0.5, tau = 1.5, k = 2 of 4. Step 1 sends {0, 1}; r = [0, 0, 1, 0.5]. Step 2 (the loss fell: C kept and
    # credited): r_2 = 0.5 * 1 + 1.5 = 2 > tau swaps in and replaces coordinate 1 (equal credit, smaller |g + r|).
    comp = ESGDCompressor(0.5, beta=0.5, tau=1.5, swap_fraction=1.0)
    comp.observe_loss(1.0)
    assert comp.compress(np.array([4.0, 3.0, 1.0, 0.5], dtype=np.float32), "w").indices.tolist() == [0, 1]
    comp.observe_loss(0.5)
    update = comp.compress(np.array([4.0, 3.0, 1.5, 0.0], dtype=np.float32), "w")
    assert update.indices.tolist() == [0, 2]
    assert update.values.tolist() == [4.0, 2.0]  # beta * r + g, not r + g = 2.5
    np.testing.assert_allclose(comp.residual_of("w"), [0.0, 3.0, 0.0, 0.25])
    assert comp.credit_of("w").tolist() == [1.0, 1.0, 0.0, 0.0]


def _two_steps(variant: str, second_loss: float):
    comp = ESGDCompressor(0.7, variant=variant, tau=math.inf, temperature=1e-3)  # d = 10, k = 3, no swaps
    comp.observe_loss(1.0)
    first = comp.compress(np.arange(10, dtype=np.float32), "w")  # top-3 |g|: 7, 8, 9
    comp.observe_loss(second_loss)
    second = comp.compress(np.arange(10, dtype=np.float32)[::-1].copy(), "w")  # top-3 |g|: 0, 1, 2
    return comp, first, second


def test_variant_a_keeps_and_credits_the_set_when_the_loss_falls() -> None:
    comp, first, second = _two_steps("A", 0.5)
    assert first.indices.tolist() == [7, 8, 9]
    assert second.indices.tolist() == [7, 8, 9]  # kept although |g| now favours 0, 1, 2
    assert comp.credit_of("w").tolist() == [0.0] * 7 + [1.0] * 3
    assert comp.loss_fell is True


def test_variant_b_refreshes_to_top_k_of_the_gradient_and_credits_it() -> None:
    comp, first, second = _two_steps("B", 0.5)
    assert second.indices.tolist() == [0, 1, 2]
    assert comp.credit_of("w").tolist() == [1.0] * 3 + [0.0] * 7


def test_on_a_rise_a_and_b_pick_the_most_credit_ties_by_gradient() -> None:
    for variant in ("A", "B"):
        comp, _, _ = _two_steps(variant, 0.5)  # credit earned at step 2
        comp.observe_loss(0.9)  # the loss rose
        third = comp.compress(np.ones(10, dtype=np.float32) * np.float32(0.1), "w")
        credited = np.flatnonzero(comp.credit_of("w") > 0).tolist()
        assert third.indices.tolist() == credited
        assert comp.loss_fell is False
    comp, _, _ = _two_steps("A", 2.0)  # rose at step 2: no credit anywhere, so |g| decides
    assert comp.credit_of("w").tolist() == [0.0] * 10


def test_variant_c_samples_by_softmax_of_credit() -> None:
    # a cold temperature makes sampling pick the credited set; a hot one spreads over all indices
    comp, _, _ = _two_steps("C", 0.5)
    comp.observe_loss(0.9)
    assert comp.compress(np.ones(10, dtype=np.float32), "w").indices.tolist() == [7, 8, 9]
    seen = set()
    hot = ESGDCompressor(0.7, variant="C", tau=math.inf, temperature=1e6, seed=1)
    for step in range(60):
        hot.observe_loss(1.0 + step)  # always rising: sample every step
        seen.update(hot.compress(np.arange(10, dtype=np.float32), "w").indices.tolist())
    assert seen == set(range(10))


def test_variant_c_is_seeded() -> None:
    def picks(seed: int) -> list[list[int]]:
        comp = ESGDCompressor(0.7, variant="C", tau=math.inf, temperature=1e3, seed=seed)
        out = []
        for step in range(8):
            comp.observe_loss(1.0 + step)
            out.append(comp.compress(np.arange(10, dtype=np.float32), "w").indices.tolist())
        return out

    assert picks(5) == picks(5)
    assert picks(5) != picks(6)


def test_loss_ema_smooths_the_comparison() -> None:
    raw, ema = ESGDCompressor(0.5), ESGDCompressor(0.5, loss_ema=0.5)
    fell = {"raw": [], "ema": []}
    for loss in (1.0, 3.0, 2.0):  # EMA(0.5): 1.0, 2.0, 2.0
        raw.observe_loss(loss)
        ema.observe_loss(loss)
        fell["raw"].append(raw.loss_fell)
        fell["ema"].append(ema.loss_fell)
    assert fell == {"raw": [None, False, True], "ema": [None, False, False]}


def test_ablation_without_residual_drops_what_it_does_not_send() -> None:
    comp = make_compressor("esgd_no_residual", 0.5)
    total = 0.0
    for g, loss in zip(_gradients(1, 50, 5, 0.0), _losses(1, 5), strict=True):
        comp.observe_loss(loss)
        total += comp.compress(g, "w").nnz
    assert total == 5 * 25
    assert not np.any(comp.residual_of("w"))


def test_ablation_top_k_with_residual_ignores_the_loss() -> None:
    comp = make_compressor("topk_esgd_residual", 0.5, tau=math.inf)
    update = comp.compress(np.array([0.1, -5.0, 3.0, 0.2], dtype=np.float32), "w")  # no observe_loss needed
    assert update.indices.tolist() == [1, 2]


def test_esgd_needs_one_loss_per_step() -> None:
    comp = ESGDCompressor(0.5)
    with pytest.raises(RuntimeError, match="observe_loss"):
        comp.compress(np.ones(4, dtype=np.float32), "w")
    comp.observe_loss(1.0)
    comp.compress(np.ones(4, dtype=np.float32), "w")
    comp.compress(np.ones(3, dtype=np.float32), "b")  # another tensor of the same step is fine
    with pytest.raises(RuntimeError, match="compressed twice"):
        comp.compress(np.ones(4, dtype=np.float32), "w")


def test_random_k_indices_come_from_the_shared_seed() -> None:
    a, b, other = RandomK(0.9, seed=7), RandomK(0.9, seed=7), RandomK(0.9, seed=8)
    g = np.ones(1000, dtype=np.float32)
    ua = [a.compress(g, "w") for _ in range(3)]
    ub = [b.compress(g * 2, "w") for _ in range(3)]  # another worker, other values, same indices
    for x, y in zip(ua, ub, strict=True):
        assert np.array_equal(x.indices, y.indices) and x.index_seed == 7
    assert not np.array_equal(ua[0].indices, ua[1].indices)  # a new draw every step
    assert not np.array_equal(ua[0].indices, other.compress(g, "w").indices)
    assert not np.array_equal(ua[0].indices, RandomK(0.9, seed=7).compress(g, "v").indices)  # per tensor name
    assert np.array_equal(RandomK(0.9, seed=7).indices("w", 2, 1000), ua[2].indices)  # a pure function
    assert a.bits(ua[0], "values_only") == 32 * 100
    assert average([ua[0], ub[0]])[1] == 100  # the union of shared supports is one support


def test_values_only_needs_a_shared_seed() -> None:
    comp = TopKEF(0.5)
    update = comp.compress(np.arange(8, dtype=np.float32), "w")
    assert comp.bits(update, "bitmap") == 8 + 32 * 4
    with pytest.raises(ValueError, match="shared seed"):
        comp.bits(update, "values_only")
    assert "values_only" not in comp.encodings and "values_only" in RandomK(0.5).encodings


@given(drop=drops, d=st.integers(1, 200), seed=seeds)
def test_dgc_without_momentum_or_warm_up_is_top_k_with_error_feedback(drop: float, d: int, seed: int) -> None:
    dgc, topk = DGCLite(drop, momentum=0.0), TopKEF(drop)
    for g in _gradients(seed, d, 5):
        x, y = dgc.compress(g, "w"), topk.compress(g, "w")
        assert np.array_equal(x.indices, y.indices)
        np.testing.assert_allclose(x.values, y.values, rtol=1e-6)


def test_dgc_momentum_correction_and_factor_masking() -> None:
    dgc = DGCLite(0.5, momentum=0.5)  # d = 2, k = 1
    assert dgc.compress(np.array([2.0, 1.0], dtype=np.float32), "w").values.tolist() == [2.0]
    # u = 0.5 * [0 (masked), 1] + [0, 1] = [0, 1.5]; v = [0 (masked), 1] + u = [0, 2.5]
    second = dgc.compress(np.array([0.0, 1.0], dtype=np.float32), "w")
    assert second.indices.tolist() == [1] and second.values.tolist() == [2.5]


def test_dgc_sparsity_warm_up() -> None:
    dgc = DGCLite(0.99, warmup_steps=4, warmup_start_density=0.25)
    densities = [dgc.density_at(t) for t in range(6)]
    assert densities[0] == pytest.approx(0.25) and densities[4] == densities[5] == pytest.approx(0.01)
    assert all(a > b for a, b in zip(densities[:4], densities[1:5], strict=True))
    assert [dgc.compress(np.ones(1000, dtype=np.float32), "w").nnz for _ in range(5)][0] == 250


def test_threshold_sgd_sends_plus_minus_tau_where_the_accumulator_reaches_tau() -> None:
    comp = make_compressor("threshold", tau=1.0)
    update = comp.compress(np.array([0.5, -1.5, 2.5, 0.9], dtype=np.float32), "w")
    assert update.indices.tolist() == [1, 2] and update.values.tolist() == [-1.0, 1.0]
    second = comp.compress(np.array([0.6, 0.0, 0.0, 0.0], dtype=np.float32), "w")  # 0.5 + 0.6 >= 1
    assert second.indices.tolist() == [0, 2]  # and 2.5 - 1 = 1.5 is still above tau


def test_dense_sends_everything() -> None:
    g = np.arange(6, dtype=np.float32).reshape(2, 3)
    update = make_compressor("dense").compress(g, "w")
    np.testing.assert_array_equal(update.densify(), g)
    assert update.nnz == 6


def test_state_is_kept_per_tensor_name() -> None:
    mixed, alone_a, alone_b = TopKEF(0.5), TopKEF(0.5), TopKEF(0.5)
    ga, gb = _gradients(1, 20, 4), _gradients(2, 8, 4)
    for x, y in zip(ga, gb, strict=True):
        ma, mb = mixed.compress(x, "a"), mixed.compress(y, "b")
        assert np.array_equal(ma.indices, alone_a.compress(x, "a").indices)
        assert np.array_equal(mb.indices, alone_b.compress(y, "b").indices)
    with pytest.raises(ValueError, match=r"grad: \(3,\) differs from the earlier shape \(20,\)"):
        mixed.compress(np.ones(3), "a")


def test_sparse_update_is_a_frozen_validated_value() -> None:
    update = SparseUpdate(np.array([1, 3]), np.array([2.0, -1.0], dtype=np.float32), (2, 2))
    np.testing.assert_array_equal(update.densify(), [[0, 2], [0, -1]])
    assert update.density == 0.5 and update.size == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        update.shape = (4,)  # type: ignore[misc]
    with pytest.raises(ValueError):
        update.values[0] = 1.0
    with pytest.raises(ValueError, match="indices"):
        SparseUpdate(np.array([3, 1]), np.zeros(2), (4,))
    with pytest.raises(ValueError, match="indices"):
        SparseUpdate(np.array([0, 4]), np.zeros(2), (4,))
    with pytest.raises(ValueError, match="values"):
        SparseUpdate(np.array([0, 1]), np.zeros(3), (4,))


def test_average_is_the_mean_of_scattered_updates() -> None:
    a = SparseUpdate(np.array([0, 2]), np.array([2.0, 4.0]), (4,))
    b = SparseUpdate(np.array([2, 3]), np.array([2.0, 6.0]), (4,))
    mean, union = average([a, b])
    np.testing.assert_allclose(mean, [1.0, 0.0, 3.0, 3.0])
    assert union == 3


@pytest.mark.parametrize(("call", "pattern"), [
    (lambda: make_compressor("esdg", 0.5), r"^method: 'esdg' is not one of"),
    (lambda: make_compressor("esgd"), r"^drop_ratio: None is required by method 'esgd'"),
    (lambda: make_compressor("esgd", 1.0), r"^drop_ratio: 1\.0 is not in \[0\.0, 1\.0\)"),
    (lambda: make_compressor("esgd", 0.5, variant="D"), r"^variant: 'D' is not one of \('A', 'B', 'C'\)"),
    (lambda: make_compressor("esgd", 0.5, betta=0.9), r"^options: \['betta'\] are not all accepted by ESGDCompressor"),
    (lambda: make_compressor("threshold", 0.5), r"^drop_ratio: 0\.5 must be None for threshold SGD"),
    (lambda: make_compressor("topk_ef", 0.5).compress(np.array([1.0, np.nan]), "w"), r"^grad: .* is not finite"),
    (lambda: ESGDCompressor(0.5).observe_loss(float("inf")), r"^loss: inf is not a finite number"),
])
def test_bad_arguments_name_the_argument(call, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.parametrize("method", ["topk_ef", "randk", "dgc", "esgd", "threshold"])
def test_reset_gives_a_fresh_compressor(method: str) -> None:
    options = {"variant": "C", "temperature": 10.0} if method == "esgd" else {}
    comp = make_compressor(method, None if method == "threshold" else 0.8, seed=3, **options)

    def run() -> list[list[int]]:
        out = []
        for g, loss in zip(_gradients(4, 50, 5), _losses(4, 5), strict=True):
            comp.observe_loss(loss)
            out.append(comp.compress(g, "w").indices.tolist())
        return out

    first = run()
    comp.reset()
    assert run() == first
