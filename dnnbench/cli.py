"""The ``dnnbench`` command. Bad input is one line on stderr and exit code 2, never a traceback.

NETWORK, CLUSTER and DATASET arguments are preset names or spec file paths.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .cliargs import finite, print_json, whole_number_at_least
from .errors import SpecError

#: Modules that add their own sub-commands with ``register(subparsers)``.
PLUGINS = ("dnnbench.importers.cli", "dnnbench.studies.cli", "dnnbench.measure.cli", "dnnbench.face.launch")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


_positive_int = whole_number_at_least(1)
_nonneg_int = whole_number_at_least(0)
_print_json = print_json
_finite = finite


# ---- presets, describe, check-spec, schema -------------------------------------------------------

def cmd_presets(args: argparse.Namespace) -> int:
    from . import presets

    data = {kind: list(presets.names(kind)) for kind in ("networks", "clusters", "datasets", "devices")}
    if args.json:
        _print_json(data)
    else:
        for kind, items in data.items():
            print(f"{kind}: {', '.join(items)}")
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from . import counts, fmt, presets

    net = presets.network(args.network)
    data = counts.describe(net)
    if args.json:
        _print_json(data)
        return 0
    print(f"{net.name}: {net.description}")
    print(f"source: {net.source}")
    head = (f"{'layer':<12}{'kind':<11}{'output':<16}{'weights':>10}{'MACs fwd':>10}{'MACs bp':>10}"
            f"{'MACs wg':>10}{'elem ops':>10}")
    print(head)
    print("-" * len(head))
    for row in data["layers"]:  # type: ignore[union-attr]
        shape = "x".join(str(s) for s in row["output_shape"])
        print(f"{row['name']:<12}{row['kind']:<11}{shape:<16}{fmt.count(row['weights']):>10}"
              f"{fmt.count(row['macs_forward']):>10}{fmt.count(row['macs_backprop']):>10}"
              f"{fmt.count(row['macs_weight_grad']):>10}"
              f"{fmt.count(row['elem_ops_forward'] + row['elem_ops_backprop']):>10}")
    t = data["totals"]
    print("-" * len(head))
    print(f"total: {fmt.count(t['weights'])} weights ({t['weights']:,}), {fmt.count(t['macs_training'])} MACs "
          f"per training sample = {fmt.count(t['flops_training'])} FLOPs (FLOPs = 2 x MACs)")
    return 0


def cmd_check_spec(args: argparse.Namespace) -> int:
    from .specs import Cluster, Configuration, Dataset, Network
    from .specs.io import load, read_document

    data = read_document(args.file)
    kind = args.kind
    if kind == "auto":
        if isinstance(data, dict) and "layers" in data:
            kind = "network"
        elif isinstance(data, dict) and "worker" in data:
            kind = "cluster"
        elif isinstance(data, dict) and "samples_per_epoch" in data:
            kind = "dataset"
        elif isinstance(data, dict) and {"network", "cluster"} & set(data):
            kind = "workbench"
        else:
            kind = "configuration"
    if kind == "workbench":
        from .face.state import WorkbenchState

        load(WorkbenchState, args.file)
    else:
        load({"network": Network, "cluster": Cluster, "dataset": Dataset, "configuration": Configuration}[kind],
             args.file)
    print(f"{args.file}: a valid {kind} spec")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from .specs import Cluster, Configuration, Dataset, Network
    from .specs.io import json_schema

    cls = {"network": Network, "cluster": Cluster, "dataset": Dataset, "configuration": Configuration}[args.kind]
    _print_json(json_schema(cls))
    return 0


# ---- predict, speedup, optimize ------------------------------------------------------------------

def _problem(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from . import presets

    net = presets.network(args.network)
    cl = presets.cluster(args.cluster)
    ds = presets.dataset(args.dataset) if args.dataset else presets.default_dataset_for(net)
    return net, cl, ds


def _config(args: argparse.Namespace) -> Any:
    from .specs import Configuration

    data: dict[str, Any] = {}
    for arg, key in (("workers_per_replica", "workers_per_replica"), ("replicas", "replicas"),
                     ("ps_machines", "ps_machines"), ("update_batch", "push_interval_samples"),
                     ("pull_interval", "pull_interval_samples"), ("threads", "threads"),
                     ("partitioning", "partitioning"), ("overlap", "overlap")):
        v = getattr(args, arg, None)
        if v is not None:
            data[key] = v
    if getattr(args, "sync", False):
        data["mode"] = "sync"
    scheme = getattr(args, "data_parallel", None)
    if scheme in ("ps", "allreduce"):
        data["data_parallel"] = scheme
        if scheme == "allreduce" and "ps_machines" not in data:
            data["ps_machines"] = 0
    allreduce = {key: value for key, value in (("algorithm", getattr(args, "allreduce", None)),
                                               ("bucket_bytes", _first(getattr(args, "bucket_bytes", None))))
                 if value is not None}
    if allreduce:
        data["allreduce"] = allreduce
    for arg, key in (("precision", "precision"), ("batch", "local_batch_samples"), ("zero_stage", "zero_stage"),
                     ("optimizer", "optimizer")):
        v = _first(getattr(args, arg, None))
        if v is not None and v != "all":
            data[key] = v
    return Configuration.build(data)


def _first(value: Any) -> Any:
    """The value of an option that optimize takes as a list (a configuration holds its first)."""
    return value[0] if isinstance(value, list) else value


def _single(args: argparse.Namespace) -> None:
    """Commands that predict one configuration take one value per option."""
    for arg in ("precision", "batch", "bucket_bytes", "zero_stage"):
        v = getattr(args, arg, None)
        if isinstance(v, list) and (len(v) > 1 or v == ["all"]):
            raise SpecError(f"--{arg.replace('_', '-')}", ",".join(map(str, v)),
                            "is a list; this command takes one value (optimize searches a list)")


def _list_of(parse: Any, what: str) -> Any:
    """An argparse type: comma-separated values, each parsed by ``parse``."""

    def parse_list(text: str) -> list[Any]:
        items = [t.strip() for t in text.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {what}")
        return [parse(t) for t in items]

    return parse_list


def _precision(text: str) -> str:
    from .specs import PRECISIONS

    if text not in (*PRECISIONS, "all"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a precision; expected one of {', '.join(PRECISIONS)}, all")
    return text


def _add_problem(p: argparse.ArgumentParser) -> None:
    p.add_argument("--network", required=True, help="preset name or spec file")
    p.add_argument("--cluster", default="adam-2014", help="preset name or spec file (default: adam-2014)")
    p.add_argument("--dataset", help="preset name or spec file (default: the network's own)")


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--update-batch", type=_positive_int, help="samples between PS pushes (k_push)")
    p.add_argument("--pull-interval", type=_positive_int, help="samples between weight fetches (k_pull)")
    p.add_argument("--threads", type=_positive_int, help="threads per machine (default: one per core)")
    p.add_argument("--partitioning", choices=["feature-map", "spatial", "auto"])
    p.add_argument("--overlap", type=float, help="compute/communication overlap, 0 (none) to 1 (full)")
    p.add_argument("--sync", action="store_true", help="synchronous rounds instead of asynchronous updates")
    p.add_argument("--data-parallel", choices=["ps", "allreduce", "both"],
                   help="how replicas share updates: the parameter server (default) or an all-reduce; optimize "
                        "also takes 'both' and picks the faster")
    p.add_argument("--allreduce", choices=["ring", "tree", "hierarchical"],
                   help="the all-reduce's algorithm (default ring; optimize searches ring and tree, and hierarchical "
                        "on a cluster of nodes, unless it is given)")
    p.add_argument("--bucket-bytes", type=_list_of(_positive_int, "whole numbers"),
                   help="gradient bytes per all-reduce bucket (default 26214400, PyTorch DDP's 25 MiB; optimize "
                        "takes a comma-separated list to search)")
    p.add_argument("--precision", type=_list_of(_precision, "precisions"),
                   help="fp32 (default), tf32, fp16 or bf16 (mixed precision) on an accelerator; optimize takes a "
                        "comma-separated list, or 'all' for every precision the worker has")
    p.add_argument("--batch", type=_list_of(_positive_int, "whole numbers"),
                   help="b: samples per mini-batch of one machine or device (default 16); optimize takes a "
                        "comma-separated list, and an all-reduce then reduces once per mini-batch")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam"],
                   help="the training optimizer, whose state counts in memory (default sgd)")
    p.add_argument("--zero-stage", type=_list_of(whole_number_at_least(0, 3, "ZeRO stage 0-3"), "ZeRO stages"),
                   help="ZeRO stage 0-3 over the all-reduce group (optimize takes a comma-separated list)")


def cmd_predict(args: argparse.Namespace) -> int:
    from . import fmt
    from .model import predict

    net, cl, ds = _problem(args)
    _single(args)
    cfg = _config(args)
    from .model.interval import profiled_layers, profiled_step

    item = predict(net, cl, ds, cfg).item()
    hits, costed = profiled_layers(net, cl.worker)
    item["profiled_layers"] = {"profiled": hits, "layers": costed, "step_timed": profiled_step(net, cl.worker)}
    if args.json:
        _print_json(_finite(item))
        return 0
    how = (f"{cfg.allreduce.algorithm} all-reduce" if cfg.data_parallel == "allreduce" else cfg.mode)
    print(f"{net.name} on {cl.name} ({ds.name}, {ds.samples_per_epoch:,} samples/epoch): W={cfg.workers_per_replica} "
          f"R={cfg.replicas} P={cfg.ps_machines} ({how})")
    print(f"epoch time {fmt.seconds(item['epoch_time_s'])}, {fmt.count(item['samples_per_s'])} samples/s, "
          f"speed-up {item['speedup']:.2f}x, bottleneck: {item['bottleneck']}")
    iv = item["interval_p10_p90"]
    if iv is not None:
        e, t, x = iv["epoch_time_s"], iv["time_per_sample_s"], iv["speedup"]
        print(f"p10-p90 (compute error on this machine): epoch time {fmt.seconds(e[0])} to {fmt.seconds(e[1])}, "
              f"time per sample {fmt.seconds(t[0])} to {fmt.seconds(t[1])}, speed-up {x[0]:.2f}x to {x[1]:.2f}x")
    if hits:
        step = " and the step's fixed time from its timed steps" if item["profiled_layers"]["step_timed"] else ""
        print(f"compute of {hits} of {costed} layers from their timings on this machine{step} (calibrate --network)")
    print("per-sample time of one replica:")
    for k, v in item["breakdown_s_per_sample"].items():
        if v != 0.0:  # the parts this configuration has (--json lists every part)
            print(f"  {k:<24} {fmt.seconds(v)}")
    feas = "yes" if item["feasible"] else f"no ({item['infeasible_detail']})"
    parts = ", ".join(f"{k.replace('_', ' ')} {fmt.nbytes(v)}" for k, v in item["memory_bytes_per_worker_parts"].items()
                      if v > 0)
    print(f"memory per worker {fmt.nbytes(item['memory_bytes_per_worker'])} ({parts}) of "
          f"{fmt.nbytes(item['memory_capacity_bytes_per_worker'])}, per PS machine "
          f"{fmt.nbytes(item['memory_bytes_per_ps'])}; feasible: {feas}")
    return 0


def cmd_speedup(args: argparse.Namespace) -> int:
    from .optimizer import best_by_budget, data_parallel_curve, model_parallel_curve

    net, cl, ds = _problem(args)
    _single(args)
    cfg = _config(args)
    m = args.max_machines
    curves = {
        "model_parallel": model_parallel_curve(net, cl, ds, m, cfg).to_dict(),
        "data_parallel": data_parallel_curve(net, cl, ds, m, cfg).to_dict(),
        "best": best_by_budget(net, cl, ds, m, cfg).to_dict(),
    }
    if args.json:
        _print_json(_finite(curves))
        return 0
    writer = csv.writer(sys.stdout)
    if args.csv:
        writer.writerow(["curve", "machines", "speedup", "epoch_time_s", "workers_per_replica", "replicas",
                         "ps_machines"])
    else:
        print(f"{'curve':<15}{'machines':>9}{'speed-up':>10}{'W':>6}{'R':>6}{'P':>6}")
    for name, c in curves.items():
        for i in range(len(c["machines"])):
            row = [name, int(c["machines"][i]), round(c["speedup"][i], 4), c["epoch_time_s"][i],
                   int(c["workers_per_replica"][i]), int(c["replicas"][i]), int(c["ps_machines"][i])]
            if args.csv:
                writer.writerow(row)
            else:
                print(f"{name:<15}{row[1]:>9}{row[2]:>10.2f}{row[4]:>6}{row[5]:>6}{row[6]:>6}")
    return 0


def cmd_optimize(args: argparse.Namespace) -> int:
    from . import fmt
    from .optimizer import optimize

    net, cl, ds = _problem(args)
    cfg = _config(args)
    schemes = ["ps", "allreduce"] if getattr(args, "data_parallel", None) == "both" else None
    # Without --allreduce, an all-reduce is searched with both algorithms.
    algorithms = None if getattr(args, "allreduce", None) else (
        ["ring", "tree", "hierarchical"] if cl.node is not None else ["ring", "tree"])
    precisions = getattr(args, "precision", None)
    if precisions and "all" in precisions:
        acc = cl.worker.accelerator
        precisions = list(acc.peak_flops_per_s.supported) if acc is not None else ["fp32"]
    res = optimize(net, cl, ds, args.machines, cfg, top_k=args.top, data_parallels=schemes,
                   allreduce_algorithms=algorithms, precisions=precisions, local_batches=getattr(args, "batch", None),
                   bucket_sizes_bytes=getattr(args, "bucket_bytes", None),
                   zero_stages=getattr(args, "zero_stage", None))
    front = None
    if args.pareto:
        from .optimizer import best_by_budget, pareto_front

        front = pareto_front(best_by_budget(net, cl, ds, args.machines, cfg), cl.price_per_machine_hour)
    if args.json:
        data = res.to_dict()
        if front is not None:
            data["pareto"] = front
        _print_json(_finite(data))
        return 0
    print(res.explanation)
    print(f"{'rank':<6}{'W':>5}{'R':>7}{'P':>7}{'epoch time':>14}{'speed-up':>10}  {'scheme':<16}{'prec':<6}"
          f"{'b':>5}{'memory':>11}  bottleneck")
    for i, c in enumerate(res.top, 1):
        scheme = (f"{c.allreduce_algorithm} AR" + (f" Z{c.zero_stage}" if c.zero_stage else "")
                  if c.data_parallel == "allreduce" else "PS")
        print(f"{i:<6}{c.workers_per_replica:>5}{c.replicas:>7}{c.ps_machines:>7}{fmt.seconds(c.epoch_time_s):>14}"
              f"{c.speedup:>10.2f}  {scheme:<16}{c.precision:<6}{c.local_batch_samples:>5}"
              f"{fmt.nbytes(c.memory_bytes_per_worker):>11}  {c.bottleneck}")
    print(f"evaluated {res.evaluated:,} candidates ({res.method} search); infeasible: {res.infeasible or 'none'}")
    if front is not None:
        price = cl.price_per_machine_hour
        print("Pareto front (no budget is both cheaper and faster):" if price else
              "Pareto front (fewer machines never train faster):")
        for m, t, c in zip(front["machines"], front["epoch_time_s"], front["cost"], strict=True):
            print(f"  {int(m):>6} machines  {fmt.seconds(t):>12}" + (f"  {c:,.2f} per epoch" if price else ""))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dnnbench", description=(
        "Predict how fast a deep neural network trains on a cluster, and find the configuration that trains "
        "it fastest. NETWORK, CLUSTER and DATASET arguments are preset names or spec files."))
    from . import __version__

    parser.add_argument("--version", action="version", version=f"dnnbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("presets", help="list the built-in networks, clusters and data sets")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("describe", help="per-layer shapes, weights and MACs of a network")
    p.add_argument("network", help="preset name or spec file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("check-spec", help="validate a network, cluster, data-set, configuration or workbench file")
    p.add_argument("file")
    p.add_argument("--kind", default="auto",
                   choices=["auto", "network", "cluster", "dataset", "configuration", "workbench"])
    p.set_defaults(func=cmd_check_spec)

    p = sub.add_parser("schema", help="print the JSON Schema of a spec type")
    p.add_argument("kind", choices=["network", "cluster", "dataset", "configuration"])
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("predict", help="epoch time, speed-up and bottleneck of one configuration")
    _add_problem(p)
    p.add_argument("--workers-per-replica", type=_positive_int, help="W: machines per replica")
    p.add_argument("--replicas", type=_positive_int, help="R: model replicas")
    p.add_argument("--ps-machines", type=_nonneg_int, help="P: parameter-server machines")
    _add_config(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("speedup", help="model-parallel, data-parallel and best speed-up curves")
    _add_problem(p)
    p.add_argument("--max-machines", type=_positive_int, required=True)
    p.add_argument("--workers-per-replica", type=_positive_int, help="W of the data-parallel curve")
    _add_config(p)
    fmt_group = p.add_mutually_exclusive_group()
    fmt_group.add_argument("--json", action="store_true")
    fmt_group.add_argument("--csv", action="store_true")
    p.set_defaults(func=cmd_speedup)

    p = sub.add_parser("optimize", help="the fastest configuration for a machine budget")
    _add_problem(p)
    p.add_argument("--machines", type=_positive_int, required=True, help="machine budget N")
    p.add_argument("--top", type=_positive_int, default=5, help="how many configurations to list")
    p.add_argument("--pareto", action="store_true",
                   help="also the Pareto front of epoch time against machines (or cost, with a price)")
    _add_config(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_optimize)

    for name in PLUGINS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that part is not built in this version
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is None and getattr(args, "steady_heap", False):
        # A measuring command times PyTorch in this process: start it again with a steady heap (docs/validation.md
        # §"Runs"); the new process parses the same arguments and goes on from here.
        from .measure.alloc import restart_with_steady_heap

        restart_with_steady_heap(["-m", "dnnbench.cli", *sys.argv[1:]])
    try:
        return int(args.func(args) or 0)
    except SpecError as err:
        print(f"dnnbench {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dnnbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
