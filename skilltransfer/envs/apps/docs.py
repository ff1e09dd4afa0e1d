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


EXAMPLE = """## Example (another task): "What is the title of my note about the dentist?"
Thought: I need the notes app's credentials, then an access token for its APIs. I print what the API returns.
```python
accounts = {a["account_name"]: a for a in apis.supervisor.show_account_passwords()}
account = accounts["notes"]
token = apis.notes.login(username=account["username"], password=account["password"])["access_token"]
notes = apis.notes.search_notes(access_token=token, query="dentist")
print(notes)
```
Observation: [{'note_id': 7, 'title': 'Call the dentist', 'created_at': '2024-05-02T09:15:00', 'updated_at': None}]
Thought: The note about the dentist is titled "Call the dentist", so I submit that text.
```python
complete_task(answer="Call the dentist")
```
Observation: Task marked as complete.
"""
"""The worked example at the end of the docs (the format of ``agents.harness.worked_example``): credentials ->
login -> API call -> complete_task, on a task type that no template asks."""

PLAN_EXAMPLE = """## Example plan (another task): "What is the title of my note about the dentist?"
SUBTASK: Get the notes account's username and password from apis.supervisor.show_account_passwords(), log in to \
the notes app with them and keep the access token.
SUBTASK: With that access token, search my notes for "dentist" and print the matching note's title.
SUBTASK: call complete_task(answer=<the title printed>)
"""
"""The planner's counterpart of `EXAMPLE`: the subtasks for the same task
(``skilltransfer.agents.harness.worked_example.split_plan_example``)."""

_PREAMBLE = [
    "You act for the main user (the supervisor) in a world of apps, through Python code.",
    "Call APIs as apis.<app>.<api>(keyword=value, ...); `apis` is already defined (do not import it). APIs return "
    "JSON-like values, so print() what you need.",
    "Get credentials with apis.supervisor.show_account_passwords(); each app (except supervisor and api_docs)",
    "needs access_token=apis.<app>.login(username=..., password=...)['access_token'] in every other call.",
    "Log in with the username and password that show_account_passwords() lists for that app; never guess them.",
    "List/search APIs are paginated: page_index (0-based) and page_limit (at most 20); loop until a page is empty.",
    "Full docs: apis.api_docs.show_api_doc(app_name=..., api_name=...). Dates are YYYY-MM-DD, times "
    "YYYY-MM-DDTHH:MM:SS.",
    "When done call complete_task() or, if the task asks a question, complete_task(answer=<the answer>).",
    "",
]


def _signature(spec: Any, *, with_token: bool) -> str:
    args = ", ".join(p.name if p.required else f"{p.name}={p.default!r}" for p in spec.params
                     if with_token or p.name != "access_token")
    return f"{spec.name}({args})"


def overview(focus: tuple[str, ...] | None = None, *, example: bool = False) -> str:
    """The docs text for ``Episode.docs()``: how to use the world, then the apps and their APIs.

    Args:
        focus: the task's apps. When given, those apps (and ``supervisor``) come first with every API's full
            signature (``access_token`` included) and what it returns; every other app is one line naming its APIs
            (their docs stay one ``api_docs`` call away). None lists every app's APIs in one line each.
        example: append the worked example of API use (`EXAMPLE`) and its plan (`PLAN_EXAMPLE`).
    """
    lines = list(_PREAMBLE)
    first = [name for name in REGISTRY if focus is not None and (name in focus or name == "supervisor")]
    for name in first:
        info = REGISTRY[name]
        lines.append(f"## {name}: {info.description}")
        for spec in info.apis.values():
            lines.append(f"- {_signature(spec, with_token=True)}: {spec.description} Returns {spec.returns}")
        lines.append("")
    if focus is not None:
        lines.append("## Other apps (see apis.api_docs.show_api_doc(app_name=..., api_name=...) for their APIs)")
    for name, info in REGISTRY.items():
        if name in first:
            continue
        if focus is not None:
            lines.append(f"- {name}: {info.description} APIs: {', '.join(info.apis)}.")
            continue
        lines.append(f"## {name}: {info.description}")
        for spec in info.apis.values():
            lines.append(f"- {_signature(spec, with_token=False)}: {spec.description}")
        lines.append("")
    if example:
        lines += ["", EXAMPLE, PLAN_EXAMPLE]
    return "\n".join(lines).rstrip() + "\n"
