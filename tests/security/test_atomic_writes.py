"""One atomic writer for the package (dnnbench.fileio): the old file or the whole new one, its mode kept,
symlinks written through, devices never replaced, failures one line, and no temporary left behind,
even by a writer that was killed."""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dnnbench import fileio
from dnnbench.errors import SpecError


def _temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_mode_is_kept_and_a_new_file_follows_the_umask(tmp_path: Path) -> None:
    p = tmp_path / "state.json"
    fileio.write_json(p, {"a": 1})
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    p.chmod(0o600)
    fileio.write_json(p, {"a": 2})
    assert stat.S_IMODE(p.stat().st_mode) == 0o600 and json.loads(p.read_text()) == {"a": 2}


def test_a_symlink_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    real.write_text("{}")
    link.symlink_to(real)
    assert fileio.write_json(link, {"b": 1}) == real
    assert link.is_symlink() and json.loads(real.read_text()) == {"b": 1}


def test_failures_keep_the_old_file_and_leave_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "x.json"
    fileio.write_json(p, {"old": True})

    def full(*_args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(SpecError, match="the device is full") as err:
        fileio.write_json(p, {"new": True})
    assert "\n" not in str(err.value)
    monkeypatch.undo()
    assert json.loads(p.read_text()) == {"old": True} and _temporaries(tmp_path) == []


def test_folders_devices_and_pipes_are_never_replaced(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "afile").write_text("x")
    for target, why in ((tmp_path / "pipe.json", "not a regular file"), (tmp_path / "dir.json", "is a folder"),
                        (tmp_path / "afile" / "x.json", "cannot be written")):
        with pytest.raises(SpecError, match=why):
            fileio.write_json(target, {})
        with pytest.raises(SpecError, match=why if why != "cannot be written" else "file, not a folder"):
            fileio.check_output_file(target, "-o")
    assert stat.S_ISFIFO((tmp_path / "pipe.json").stat().st_mode)
    assert _temporaries(tmp_path) == []


def test_nan_and_infinity_never_reach_a_file(tmp_path: Path) -> None:
    import numpy as np

    p = fileio.write_json(tmp_path / "r.json", {"x": float("inf"), "y": [np.float64("nan"), np.int64(3)]})
    assert json.loads(p.read_text()) == {"x": None, "y": [None, 3]}


_KILLED_WRITER = """
import os, sys, time
from dnnbench import fileio
real_replace = os.replace
def slow_replace(*args):
    print("written", flush=True)
    time.sleep(60)
os.replace = slow_replace
fileio.atomic_write(sys.argv[1], b"x" * 1_000_000)
"""


def test_the_temporary_of_a_killed_writer_is_removed_by_the_next_save(tmp_path: Path) -> None:
    target = tmp_path / "big.json"
    with subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(target)], stdout=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
        os.kill(proc.pid, signal.SIGKILL)  # nothing in the writer can clean up after this
    deadline = time.monotonic() + 10
    while not _temporaries(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_temporaries(tmp_path)) == 1 and not target.exists()
    fileio.write_json(target, {"saved": True})
    assert _temporaries(tmp_path) == [] and json.loads(target.read_text()) == {"saved": True}


@pytest.mark.timeout(60)  # a read that blocked on the pipe would hang here: a failure, not a wait
def test_reads_take_regular_files_only_and_count_on_the_open_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    for name in ("pipe.json", "zero.json"):
        with pytest.raises(SpecError, match="not a regular file"):
            fileio.read_text(tmp_path / name)  # never opened: a pipe with no writer would block
    (tmp_path / "big.json").write_bytes(b" " * 2000)
    with pytest.raises(SpecError, match="larger than"):
        fileio.read_text(tmp_path / "big.json", limit_bytes=1000)


def test_every_writer_of_the_package_uses_the_atomic_writer() -> None:
    """No module writes a user-visible file by itself: the writers go through dnnbench.fileio."""
    root = Path(__file__).resolve().parents[2] / "dnnbench"
    offenders = []
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name == "fileio.py":
            continue
        for needle in ("tempfile.mkstemp", "os.replace(", ".write_text(", "json.dump(", "shutil.copyfile("):
            if needle in text:
                offenders.append(f"{path.relative_to(root)}: {needle}")
    allowed = {  # not user files: a rank's private result file in its own temporary folder, a build step
        "esgd/torch_demo.py: json.dump(", "measure/launch.py: .write_text(",
        "studies/build_notebooks.py: .write_text(", "measure/proc.py: json.dump(", "measure/proc.py: os.replace(",
    }
    assert sorted(set(offenders) - allowed) == []
