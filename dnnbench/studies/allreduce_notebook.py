"""Write notebooks/allreduce_study.ipynb with nbformat, outputs stripped (the study ``allreduce``).

Run ``python -m dnnbench.studies.allreduce_notebook`` after editing the text below; ``--check`` exits 1
if the committed notebook differs (the tests compare it with :func:`text`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

INTRO = r"""# When does a parameter server beat an all-reduce?

Data-parallel training keeps R replicas of a model and has to combine their updates. Two designs do it:

- a **parameter server** (Project Adam, Chilimbi et al. OSDI 2014): P extra machines hold the weights;
  every replica pushes its updates to them and pulls the new weights back;
- an **all-reduce** (PyTorch DDP, Horovod, NCCL): no extra machines; the replicas average their
  gradients among themselves, each machine sending and receiving on its own NIC.

This notebook asks dnnbench's model when each wins, as the network's size, the NIC's bandwidth and the
number of PS machines change. Every formula is dnnbench's **reconstructed** model (docs/model.md §6 and
§10) built from the cited costs, not a measurement of a real cluster; the prose under each figure is
computed from the same results, so it stays true when you change the parameters.

**How to run it.** `dnnbench study allreduce` runs it with papermill and writes the executed notebook,
a results JSON and a self-contained HTML report; change a parameter with `-p NAME VALUE`.
"""

PARAMETERS = """from typing import Union  # Union[str, dict]: a preset or spec-file name, or a nested mapping (-y)

network: Union[str, dict] = "resnet50"  # the network of sections 3 and 4: preset name, spec file or mapping
cluster: Union[str, dict] = "modern-2025"  # cluster: preset name, spec file or mapping
dataset: Union[str, dict] = ""  # data set: "" means the network's own
configuration: dict = {}  # Configuration fields, e.g. {"push_interval_samples": 64}
machines: int = 32  # the machine budget of sections 2 and 3
networks: list[str] = ["lenet5", "mobilenet-v2", "resnet50", "bert-base", "vgg16"]  # section 2: preset names
nic_factors: list[float] = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0]  # section 3: NIC bandwidth multipliers
replicas: int = 16  # section 4: replicas of one machine each
ps_options: list[int] = [1, 2, 4, 8, 16]  # section 4: PS machine counts
gpu_cluster: Union[str, dict] = "dgx-a100"  # section 5: a cluster of GPU nodes
gpu_network: Union[str, dict] = "gpt2-small"  # section 5: the network (sequences of 1,024 tokens)
gpu_precision: str = "bf16"  # section 5: a precision the cluster's device has
gpu_replicas: int = 32  # section 5: replicas of one device each
gpu_batches: list[int] = [4, 8, 16, 32, 64]  # section 5: per-device mini-batches
seed: int = 0  # seeds Python's and numpy's generators (the model itself is deterministic)
results_path: str = "results.json"  # where the results JSON goes (set by `dnnbench study`)
"""

SETUP = """import random

import numpy as np

from dnnbench import fmt
from dnnbench.studies import allreduce as study
from dnnbench.studies import analysis, figures
from dnnbench.studies.display import markdown, setup, show, table, write_results

random.seed(seed)
np.random.seed(seed)
setup()  # BokehJS inline: the notebook and its report work offline
net, cl, ds, cfg = analysis.resolve_specs(network, cluster, dataset, configuration)
results = {"study": "allreduce", "network": net.name, "cluster": cl.name, "dataset": ds.name,
           "parameters": {"machines": machines, "networks": networks, "nic_factors": nic_factors,
                          "replicas": replicas, "ps_options": ps_options, "seed": seed,
                          "gpu_cluster": gpu_cluster if isinstance(gpu_cluster, str) else "(mapping)",
                          "gpu_network": gpu_network if isinstance(gpu_network, str) else "(mapping)",
                          "gpu_precision": gpu_precision, "gpu_replicas": gpu_replicas, "gpu_batches": gpu_batches,
                          "configuration": cfg.to_dict()}}
markdown(f"**This run:** cluster `{cl.name}` ({cl.worker.cores} cores per machine, NIC "
         f"{fmt.rate_bits(cl.worker_nic.upload_bits_per_s)}), a budget of {machines} machines; sections 3 and 4 "
         f"use `{net.name}` on `{ds.name}`.")
"""

S1 = r"""## 1. The two schemes in equations

Take R replicas of one machine each, a gradient of n bytes per replica and step, and NICs of B bytes/s.

**Parameter server** with P machines (BytePS, OSDI 2020): every replica sends n and receives n; the PS
machines share R·n in each direction, so per direction a step needs

$$ t_\text{PS} = \max\left(\frac{n}{B},\ \frac{R\,n}{P\,B}\right) $$

which reaches the workers' own n/B only with P ≥ R PS machines, and those machines do not train.

**Ring all-reduce** (Thakur, Rabenseifner and Gropp 2005): reduce-scatter then all-gather, 2(R−1) steps
of n/R each, every machine sending and receiving at once:

$$ t_\text{ring} = 2(R-1)\,\alpha + 2\,\frac{R-1}{R}\,\frac{n}{B} $$

with α the latency per message. Its traffic per machine is almost 2·n/B however many replicas there
are, but it waits for R−1 latencies twice, and the step is synchronous: everybody waits for the slowest
replica and for the part of the reduction that backward does not hide (docs/model.md §10). A parameter
server instead lets replicas run asynchronously, and Adam's PS computes the fully connected layers'
weight gradients from shipped activations.
"""

S2 = r"""## 2. Network size: the best of each scheme

For each network the optimizer finds the fastest configuration at the budget with a parameter server
and with an all-reduce (exact searches, docs/model.md §7 and §10).
"""

S2_CODE = """rows = study.by_network(networks, cl, cfg, machines)
results["by_network"] = rows
table([{"network": r["network"], "weights": fmt.count(r["weights"]),
        "PS best": fmt.seconds(r["ps"]["epoch_time_s"]) if r["ps"] else "does not fit",
        "PS (W, R, P)": (f"{r['ps']['workers_per_replica']}, {r['ps']['replicas']}, {r['ps']['ps_machines']}"
                         if r["ps"] else ""),
        "all-reduce best": fmt.seconds(r["allreduce"]["epoch_time_s"]) if r["allreduce"] else "does not fit",
        "all-reduce (W, R)": (f"{r['allreduce']['workers_per_replica']}, {r['allreduce']['replicas']}"
                              if r["allreduce"] else ""),
        "winner": r["winner"] or "—",
        "PS / all-reduce": f"{r['ps_over_allreduce']:.2f}" if r["ps_over_allreduce"] else "—"} for r in rows])
wins = [r["network"] for r in rows if r["winner"] == "allreduce"]
markdown(f"At {machines} machines the all-reduce wins for {', '.join(wins) or 'none of them'}; the parameter "
         f"server for {', '.join(r['network'] for r in rows if r['winner'] == 'ps') or 'none'}. A ratio above 1 "
         "means the parameter server's best epoch is that many times longer.")
"""

S3 = r"""## 3. NIC bandwidth

The same question for one network as every NIC gets slower or faster. Where the network is cheap, the
PS's extra machines are pure cost; where it is the bottleneck, the ring's 2(R−1)/R·n per machine
against the PS's R·n over P machines decides.
"""

S3_CODE = """bw = study.by_bandwidth(net, cl, ds, cfg, machines, nic_factors)
results["by_bandwidth"] = bw
x = [r["worker_nic_bits_per_s"] for r in bw]
fig = figures.lines_figure(
    "allreduce_bandwidth", x,
    {"parameter server (best)": [r["ps"]["epoch_time_s"] if r["ps"] else None for r in bw],
     "all-reduce (best)": [r["allreduce"]["epoch_time_s"] if r["allreduce"] else None for r in bw]},
    title=f"{net.name}: best epoch time at {machines} machines against NIC bandwidth", x_label="NIC bit/s",
    y_label="epoch time", log_x=True, log_y=True, y_seconds=True)
show(fig.figure, "Each point is the optimizer's best of its scheme at that bandwidth.")
flips = [r["worker_nic_bits_per_s"] for a, r in zip(bw, bw[1:]) if a["winner"] != r["winner"]]
markdown("The winner changes near " + ", ".join(fmt.rate_bits(v) for v in flips) + "." if flips else
         f"Over these bandwidths the winner is always {bw[0]['winner']}.")
"""

S4 = r"""## 4. How many PS machines match an all-reduce?

R one-machine replicas in synchronous rounds (as an all-reduce runs), with P = 1, 2, ... PS machines,
against the same replicas reducing by a ring. The equations of section 1 say the PS needs about as many
machines as there are replicas before its ports stop being the bottleneck.
"""

S4_CODE = """m = study.ps_machines_to_match(net, cl, ds, cfg, replicas, ps_options)
results["ps_machines_to_match"] = m
fig = figures.lines_figure(
    "allreduce_ps_machines", [r["ps_machines"] for r in m["ps"]],
    {"parameter server, synchronous rounds": [r["samples_per_s"] for r in m["ps"]],
     "ring all-reduce": [m["allreduce_samples_per_s"]] * len(m["ps"])},
    title=f"{net.name}: {replicas} replicas, samples/s against PS machines", x_label="PS machines P",
    y_label="samples/s", log_x=True)
show(fig.figure, "The all-reduce needs no extra machines; its line is flat.")
need = m["ps_machines_to_match"]
markdown(f"With {replicas} replicas the parameter server matches the all-reduce's "
         f"{fmt.count(m['allreduce_samples_per_s'])} samples/s from {need} PS machines on." if need else
         f"None of {ps_options} PS machines matches the all-reduce's {fmt.count(m['allreduce_samples_per_s'])} "
         "samples/s.")
"""

S5 = r"""## 5. GPU nodes: memory decides what fits

On a cluster of GPU nodes each replica is one device, and the first question is often whether the
model fits. A device holds its weights, gradients and optimizer state (mixed-precision Adam: 2 + 2 + 12
bytes per weight) and the activations its mini-batch keeps for backward. ZeRO (Rajbhandari et al.,
SC'20) divides the state over the R replicas (stage 1), then the gradients (2), then the weights (3,
at 1.5 times the traffic). The table shows every stage and mini-batch (docs/model.md §11).
"""

S5_CODE = """gnet, gcl, gds, _ = analysis.resolve_specs(gpu_network, gpu_cluster, "", {})
rows = study.memory_on_devices(gnet, gcl, gds, cfg, gpu_replicas, gpu_batches, gpu_precision)
results["memory_on_devices"] = rows
table([{"ZeRO stage": r["zero_stage"], "mini-batch": r["batch"], "memory per device": fmt.nbytes(r["memory_bytes"]),
        "of": fmt.nbytes(r["capacity_bytes"]), "fits": "yes" if r["feasible"] else "no",
        "samples/s": fmt.count(r["samples_per_s"]) if r["feasible"] else "—"} for r in rows])
plain, sharded = study.largest_batch(rows, 0), study.largest_batch(rows, 3)
markdown(f"`{gnet.name}` on `{gcl.name}` in {gpu_precision}, {gpu_replicas} replicas: without ZeRO the largest "
         f"mini-batch that fits is {plain or 'none of them'}; with ZeRO stage 3 it is {sharded or 'none of them'}. "
         "Activations grow with the mini-batch and ZeRO does not shard them, so past some batch no stage fits.")
"""

S6 = r"""## 6. Limitations

The all-reduce moves gradients in buckets overlapped with backward, by ring, tree or hierarchically
inside and between nodes; compressed gradients are all-gathered. There is no contention between the W
slices of a model-parallel replica, no activation checkpointing and no data loading. The parameter
server is Adam's: sharded, replicated three times, asynchronous unless synchronous rounds are chosen.
All are **reconstructed** models (docs/model.md §6, §10 and §11), validated against measurements only
where docs/validation.md says.
"""

END_CODE = """write_results(results_path, results)
"""


def build() -> Any:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    cells = [nbformat.v4.new_markdown_cell(INTRO)]
    params = nbformat.v4.new_code_cell(PARAMETERS)
    params.metadata["tags"] = ["parameters"]
    cells += [params, nbformat.v4.new_code_cell(SETUP)]
    for md, code in ((S1, None), (S2, S2_CODE), (S3, S3_CODE), (S4, S4_CODE), (S5, S5_CODE), (S6, END_CODE)):
        cells.append(nbformat.v4.new_markdown_cell(md))
        if code:
            cells.append(nbformat.v4.new_code_cell(code))
    for i, cell in enumerate(cells):
        cell["id"] = f"allreduce-{i:02d}"
    nb.cells = cells
    return nb


def text() -> str:
    import nbformat

    return nbformat.writes(build()) + "\n"


PATH = Path(__file__).resolve().parents[2] / "notebooks" / "allreduce_study.ipynb"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        return 0 if PATH.read_text(encoding="utf-8") == text() else 1
    from ..fileio import atomic_write

    atomic_write(PATH, text())
    print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
