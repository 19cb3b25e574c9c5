"""Built-in presets: networks, clusters, data sets and devices (machine types), stored as JSON data
files with their sources.

A NETWORK, CLUSTER or DATASET argument anywhere in dnnbench is a preset name or a path to a spec file;
a cluster's ``worker`` or ``ps`` may name a device preset instead of spelling the machine out.
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from ..errors import SpecError
from ..specs import Cluster, Dataset, Machine, Network
from ..specs.base import Spec
from ..specs.io import load, parse_text

S = TypeVar("S", bound=Spec)

_FOLDERS: dict[type[Spec], str] = {Network: "networks", Cluster: "clusters", Dataset: "datasets",
                                   Machine: "devices"}


def names(kind: str) -> tuple[str, ...]:
    """Preset names of ``kind`` ('networks', 'clusters', 'datasets' or 'devices'), sorted."""
    folder = resources.files(__name__) / kind
    return tuple(sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json")))


@cache
def _preset(cls: type[S], name: str) -> S:
    text = (resources.files(__name__) / _FOLDERS[cls] / f"{name}.json").read_text(encoding="utf-8")
    return cls.build(parse_text(text, where=f"preset {name}"))


def resolve(cls: type[S], name_or_path: str | os.PathLike[str] | S | dict) -> S:
    """A spec from a preset name, a spec file path, a mapping (validated), or a spec (returned as is)."""
    kind = _FOLDERS[cls]
    if isinstance(name_or_path, cls):
        return name_or_path
    if isinstance(name_or_path, dict):
        return cls.build(name_or_path, where=kind[:-1])
    if not isinstance(name_or_path, (str, os.PathLike)) or isinstance(name_or_path, bytes):
        raise SpecError(kind[:-1], name_or_path, f"is not valid: expected a preset name ({', '.join(names(kind))}), "
                                                 f"a spec file path, a mapping or a {cls.__name__}")
    text = os.fspath(name_or_path)
    if not isinstance(text, str):
        raise SpecError(kind[:-1], text, "is not valid: expected a text path")
    if text in names(kind):
        return _preset(cls, text)
    base, sep, params = text.partition(":")
    if sep and cls is Network and base in names(kind):
        return _with_parameters(_preset(Network, base), params)  # type: ignore[return-value]
    # os.path.exists answers False (never raises) for names too long for the file system or with a NUL.
    if Path(text).suffix.lower() in (".json", ".yaml", ".yml") or os.sep in text or os.path.exists(text):
        return load(cls, text)
    raise SpecError(kind[:-1], text, f"is neither a preset ({', '.join(names(kind))}) nor a spec file")


#: Parameters a preset name may carry: ``gpt2-small:seq_len=256``.
NETWORK_PARAMETERS = {"seq_len": "the sequence length in tokens (networks whose input is token ids)"}


def _with_parameters(net: Network, params: str) -> Network:
    """``net`` with ``seq_len=N`` (and any later parameters) applied; one-line errors name the parameter."""
    where = f"network {net.name}:{params}"
    data = net.to_dict()
    for item in params.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if key not in NETWORK_PARAMETERS or not eq:
            raise SpecError(where, item, "is not a parameter: expected " +
                            ", ".join(f"{k}=N ({v})" for k, v in NETWORK_PARAMETERS.items()))
        shape = data["layers"][0]["shape"]
        if len(shape) != 1 or data["layers"][1]["kind"] != "embedding":
            raise SpecError(where, key, f"applies only to networks whose input is token ids; {net.name}'s input is "
                                        f"{list(shape)}")
        rows = [layer["rows"] for layer in data["layers"] if layer["kind"] == "position_embedding"]
        longest = max(rows, default=None)
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1 or (longest is not None and n > longest):
            raise SpecError(where, value, f"{key} must be a whole number from 1 to {longest} (the position table)")
        data["layers"][0]["shape"] = [n]
        data["name"] = f"{net.name}:{key}={n}"
    return Network.build(data, where=where)


def network(name_or_path: str | os.PathLike[str] | Network) -> Network:
    return resolve(Network, name_or_path)


def cluster(name_or_path: str | os.PathLike[str] | Cluster) -> Cluster:
    return resolve(Cluster, name_or_path)


def device(name_or_path: str | os.PathLike[str] | Machine) -> Machine:
    """A machine type: a device preset (``a100-80gb``, ``epyc-9654``, ...) or a machine spec file."""
    return resolve(Machine, name_or_path)


def dataset(name_or_path: str | os.PathLike[str] | Dataset) -> Dataset:
    return resolve(Dataset, name_or_path)


#: The data set each preset network is trained on, for commands that take a network alone.
DEFAULT_DATASET = {"lenet5": "mnist", "mnist-adam": "mnist", "alexnet": "imagenet22k",
                   "vgg16": "imagenet22k", "imagenet22k-adam": "imagenet22k", "resnet50": "imagenet1k",
                   "mobilenet-v2": "imagenet1k", "vit-b16": "imagenet1k", "gpt2-small": "openwebtext",
                   "bert-base": "bookswiki"}


def default_dataset_for(net: Network) -> Dataset:
    base = net.name.partition(":")[0]
    if base in DEFAULT_DATASET:
        return dataset(DEFAULT_DATASET[base])
    if len(net.input_shape) == 1 and len(net.layers) > 1 and net.layers[1].kind == "embedding":
        return dataset("openwebtext")
    return dataset("imagenet22k" if net.input_shape[-1] >= 64 else "mnist")


def problem(network: Any, cluster: Any, dataset: Any = None, config: Any = None) -> tuple[Any, Any, Any, Any]:
    """(Network, Cluster, Dataset, Configuration) from specs, preset names, spec files or mappings;
    ``dataset`` None: the network's own; ``config`` None: the default configuration."""
    from ..specs import Configuration

    net = resolve(Network, network)
    cl = resolve(Cluster, cluster)
    ds = default_dataset_for(net) if dataset is None else resolve(Dataset, dataset)
    if config is None:
        cfg = Configuration()
    elif isinstance(config, Configuration):
        cfg = config
    elif isinstance(config, dict):
        cfg = Configuration.build(config, where="config")
    else:
        raise SpecError("config", config, "is not valid: expected a Configuration or a mapping of its fields")
    return net, cl, ds, cfg
