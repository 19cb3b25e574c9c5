"""Files in and out, in one place: bounded reads of regular files and one atomic writer.

Reading (:func:`read_text`): only regular files are read (a FIFO, a device or a socket is refused
without blocking: the file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the opened
descriptor, so a symlink to ``/dev/zero`` is refused too), and at most ``limit_bytes`` are read,
counted on the opened file rather than trusted from a ``stat`` of the name.

Writing (:func:`atomic_write`): the target holds either its old contents or the whole new ones.
The text goes to a temporary file in the target's folder (``.NAME.PID.RANDOM.tmp``), is flushed and
synced, takes the target's permission bits (or ``0666 & ~umask`` for a new file), replaces the target
with ``os.replace``, and the folder is synced. A failure removes the temporary file; a process killed
while writing cannot clean up, so the next save to the same folder removes temporary files of
processes that no longer exist. A symlink is written through (its target is replaced, the link
stays). Every failure is one :class:`~dnnbench.errors.SpecError` line naming the path.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from .errors import SpecError

#: The default read limit: spec files, reports and notebooks are small.
DEFAULT_READ_LIMIT_BYTES = 16 * 2**20

_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{16}\.tmp$")


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def read_bytes(path: str | os.PathLike[str], field: str = "file",
               limit_bytes: int = DEFAULT_READ_LIMIT_BYTES) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit_bytes``), or a one-line SpecError."""
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise SpecError(field, name, "does not exist") from None
    except IsADirectoryError:
        raise SpecError(field, name, "is a folder, expected a file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        why = _reason(exc) if isinstance(exc, OSError) else "the name contains a NUL byte"
        raise SpecError(field, name, f"cannot be opened ({why})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise SpecError(field, name, "is a folder, expected a file")
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(field, name, "is not a regular file (a pipe, device or socket is never read)")
        if info.st_size > limit_bytes:
            raise SpecError(field, name, f"is {_mib(info.st_size)}, larger than the {_mib(limit_bytes)} limit")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit_bytes:  # the file grew after fstat
                raise SpecError(field, name, f"is larger than the {_mib(limit_bytes)} limit")
        return b"".join(chunks)
    except OSError as exc:
        raise SpecError(field, name, f"cannot be read ({_reason(exc)})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], field: str = "file",
              limit_bytes: int = DEFAULT_READ_LIMIT_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a one-line SpecError if it is not)."""
    data = read_bytes(path, field, limit_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(field, os.fspath(path), f"is not UTF-8 text (byte {exc.start})") from None


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def sweep_stale_temporaries(folder: Path) -> int:
    """Remove ``.NAME.PID.RANDOM.tmp`` files in ``folder`` whose writing process is gone; the count."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        m = _TEMP.match(entry.name)
        if m is None or _pid_alive(int(m["pid"])):
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            pass
    return removed


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # not every platform opens folders; the rename itself is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _probe(folder: Path, field: str, given: str) -> None:
    """Create the folder (and its parents) and a file in it, then remove the file: a folder that cannot
    be written fails here, before any work, not at the end."""
    # Named like the writer's temporaries, so a probe of a killed process is swept like them.
    probe = folder / f".dnnbench-probe.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SpecError(field, given, "is not valid: a part of it is a file, not a folder") from None
    except OSError as exc:
        raise SpecError(field, given, f"cannot be written ({_reason(exc)})") from None
    os.close(fd)
    os.unlink(probe)
    sweep_stale_temporaries(folder)


def check_output_file(path: str | os.PathLike[str], field: str = "output") -> Path:
    """Fail now, with one line, if :func:`atomic_write` could not write ``path`` later (a folder, a
    device, a parent that is a file, a folder without write permission). Creates missing parents."""
    given = Path(path)
    target = Path(os.path.realpath(given))
    if target.is_dir():
        raise SpecError(field, str(given), "is a folder, expected a file name")
    if target.exists() and not target.is_file():
        raise SpecError(field, str(given), "is not a regular file (a device, pipe or socket is never replaced)")
    _probe(target.parent, field, str(given))
    return given


def check_output_folder(path: str | os.PathLike[str], field: str = "--out") -> Path:
    """Fail now, with one line, unless ``path`` is (or can be made) a folder that can be written."""
    given = Path(path)
    if given.exists() and not given.is_dir():
        raise SpecError(field, str(given), "is not a folder")
    _probe(given, field, str(given))
    return given


def atomic_write(path: str | os.PathLike[str], data: str | bytes, field: str = "output") -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (see the module doc); returns the path
    written, which is the symlink's target when ``path`` is a symlink."""
    given = Path(path)
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = target.parent
    try:
        if target.is_dir():
            raise SpecError(field, str(given), "is a folder, expected a file name")
        if target.exists() and not target.is_file():  # never replace a device, pipe or socket
            raise SpecError(field, str(given), "is not a regular file (a device, pipe or socket is never replaced)")
        folder.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        sweep_stale_temporaries(folder)
        tmp = folder / f".{target.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except SpecError:
        raise
    except OSError as exc:
        raise SpecError(field, str(given), f"cannot be written ({_reason(exc)})") from None
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            why = "the device is full" if exc.errno == errno.ENOSPC else _reason(exc)
            raise SpecError(field, str(given), f"cannot be written ({why})") from None
        raise
    _fsync_folder(folder)
    return target


def json_ready(data: Any) -> Any:
    """``data`` with numpy values made plain and non-finite floats (unbounded results) made None, so
    that it is standard JSON."""
    if isinstance(data, dict):
        return {str(k): json_ready(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [json_ready(v) for v in data]
    if hasattr(data, "tolist") and not isinstance(data, (str, bytes)):  # numpy scalars and arrays
        return json_ready(data.tolist())
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def write_json(path: str | os.PathLike[str], data: Any, field: str = "output", indent: int | None = 2) -> Path:
    """``data`` as standard JSON (no NaN or Infinity: see :func:`json_ready`), written atomically."""
    text = json.dumps(json_ready(data), indent=indent, allow_nan=False) + "\n"
    return atomic_write(path, text, field)


__all__ = ["DEFAULT_READ_LIMIT_BYTES", "atomic_write", "check_output_file", "check_output_folder", "json_ready",
           "read_bytes", "read_text",
           "sweep_stale_temporaries", "write_json"]
