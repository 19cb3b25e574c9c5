"""Which of torchvision's classification models dnnbench imports, and how long each import takes.

    python3 benchmarks/bench_torchvision_import.py

Builds every model torchvision lists as a classification model (without weights; on the meta device, or
on the CPU for the few whose constructors compute with their weights), imports it with
``dnnbench.from_torch`` at 224×224 (299×299 for Inception-v3), and prints the time per import, the
weights counted against the module's parameters, and for each model that does not import the
importer's one-line reason.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import torch  # noqa: E402
from torchvision_models import models  # noqa: E402  (the definitions, without the compiled operators)

import dnnbench  # noqa: E402
from dnnbench.counts import totals  # noqa: E402
from dnnbench.errors import SpecError  # noqa: E402

#: Constructor arguments: GoogLeNet and Inception-v3 keep their auxiliary classifiers (torchvision's default,
#: in training mode: imported as their sum with the logits), without the initialisation that reads weights.
KWARGS = {"googlenet": {"init_weights": False}, "inception_v3": {"init_weights": False}}


def build(m: object, name: str) -> torch.nn.Module:
    try:
        with torch.device("meta"):
            return getattr(m, name)(**KWARGS.get(name, {}))
    except NotImplementedError:  # a constructor that reads its weights (RegNet's): build it for real
        return getattr(m, name)(**KWARGS.get(name, {}))


def main() -> None:
    m = models()
    names = m.list_models(module=m)
    ok, failed, equal = [], {}, 0
    for name in names:
        shape = (3, 299, 299) if name == "inception_v3" else (3, 224, 224)
        module = build(m, name)
        start = time.perf_counter()
        try:
            net = dnnbench.from_torch(module, shape)
        except SpecError as exc:
            failed[name] = str(exc)
            continue
        seconds = time.perf_counter() - start
        ok.append(name)
        weights, own = totals(net).weights, sum(p.numel() for p in module.parameters())
        equal += weights == own
        check = "equal" if weights == own else f"{weights - own:+,} against the module's"
        print(f"{name:<22} {seconds:6.2f} s  {weights:>13,} weights ({check})", flush=True)
    print(f"\nimported {len(ok)} of {len(names)} torchvision classification models; weights equal the module's "
          f"parameters in {equal}")
    for name, reason in failed.items():
        print(f"not imported: {name}: {reason[:160]}")


if __name__ == "__main__":
    main()
