"""HTTP handlers of the dnnbench server extension, under ``<base_url>dnnbench/`` (docs/jupyterlab.md).

``GET notebooks`` lists the packaged study notebooks; ``GET startup`` names, once, the notebook
``dnnbench lab`` opened (the front end runs it); ``POST workbench {"dir"}``, ``POST notebook
{"name", "dir"}`` and ``POST spec {"path"}`` write a notebook through the server's contents manager
(so they work with any contents manager, not only local files) and answer ``{"path", "existed"}``
(plus ``"kind"`` for a spec). Bad input answers 400 with the one-line SpecError message.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, url_path_join
from tornado import web

from ..errors import SpecError
from ..specs.io import MAX_SPEC_BYTES
from . import labext


class _Handler(APIHandler):
    def body(self) -> dict[str, str]:
        try:
            data = json.loads(self.request.body or b"{}")
        except json.JSONDecodeError:
            raise web.HTTPError(400, reason="the request body is not JSON") from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise web.HTTPError(400, reason="the request body must be a JSON object of strings")
        return data

    def fail(self, exc: SpecError) -> None:
        self.set_status(400)
        self.finish(json.dumps({"message": str(exc)}))

    async def folder(self, path: str) -> str:
        directory = path.strip("/")
        if not await ensure_async(self.contents_manager.dir_exists(directory)):
            raise SpecError("dir", directory or "/", "is not a folder on the server")
        return directory

    async def exists(self, path: str) -> bool:
        return bool(await ensure_async(self.contents_manager.file_exists(path)))

    async def save(self, path: str, nb: dict[str, Any]) -> None:
        specs = self.kernel_spec_manager.get_all_specs()
        available = {name: s.get("spec", {}).get("display_name", name) for name, s in specs.items()}
        labext.set_kernel(nb, available, self.kernel_manager.default_kernel_name)
        await ensure_async(self.contents_manager.save({"type": "notebook", "format": "json", "content": nb}, path))


class NotebooksHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        self.finish(json.dumps({"notebooks": labext.study_notebooks()}))


class StartupHandler(_Handler):
    """``GET startup``: ``{"run": path}`` the first time (the notebook ``dnnbench lab`` opened), then
    ``{"run": null}``: a reload does not run it again behind the user's back."""

    answered = False

    @web.authenticated
    def get(self) -> None:
        path = None
        if not StartupHandler.answered:
            StartupHandler.answered = True
            path = labext.run_on_start()
        self.finish(json.dumps({"run": path}))


class WorkbenchHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        try:
            directory = await self.folder(self.body().get("dir", ""))
            for candidate in labext.candidates(directory, labext.WORKBENCH):
                if not await self.exists(candidate):
                    break
            else:
                raise SpecError("dir", directory or "/", "has too many workbench-N.ipynb notebooks")
            await self.save(candidate, labext.workbench_notebook())
        except SpecError as exc:
            return self.fail(exc)
        self.finish(json.dumps({"path": candidate, "existed": False}))


class NotebookHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        try:
            data = self.body()
            directory = await self.folder(data.get("dir", ""))
            name = data.get("name", "")
            nb = labext.read_packaged(name)
            path = url_path_join(directory, f"{name}.ipynb").lstrip("/")
            existed = await self.exists(path)
            if not existed:
                await self.save(path, nb)
        except SpecError as exc:
            return self.fail(exc)
        self.finish(json.dumps({"path": path, "existed": existed}))


class SpecHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        try:
            spec_path = labext.check_name(self.body().get("path", "").strip("/"))
            if not await self.exists(spec_path):
                raise SpecError("file", spec_path, "does not exist on the server")
            info = await ensure_async(self.contents_manager.get(spec_path, content=False, type="file"))
            size = info.get("size")
            if isinstance(size, int) and size > MAX_SPEC_BYTES:  # refused before it is read
                raise SpecError("file", spec_path, f"is {size / 2**20:.1f} MiB, larger than the "
                                                   f"{MAX_SPEC_BYTES // 2**20} MiB limit for a spec file")
            model = await ensure_async(self.contents_manager.get(spec_path, content=True, type="file",
                                                                 format="text"))
            path, nb, kind = labext.spec_notebook(spec_path, model["content"])
            existed = await self.exists(path)
            if not existed:
                await self.save(path, nb)
        except SpecError as exc:
            return self.fail(exc)
        self.finish(json.dumps({"path": path, "existed": existed, "kind": kind}))


def setup_handlers(web_app: Any) -> None:
    base = url_path_join(web_app.settings.get("base_url", "/"), "dnnbench")
    web_app.add_handlers(".*$", [
        (url_path_join(base, "notebooks"), NotebooksHandler),
        (url_path_join(base, "startup"), StartupHandler),
        (url_path_join(base, "workbench"), WorkbenchHandler),
        (url_path_join(base, "notebook"), NotebookHandler),
        (url_path_join(base, "spec"), SpecHandler),
    ])


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "dnnbench.face.labext_server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    setup_handlers(serverapp.web_app)
    serverapp.log.info("dnnbench: JupyterLab extension handlers at %sdnnbench/",
                       serverapp.web_app.settings.get("base_url", "/"))
