"""The API machinery of the apps world: registration, argument checks, access tokens, pagination, the world database.

Each app module defines plain functions ``fn(db: Db, ...)`` decorated with ``@api("app")``; the decorator records a
documented ``ApiSpec`` (description, parameters and return text parsed from the Google-style docstring). The agent
calls them as ``apis.<app>.<name>(**kwargs)`` with keyword arguments only; apps that need a login take an extra
``access_token`` argument obtained from ``apis.<app>.login(username=..., password=...)``. The calls run on the
harness side (``call``) against the episode's :class:`WorldDb`, an in-memory database the agent's process cannot
open; the agent's ``apis`` object holds only stubs (see ``env.bindings``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from skilltransfer.envs.apps.world import NOW

MAX_PAGE_LIMIT = 20


class ApiError(Exception):
    """A bad API call (wrong arguments, missing token, unknown record); the message says what to fix."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    required: bool
    default: Any
    description: str


@dataclass(frozen=True)
class ApiSpec:
    """One documented API."""

    app: str
    name: str
    func: Callable[..., Any]
    description: str
    params: tuple[Param, ...]
    returns: str
    auth: bool

    def doc(self) -> dict[str, Any]:
        return {"app_name": self.app, "api_name": self.name, "description": self.description,
                "parameters": [{"name": p.name, "type": p.type, "required": p.required,
                                "default": None if p.required else p.default, "description": p.description}
                               for p in self.params],
                "returns": self.returns}


@dataclass
class AppInfo:
    description: str
    apis: dict[str, ApiSpec] = field(default_factory=dict)


REGISTRY: dict[str, AppInfo] = {}
"""App name -> its description and APIs, filled by the app modules on import."""


def register_app(name: str, description: str) -> None:
    REGISTRY.setdefault(name, AppInfo(description))


def _parse_docstring(doc: str) -> tuple[str, dict[str, str], str]:
    lines = inspect.cleandoc(doc).splitlines()
    head = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    summary = " ".join(line.strip() for line in lines[:head])  # the first paragraph
    args: dict[str, str] = {}
    returns: list[str] = []
    section = ""
    for line in lines[head:]:
        stripped = line.strip()
        if stripped in ("Args:", "Returns:"):
            section = stripped
        elif section == "Args:" and ":" in stripped and line.startswith("    ") and not line.startswith("        "):
            name, _, text = stripped.partition(":")
            args[name.strip()] = text.strip()
        elif section == "Args:" and stripped and args:
            last = list(args)[-1]
            args[last] = f"{args[last]} {stripped}"
        elif section == "Returns:" and stripped:
            returns.append(stripped)
    return summary, args, " ".join(returns)


_TYPE_NAMES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "list[str]": "list[string]",
               "int | None": "integer | null", "str | None": "string | null", "float | None": "number | null",
               "bool | None": "boolean | null", "list[str] | None": "list[string] | null"}


def api(app: str, *, auth: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``func`` as an API of ``app`` (its docstring is the documentation)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        summary, arg_docs, returns = _parse_docstring(func.__doc__ or func.__name__)
        params = []
        if auth:
            params.append(Param("access_token", "string", True, None, f"Token from apis.{app}.login."))
        for pname, p in list(inspect.signature(func).parameters.items())[1:]:
            ann = str(p.annotation)
            params.append(Param(pname, _TYPE_NAMES.get(ann, ann), p.default is inspect.Parameter.empty,
                                None if p.default is inspect.Parameter.empty else p.default, arg_docs.get(pname, "")))
        REGISTRY[app].apis[func.__name__] = ApiSpec(app, func.__name__, func, summary, tuple(params), returns, auth)
        return func

    return decorate


class Db:
    """Access to the world's SQLite file for one API call (commits on success, rolls back on error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def all(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute(sql, args).fetchall()]

    def one(self, sql: str, *args: Any) -> dict[str, Any] | None:
        row = self.conn.execute(sql, args).fetchone()
        return None if row is None else dict(row)

    def run(self, sql: str, *args: Any) -> int:
        """Execute a write; returns the last inserted row id."""
        return int(self.conn.execute(sql, args).lastrowid or 0)

    def get(self, table: str, row_id: int, what: str) -> dict[str, Any]:
        """The row with ``id == row_id`` or an ApiError naming ``what``."""
        row = self.one(f"SELECT * FROM {table} WHERE id = ?", row_id)
        if row is None:
            raise ApiError(f"No {what} with id {row_id}.")
        return row

    def user(self) -> dict[str, Any]:
        return self.all("SELECT * FROM profile")[0]

    def now(self) -> str:
        """The world clock: NOW plus one second per write that asked for a timestamp."""
        tick = int(self.all("SELECT value FROM meta WHERE key = 'clock'")[0]["value"]) + 1
        self.run("UPDATE meta SET value = ? WHERE key = 'clock'", str(tick))
        return (NOW + timedelta(seconds=tick)).strftime("%Y-%m-%dT%H:%M:%S")


class WorldDb:
    """One episode's world: an in-memory SQLite copy of the generated world, held by the harness.

    The copy may grow by at most ``quota_mb`` MiB (SQLite's ``max_page_count``, enforced by SQLite itself): the
    world lives in the harness's memory, so agent writes (``create_file`` of megabytes, many times) are capped like
    the workspace is; a write past it is an ``ApiError`` and is rolled back.

    Args:
        data: the world database's bytes (``sqlite3.Connection.serialize`` of the generated world).
        quota_mb: how much the world may grow.
    """

    def __init__(self, data: bytes, quota_mb: int = 64) -> None:
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.deserialize(data)
        self.conn.row_factory = sqlite3.Row
        self.lock = threading.Lock()
        self.quota_mb = quota_mb
        page = int(self.conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(self.conn.execute("PRAGMA page_count").fetchone()[0])
        self.conn.execute(f"PRAGMA max_page_count = {pages + -(-(quota_mb << 20) // page)}")

    def size(self) -> int:
        """The world database's size in bytes now."""
        with self.lock:
            return int(self.conn.execute("PRAGMA page_count").fetchone()[0]) * \
                int(self.conn.execute("PRAGMA page_size").fetchone()[0])

    def call(self, spec: ApiSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Check the arguments and the access token, then run the API in one transaction (rolled back on error)."""
        try:
            with self.lock, self.conn:
                return _call(spec, Db(self.conn), args, kwargs)
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc):
                raise
            raise ApiError(f"{spec.app}.{spec.name}: the world's storage is full (it may grow by {self.quota_mb} "
                           "MiB per episode); nothing was changed. Delete or shorten what is not needed.") from None

    def close(self) -> None:
        self.conn.close()


def paginate(rows: list[Any], page_index: int, page_limit: int) -> list[Any]:
    """One page of ``rows``; pages are 0-based and hold at most MAX_PAGE_LIMIT items."""
    if not isinstance(page_index, int) or page_index < 0:
        raise ApiError("page_index must be an integer >= 0.")
    if not isinstance(page_limit, int) or not 1 <= page_limit <= MAX_PAGE_LIMIT:
        raise ApiError(f"page_limit must be an integer between 1 and {MAX_PAGE_LIMIT}.")
    return rows[page_index * page_limit:(page_index + 1) * page_limit]


def check_date(value: str | None, name: str) -> str | None:
    """Validate a YYYY-MM-DD (or full ISO) date argument; returns it as YYYY-MM-DD."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).date().isoformat()
    except (TypeError, ValueError):
        raise ApiError(f"{name} must be a date like 2024-03-31, got {value!r}.") from None


def loads(text: str | None) -> Any:
    return json.loads(text) if text else []


def _call(spec: ApiSpec, db: Db, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    label = f"{spec.app}.{spec.name}"
    if args:
        raise ApiError(f"{label} takes keyword arguments only, e.g. {label}({spec.params[0].name}=...)."
                       if spec.params else f"{label} takes no arguments.")
    known = {p.name for p in spec.params}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ApiError(f"{label} got unexpected argument(s) {', '.join(unknown)}; "
                       f"valid: {', '.join(p.name for p in spec.params) or 'none'}.")
    missing = [p.name for p in spec.params if p.required and p.name not in kwargs]
    if missing:
        raise ApiError(f"{label} is missing required argument(s): {', '.join(missing)}.")
    if spec.auth:
        token = kwargs.pop("access_token")
        row = db.one("SELECT app FROM tokens WHERE token = ?", str(token))
        if row is None or row["app"] != spec.app:
            raise ApiError(f"Invalid or expired access token for {spec.app}; get one with "
                           f"apis.{spec.app}.login(username=..., password=...).")
    return spec.func(db, **kwargs)


def login_api(app: str) -> None:
    """Register the standard ``login``/``logout`` pair for ``app``."""

    def login(db: Db, username: str, password: str) -> dict[str, str]:
        """Log in as the main user (this app's username and password are in apis.supervisor.show_account_passwords())
        and get an access token for the app's other APIs.

        Args:
            username: the account's username (see apis.supervisor.show_account_passwords).
            password: the account's password.

        Returns:
            {"access_token": str, "token_type": "Bearer"}.
        """
        account = db.one("SELECT * FROM accounts WHERE app = ?", app)
        if account is None or account["username"] != username:
            raise ApiError(f"No {app} account with username {username!r}; the main user's {app} username and password "
                           "are in apis.supervisor.show_account_passwords().")
        if account["password"] != password:
            raise ApiError(f"Wrong password for {app} account {username!r}; use the password that "
                           f"apis.supervisor.show_account_passwords() lists for account_name {app!r} "
                           "(each app has its own).")
        count = len(db.all("SELECT token FROM tokens"))
        digest = hashlib.sha256(f"{app}:{password}:{count}".encode()).hexdigest()[:16]
        token = f"{app}-{digest}"
        db.run("INSERT INTO tokens (token, app) VALUES (?, ?)", token, app)
        return {"access_token": token, "token_type": "Bearer"}

    def logout(db: Db) -> dict[str, str]:
        """Log out of the app (all of its access tokens stop working).

        Returns:
            {"message": str}.
        """
        db.run("DELETE FROM tokens WHERE app = ?", app)
        return {"message": f"Logged out of {app}."}

    api(app, auth=False)(login)
    api(app)(logout)
