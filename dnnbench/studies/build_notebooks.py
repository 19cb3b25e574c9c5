"""Write the Adam-style study notebooks (MNIST, ImageNet-22K) with nbformat, outputs stripped.

Run ``python -m dnnbench.studies.build_notebooks`` after editing the text below; the notebooks are
generated so that both studies keep one structure (the KDD 2015 study design, reconstructed) and
differ only in their parameters and their introduction. ``--check`` exits 1 if a committed
notebook differs from what this script would write (the tests use :func:`build`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

STUDIES: dict[str, dict[str, Any]] = {
    "mnist": {
        "title": "MNIST on an Adam-style cluster: what limits scaling a small network",
        "network": "mnist-adam", "dataset_name": "MNIST (60,000 training images per epoch)",
        "max_workers": 16, "max_replicas": 64, "ps_options": "[1, 2, 4, 8, 16]",
        "budgets": "[8, 16, 32, 64, 120]",
        "about": (
            "`mnist-adam` is a *reconstructed* Adam-style network for MNIST: two 5×5 convolutions with "
            "max-pooling, then fully connected layers 1024→1500→1500→10, about 3.9 M weights "
            "(docs/model.md §8). One training sample costs well under a millisecond of compute on one "
            "server, so every microsecond spent on the network is felt. This is the study's lesson: for a "
            "small model, splitting one replica over machines soon costs more in messages than it saves in "
            "arithmetic, and data parallelism, bounded by the parameter server, is where speed comes from."),
    },
    "imagenet22k": {
        "title": "ImageNet-22K on an Adam-style cluster: scaling a 2-billion-connection network",
        "network": "imagenet22k-adam", "dataset_name": "ImageNet-22K (14,197,087 images per epoch)",
        "max_workers": 16, "max_replicas": 64, "ps_options": "[1, 2, 4, 8, 16]",
        "budgets": "[8, 16, 32, 64, 120]",
        "about": (
            "`imagenet22k-adam` is a *reconstructed* Adam-style network for ImageNet-22K: five "
            "convolutions and three fully connected layers (18432→30000→30000→21841), about 2.1 B "
            "weights, matching Project Adam's \"2 billion connections\" (docs/model.md §8; the real layer "
            "shapes were never published). One training sample costs over ten billion multiply-adds, so "
            "computing dominates and "
            "model parallelism keeps paying off over many machines, while the fully connected layers' "
            "weights make every parameter-server exchange heavy."),
    },
}

INTRO = r"""# {title}

{about}

This notebook reproduces the *study design* of Yan, Ruwase, He and Chilimbi, "Performance Modeling
and Scalability Optimization of Distributed Deep Learning Systems" (KDD 2015), on Project Adam's
system (Chilimbi et al., OSDI 2014): the per-layer costs, model-parallel and data-parallel speed-up,
the parameter server's provisioning, the optimizer's choice of configuration, and how sensitive the
answer is to the hardware. The paper's equations and tables are not available to us: every formula
below is dnnbench's **reconstructed** model (docs/model.md), and no number here is the paper's.

**How to read it.** Each section states the model in a few equations, then shows what they give for
the parameters of this run. The prose under each figure is computed from the same results, so it
stays true when you change the parameters.

**How to run it.** `dnnbench study {name}` runs this notebook with papermill and writes the executed
notebook, a results JSON and a self-contained HTML report; change any parameter below with
`-p NAME VALUE` (for example `-p budgets "[8, 16, 32]"`), or give nested specs (a whole cluster as a
mapping) with `-y params.yaml`. `dnnbench study {name} --parameters` lists them.
"""

PARAMETERS = """from typing import Union  # Union[str, dict]: a preset or spec-file name, or a nested mapping (-y)

network: Union[str, dict] = "{network}"  # network: preset name, spec file (JSON/YAML) or mapping
cluster: Union[str, dict] = "adam-2014"  # cluster: preset name, spec file or mapping
dataset: Union[str, dict] = ""  # data set: "" means the network's own, {dataset_name}
configuration: dict = {{}}  # Configuration fields, e.g. {{"push_interval_samples": 64, "overlap": 0.5}}
max_workers: int = {max_workers}  # model-parallel sweep: W from 1 to max_workers machines per replica
max_replicas: int = {max_replicas}  # data-parallel sweep: R from 1 to max_replicas replicas of one machine
ps_options: list[int] = {ps_options}  # PS machine counts compared in the data-parallel sweep
budgets: list[int] = {budgets}  # machine budgets N for the optimizer (the largest drives sections 4-5)
nic_factors: list[float] = [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0]  # NIC bandwidth multipliers
mac_factors: list[float] = [0.25, 0.5, 1.0, 2.0, 4.0]  # multiply-add time multipliers (2: cores half as fast)
update_batches: list[int] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]  # k_push: samples per PS push
seed: int = 0  # seeds Python's and numpy's generators (the model itself is deterministic)
results_path: str = "results.json"  # where the results JSON goes (set by `dnnbench study`)
"""

SETUP = """import random
import time

import numpy as np

from dnnbench import fmt
from dnnbench.face import plots
from dnnbench.optimizer import best_by_budget, data_parallel_curve, model_parallel_curve
from dnnbench.studies import analysis, figures
from dnnbench.studies.display import markdown, setup, show, table, write_results

random.seed(seed)
np.random.seed(seed)
t_start = time.perf_counter()
setup()  # BokehJS inline: the notebook and its report work offline

net, cl, ds, cfg = analysis.resolve_specs(network, cluster, dataset, configuration)
budgets = sorted(set(int(n) for n in budgets))
top_budget = budgets[-1]
results = {{"study": "{name}", "network": net.name, "cluster": cl.name, "dataset": ds.name,
           "reconstructed": {{"network": net.reconstructed, "cluster": cl.reconstructed}},
           "parameters": {{"max_workers": max_workers, "max_replicas": max_replicas, "ps_options": ps_options,
                          "budgets": budgets, "nic_factors": nic_factors, "mac_factors": mac_factors,
                          "update_batches": update_batches, "seed": seed, "configuration": cfg.to_dict()}}}}
markdown(f"**This run:** network `{{net.name}}`, cluster `{{cl.name}}` ({{cl.machines}} machines of "
         f"{{cl.worker.cores}} cores, NIC {{fmt.rate_bits(cl.worker_nic.upload_bits_per_s)}}), data set `{{ds.name}}` "
         f"({{ds.samples_per_epoch:,}} samples per epoch, epoch ends at {{ds.epoch_fraction:.0%}}). "
         f"Budgets: {{', '.join(map(str, budgets))}} machines.")
"""

S1_TEXT = r"""## 1. Per-layer counts and where the time goes

Everything starts from counting. For a layer with input $C_\text{in} \times H_\text{in} \times W_\text{in}$
and output $C_\text{out} \times H_\text{out} \times W_\text{out}$, per sample:

| layer | weights | forward multiply-adds (MACs) |
|---|---|---|
| convolution $K_h \times K_w$ | $C_\text{out} C_\text{in} K_h K_w$ | $H_\text{out} W_\text{out} \times$ weights |
| fully connected $N_\text{in} \to N_\text{out}$ | $N_\text{in} N_\text{out}$ | $N_\text{in} N_\text{out}$ |
| pooling, activation | 0 | element operations only |

with $H_\text{out} = \left\lfloor (H_\text{in} + 2p - K_h)/s \right\rfloor + 1$ for stride $s$ and padding $p$.
Training repeats the forward MACs twice more: once to back-propagate the error to the layer below, once for the weight
gradient. A MAC is one multiply and one add, so FLOPs $= 2 \times$ MACs.

Convolutions own few weights but most of the arithmetic (each weight is reused at every output
position); fully connected layers are the opposite. That asymmetry decides everything below: weights
are what travels to the parameter server, arithmetic is what a machine spends its time on.
"""

S1_CODE = """layers = analysis.layer_table(net)
t = layers["totals"]
table([{"layer": r["name"], "kind": r["kind"], "output": "x".join(map(str, r["output_shape"])),
        "weights": fmt.count(r["weights"]), "training MACs": fmt.count(r["macs_training"]),
        "share of MACs": f"{100 * r['macs_share']:.1f} %"}
       for r in layers["layers"] if r["weights"] or r["macs_training"]])
show(figures.layer_bars(layers).figure,
     "Figure 1. Training MACs and weights per layer (log scale): convolutions compute, fully connected layers store.")
conv_share = sum(r["macs_share"] for r in layers["layers"] if r["kind"] == "conv2d")
fc_weights = sum(r["weights"] for r in layers["layers"] if r["kind"] == "fc") / max(t["weights"], 1)
markdown(f"`{net.name}` has **{fmt.count(t['weights'])} weights** ({fmt.nbytes(4 * t['weights'])} in fp32) and "
         f"costs **{fmt.count(t['macs_training'])} MACs** ({fmt.count(t['flops_training'])} FLOPs) per training "
         f"sample. Convolutions do {conv_share:.0%} of the arithmetic; fully connected layers hold "
         f"{fc_weights:.0%} of the weights.")
results["counts"] = layers
"""

S1B_TEXT = r"""### Compute time on one machine

A machine with $T$ threads spends, per sample (docs/model.md §4),

$$T_\text{comp} = \frac{1}{T\,\eta(T)} \sum_l \Big[ \big(M^\text{fwd}_l + M^\text{bp}_l + M^\text{wg}_l\big)\,
t_\text{mac}(\text{kind}_l, \text{fits}_l) + E_l\, t_\text{elem} \Big], \qquad \eta(T) = \frac{1}{1 + \sigma (T-1)}$$

where $t_\text{mac}$ is the seconds per MAC of one core for that layer kind (convolutions run closer
to peak than fully connected layers), divided by the cache speed-up when the machine's slice of the
layer fits in its last-level cache; $E_l$ counts element operations (pooling, activations) and
$\eta(T)$ is the multi-thread efficiency with contention $\sigma$. Distributed configurations add
network time (sections 2 and 3). The bars split one sample's time into these named parts for three
configurations: one machine, the best single replica of section 2, and the optimizer's choice for
the largest budget of section 4.
"""

S1B_CODE = """from dnnbench.optimizer import optimize

single = analysis.time_split(net, cl, ds, cfg)
mp = analysis.model_parallel(net, cl, ds, cfg, max_workers)
peak_item = analysis.time_split(net, cl, ds, cfg.evolve(workers_per_replica=mp["peak_workers"], replicas=1,
                                                        ps_machines=0))
best_top = optimize(net, cl, ds, top_budget, cfg, top_k=1)
best_item = analysis.time_split(net, cl, ds, best_top.configuration(cfg))
items = {"1 machine": single, f"1 replica, W={mp['peak_workers']}": peak_item,
         f"best for N={top_budget}": best_item}
show(plots.breakdown_figure(items, title="Per-sample time of one replica, by part").figure,
     "Figure 2. Where one sample's time goes (per sample of one replica).")
best_cfg = best_top.configuration(cfg)
show(plots.timeline_figure(best_item, best_cfg.push_interval_samples,
                           title=f"One training step of the best configuration for N={top_budget}").figure,
     f"Figure 2b. What one machine of a replica and one PS machine do in one step of the best configuration "
     f"({best_cfg.push_interval_samples} samples between PS exchanges), part by part: the breakdown above laid "
     "end to end (the serial sum; overlap is not drawn).")
kinds = single["compute_by_kind_s_per_sample"]
total_kind = sum(kinds.values()) or 1.0
markdown(f"On one machine a sample takes **{fmt.seconds(1 / single['samples_per_s'])}**: "
         + ", ".join(f"{k} layers {v / total_kind:.0%}" for k, v in kinds.items() if v > 0)
         + f" of compute; one epoch takes {fmt.seconds(single['epoch_time_s'])}. "
         f"The best configuration for {top_budget} machines binds on **{best_item['bottleneck']}**.")
results["time_split"] = {"single_machine": single, "model_parallel_peak": peak_item, "best": best_item}
"""

S2_TEXT = r"""## 2. Model parallelism: one replica over W machines

Adam partitions a replica *vertically*: each of the $W$ machines owns a slice of every layer (a share
of the fully connected neurons, a share of the convolution feature maps). Compute per machine falls
as $1/W$, up to an imbalance when $u$ units do not divide evenly:

$$T_\text{rep} = \frac{T_\text{comp}}{W} \cdot \frac{\lceil u/W \rceil}{u/W} \;\oplus\; T_\text{mp}$$

where $\oplus$ is a sum without overlap of computing and communicating and a maximum with full overlap.
The price is $T_\text{mp}$, the model-parallel network time. A fully connected layer needs all its
$N_\text{in}$ inputs on every machine, and each machine owns only $N_\text{in}/W$ of them: forward it
receives the rest, backward it sends partial error sums, so per sample a machine moves
$2\,\tfrac{W-1}{W}\,N_\text{in}$ values. A convolution partitioned by *feature maps* behaves the same
way over its input maps; partitioned *spatially* (strips of rows) only the halo of $K_h - 1$ rows at
each internal boundary crosses machines, about $2 (K_h - 1)\, W_\text{in} C_\text{in}$ values.

Two effects bend the curve. The **cache effect** (Adam's super-linear speed-up): once a machine's slice
of a layer fits in its L3 cache, its MACs run faster, so adding machines can more than pay for itself.
And **messages**: the traffic per machine does not fall with $W$ (it tends to $2 N_\text{in}$), and each
message costs latency, so a small network soon spends more time talking than computing. The curves
below compare the cluster as given, the same cluster without the cache effect (cache speed-up 1) and
spatial partitioning of the convolutions.
"""

S2_CODE = """w = mp["workers_per_replica"]
show(figures.lines_figure(
    "model_parallel", w,
    {"feature-map partitioning (as given)": mp["speedup"],
     "without the cache effect (cache speed-up 1)": mp["speedup_no_cache"],
     "without the cache effect, against the cached 1 machine": mp["speedup_no_cache_vs_cached_baseline"],
     "spatial partitioning of convolutions": mp["speedup_spatial"]},
    reference=("linear", [1, max_workers], [1, max_workers]), hover={"bottleneck": mp["bottleneck"]},
    title="Model-parallel speed-up of one replica", x_label="W: machines per replica",
    y_label="speed-up over one machine (x)").figure,
    "Figure 3. Speed-up of one replica against the machines it is split over.")
show(figures.lines_figure(
    "model_parallel_time", w,
    {"compute per sample (one machine's slice)": mp["compute_s_per_sample"],
     "model-parallel network per sample": mp["network_s_per_sample"]},
    title="Why the curve bends: compute falls, communication does not", x_label="W: machines per replica",
    y_label="time per sample", log_y=True, y_seconds=True).figure,
    "Figure 4. Per-sample compute and model-parallel network time of one machine against W.")
cross = next((wi for wi, c, n in zip(w, mp["compute_s_per_sample"], mp["network_s_per_sample"]) if n >= c), None)
gap = max(s - n for s, n in zip(mp["speedup_spatial"], mp["speedup"]))
if mp["peak_workers"] == max_workers:
    shape = f"it still rises at W = {max_workers}, the end of the sweep"
else:
    shape = "beyond it every extra machine slows the replica down"
if cross:
    why = f"Communication per sample overtakes computing at W = {cross}."
else:
    why = f"Computing stays larger than communication up to W = {max_workers}."
if mp["super_linear_workers"]:
    cache = f"Super-linear points (speed-up > W): W = {', '.join(map(str, mp['super_linear_workers']))}."
else:
    cache = ("No point is super-linear against this cluster's own single machine, whose slices already fit "
             "in cache or never do.")
markdown(f"The replica is fastest with **W = {mp['peak_workers']}** machines, a speed-up of "
         f"**{mp['peak_speedup']:.2f}x**; {shape}. {why} {cache} Without the cache effect, against the cached single "
         f"machine, the best speed-up is {max(mp['speedup_no_cache_vs_cached_baseline']):.2f}x. Spatial partitioning "
         f"of the convolutions changes the speed-up by at most {gap:+.2f}x.")
results["model_parallel"] = mp
"""

S3_TEXT = r"""## 3. Data parallelism and the parameter server

$R$ replicas train on different shards of the data and share weights through $P$ parameter-server (PS)
machines, asynchronously. Every $k_\text{push}$ samples a replica pushes its updates; every
$k_\text{pull}$ samples it fetches fresh weights. Adam's trick for fully connected layers: instead of an
$N_\text{in} \times N_\text{out}$ weight delta, send the $k_\text{push}$ samples' activations and errors,
$k_\text{push}(N_\text{in} + N_\text{out})$ values, and let the PS form the outer products. Throughput is
the smallest of four bounds (docs/model.md §6):

$$X = \min\left(\frac{R}{T_\text{rep} + T_\text{io}},\; \frac{P\,B\,k_\text{push}}{b_\text{push}},\;
\frac{P\,B\,k_\text{pull}}{b_\text{pull}},\; \frac{P\,T_\text{ps}\,\eta_\text{ps}\,k_\text{push}}{C_\text{ps}}\right)$$

the replicas' own rate; the PS NICs inbound (pushes of $b_\text{push}$ bits) and outbound (pulls of
$b_\text{pull}$ bits), each $B$ bit/s; and the PS cores applying updates ($C_\text{ps}$ core-seconds per
update). The epoch time is $t_\text{epoch} = \alpha S / X$ for $S$ samples and epoch fraction $\alpha$.
The replica bound grows with $R$, the PS bounds with $P$: with too few PS machines the curve goes flat
where a PS bound takes over, however many replicas are added.
"""

S3_CODE = """dp = analysis.data_parallel(net, cl, ds, cfg, max_replicas, ps_options)
show(figures.lines_figure(
    "data_parallel", dp["replicas"],
    {f"P = {p} PS machines": dp["curves"][str(p)]["speedup"] for p in dp["ps_machines"]},
    hover={"bottleneck": [dp["curves"][str(p)]["bottleneck"] for p in dp["ps_machines"]]},
    title="Data-parallel speed-up against replicas, by PS provisioning", x_label="R: replicas (W = 1)",
    y_label="speed-up over one machine (x)").figure,
    "Figure 5. Data-parallel speed-up: each curve flattens where its PS machines become the bottleneck.")
rows = []
for p in dp["ps_machines"]:
    c = dp["curves"][str(p)]
    sat = c["saturation_replicas"]
    rows.append({"PS machines P": p, "PS binds from R": sat if sat else f"> {max_replicas}",
                 "replicas per PS machine": f"{sat / p:.1f}" if sat else "-",
                 "max speed-up": f"{c['max_speedup']:.1f}x",
                 "bottleneck at R max": c["bottleneck"][-1]})
table(rows)
sats = [dp["curves"][str(p)]["saturation_replicas"] / p for p in dp["ps_machines"]
        if dp["curves"][str(p)]["saturation_replicas"]]
markdown((f"One PS machine keeps up with about **{np.median(sats):.1f} replicas**; past that a PS bound binds and "
          "more replicas add nothing. Provisioning is a ratio: double the replicas, double the PS machines."
          if sats else f"No PS bound binds up to {max_replicas} replicas with these PS counts."))
results["data_parallel"] = dp
"""

S4_TEXT = r"""## 4. The optimizer's choice across budgets

Given $N$ machines, which split is fastest? The optimizer minimises the epoch time over $W$, $R$ and $P$
subject to $W R + P \le N$ and the machines' memory (docs/model.md §7). For a fixed $W$ the replica
bound grows with $R$ and the PS bounds with $P = N - W R$, so with $a$ the throughput of one replica
and $c$ that of one PS machine, throughput is $\min(R\,a,\ (N - W R)\,c)$, largest at

$$R^\ast = \frac{N c}{a + W c}$$

then rounded to the better integer neighbour; a single replica without a PS is also a candidate. That
needs $O(W_\text{max})$ model evaluations instead of enumerating all $O(N^2)$ splits, and the test
suite proves it equal to brute force. The table gives its choice per budget with the bound that binds;
the figures put it against the pure model-parallel and data-parallel curves, and show every
$(W, R)$ split of the largest budget.
"""

S4_CODE = """opt = analysis.optimizer_choices(net, cl, ds, cfg, budgets)
table([{"budget N": r["budget_machines"], "W": r["best"]["workers_per_replica"], "R": r["best"]["replicas"],
        "P": r["best"]["ps_machines"], "idle": r["best"]["machines_idle"],
        "epoch time": fmt.seconds(r["best"]["epoch_time_s"]), "speed-up": f"{r['best']['speedup']:.1f}x",
        "bottleneck": r["best"]["bottleneck"]} for r in opt["results"]])
markdown("\\n".join(f"- **N = {r['budget_machines']}.** {r['explanation']}" for r in opt["results"]))
mp_curve = model_parallel_curve(net, cl, ds, min(max_workers, top_budget), cfg)
dp_curve = data_parallel_curve(net, cl, ds, top_budget, cfg)
best_curve = best_by_budget(net, cl, ds, top_budget, cfg)
show(plots.speedup_figure(mp_curve, dp_curve, best_curve, current=best_item,
                          title="Speed-up against machines: model, data and optimal parallelism").figure,
     f"Figure 6. The optimizer's best configuration for every budget up to {top_budget} machines, against "
     "one replica split over W machines and data parallelism at the configured W (the best R and P within "
     "each budget). "
     "The red point is the best for the largest budget.")
cells = analysis.budget_cells(net, cl, ds, cfg, top_budget)
show(plots.heatmap_figure(cells, optimum=best_item, budget_machines=top_budget).figure,
     f"Figure 7. Epoch time of every split of {top_budget} machines into W machines per replica and R replicas "
     "(the rest are PS machines); the star is the optimizer's choice.")
first, last = opt["results"][0]["best"], opt["results"][-1]["best"]
markdown(f"From {budgets[0]} to {top_budget} machines the best speed-up goes from {first['speedup']:.1f}x to "
         f"**{last['speedup']:.1f}x** ({last['speedup'] / top_budget:.0%} of linear). At the largest budget the "
         f"optimizer uses W = {last['workers_per_replica']}, R = {last['replicas']}, P = {last['ps_machines']}; "
         f"it evaluated {opt['results'][-1]['evaluated']:,} candidates.")
results["optimizer"] = opt
results["curves"] = {"model_parallel": mp_curve.to_dict(), "data_parallel": dp_curve.to_dict(),
                     "best": best_curve.to_dict()}
"""

S5_TEXT = r"""## 5. Sensitivity: which hardware matters

How much would a faster network or faster cores help? Scale one constant by a factor $f$ and watch
the epoch time. The *elasticity*

$$\varepsilon = \frac{d \ln t_\text{epoch}}{d \ln f}$$

summarises the answer near today's hardware: $\varepsilon \approx 1$ for the multiply-add time means
the run is compute-bound (twice as slow cores, twice the epoch); $\varepsilon \approx -1$ for the NIC
bandwidth means it is network-bound; $\varepsilon \approx 0$ means that resource does not matter.
The "configuration fixed" curves keep the optimizer's choice for the largest budget; the
"re-optimised" curves let the optimizer choose again on the changed cluster, which can only help.
The update batch $k_\text{push}$ trades PS traffic against freshness: larger batches push less often
(a statistical cost this model does not capture, see section 6).
"""

S5_CODE = """from bokeh.layouts import row

sens = analysis.sensitivity(net, cl, ds, cfg, top_budget, nic_factors, mac_factors, update_batches)
panels = []
for key, label in (("nic_bandwidth", "NIC bandwidth x f"), ("mac_time", "multiply-add time x f")):
    s = sens[key]
    panels.append(figures.lines_figure(
        f"sensitivity_{key}", s["factors"],
        {"configuration fixed": s["epoch_time_s_fixed"], "re-optimised": s["epoch_time_s_reoptimised"]},
        hover={"bottleneck": [s["bottleneck_fixed"], s["bottleneck_fixed"]]},
        title=label, x_label="factor f", y_label="epoch time", log_x=True, log_y=True, y_seconds=True,
        width=420, height=330).figure)
show(row(*panels, name="sensitivity"),
     f"Figure 8. Epoch time on {top_budget} machines when every NIC is f times faster (left), or "
     "every multiply-add takes f times longer (right).")
ub = sens["update_batch"]
show(figures.lines_figure(
    "update_batch", ub["push_interval_samples"], {"epoch time": ub["epoch_time_s"]},
    hover={"bottleneck": ub["bottleneck"]}, title="Epoch time against the update batch k_push",
    x_label="k_push: samples between PS pushes", y_label="epoch time", log_x=True, log_y=True,
    y_seconds=True).figure,
    "Figure 9. Larger update batches push less often; once the PS stops binding they stop helping.")


def _e(v):
    return "n/a" if v is None else f"{v:+.2f}"


slow, fast = int(np.argmax(ub["epoch_time_s"])), int(np.argmin(ub["epoch_time_s"]))
c = sens["configuration"]
markdown(f"Around today's hardware the elasticity of the epoch time is **{_e(sens['mac_time']['elasticity'])}** for "
         f"the multiply-add time and **{_e(sens['nic_bandwidth']['elasticity'])}** for the NIC bandwidth "
         f"(configuration W = {c['workers_per_replica']}, R = {c['replicas']}, P = {c['ps_machines']}). "
         f"The update batch moves the epoch time from {fmt.seconds(ub['epoch_time_s'][slow])} "
         f"(k_push = {ub['push_interval_samples'][slow]}) to {fmt.seconds(ub['epoch_time_s'][fast])} "
         f"(k_push = {ub['push_interval_samples'][fast]}).")
results["sensitivity"] = sens
"""

S6_TEXT = r"""## 6. Limitations, and what is reconstructed

- **The model is reconstructed.** The KDD 2015 paper's equations, constants and measurements are not
  available; the formulas above are dnnbench's first-principles model of the mechanics Project Adam
  describes (docs/model.md §1 lists what is known and how sure we are). Shapes of the speed-up curves
  are meant to be right; absolute epoch times are only as good as the constants.
- **The networks are reconstructed.** Adam's MNIST and ImageNet-22K layer shapes were not published;
  `mnist-adam` and `imagenet22k-adam` are plausible networks with the published sizes.
- **The cluster constants are estimates.** `adam-2014` has Adam's published hardware, but its per-core
  efficiencies, element-op time, cache speed-up and latency are dnnbench estimates, to be replaced by
  calibration on real machines (`dnnbench calibrate`, where available).
- **Time per epoch, not time to accuracy.** Asynchronous updates and large update batches can cost
  accuracy per epoch (staleness); the model does not charge for it, so it flatters many replicas and
  large $k_\text{push}$.
- **No stragglers or failures** beyond the epoch fraction: Adam ended an epoch at 75 % of the samples so
  as not to wait for stragglers; this run uses its data set's fraction, given at the top.
- **One machine type per role.** Heterogeneous clusters would place partitions by assignment
  (docs/model.md §7); this study uses one worker and one PS machine type.
"""

FINAL_CODE = """last = results["optimizer"]["results"][-1]["best"]
results["headline"] = {
    "model_parallel_peak_workers": mp["peak_workers"], "model_parallel_peak_speedup": mp["peak_speedup"],
    "best_budget": top_budget, "best_speedup": last["speedup"], "best_epoch_time_s": last["epoch_time_s"],
    "best_configuration": f"W={last['workers_per_replica']} R={last['replicas']} P={last['ps_machines']}",
    "best_bottleneck": last["bottleneck"], "single_machine_epoch_time_s": single["epoch_time_s"],
}
results["elapsed_s"] = time.perf_counter() - t_start
write_results(results_path, results)
markdown(f"*Study computed in {results['elapsed_s']:.1f} s; results written to `{results_path}`.*")
"""


def build(name: str) -> Any:
    """The notebook of study ``name`` as an nbformat node (outputs empty)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    s = STUDIES[name]
    fields = {**s, "name": name}
    cells = [
        new_markdown_cell(INTRO.format(**fields).strip()),
        new_code_cell(PARAMETERS.format(**fields).strip(), metadata={"tags": ["parameters"]}),
        new_code_cell(SETUP.format(**fields).strip()),
        new_markdown_cell(S1_TEXT.strip()), new_code_cell(S1_CODE.strip()),
        new_markdown_cell(S1B_TEXT.strip()), new_code_cell(S1B_CODE.strip()),
        new_markdown_cell(S2_TEXT.strip()), new_code_cell(S2_CODE.strip()),
        new_markdown_cell(S3_TEXT.strip()), new_code_cell(S3_CODE.strip()),
        new_markdown_cell(S4_TEXT.strip()), new_code_cell(S4_CODE.strip()),
        new_markdown_cell(S5_TEXT.strip()), new_code_cell(S5_CODE.strip()),
        new_markdown_cell(S6_TEXT.strip()), new_code_cell(FINAL_CODE.strip()),
    ]
    for i, cell in enumerate(cells):
        cell["id"] = f"{name}-{i:02d}"  # stable ids: the committed file does not churn
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    })
    nbformat.validate(nb)
    return nb


def text(name: str) -> str:
    import nbformat

    return nbformat.writes(build(name)) + "\n"


def main(argv: list[str] | None = None) -> int:
    from .registry import notebooks_dir

    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    folder = notebooks_dir()
    stale = []
    for name in STUDIES:
        path = Path(folder) / f"{name}_study.ipynb"
        new = text(name)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != new:
                stale.append(str(path))
        else:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print("out of date (run python -m dnnbench.studies.build_notebooks): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
