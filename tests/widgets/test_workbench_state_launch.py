"""WorkbenchState round trips; ``dnnbench lab`` / ``dnnbench app`` build the right commands and never
overwrite the user's notebook."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dnnbench import cli
from dnnbench.errors import SpecError
from dnnbench.face import launch
from dnnbench.face.state import WorkbenchState
from dnnbench.specs import Configuration


def test_state_round_trip_and_check_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = WorkbenchState.from_presets("mnist-adam", "edge-wifi", configuration=Configuration(replicas=2, ps_machines=1))
    path = s.save(tmp_path / "bench.json")
    assert WorkbenchState.load(path) == s
    assert cli.main(["check-spec", str(path)]) == 0
    data = json.loads(path.read_text())
    data["budget_machines"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="budget_machines"):
        WorkbenchState.load(path)
    assert cli.main(["check-spec", str(path)]) == 2


def test_packaged_notebook_is_thin_and_stripped() -> None:
    nb = json.loads(launch.packaged_notebook().read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert "parameters" in code[0]["metadata"]["tags"]
    assert any("Workbench(" in "".join(c["source"]) for c in code)
    assert any("INLINE" in "".join(c["source"]) for c in code)


def test_lab_copies_once_and_keeps_token_auth(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lab", "--dry-run", "--no-browser", "--port", "8899"]) == 0
    cmd = capsys.readouterr().out
    assert "-m jupyter lab dnnbench-workbench.ipynb" in cmd
    assert f"--ServerApp.root_dir={tmp_path.resolve()}" in cmd
    assert "--ServerApp.ip=127.0.0.1" in cmd and "--ServerApp.port=8899" in cmd and "--no-browser" in cmd
    # The extension runs the notebook once when the page opens (dnnbench lab lands on the workbench).
    from dnnbench.face import labext

    env = launch.lab_environment(tmp_path / "sub" / "bench.ipynb", {})
    assert labext.run_on_start(env) == "sub/bench.ipynb"
    assert launch.lab_root(Path("/elsewhere/x.ipynb")) == (Path("/elsewhere"), "x.ipynb")
    for bad in ("", "../x.ipynb", "/abs/x.ipynb", "a/../../x.ipynb", "x.py", "a\nb.ipynb"):
        assert labext.run_on_start({labext.RUN_ON_START_ENV: bad}) is None, bad
    assert "token" not in cmd.lower()
    user = tmp_path / "dnnbench-workbench.ipynb"
    user.write_text('{"edited": true}')
    assert cli.main(["lab", "--dry-run"]) == 0
    assert user.read_text() == '{"edited": true}'  # never overwritten


def test_app_uses_voila_inline_on_localhost(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["app", "--dry-run", "--notebook", "sub/bench.ipynb"]) == 0
    out = capsys.readouterr().out
    assert "-m dnnbench.face.appserver sub/bench.ipynb --Voila.ip=127.0.0.1 --Voila.auto_token=True" in out
    assert "--VoilaConfiguration.template=dnnbench" in out
    assert "--MappingKernelManager.cull_idle_timeout=120" in out and "--MappingKernelManager.cull_interval=15" in out
    assert "--CappedKernelManager.max_kernels=8" in out and "allow_remote_access" not in out
    assert "token=" not in out.replace("auto_token=", "")  # the token never goes on a command line
    assert (tmp_path / "sub" / "bench.ipynb").exists()
    env = launch.app_environment({"JUPYTER_PATH": "/elsewhere", "JUPYTER_TOKEN_FILE": "/x"}, root=tmp_path)
    assert env["BOKEH_RESOURCES"] == "inline"
    assert len(env["JUPYTER_TOKEN"]) >= 32 and "JUPYTER_TOKEN_FILE" not in env
    assert env["JUPYTER_TOKEN"] != launch.app_environment({})["JUPYTER_TOKEN"]  # a new one each start
    assert (env[launch.APP_ROOT_ENV], env[launch.APP_TORCH_ENV]) == (str(tmp_path.resolve()), "0")
    assert "--DnnbenchApp.allow_remote_access=True" in launch.app_command(Path("n.ipynb"), ip="0.0.0.0")
    first, *rest = env["JUPYTER_PATH"].split(os.pathsep)
    assert (Path(first) / "voila" / "templates" / "dnnbench" / "index.html.j2").is_file()
    assert rest == ["/elsewhere"]
    assert cli.main(["app", "--dry-run", "--notebook", "sub/bench.ipynb", "--cull-idle-timeout", "0"]) == 0
    assert "--MappingKernelManager.cull_idle_timeout=0" in capsys.readouterr().out  # 0: culling off
    with pytest.raises(SystemExit) as exit_info:  # argparse: one line on stderr, exit 2
        cli.main(["app", "--dry-run", "--cull-idle-timeout", "-5"])
    assert exit_info.value.code == 2
    assert cli.main(["app", "--dry-run", "--notebook", "notes.txt"]) == 2
    assert not Path("notes.txt").exists()


def test_offline_template_strips_exactly_the_links_voila_ships() -> None:
    # The dnnbench Voila template removes the Font Awesome <link>s by exact text: if Voila's "lab" template
    # changes them, this fails at once (the browser tests would see the CDN requests).
    import re

    from jupyter_core.paths import jupyter_path

    ours = (launch.voila_data_dir() / "voila" / "templates" / "dnnbench" / "index.html.j2").read_text("utf-8")
    stripped = re.findall(r"replace\('(<link [^']+>)', ''\)", ours)
    assert len(stripped) == 2 and all("cdn.jsdelivr.net" in link for link in stripped)
    lab = next(Path(d) / "templates" / "lab" / "index.html.j2" for d in jupyter_path("voila")
               if (Path(d) / "templates" / "lab" / "index.html.j2").is_file())
    text = lab.read_text("utf-8")
    assert all(link in text for link in stripped)
    for link in re.findall(r"<link [^>]*https?://[^>]*>", text):
        assert link in stripped, f"Voila's lab template links {link} and dnnbench's template keeps it"
    page = (launch.voila_data_dir() / "voila" / "templates" / "dnnbench" / "page.html").read_text("utf-8")
    assert "https://" not in page and "http://" not in page
