"""The ``api_docs`` app (documentation the agent can query) and the compact overview returned by ``Episode.docs()``."""

from __future__ import annotations

from typing import Any

from skilltransfer.envs.apps import (  # noqa: F401 - importing registers the apps
    apps_calendar,
    apps_comm,
    apps_files,
    apps_money,
    apps_people,
)
from skilltransfer.envs.apps.api import REGISTRY, ApiError, AppInfo, Db, api, register_app

register_app("api_docs", "Documentation of every app and API (no login needed).")

APP_ORDER = ("supervisor", "email", "contacts", "phone", "calendar", "todo", "file_system", "notes", "payments",
             "shopping", "api_docs")
for _name in APP_ORDER:  # a stable, readable order for the docs and the apis object
    REGISTRY[_name] = REGISTRY.pop(_name)


def _app(app_name: str) -> AppInfo:
    if app_name not in REGISTRY:
        raise ApiError(f"No app named {app_name!r}; apps: {', '.join(REGISTRY)}.")
    return REGISTRY[app_name]


@api("api_docs", auth=False)
def show_app_descriptions(db: Db) -> list[dict[str, str]]:
    """List all apps with a one-line description.

    Returns:
        list of {"name", "description"}.
    """
    return [{"name": name, "description": info.description} for name, info in REGISTRY.items()]


@api("api_docs", auth=False)
def show_api_descriptions(db: Db, app_name: str) -> list[dict[str, str]]:
    """List the APIs of one app with a one-line description.

    Args:
        app_name: the app, e.g. "email".

    Returns:
        list of {"name", "description"}.
    """
    return [{"name": name, "description": spec.description} for name, spec in _app(app_name).apis.items()]


@api("api_docs", auth=False)
def show_api_doc(db: Db, app_name: str, api_name: str) -> dict[str, Any]:
    """Show the full documentation of one API: parameters (type, required, default) and what it returns.

    Args:
        app_name: the app, e.g. "email".
        api_name: the API, e.g. "send_email".

    Returns:
        {"app_name", "api_name", "description", "parameters": list of {"name", "type", "required", "default",
        "description"}, "returns"}.
    """
    spec = _app(app_name).apis.get(api_name)
    if spec is None:
        raise ApiError(f"App {app_name!r} has no API {api_name!r}; see show_api_descriptions(app_name=...).")
    return spec.doc()


def api_count() -> int:
    """How many APIs the world offers (api_docs included)."""
    return sum(len(info.apis) for info in REGISTRY.values())


def overview() -> str:
    """The compact docs text for ``Episode.docs()``: how to use the world, then each app and its APIs."""
    lines = [
        "You act for the main user (the supervisor) in a world of apps, through Python code.",
        "Call APIs as apis.<app>.<api>(keyword=value, ...); they return JSON-like values, so print() what you need.",
        "Get credentials with apis.supervisor.show_account_passwords(); each app (except supervisor and api_docs)",
        "needs access_token=apis.<app>.login(username=..., password=...)['access_token'] in every other call.",
        "The username is the user's email (the phone number for the phone app): see apis.supervisor.show_profile().",
        "List/search APIs are paginated: page_index (0-based) and page_limit (at most 20); loop until a page is "
        "empty.",
        "Full docs: apis.api_docs.show_api_doc(app_name=..., api_name=...). Dates are YYYY-MM-DD, times "
        "YYYY-MM-DDTHH:MM:SS.",
        "When done call complete_task() or, if the task asks a question, complete_task(answer=<the answer>).",
        "",
    ]
    for name, info in REGISTRY.items():
        lines.append(f"## {name}: {info.description}")
        for api_name, spec in info.apis.items():
            args = ", ".join(p.name if p.required else f"{p.name}={p.default!r}" for p in spec.params
                             if p.name != "access_token")
            lines.append(f"- {api_name}({args}): {spec.description}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
