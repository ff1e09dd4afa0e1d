"""Reading run folders of the old log format (format_version 1): their ``config.json`` recorded the env and the model
as strings, in one format written by ``run`` and another written by ``grid``. `upgrade_v1_config` turns such a
config into the current shape (typed records), keeping ``format_version: 1`` so the run is shown and reported but
never resumed (its settings cannot be compared exactly). Results and trajectories kept their schema.

- ``run``: env ``"<spec> <JSON of seed and --env-arg values>"``; model ``"<name>[:<model id>] [key=value ...]
  [context_window=N]"``; the order seed, task limit and split were not recorded (the task ids were).
- ``grid``: env ``{"label", "env", "args", "split", "order_seed", "task_limit"}`` and model ``{"label", "name",
  "model", "params", "extra_body"}`` as JSON strings.
"""

from __future__ import annotations

from typing import Any

from skilltransfer import untrusted


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:  # a string inside an old config.json: depth-capped like the file
        value = untrusted.parse_json(text, "config.json")
    except untrusted.UntrustedFileError:
        return None
    return value if isinstance(value, dict) else None


def _env(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(env record, other stream settings) of a v1 env string."""
    text = text.strip()
    record = _json_object(text)
    if record is not None:  # grid
        env = {"env": record.get("env"), "label": record.get("label"), "args": record.get("args") or {},
               "split": record.get("split"), "stream": record.get("stream")}
        return env, {"order_seed": record.get("order_seed") or 0, "limits": {"task_limit": record.get("task_limit")}}
    if not text:
        return {}, {}
    spec, _, extra = text.partition(" ")  # run: "<spec> <JSON>"
    args = _json_object(extra.strip()) or {}
    seed = args.pop("seed", None)
    return {"env": spec, "args": args, "seed": seed if isinstance(seed, int) else None}, {}


def _model(text: str) -> dict[str, Any]:
    """The model record of a v1 model string."""
    text = text.strip()
    record = _json_object(text)
    if record is not None:  # grid
        return {key: record.get(key) for key in ("label", "name", "model") if record.get(key) is not None} | {
            "params": record.get("params") or {}, "extra_body": record.get("extra_body") or {}}
    if not text:
        return {}
    head, *settings = text.split()  # run: "name[:model id] key=value ... context_window=N"
    name, _, model = head.partition(":")
    out: dict[str, Any] = {"name": name, "params": {}}
    if model:
        out["model"] = model
    for item in settings:
        key, _, raw = item.partition("=")
        try:  # an old run folder is anyone's: no aliases, depth-capped; what is not YAML stays text
            value = untrusted.parse_yaml(raw, "config.json", max_depth=16) if raw else None
        except untrusted.UntrustedFileError:
            value = raw
        if key == "context_window":
            out["context_window"] = value
        else:
            out["params"][key] = value
    return out


def upgrade_v1_config(data: dict[str, Any]) -> dict[str, Any]:
    """A format_version 1 ``config.json`` in the current shape (``format_version`` stays 1).

    Args:
        data: the parsed file.
    """
    old = data.get("config")
    if not isinstance(old, dict):
        return data
    env, settings = _env(str(old.get("env") or ""))
    config = {key: old[key] for key in ("run", "runs_dir", "condition", "induction_variant", "library",
                                        "library_filter") if key in old}
    config.update(settings)
    config.update({"env": env, "model": _model(str(old.get("model") or "")), "embedder": old.get("embedder") or "",
                   "agent": old.get("agent") or {}, "memory": old.get("memory") or {}})
    return {**data, "config": config}
