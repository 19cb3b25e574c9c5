"""Wire cost of sparse updates (docs/esgd.md §4): exact bits, per-element formulas, union density."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dnnbench.compression.methods import METHODS
from dnnbench.esgd import wire

# d = 1000 elements, k = 125 sent (rho = 1/8). Hand-computed:
# H(1/8) = 1/8 * 3 + 7/8 * log2(8/7) = 0.375 + 0.168564... = 0.5435644 bits -> ceil(543.56) = 544 index bits.
HAND = [
    ("pairs32", 125 * (32 + 32)),  # (32-bit index, fp32 value) per coordinate
    ("fp16_index32", 125 * (32 + 16)),
    ("bitmap", 1000 + 125 * 32),  # one presence bit per element + fp32 values
    ("entropy", 544 + 125 * 32),
    ("values_only", 125 * 32),  # indices regenerated from the shared seed
    ("dense", 1000 * 32),
]


@pytest.mark.parametrize(("encoding", "bits"), HAND)
def test_update_bits_match_hand_computed_values(encoding: str, bits: int) -> None:
    assert wire.update_bits(encoding, 125, 1000, shared_indices=True) == bits


@pytest.mark.parametrize(("encoding", "per_element"), [
    ("pairs32", 64 * 0.125), ("fp16_index32", 48 * 0.125), ("bitmap", 1 + 32 * 0.125),
    ("entropy", 0.5435644431995964 + 32 * 0.125), ("values_only", 32 * 0.125), ("dense", 32.0)])
def test_bits_per_element_table(encoding: str, per_element: float) -> None:
    assert wire.bits_per_element(encoding, 0.125) == pytest.approx(per_element, rel=1e-12)


def test_at_esgd_50_percent_pairs_save_nothing_and_a_bitmap_saves_1_88x() -> None:
    # esgd.md §4: 64 * 0.5 = 32 bits, the same as dense; bitmap 1 + 16 = 17 bits.
    assert wire.bits_per_element("pairs32", 0.5) == wire.bits_per_element("dense", 0.5) == 32.0
    assert 32.0 / wire.bits_per_element("bitmap", 0.5) == pytest.approx(1.882, abs=1e-3)


def test_bits_per_element_is_vectorised_and_keeps_scalars_scalar() -> None:
    rho = np.array([[0.0, 0.25], [0.5, 1.0]])
    out = wire.bits_per_element("bitmap", rho)
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    np.testing.assert_allclose(out, 1 + 32 * rho)
    assert isinstance(wire.bits_per_element("bitmap", 0.25), float)
    np.testing.assert_allclose(wire.bits_per_element("entropy", np.array([0.0, 1.0])), [0.0, 32.0])
    np.testing.assert_allclose(wire.bits_per_element("dense", rho), np.full((2, 2), 32.0))


def test_union_density() -> None:
    assert wire.union_density(0.5, 4) == pytest.approx(1 - 0.5 ** 4)
    assert wire.union_density(0.125, 1) == pytest.approx(0.125)
    np.testing.assert_allclose(wire.union_density(np.array([0.0, 1.0, 0.25]), 3), [0.0, 1.0, 1 - 0.75 ** 3])


def test_names() -> None:
    assert wire.ENCODINGS == ("pairs32", "fp16_index32", "bitmap", "entropy", "values_only", "dense")
    assert wire.METHODS == METHODS
    assert {"dense", "topk_ef", "randk", "threshold", "dgc", "esgd", "esgd_no_residual",
            "topk_esgd_residual", "signsgd", "qsgd"} == set(METHODS)


def test_selection_ops_per_element() -> None:
    ops = {m: wire.selection_ops_per_element(m) for m in METHODS}
    assert ops["dense"] == 0.0
    assert all(v >= 0 for v in ops.values())
    # ESGD does top-k's work plus credit, residual and swap bookkeeping
    assert ops["esgd"] > ops["topk_ef"] > ops["randk"] > 0


@pytest.mark.parametrize(("call", "pattern"), [
    (lambda: wire.bits_per_element("bitmapp", 0.5), r"^encoding: 'bitmapp' is not one of \("),
    (lambda: wire.bits_per_element("bitmap", 1.5), r"^density: 1\.5 is not in \[0, 1\]"),
    (lambda: wire.bits_per_element("bitmap", [0.5, -0.1]), r"^density: \[-0\.1\] is not in \[0, 1\]"),
    (lambda: wire.union_density(0.5, 0), r"^n_workers: 0 is not in \[1, inf\]"),
    (lambda: wire.selection_ops_per_element("esdg"), r"^method: 'esdg' is not one of"),
    (lambda: wire.update_bits("values_only", 3, 10), r"^encoding: 'values_only' needs indices drawn from a shared"),
    (lambda: wire.update_bits("bitmap", 11, 10), r"^nnz: 11 is not in \[0, 10\]"),
])
def test_bad_arguments_raise_one_line_value_errors(call, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern) as info:
        call()
    assert "\n" not in str(info.value)


@given(d=st.integers(1, 10**7), data=st.data(), encoding=st.sampled_from(wire.ENCODINGS))
def test_exact_message_bits_agree_with_the_per_element_formula(d: int, data: st.DataObject, encoding: str) -> None:
    k = data.draw(st.integers(0, d))
    exact = wire.update_bits(encoding, k, d, shared_indices=True)
    formula = wire.bits_per_element(encoding, k / d) * d
    slack = 1.0 if encoding == "entropy" else 1e-6 * max(1.0, formula)  # the entropy bound is rounded up
    assert formula - 1e-6 * max(1.0, formula) <= exact <= formula + slack


@given(rho=st.lists(st.floats(0, 1), min_size=2, max_size=20), encoding=st.sampled_from(wire.ENCODINGS))
def test_more_coordinates_never_cost_fewer_bits(rho: list[float], encoding: str) -> None:
    rho_sorted = np.sort(np.array(rho))
    bits = wire.bits_per_element(encoding, rho_sorted)
    # entropy: H falls above rho = 1/2, but 32 rho rises faster (d/drho = log2((1 - rho)/rho) + 32 > 0
    # up to rho = 1 - 2e-10; beyond that the dip is below 1e-9 bits)
    assert np.all(np.diff(bits) >= -1e-9)


@given(rho=st.floats(0, 1), n=st.integers(1, 1000))
def test_union_is_at_least_one_support_and_at_most_all(rho: float, n: int) -> None:
    u = wire.union_density(rho, n)
    assert rho - 1e-12 <= u <= min(1.0, n * rho) + 1e-12
    assert math.isfinite(u)
