"""ESGD as reconstructed in esgd.md §2 (reconstructed; Tao and Li, HotEdge 2018, abstract only).

Per worker and flattened tensor of d elements the state is: hidden weights h (credit; stored as
the count of credits earned, h = credit * count, so that selecting by h is an O(d) histogram), a
discounted residual r, the current index set C with |C| = k = ceil((1 - drop) d), and (shared by
all tensors) the previous loss. One step with mini-batch loss L_t and gradient g:

    if L_t < L_prev:  h[C] += credit      (A keeps C; B first refreshes C = top-k |g|; C keeps C)
    else:             C = top-k(h), ties by larger |g|
                      (variant C: k indices sampled without replacement, p ∝ softmax(h / T))
    U = complement(C);  r[U] = beta r[U] + g[U]                     # discounted momentum residual
    swap in up to s_max = floor(swap_fraction k) indices j in U with |r_j| > tau (largest first),
        dropping the lowest-credit members of C (ties: smallest |g + r|)
    send g[C] + r[C] with the indices;  r[C] = 0

A swapped-in j already holds g_j in r_j, so it sends r_j (g_j is not counted twice), and a dropped
member of C keeps beta r + g as residual. With beta = 1 this is exact error feedback: over any run,
sent values plus the residual equal the summed gradients. Variant C samples with the Gumbel-top-k
trick (Kool et al. 2019), which draws k indices without replacement from softmax(h / T).

Options beyond the description (ours): ``loss_ema`` compares an exponential moving average of the
loss instead of the raw, noisy mini-batch loss; ``residual=False`` and ``selection="magnitude"``
give the two ablations of esgd.md §2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import checks as v
from .compressor import Compressor, kept, top_k, top_k_lex
from .methods import drop_ratio as checked_drop_ratio
from .sparse import SparseUpdate

VARIANTS: tuple[str, ...] = ("A", "B", "C")
SELECTIONS: tuple[str, ...] = ("loss", "magnitude")


@dataclass
class _TensorState:
    earned: np.ndarray  # credits earned per coordinate (int64); the hidden weight h = credit * earned
    residual: np.ndarray  # r, float32
    chosen: np.ndarray | None  # C, sorted int64
    loss_step: int  # the observe_loss count at this tensor's last compress


class ESGDCompressor(Compressor):
    """Loss-driven sparse updates with a discounted momentum residual (esgd.md §2, reconstructed)."""

    method = "esgd"

    def __init__(self, drop_ratio: float, *, variant: str = "A", beta: float = 0.9, tau: float = 0.01,
                 swap_fraction: float = 0.1, credit: float = 1.0, temperature: float = 1.0,
                 loss_ema: float | None = None, residual: bool = True, selection: str = "loss",
                 seed: int = 0) -> None:
        super().__init__()
        self.drop_ratio = checked_drop_ratio(drop_ratio)
        self.variant = v.choice("variant", variant, VARIANTS)
        self.beta = v.number("beta", beta, low=0.0, high=1.0)
        self.tau = v.number("tau", tau, low=0.0) if tau != math.inf else math.inf
        self.swap_fraction = v.number("swap_fraction", swap_fraction, low=0.0, high=1.0)
        self.credit = v.number("credit", credit, low=0.0, low_open=True)
        self.temperature = v.number("temperature", temperature, low=0.0, low_open=True)
        self.loss_ema = None if loss_ema is None else v.number("loss_ema", loss_ema, low=0.0, high=1.0,
                                                               high_open=True)
        if not isinstance(residual, bool):
            raise v.fail("residual", residual, "is not a bool")
        self.residual = residual
        self.selection = v.choice("selection", selection, SELECTIONS)
        self.seed = v.integer("seed", seed, low=0)
        self._rng = np.random.default_rng(self.seed)
        self._tensors: dict[str, _TensorState] = {}
        self._smoothed: float | None = None  # the loss compared (raw or EMA)
        self._fell: bool | None = None  # did the compared loss fall at the last observe_loss?
        self._loss_steps = 0
        self._falls = 0  # observe_loss calls where the compared loss fell
        self._swapped = 0  # coordinates swapped in, all tensors
        self._compressed = 0  # compress calls

    # -- the loss channel ------------------------------------------------------------------------
    def observe_loss(self, loss: float) -> None:
        """Record L_t; the next ``compress`` calls credit C if it fell below L_{t-1}, else reselect."""
        super().observe_loss(loss)
        current = self._loss if self.loss_ema is None or self._smoothed is None else (
            self.loss_ema * self._smoothed + (1.0 - self.loss_ema) * self._loss)
        self._fell = None if self._smoothed is None else current < self._smoothed
        self._smoothed = current
        self._loss_steps += 1
        self._falls += bool(self._fell)

    @property
    def loss_fell(self) -> bool | None:
        """Whether the last observed (smoothed) loss was below the one before; None at the start."""
        return self._fell

    # -- compression -----------------------------------------------------------------------------
    def _state(self, name: str, d: int) -> _TensorState:
        state = self._tensors.get(name)
        if state is None:
            state = _TensorState(np.zeros(d, dtype=np.int64), np.zeros(d, dtype=np.float32), None, -1)
            self._tensors[name] = state
        return state

    def _select(self, state: _TensorState, g_abs: np.ndarray, k: int) -> np.ndarray:
        """C before the swap-in: the loss-driven rule (or top-k |g| for the magnitude ablation)."""
        if self.selection == "magnitude" or state.chosen is None:
            return top_k(g_abs, k)  # first step: h = 0 everywhere, so ties by |g| decide
        if self._fell:
            chosen = top_k(g_abs, k) if self.variant == "B" else state.chosen
            state.earned[chosen] += 1
            return chosen
        if self.variant == "C":  # Gumbel-top-k: sampling without replacement from softmax(h / T)
            keys = (self.credit / self.temperature) * state.earned + self._rng.gumbel(size=state.earned.size)
            return top_k(keys, k)
        return top_k_lex(state.earned, g_abs, k)

    def _compress(self, flat: np.ndarray, name: str, step: int) -> SparseUpdate:
        if self.selection == "loss":
            if self._loss_steps == 0:
                raise RuntimeError("ESGD needs the loss: call observe_loss(loss) before compress()")
        state = self._state(name, flat.size)
        if self.selection == "loss" and state.loss_step == self._loss_steps:
            raise RuntimeError(f"tensor {name!r} compressed twice for one loss: call observe_loss(loss) "
                               "once per step, before the step's compress() calls")
        state.loss_step = self._loss_steps
        self._compressed += 1
        d = flat.size
        k = kept(self.drop_ratio, d)
        g_abs = np.abs(flat)
        chosen = self._select(state, g_abs, k)
        if not self.residual:
            state.chosen = chosen
            return SparseUpdate(chosen, flat[chosen], (d,))
        r = state.residual
        send_now = flat + r  # value of a coordinate sent this step: g + r
        unsent = self.beta * r + flat  # residual of a coordinate not sent: beta r + g
        in_set = np.zeros(d, dtype=bool)
        in_set[chosen] = True
        swapped = self._swap_in(state, chosen, in_set, unsent, send_now, k)
        self._swapped += swapped.size
        final = np.flatnonzero(in_set)
        values = send_now[final]
        if swapped.size:
            values[np.searchsorted(final, swapped)] = unsent[swapped]  # r_j already holds g_j
        unsent[final] = 0.0
        state.residual = unsent.astype(np.float32, copy=False)
        state.chosen = final
        return SparseUpdate(final, values, (d,))

    def _swap_in(self, state: _TensorState, chosen: np.ndarray, in_set: np.ndarray,
                 unsent: np.ndarray, send_now: np.ndarray, k: int) -> np.ndarray:
        """Swap residuals above tau into C (edits ``in_set``); returns the swapped-in indices, sorted."""
        s_max = math.floor(self.swap_fraction * k)
        if s_max == 0 or k == unsent.size or math.isinf(self.tau):
            return np.empty(0, dtype=np.int64)
        candidates = np.flatnonzero((np.abs(unsent) > self.tau) & ~in_set)
        if candidates.size > s_max:
            candidates = candidates[top_k(np.abs(unsent[candidates]), s_max)]
        s = candidates.size
        if s == 0:
            return np.empty(0, dtype=np.int64)
        # lowest credit first, ties by the smallest |g + r|: the top of (max h - h, -|g + r|)
        earned = state.earned[chosen]
        dropped = chosen[top_k_lex(earned.max() - earned, -np.abs(send_now[chosen]), s)]
        in_set[dropped] = False
        in_set[candidates] = True
        return candidates

    def stats(self) -> dict[str, float]:
        """``loss_fell_fraction`` of the observed steps and ``swapped_per_call`` (coordinates swapped in)."""
        return {"loss_fell_fraction": self._falls / max(1, self._loss_steps),
                "swapped_per_call": self._swapped / max(1, self._compressed)}

    def reset(self) -> None:
        super().reset()
        self._falls = self._swapped = self._compressed = 0
        self._tensors.clear()
        self._rng = np.random.default_rng(self.seed)
        self._smoothed = None
        self._fell = None
        self._loss_steps = 0

    def credit_of(self, name: str) -> np.ndarray:
        """The hidden weights h = credit * (credits earned) of tensor ``name`` (a copy)."""
        return self.credit * self._tensors[name].earned.astype(np.float64)

    def residual_of(self, name: str) -> np.ndarray:
        """A read-only view of the residual r of tensor ``name``."""
        view = self._tensors[name].residual.view()
        view.setflags(write=False)
        return view


class ESGDNoResidual(ESGDCompressor):
    """Ablation: ESGD's loss-gated selection; unsent coordinates are dropped (no residual, no swap)."""

    method = "esgd_no_residual"

    def __init__(self, drop_ratio: float, **options: object) -> None:
        super().__init__(drop_ratio, residual=False, **options)  # type: ignore[arg-type]


class TopKESGDResidual(ESGDCompressor):
    """Ablation: C = top-k |g| every step (loss unused), with ESGD's discounted residual and swap-in."""

    method = "topk_esgd_residual"

    def __init__(self, drop_ratio: float, **options: object) -> None:
        super().__init__(drop_ratio, selection="magnitude", **options)  # type: ignore[arg-type]


__all__ = ["SELECTIONS", "VARIANTS", "ESGDCompressor", "ESGDNoResidual", "TopKESGDResidual"]
