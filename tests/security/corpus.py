"""A generated corpus of bad input for every ``dnnbench`` subcommand (tests/security/test_fuzz_cli.py).

:func:`build` writes the bad files into a folder and returns the cases: command lines, each marked
``"error"`` (must exit 2 with one line on stderr) or ``"any"`` (a mutation that may still be valid:
exit 0, or exit 2 with one line). Seeded: the same corpus every run.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from dnnbench import presets
from dnnbench.face.state import WorkbenchState

BOMB = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8))

#: Documents that are no spec of any kind (the name's suffix decides JSON or YAML).
BAD_DOCUMENTS: dict[str, str | bytes] = {
    "empty.json": "",
    "truncated.json": '{"name": "x", "layers": [',
    "array.json": "[1, 2]",
    "null.json": "null",
    "string.json": '"lenet5"',
    "nan.json": '{"name": NaN, "layers": []}',
    "infinity.json": '{"samples_per_epoch": Infinity}',
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "deep.yaml": "[" * 100_000 + "]" * 100_000,
    "deepmap.json": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "bomb.yaml": BOMB,
    "bigint.json": '{"samples_per_epoch": ' + "9" * 5000 + "}",
    "bigint2.json": '{"samples_per_epoch": ' + "9" * 40 + "}",
    "binary.yaml": "name: !!binary aGVsbG8=\nlayers: []\n",
    "set.yaml": "!!set {a: null}\n",
    "date.yaml": "name: 2024-01-01\nlayers: []\n",
    "intkeys.yaml": "{1: 2, 3: 4}\n",
    "python.yaml": '!!python/object/apply:os.system ["id"]\n',
    "latin1.json": b'{"name": "\xe9"}',
    "bom.json": b"\xef\xbb\xbf{}",
    "tabs.yaml": "name:\t[\n",
}

REPORT = Path(__file__).with_name("data") / "validation-report.json"

#: Values put in place of one leaf of a valid spec.
MUTATIONS: list[Any] = [-1, 0, 2**62, 1e308, -1e308, 5e-324, "5", True, None, [], {}, "x" * 10_000, 0.5]


def _leaves(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _leaves(v, (*path, i))] or [path]
    return [path]


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    data = json.loads(json.dumps(data))
    if not path:
        return value
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


def mutants(doc: dict[str, Any], rng: random.Random, count: int) -> list[Any]:
    """``count`` copies of ``doc``, each with one leaf (or one whole branch) replaced."""
    leaves = _leaves(doc)
    branches = sorted({p[:i] for p in leaves for i in range(1, len(p))}, key=str)
    out = []
    for _ in range(count):
        path = rng.choice(leaves if rng.random() < 0.85 or not branches else branches)
        out.append(_set(doc, path, rng.choice(MUTATIONS)))
    return out


def _special_files(folder: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    fifo = folder / "fifo.json"
    os.mkfifo(fifo)
    out["fifo"] = fifo
    zero = folder / "zero.json"
    zero.symlink_to("/dev/zero")
    out["zero"] = zero
    loop = folder / "loop.json"
    loop.symlink_to(loop)
    out["loop"] = loop
    (folder / "dir.json").mkdir()
    out["dir"] = folder / "dir.json"
    huge = folder / "huge.json"
    with huge.open("wb") as fh:  # sparse: 17 MiB of nothing, over the 16 MiB limit
        fh.seek(17 * 2**20)
        fh.write(b"}")
    out["huge"] = huge
    out["missing"] = folder / "missing.json"
    out["longname"] = folder / ("x" * 300 + ".json")
    return out


def _file_commands(path: str) -> list[list[str]]:
    """Every command line that reads ``path`` as a spec file."""
    return [
        ["check-spec", path], ["describe", path],
        ["predict", "--network", path], ["predict", "--network", "lenet5", "--cluster", path],
        ["predict", "--network", "lenet5", "--dataset", path],
        ["optimize", "--network", "lenet5", "--cluster", path, "--machines", "8"],
        ["speedup", "--network", path, "--max-machines", "4"],
        ["validate", "--replay", path],
        ["study", "mnist", "-y", path, "--parameters"],
    ]


NUMBER_ARGS = [
    ["speedup", "--network", "lenet5", "--max-machines"], ["optimize", "--network", "lenet5", "--machines"],
    ["optimize", "--network", "lenet5", "--machines", "8", "--top"],
    ["predict", "--network", "lenet5", "--workers-per-replica"], ["predict", "--network", "lenet5", "--replicas"],
    ["predict", "--network", "lenet5", "--ps-machines"], ["predict", "--network", "lenet5", "--update-batch"],
    ["predict", "--network", "lenet5", "--pull-interval"], ["predict", "--network", "lenet5", "--threads"],
    ["predict", "--network", "lenet5", "--overlap"],
    ["lab", "--dry-run", "--port"], ["app", "--dry-run", "--max-kernels"],
    ["app", "--dry-run", "--cull-idle-timeout"],
    ["validate", "--network", "lenet5", "--launches"], ["validate", "--network", "lenet5", "--batch-size"],
    ["validate", "--network", "lenet5", "--exchange-overhead-s"], ["validate", "--network", "lenet5", "--link"],
]
#: Values that are bad for every option of ``validate`` (a good one would start real training runs).
BAD_FOR_VALIDATE = ["-1", "abc", "", "nan", "inf", "-inf", "0x10"]
BAD_NUMBERS = ["0", "-1", "abc", "", "1e18", "100000", "99999999999999999999", "nan", "inf", "-inf", "1.5",
               "0x10", "1_000", " 5", "٣"]


def build(folder: Path, mutants_per_kind: int = 60, seed: int = 0) -> list[dict[str, Any]]:
    """Write the corpus into ``folder``; the cases (``argv``, ``cwd``, ``expect``)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    cases: list[dict[str, Any]] = []

    def case(argv: list[str], expect: str = "error") -> None:
        cases.append({"argv": argv, "cwd": str(folder), "expect": expect})

    # Documents that are not specs, and files that are not regular files, through every reader.
    for name, text in BAD_DOCUMENTS.items():
        p = folder / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        for argv in _file_commands(str(p)):
            # An empty YAML document is an empty mapping of study parameters: nothing to refuse.
            case(argv, expect="any" if name == "null.json" and argv[0] == "study" else "error")
    for path in _special_files(folder).values():
        for argv in _file_commands(str(path)):
            case(argv)
    # ONNX sources that are not ONNX models, or not regular files.
    os.mkfifo(folder / "fifo.onnx")
    (folder / "zero.onnx").symlink_to("/dev/zero")
    (folder / "dir.onnx").mkdir()
    (folder / "garbage.onnx").write_bytes(b"\x08\x07not a model" * 100)
    (folder / "empty.onnx").write_bytes(b"")
    for name in ("fifo", "zero", "dir", "garbage", "empty", "missing"):
        case(["import", str(folder / f"{name}.onnx"), "-o", str(folder / "imported.json")])
    case(["import", "nonexistent_module_xyz:factory", "-o", str(folder / "imported.json"), "--input-shape", "1"])
    case(["import", "os:path", "-o", str(folder / "dir.json")])
    # Inline text where a file name or mapping goes (names too long for the file system).
    long_yaml = "cluster: {" + ", ".join(f"k{i}: {i}" for i in range(200)) + "}"
    case(["study", "mnist", "-y", long_yaml, "--parameters"])
    case(["study", "mnist", "-y", "cluster: " + "x" * 5000, "--parameters"])
    case(["predict", "--network", "x" * 5000])
    case(["study", "mnist", "-p", "network", "{name: x, layers: !!binary aGVsbG8=}", "--parameters"])
    case(["study", "mnist", "-p", "configuration", "!!set {a: null}", "--parameters"])
    case(["study", "mnist", "-p", "budgets", "[" * 10_000, "--parameters"])
    case(["study", "mnist", "-p", "nope", "1", "--parameters"])
    case(["study", "nope"])
    case(["study", str(folder / "array.json")])
    case(["presets", "--bogus"])
    case(["schema", "nope"])
    case(["describe"])
    case(["nope"])
    case(["report", "mnist", "--grid", "cluster=adam-2014", "-y", str(folder / "bomb.yaml")])
    case(["report", "mnist", "--grid", "cluster"])
    case(["report", "mnist", "--grid", "nope=1,2"])
    # Numbers out of range or not numbers at all.
    for argv in NUMBER_ARGS:
        for value in BAD_FOR_VALIDATE if argv[0] == "validate" else BAD_NUMBERS:
            valid_somewhere = value in ("1.5", " 5", "1_000", "٣", "100000") or (
                argv[-1] == "--top" and value == "99999999999999999999") or (  # more than there are: all of them
                value == "0" and argv[-1] in ("--ps-machines", "--overlap", "--cull-idle-timeout"))
            case([*argv, value], expect="any" if valid_somewhere else "error")
    # Outputs that cannot be written.
    (folder / "afile").write_text("x")
    for out in (str(folder), str(folder / "afile" / "x.json"), "/proc/nope/x.json", "/dev/null", "/dev/full"):
        case(["calibrate", "-o", out])
        case(["validate", "--network", "lenet5", "-o", out])
        for command in ("lab", "app"):  # a folder is a good --notebook: the copy goes inside it
            case([command, "--dry-run", "--notebook", out], expect="any" if out == str(folder) else "error")
        if out != str(folder):  # (a folder is a good --out: the study would run)
            case(["study", "mnist", "--out", out, "-p", "budgets", "[8]", "--no-report"])
    # Spec mutations: one leaf (or branch) of a valid spec replaced, through the commands that read it.
    docs = {
        "network": (presets.network("lenet5").to_dict(), lambda p: [["check-spec", p], ["describe", p],
                                                                    ["predict", "--network", p, "--json"],
                                                                    ["optimize", "--network", p, "--machines", "8"]]),
        "cluster": (presets.cluster("adam-2014").to_dict(),
                    lambda p: [["check-spec", p], ["predict", "--network", "lenet5", "--cluster", p],
                               ["speedup", "--network", "lenet5", "--cluster", p, "--max-machines", "6"],
                               ["optimize", "--network", "mnist-adam", "--cluster", p, "--machines", "12"]]),
        "dataset": (presets.dataset("mnist").to_dict(), lambda p: [["check-spec", p, "--kind", "dataset"],
                                                                   ["predict", "--network", "lenet5", "--dataset", p]]),
        "workbench": (WorkbenchState.from_presets("lenet5", "edge-wifi").to_dict(),
                      lambda p: [["check-spec", p, "--kind", "workbench"]]),
        # A real report of `dnnbench validate --smoke --no-emulation` (LeNet-5 on a 2-core machine).
        "report": (json.loads(REPORT.read_text(encoding="utf-8")), lambda p: [["validate", "--replay", p]]),
    }
    for kind, (doc, commands) in docs.items():
        for i, mutant in enumerate(mutants(doc, rng, mutants_per_kind)):
            p = folder / f"mut-{kind}-{i}.json"
            p.write_text(json.dumps(mutant))
            for argv in commands(str(p)):
                case(argv, expect="any")
    return cases
