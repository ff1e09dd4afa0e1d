"""The model layer's test doubles, apart from the client: nothing else in the package imports them (a test holds it);
a user gets one only by asking for it by name (``--model scripted:<file.jsonl>``, or running the mock server).

- `ScriptedModel` (`scripted.py`): replays a list of replies, a reply function, or a script file (`script.py`:
  replies in order, or match/reply rules), registered as the model ``scripted``: the model registry names it by a
  ``module:Class`` string, loaded only when that name is asked for.
- `FaultyModel` (`faults.py`): seeded fault injection around any chat model.
- `MockServer` (`mock_server.py`): an OpenAI-compatible HTTP server on 127.0.0.1, to exercise the real client;
  ``python -m skilltransfer.llm.testing.mock_server --port 8011 --roles fail_rate=0.2`` runs one standalone.
- `RolePlay` (`roleplay.py`): the mock server's ``--roles`` replies, every agent role in its reply format.
"""

from __future__ import annotations

from skilltransfer.llm.testing.scripted import ScriptedModel, ScriptExhausted, ScriptFn

__all__ = ["ScriptExhausted", "ScriptFn", "ScriptedModel"]
