"""Emulated compute for data-parallel runs with more ranks than the host has cores
(docs/validation.md §"All-reduce runs"; the real-runs method of replacing a worker's compute by a sleep
of its duration while it still exchanges real gradients).

:func:`sleeping_model` is a ``torch.nn.Module`` with one parameter tensor per weighted layer of the
network (its weights' count, so DDP's buckets and their bytes are the network's), whose forward and
backward sleep each layer's time instead of computing it. Backward still runs through autograd layer by
layer, last layer first, so DDP's hooks fire and its buckets are all-reduced while the earlier layers
"compute", exactly when they would in the real network. Runs that use it carry
``"emulated_compute": true``.
"""

from __future__ import annotations

import time
from typing import Any


def fine_timer_slack() -> None:
    """Ask Linux to wake sleepers within 1 ns of their deadline (the default slack is 50 µs, which a
    network of many short layers would add up); nothing elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


class _Schedule:
    """Sleeps that keep to a schedule: the time since the previous layer's sleep (autograd's own work
    between layers) and a sleep that overran (the host woke the process late) are paid back by the next
    sleeps, so a phase of many short layers lasts the sum of their times, not that plus a wake-up and
    the framework's work per layer. After ``forget_s`` without a sleep (between steps) nothing is owed."""

    def __init__(self, forget_s: float = 0.005) -> None:
        self.debt_s, self.last, self.forget_s = 0.0, -1.0, forget_s

    def wait(self, seconds: float) -> None:
        now = time.perf_counter()
        gap = now - self.last
        owed = self.debt_s + gap if gap <= self.forget_s else 0.0
        due = seconds - owed
        if due > 0:
            time.sleep(due)
            end = time.perf_counter()
            self.debt_s = (end - now) - due  # the overrun
        else:
            end = now
            self.debt_s = -due
        self.last = end


def sleeping_model(layers: list[tuple[float, float, int]]) -> Any:
    """A module of ``layers`` = (forward seconds, backward seconds, weights) per layer, in network order;
    its input is any tensor (ignored but for its batch), its output a scalar to call ``backward`` on."""
    import torch
    import torch.nn as nn

    clock = _Schedule()

    class Sleep(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, h: Any, weight: Any, grad: Any, forward_s: float,  # type: ignore[override]
                    backward_s: float) -> Any:
            ctx.backward_s, ctx.grad = backward_s, grad
            clock.wait(forward_s)
            return h.clone()

        @staticmethod
        def backward(ctx: Any, out_grad: Any) -> Any:  # type: ignore[override]
            clock.wait(ctx.backward_s)
            return out_grad, ctx.grad, None, None, None

    class SleepingNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.times = [(float(f), float(b)) for f, b, _ in layers]
            self.has_weight = [int(n) > 0 for _, _, n in layers]
            self.weights = nn.ParameterList([nn.Parameter(torch.zeros(int(n))) for _, _, n in layers if int(n) > 0])
            # The gradient each layer hands back: ones, made once (a real layer computes its own).
            self.grads = [torch.ones(int(n)) for _, _, n in layers if int(n) > 0]

        def forward(self, x: Any) -> Any:
            h = torch.zeros(1, requires_grad=True)  # the chain's handle: backward runs through every layer
            weighted = iter(zip(self.weights, self.grads, strict=True))
            for (fwd, bwd), has in zip(self.times, self.has_weight, strict=True):
                weight, grad = next(weighted) if has else (None, None)
                h = Sleep.apply(h, weight, grad, fwd, bwd)
            return h.sum()

    return SleepingNet()
