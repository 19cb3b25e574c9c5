"""The ESGD DDP communication hook (docs/esgd.md §3): state, and a real 2-process gloo run on the CPU."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dnnbench.esgd import ESGDCompressor, ESGDHookState
from dnnbench.esgd.torch_demo import run_ddp_check


def test_import_stays_light() -> None:
    import subprocess

    code = "import dnnbench.esgd as e, sys; e.ESGDHookState; e.esgd_hook; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_state_keeps_a_compressor_per_bucket_and_passes_the_loss_once_per_step() -> None:
    state = ESGDHookState(0.75, beta=0.5)
    g0, g1 = np.arange(8, dtype=np.float32), np.ones(4, dtype=np.float32)
    state.observe_loss(1.0)
    assert state.compress(0, g0).nnz == 2 and state.compress(1, g1).nnz == 1
    state.observe_loss(0.5)
    state.compress(0, g0)
    state.compress(1, g1)
    comp = state._compressors[(0, 8)]
    assert isinstance(comp, ESGDCompressor) and comp.loss_fell is True
    assert state.density == pytest.approx((2 + 1) / (8 + 4))
    with pytest.raises(RuntimeError, match="compressed twice"):  # a second backward without a new loss
        state.compress(0, g0)
    state.compress(0, np.ones(6, dtype=np.float32))  # a rebuilt bucket of another size: fresh state


def test_state_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="^method: 'qsgd' is a quantiser"):
        ESGDHookState(method="qsgd")
    with pytest.raises(ValueError, match=r"^drop_ratio: 1\.5 is not in"):
        ESGDHookState(1.5)
    with pytest.raises(ValueError, match="^options: "):
        ESGDHookState(0.5, betta=0.9)
    with pytest.raises(ValueError, match="^loss: nan is not a finite number"):
        ESGDHookState(0.5).observe_loss(float("nan"))
    assert ESGDHookState(None, method="threshold", tau=0.1).drop_ratio is None


@pytest.mark.slow
def test_two_gloo_ranks_train_identical_replicas() -> None:
    # 2 processes, a 8-16-3 MLP, 20 steps of 16 samples per rank; ~10 s (most of it starting torch twice)
    ranks = run_ddp_check(world_size=2, steps=20, drop_ratio=0.5)
    a, b = ranks
    for name in ("esgd", "esgd_drop0", "allreduce"):  # every rank applies the same average
        np.testing.assert_array_equal(a[name]["params"], b[name]["params"])
    for rank in ranks:
        losses = np.array(rank["esgd"]["losses"])
        assert losses[-5:].mean() < 0.8 * losses[:5].mean()  # it trains
        assert rank["esgd"]["density"] == pytest.approx(0.5, abs=0.01)  # k = ceil(d / 2) per bucket
        # drop ratio 0: the hook is plain all-reduce averaging
        np.testing.assert_allclose(rank["esgd_drop0"]["params"], rank["allreduce"]["params"], rtol=0, atol=1e-6)
        np.testing.assert_allclose(rank["esgd_drop0"]["losses"], rank["allreduce"]["losses"], rtol=1e-6)
    assert not np.allclose(a["esgd"]["params"], a["allreduce"]["params"])  # and at 50 % it does differ
