"""Reasoning kept apart from the answer: what a reasoning model thinks is split off before anything parses its reply.

Three ways an OpenAI-compatible endpoint returns a reasoning model's thinking:

- in ``message.reasoning`` (vLLM with ``--reasoning-parser``, recent versions) or ``message.reasoning_content``
  (older vLLM, DeepSeek's API), the answer alone in ``content``;
- inside ``content`` between ``<think>`` and ``</think>`` (vLLM without a reasoning parser, llama.cpp without
  ``--reasoning-format``); a reply cut by the length limit may end inside an unclosed ``<think>``, and a chat
  template that opens the block in the prompt (DeepSeek-R1's) leaves only the closing ``</think>`` in the reply;
- not at all (OpenAI's reasoning models): only its size, ``usage.completion_tokens_details.reasoning_tokens``.

`split_reply` returns the answer (what the agent parses) and the reasoning (kept in the run log beside the reply,
never sent back to the model nor used by any role).
"""

from __future__ import annotations

from typing import Any

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
REASONING_FIELDS = ("reasoning", "reasoning_content")
"""Message fields that carry reasoning, in the order they are read."""


def split_think(content: str) -> tuple[str, str]:
    """(answer, reasoning) of a reply that may hold its reasoning between ``<think>`` and ``</think>``.

    A leading ``<think>`` block (after whitespace) is the reasoning; an unclosed one (a reply cut by length) is all
    reasoning and no answer; a ``</think>`` with no ``<think>`` before it (the template opened the block) ends the
    reasoning. Anything else is all answer.
    """
    stripped = content.lstrip()
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN):]
        end = body.find(THINK_CLOSE)
        if end < 0:
            return "", body.strip()
        return body[end + len(THINK_CLOSE):].lstrip(), body[:end].strip()
    end = content.find(THINK_CLOSE)
    if end >= 0 and THINK_OPEN not in content[:end]:
        return content[end + len(THINK_CLOSE):].lstrip(), content[:end].strip()
    return content, ""


def message_reasoning(message: dict[str, Any]) -> str:
    """The reasoning field of a chat message (``reasoning``, else ``reasoning_content``); "" when it has none."""
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def split_reply(message: dict[str, Any]) -> tuple[str, str]:
    """(answer, reasoning) of a chat message: its reasoning field, and any ``<think>`` block left in its content."""
    content = message.get("content")
    answer, inline = split_think(content if isinstance(content, str) else "")
    field = message_reasoning(message)
    reasoning = "\n\n".join(part for part in (field, inline) if part)
    return answer, reasoning
