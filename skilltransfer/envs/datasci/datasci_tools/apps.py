"""The agent-side namespace of the datasci env: a small file API and its docs (``complete_task`` is a harness
service bound next to them).

``setup(workspace)`` runs in whatever process runs the agent's code (the sandbox worker, where this package is
``datasci_tools``, or in-process); it only reads files under ``workspace/data``.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
from pathlib import Path
from typing import Any

DATA_DIR = "data"


class FilesApp:
    """Browse the data files of the task (CSV, JSON and README files under data/<domain>/)."""

    def __init__(self, workspace: Path) -> None:
        self._root = Path(workspace).resolve()

    def _resolve(self, path: str) -> Path:
        target = (self._root / str(path).lstrip("/")).resolve()
        data_root = self._root / DATA_DIR
        if target != data_root and data_root not in target.parents:
            raise ValueError(f"path {path!r} is outside {DATA_DIR}/; use paths like 'data/<domain>/<file>'")
        if not target.exists():
            raise FileNotFoundError(f"no such file or folder: {path!r}; call apis.files.list_files() to see them")
        return target

    def list_domains(self) -> list[dict[str, str]]:
        """List the data domains: each folder under data/ with the title line of its README.

        Returns:
            [{"domain": name, "folder": "data/<name>", "title": ...}].
        """
        out = []
        for folder in sorted((self._root / DATA_DIR).iterdir()):
            readme = folder / "README.md"
            title = readme.read_text(encoding="utf-8").splitlines()[0].lstrip("# ") if readme.exists() else ""
            out.append({"domain": folder.name, "folder": f"{DATA_DIR}/{folder.name}", "title": title})
        return out

    def list_files(self, domain: str | None = None) -> list[dict[str, Any]]:
        """List data files (relative paths, usable with pandas from the working directory) and their sizes.

        Args:
            domain: only this domain's folder (e.g. "wildfire"); all domains when omitted.

        Returns:
            [{"path": "data/<domain>/<file>", "size_bytes": int}].
        """
        base = self._resolve(f"{DATA_DIR}/{domain}" if domain else DATA_DIR)
        return [{"path": p.relative_to(self._root).as_posix(), "size_bytes": p.stat().st_size}
                for p in sorted(base.rglob("*")) if p.is_file()]

    def describe(self, path: str) -> dict[str, Any]:
        """Summarise a file: CSV columns, row count and first rows; JSON structure and a first record; text head.

        Args:
            path: e.g. "data/astronomy/planets.csv".

        Returns:
            A dict whose fields depend on the file type.
        """
        target = self._resolve(path)
        if target.is_dir():
            raise ValueError(f"{path!r} is a folder; call apis.files.list_files(domain=...)")
        text = target.read_text(encoding="utf-8")
        info: dict[str, Any] = {"path": path, "size_bytes": target.stat().st_size}
        if target.suffix == ".csv":
            rows = list(csv.reader(io.StringIO(text)))
            info.update(kind="csv", columns=rows[0] if rows else [], n_rows=max(0, len(rows) - 1),
                        first_rows=[dict(zip(rows[0], r, strict=False)) for r in rows[1:6]])
        elif target.suffix == ".json":
            data = json.loads(text)
            info["kind"] = "json"
            if isinstance(data, dict):
                info["keys"] = {k: f"list of {len(v)}" if isinstance(v, list) else type(v).__name__
                                for k, v in data.items()}
                lists = [v for v in data.values() if isinstance(v, list) and v]
                info["first_record"] = lists[0][0] if lists else None
            elif isinstance(data, list):
                info.update(length=len(data), first_record=data[0] if data else None)
        else:
            info.update(kind="text", head=text[:1500])
        return info

    def read_text(self, path: str, max_chars: int = 2000, offset: int = 0) -> str:
        """Read raw text of a data file.

        Args:
            path: e.g. "data/crime/README.md".
            max_chars: at most this many characters (default 2000).
            offset: start at this character.

        Returns:
            The text slice.
        """
        target = self._resolve(path)
        if target.is_dir():
            raise ValueError(f"{path!r} is a folder, not a file")
        return target.read_text(encoding="utf-8")[int(offset): int(offset) + int(max_chars)]


def _describe_function(name: str, fn: Any) -> dict[str, Any]:
    doc = inspect.getdoc(fn) or ""
    return {"name": name, "signature": f"{name}{inspect.signature(fn)}", "description": doc.split("\n")[0],
            "doc": doc}


class ApiDocsApp:
    """Documentation of the available apps and their APIs."""

    def __init__(self, apps: dict[str, Any]) -> None:
        self._apps = apps

    def _app(self, app_name: str) -> Any:
        if app_name not in self._apps:
            raise ValueError(f"unknown app {app_name!r}; apps: {', '.join(self._apps)}")
        return self._apps[app_name]

    def _apis(self, app_name: str) -> dict[str, Any]:
        app = self._app(app_name)
        return {n: getattr(app, n) for n in dir(app) if not n.startswith("_") and callable(getattr(app, n))}

    def show_app_descriptions(self) -> list[dict[str, str]]:
        """List the apps and what each is for."""
        return [{"name": n, "description": inspect.getdoc(type(a)) or ""} for n, a in self._apps.items()]

    def show_api_descriptions(self, app_name: str) -> list[dict[str, str]]:
        """List an app's APIs with one-line descriptions."""
        return [{"name": n, "description": _describe_function(n, fn)["description"]}
                for n, fn in self._apis(app_name).items()]

    def show_api_doc(self, app_name: str, api_name: str) -> dict[str, Any]:
        """The full documentation (signature, arguments, returns) of one API."""
        apis = self._apis(app_name)
        if api_name not in apis:
            raise ValueError(f"unknown api {api_name!r} of app {app_name!r}; apis: {', '.join(apis)}")
        return _describe_function(api_name, apis[api_name])


class Apis:
    """The ``apis`` object of the namespace: one attribute per app."""

    def __init__(self, workspace: Path) -> None:
        apps: dict[str, Any] = {}
        self.files = apps["files"] = FilesApp(workspace)
        self.api_docs = apps["api_docs"] = ApiDocsApp(apps)


def setup(workspace: Path, **_: Any) -> dict[str, Any]:
    """Build the agent-side namespace for an episode whose data lives in ``workspace/data``."""
    return {"apis": Apis(Path(workspace))}
