"""Built-in presets: networks, clusters and data sets, stored as JSON data files with their sources.

A NETWORK, CLUSTER or DATASET argument anywhere in dnnbench is a preset name or a path to a spec file.
"""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from ..errors import SpecError
from ..specs import Cluster, Dataset, Network
from ..specs.base import Spec
from ..specs.io import load, parse_text

S = TypeVar("S", bound=Spec)

_FOLDERS: dict[type[Spec], str] = {Network: "networks", Cluster: "clusters", Dataset: "datasets"}


def names(kind: str) -> tuple[str, ...]:
    """Preset names of ``kind`` ('networks', 'clusters' or 'datasets'), sorted."""
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
    # os.path.exists answers False (never raises) for names too long for the file system or with a NUL.
    if Path(text).suffix.lower() in (".json", ".yaml", ".yml") or os.sep in text or os.path.exists(text):
        return load(cls, text)
    raise SpecError(kind[:-1], text, f"is neither a preset ({', '.join(names(kind))}) nor a spec file")


def network(name_or_path: str | os.PathLike[str] | Network) -> Network:
    return resolve(Network, name_or_path)


def cluster(name_or_path: str | os.PathLike[str] | Cluster) -> Cluster:
    return resolve(Cluster, name_or_path)


def dataset(name_or_path: str | os.PathLike[str] | Dataset) -> Dataset:
    return resolve(Dataset, name_or_path)


#: The data set each preset network is trained on, for commands that take a network alone.
DEFAULT_DATASET = {"lenet5": "mnist", "mnist-adam": "mnist", "alexnet": "imagenet22k",
                   "vgg16": "imagenet22k", "imagenet22k-adam": "imagenet22k"}


def default_dataset_for(net: Network) -> Dataset:
    return dataset(DEFAULT_DATASET.get(net.name, "imagenet22k" if net.input_shape[-1] >= 64 else "mnist"))


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
