"""Every ``dnnbench`` subcommand against a generated corpus of bad files, values and paths
(tests/security/corpus.py), run under a 2 GiB address-space limit and 30 s per case: each bad case
exits 2 with one line on stderr naming the field or argument, and nothing raises, hangs or runs out
of memory. Mutated specs that are still valid may exit 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import corpus
import pytest

DRIVER = Path(__file__).with_name("fuzz_driver.py")
MEMORY_BYTES = 2 * 2**30
SECONDS_PER_CASE = 30

pytestmark = [pytest.mark.slow]


def _verdict(case: dict, result: dict) -> str | None:
    err = str(result.get("stderr") or "").strip()
    if result.get("exception"):
        return f"raised: {str(result['exception']).strip().splitlines()[-1][:200]}"
    if "Traceback" in err:
        return "printed a traceback"
    lines = err.splitlines()
    if result["code"] == 2 and len(lines) == 1:
        return None
    if case["expect"] == "any" and result["code"] == 0:
        return None
    return f"exit {result['code']} with {len(lines)} lines on stderr: {err[:200]!r}"


def test_every_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cases = corpus.build(tmp_path / "corpus", mutants_per_kind=60, seed=0)
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    subprocess.run([sys.executable, str(DRIVER), str(tmp_path / "cases.json"), str(tmp_path / "results.json"),
                    str(MEMORY_BYTES), str(SECONDS_PER_CASE)], check=True, timeout=1800)
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results) == len(cases) > 1000
    failures = [(c["argv"], why) for c, r in zip(cases, results, strict=True) if (why := _verdict(c, r))]
    shown = "\n".join(f"{' '.join(a[:60] for a in argv)[:200]}: {why}" for argv, why in failures[:20])
    assert not failures, f"{len(failures)} of {len(cases)} cases failed:\n{shown}"
    # The corpus reaches the errors it is meant to: a sample of the messages name what was wrong.
    messages = " ".join(str(r["stderr"]) for r in results)
    for expected in ("nests deeper than", "once its aliases are expanded", "is not a regular file",
                     "larger than the", "is not valid JSON", "is more than the limit", "cannot be written",
                     "is a folder"):
        assert expected in messages, expected


def test_the_corpus_report_replays(capsys: pytest.CaptureFixture[str]) -> None:
    """The report the corpus mutates is a good one: replaying it as it is works."""
    from dnnbench import cli

    assert cli.main(["validate", "--replay", str(corpus.REPORT), "--json"]) == 0
    assert '"replayed": true' in capsys.readouterr().out
