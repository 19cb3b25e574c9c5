"""Run many ``dnnbench`` command lines in one process under a memory limit and a time limit per case.

    python fuzz_driver.py CASES.json RESULTS.json [MEMORY_BYTES] [SECONDS_PER_CASE]

CASES.json is a list of ``{"argv": [...], "cwd": "..."}``; RESULTS.json gets, for each case, the exit
code, what it wrote to stderr and, if it raised instead of exiting (or ran past its time), the
exception. The address-space limit (RLIMIT_AS) makes an unbounded allocation a MemoryError here
instead of a machine swapping; the alarm makes a hang a failure instead of a stuck suite.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import traceback


class CaseTimeout(BaseException):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise CaseTimeout()


def run_case(argv: list[str], seconds: int) -> dict[str, object]:
    from dnnbench import cli

    out, err = io.StringIO(), io.StringIO()
    result: dict[str, object] = {"argv": argv}
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                result["code"] = cli.main(argv)
            except SystemExit as exc:  # argparse's own exit
                result["code"] = exc.code if isinstance(exc.code, int) else 1
    except CaseTimeout:
        result["code"], result["exception"] = None, f"ran past {seconds} s"
    except BaseException as exc:  # noqa: BLE001 - any escape is what the fuzz suite reports
        result["code"] = None
        result["exception"] = "".join(traceback.format_exception(exc))[-2000:]
    finally:
        signal.alarm(0)
    result["stderr"] = err.getvalue()[-4000:]
    return result


def main() -> int:
    cases_path, results_path = sys.argv[1], sys.argv[2]
    memory = int(sys.argv[3]) if len(sys.argv) > 3 else 2 * 2**30
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGALRM, _alarm)
    with open(cases_path, encoding="utf-8") as fh:
        cases = json.load(fh)
    results = []
    for case in cases:
        os.chdir(case.get("cwd", "."))
        results.append(run_case(case["argv"], seconds))
    with open(results_path, "w", encoding="utf-8") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
