"""Context fitting: every prompt, of every role, is made to fit the model's window before it is sent.

The policy (deterministic: the same messages, window and counts give the same prompt):

1. The completion budget is the call's ``max_tokens`` (the call's params, else the model's own params, else the
   role's entry of `skilltransfer.agents.config.role_budgets`, which is then sent as ``max_tokens``; the
   ``small-model`` entries are capped at a quarter of the window, ``paper`` has none). A call with no budget sends
   no cap and reserves a quarter of the window, at most 1,024 tokens. The prompt may use
   ``window - budget - margin`` tokens, margin = 16 + window // 64 (144 at 8,192; 48 at 2,048).
2. If the prompt fits, it is sent unchanged. Otherwise the first of these variants that fits is sent:
   a. the system prompt and the task message (everything up to the first user message, or the first ``head``
      messages when the caller says so, e.g. with a demonstration before the task) stay verbatim; of the steps
      after it (a step = a model reply and the observation messages after it), the last ``keep_steps`` stay
      verbatim and older **observations** are elided to one line each, oldest first, in blocks of 4 steps (so the
      prompt prefix, and llama.cpp's reusable KV cache, changes only every few steps);
   b. then older **replies** are elided the same way;
   c. then the elided older steps are **dropped**, oldest first, in blocks of 4; the task message then ends with
      one line saying how many earlier steps were dropped;
   d. then the kept steps are elided too, oldest first, and then dropped, down to the last step alone;
   e. then retrieved **skills** are shortened in rounds, worst-ranked first within a round (`SkillBlock`): each
      round cuts every skill's body to the next of `BODY_CAPS` (32,000 characters, halving down to 250; a body
      already shorter is left as it is) with a marker line saying how much is shown and how to see the rest
      (``load_skill("name")`` where the agent has that action); the round after the last cap leaves the body out
      (the skill's card: heading, description, contracts, marker); the next cuts a description longer than 200
      characters to that; only the last round cuts a skill to its heading line. So no description is shortened
      while any skill still shows body text, and a skill is a bare name only when the prompt with its shortest card
      does not fit. Last, a skills section the caller names (``section``: progressive disclosure's header, cards and
      actions) is left out whole.
   A rendered (sub-)trajectory inside one message (the summarizer's and the inducer's prompts) is fitted the same
   way, step by step (blocks of 1), down to its last step, whose observation may finally be elided too.
3. If no variant fits, `ContextExceeded` is raised: the caller ends the (sub)task with status ``context_exceeded``.

Each call is logged as ``context_fit`` (window, budget, tokens before/after, elided and dropped steps, elided
replies, shortened and cut skills, how tokens were counted) in the call's record in the trajectory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from skilltransfer.agents.exceptions import ContextExceeded
from skilltransfer.llm.context import configured_params, context_window, count_prompt_tokens
from skilltransfer.protocols import Message, Trajectory

CONVERSATION_BLOCK = 4
"""Older steps of a conversation are elided in blocks of this many (KV-cache friendly)."""
_GIST_CHARS = 60


def margin_tokens(window: int) -> int:
    """Tokens kept free beyond the prompt and the completion budget (template/count slack)."""
    return 16 + window // 64


def _gist(text: str) -> str:
    """The first informative line of a text, cut to ``_GIST_CHARS`` characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if not (line.endswith(":") and len(line) <= 24) and not line.startswith("```"):
            return line if len(line) <= _GIST_CHARS else line[: _GIST_CHARS - 3] + "..."
    return ""


def _shorter(original: str, elided: str) -> str:
    return elided if len(elided) < len(original) else original


def elide_observation(text: str) -> str:
    """An observation as one line (the original when that is not shorter)."""
    lines = text.count("\n") + 1
    return _shorter(text, f"[elided observation: {lines} lines, {len(text):,} chars, began {_gist(text)!r}]")


def elide_reply(text: str) -> str:
    """A model reply (thought and code) as one line (the original when that is not shorter)."""
    code = text.split("```", 2)
    first = _gist(code[1].partition("\n")[2]) if len(code) > 1 else _gist(text)
    return _shorter(text, f"[elided reply, began {first!r}]")


def cut_skill(text: str) -> str:
    """A rendered skill reduced to its heading line."""
    head = text.strip().splitlines()[0] if text.strip() else ""
    return _shorter(text, f"{head} [cut to fit the context]\n")


BODY_CAPS = (32_000, 16_000, 8_000, 4_000, 2_000, 1_000, 500, 250)
"""The body lengths (characters) a skill is cut to, one per fitting round (see the module docstring)."""
CARD_LEVEL = len(BODY_CAPS) + 1
"""The level at which a skill is its card (its body left out)."""
SHORT_DESCRIPTION = 200
"""At the level after the card, a description longer than this is cut to it (characters)."""
SKILL_LEVELS = CARD_LEVEL + 2
"""Shortening levels of a skill beyond its full text: one per cap, the card (no body), the card with its description
cut to `SHORT_DESCRIPTION` characters, the heading line."""


@dataclass(frozen=True)
class SkillBlock:
    """A skill as it stands in a prompt, with the parts fitting may shorten (a plain string is a block whose only
    shorter form is its heading line).

    ``text`` is the exact rendering (fitting finds it in the messages); ``card`` the part kept when the body is left
    out (heading, description, contracts, notes); ``before`` + ``body`` + ``after`` the rest (``before``/``after``
    wrap the body, e.g. a code fence); ``more`` says where the whole body can be seen (``'load_skill("x") shows
    it all'``; "" where the agent has no such action); in it ``{end}`` stands for the character where the shown
    part ends, counted from ``offset`` (a page of a longer text starts there).
    """

    text: str
    card: str = ""
    body: str = ""
    before: str = ""
    after: str = ""
    more: str = ""
    offset: int = 0
    description: str = ""
    """The description as ``card`` holds it (cut to `SHORT_DESCRIPTION` characters at the level after the card)."""

    def forms(self) -> list[str]:
        """The text at each level 0..`SKILL_LEVELS` (full, each cap, card, card with a short description, heading
        line), never growing."""
        out = [self.text]
        for cap in BODY_CAPS:
            out.append(self._cut(cap) if self.body and len(self.body) > cap else out[-1])
        out.append(self._left_out() if self.body else out[-1])
        out.append(self._short(out[-1]))
        out.append(cut_skill(self.text))
        for level in range(1, len(out)):
            out[level] = _shorter(out[level - 1], out[level])
        return out

    def _note(self, text: str, shown: int) -> str:
        more = self.more.replace("{end}", str(self.offset + shown))
        return f"[{text}{'; ' + more if more else ''}]\n"

    def _cut(self, cap: int) -> str:
        head = self.body[:cap]
        line_end = head.rfind("\n")
        if line_end >= cap // 2:  # end at a line break when one is near
            head = head[:line_end]
        note = self._note(f"text cut to fit the context: {len(head):,} of {len(self.body):,} characters shown",
                          len(head))
        return f"{self.card}{self.before}{head.rstrip()}\n{self.after}{note}"

    def _short(self, text: str) -> str:
        """``text`` with the description cut to `SHORT_DESCRIPTION` characters (unchanged when it is not longer)."""
        if len(self.description) <= SHORT_DESCRIPTION or self.description not in text:
            return text
        cut = self.description[: SHORT_DESCRIPTION - 1].rstrip() + "…"
        return text.replace(self.description, f"{cut} [description cut to fit the context]", 1)

    def _left_out(self) -> str:
        return f"{self.card}{self._note(f'text ({len(self.body):,} characters) left out to fit the context', 0)}"


def as_block(skill: str | SkillBlock) -> SkillBlock:
    """A skill of the prompt as a `SkillBlock` (a plain string: its text alone)."""
    return skill if isinstance(skill, SkillBlock) else SkillBlock(skill)


def dropped_note(n: int) -> str:
    """The line that stands for ``n`` dropped steps."""
    return f"[{n} earlier step{'s' if n != 1 else ''} dropped to fit the context]"


@dataclass
class ContextFit:
    """What fitting did to one call's prompt (logged as ``context_fit``)."""

    window: int
    budget: int
    """Completion tokens reserved (the call's max_tokens)."""
    tokens_before: int
    tokens_after: int
    elided_steps: int = 0
    """Steps whose observation was elided (dropped steps included)."""
    elided_replies: int = 0
    dropped_steps: int = 0
    """Oldest steps left out altogether."""
    cut_skills: int = 0
    """Skills cut to their heading line (or left out with the skills section)."""
    dropped_skills_section: bool = False
    """The skills section was left out whole (the last resort; progressive disclosure only)."""
    shortened_skills: int = 0
    """Skills whose body was shortened or left out (and a long description cut), their description kept."""
    counted_by: str = "model"
    """How tokens were counted: "server" (the model server's tokenizer), "tokenizer" (a local tokenizer.json),
    "estimate" (`skilltransfer.llm.context.estimate_tokens`), "approx" (a test double's chars / 4)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def changed(self) -> bool:
        return bool(self.elided_steps or self.elided_replies or self.dropped_steps or self.cut_skills
                    or self.shortened_skills or self.dropped_skills_section)


Variant = tuple[int, int, int, int]
"""(steps dropped, steps with elided observations, steps with elided replies, skill shortenings); steps count from
the oldest; the skill shortenings are taken one skill and level at a time (`skill_levels`)."""


def skill_levels(shortenings: int, n_skills: int) -> list[int]:
    """Each skill's level (best-ranked first) after ``shortenings`` steps of the ladder: rounds over all skills,
    worst-ranked first within a round, each raising a skill one level (0: full ... `SKILL_LEVELS`: heading line)."""
    if not n_skills:
        return []
    rounds, rest = divmod(shortenings, n_skills)
    return [rounds + (1 if index >= n_skills - rest else 0) for index in range(n_skills)]


def _blocked(limit: int, block: int) -> list[int]:
    return list(range(block, limit, block)) + ([limit] if limit > 0 else [])


def variants(n_steps: int, keep_steps: int, n_skills: int, block: int, *,
             elide_last_observation: bool = False, section: bool = False) -> list[Variant]:
    """The fitting ladder, least changed first (see the module docstring).

    Args:
        n_steps: steps after the verbatim head.
        keep_steps: the last steps kept verbatim while older ones are elided and dropped.
        n_skills: retrieved skills that may be shortened (`SKILL_LEVELS` steps each).
        block: older steps are elided and dropped this many at a time.
        elide_last_observation: finally elide the last step's observation too (a trajectory to summarise or learn
            from; never the executor's own conversation, which must see its last observation).
        section: finally leave the skills section out (one more step).
    """
    older = max(0, n_steps - keep_steps)
    last = max(0, n_steps - 1)
    ladder: list[Variant] = [(0, 0, 0, 0)]
    ladder += [(0, e, 0, 0) for e in _blocked(older, block)]
    ladder += [(0, older, a, 0) for a in _blocked(older, block)]
    ladder += [(d, older, older, 0) for d in _blocked(older, block)]
    ladder += [(older, e, e, 0) for e in range(older + 1, last + 1)]
    ladder += [(d, last, last, 0) for d in range(older + 1, last + 1)]
    if elide_last_observation and n_steps:
        ladder.append((last, n_steps, last, 0))
    final = ladder[-1]
    ladder += [(*final[:3], c) for c in range(1, n_skills * SKILL_LEVELS + 1 + int(section))]
    return ladder


def _split_conversation(messages: Sequence[Message], head: int | None = None) -> tuple[int, list[list[int]]]:
    """(length of the verbatim head, message indices of each step); the head is everything up to the first user
    message unless ``head`` says how many leading messages it holds (e.g. a demonstration before the task)."""
    if head is None:
        head = next((i + 1 for i, m in enumerate(messages) if m.get("role") == "user"), len(messages))
    steps: list[list[int]] = []
    for index in range(head, len(messages)):
        if messages[index].get("role") == "assistant" or not steps:
            steps.append([index])
        else:
            steps[-1].append(index)
    return head, steps


def _apply_skills(messages: list[Message], skills: Sequence[SkillBlock], shortenings: int,
                  section: str = "") -> list[Message]:
    if not shortenings:
        return messages
    levels = skill_levels(min(shortenings, len(skills) * SKILL_LEVELS), len(skills))
    changes = [(block.text, block.forms()[level]) for block, level in zip(skills, levels, strict=True) if level]
    drop = section if section and shortenings > len(skills) * SKILL_LEVELS else ""
    for text, shorter in changes:
        drop = drop.replace(text, shorter)
    out = []
    for message in messages:
        content = str(message.get("content") or "")
        for text, shorter in changes:
            if text in content:
                content = content.replace(text, shorter)
        if drop:
            content = content.replace(drop, "")
        out.append({**message, "content": content})
    return out


def _skill_counts(skills: Sequence[SkillBlock], shortenings: int) -> tuple[int, int, bool]:
    """(skills shortened with their description kept, skills cut to their heading line, section left out) at
    ``shortenings``."""
    if shortenings > len(skills) * SKILL_LEVELS:
        return 0, len(skills), True
    shortened = cut = 0
    for block, level in zip(skills, skill_levels(shortenings, len(skills)), strict=True):
        if not level:
            continue
        forms = block.forms()
        if forms[level] == forms[-1] and forms[-1] != forms[0]:
            cut += 1
        elif forms[level] != forms[0]:
            shortened += 1
    return shortened, cut, False


def _conversation_variant(messages: Sequence[Message], variant: Variant, skills: Sequence[SkillBlock],
                          head: int | None = None, section: str = "") -> list[Message]:
    dropped, elided_obs, elided_replies, cut = variant
    head, steps = _split_conversation(messages, head)
    out = [dict(m) for m in messages]
    for number, indices in enumerate(steps):
        for index in indices:
            content = str(out[index].get("content") or "")
            if out[index].get("role") == "assistant":
                if number < elided_replies:
                    out[index]["content"] = elide_reply(content)
            elif number < elided_obs:
                out[index]["content"] = elide_observation(content)
    if dropped:
        gone = {index for indices in steps[:dropped] for index in indices}
        out[head - 1]["content"] = f"{out[head - 1].get('content') or ''}\n\n{dropped_note(dropped)}"
        out = [m for index, m in enumerate(out) if index not in gone]
    return _apply_skills(out, skills, cut, section)


@dataclass
class ContextFitter:
    """Applies the module's policy for one agent (see the module docstring).

    Args:
        role_max_tokens: completion budget per role, sent as ``max_tokens`` unless the call or the model sets it.
        keep_steps: steps kept verbatim at the end of a conversation.
        cap_to_window: cap a role's budget at a quarter of the model's window.
    """

    role_max_tokens: dict[str, int]
    keep_steps: int = 4
    cap_to_window: bool = True
    """Cap each role's budget at a quarter of the window (the defaults are; budgets a user set are not)."""

    def params(self, model: Any, role: str, params: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
        """The call's params (with the role's ``max_tokens`` added when nobody set one) and its completion budget."""
        for source in (params, configured_params(model)):
            for key in ("max_tokens", "max_completion_tokens"):
                if isinstance(source.get(key), int):
                    return params, int(source[key])
        budget = self.role_max_tokens.get(role)
        if budget is None:
            return params, None
        window = context_window(model)
        if self.cap_to_window and window is not None:  # a small window keeps room for the prompt
            budget = min(budget, max(64, window // 4))
        return {**params, "max_tokens": budget}, budget

    def fit(self, model: Any, messages: list[Message], budget: int | None, *, trajectory: Trajectory | None = None,
            skills: Sequence[str | SkillBlock] = (), head: int | None = None,
            section: str = "") -> tuple[list[Message], ContextFit | None]:
        """The messages to send and what was done (None when the model's window is unknown).

        ``skills``: the skills in the prompt, best-ranked first (a string: its rendering, shortened only to its
        heading line). ``head``: how many leading messages stay verbatim (default: up to the first user message).
        ``section``: a skills section (as rendered, holding ``skills``) that may be left out as the last resort.

        Raises:
            ContextExceeded: no variant fits (``fit`` holds the log of the attempt).
        """
        window = context_window(model)
        if window is None:
            return messages, None
        reserved = budget if budget is not None else min(1024, window // 4)
        available = window - reserved - margin_tokens(window)
        before, counted_by = count_prompt_tokens(model, messages)
        fit = ContextFit(window, reserved, before, before, counted_by=counted_by)
        if before <= available:
            return messages, fit
        present = [block for block in map(as_block, skills)
                   if block.text and any(block.text in str(m.get("content") or "") for m in messages)]
        if section and not any(section in str(m.get("content") or "") for m in messages):
            section = ""
        build, ladder = self._ladder(messages, trajectory, present, head, section)

        def size(index: int) -> int:
            return count_prompt_tokens(model, build(ladder[index]))[0]

        found = _first_fitting(len(ladder), size, available)
        if found is None:
            fit.tokens_after = size(len(ladder) - 1) if len(ladder) > 1 else before
            fit.dropped_steps, fit.elided_steps, fit.elided_replies, _ = ladder[-1]
            fit.shortened_skills, fit.cut_skills, fit.dropped_skills_section = _skill_counts(present, ladder[-1][3])
            raise ContextExceeded(f"the prompt needs {fit.tokens_after:,} tokens even with everything elidable elided; "
                                  f"the window leaves {available:,} (window {window:,} - completion {reserved:,} - "
                                  f"margin {margin_tokens(window)})", fit=fit.to_dict())
        fitted = build(ladder[found])
        fit.tokens_after = count_prompt_tokens(model, fitted)[0]
        fit.dropped_steps, fit.elided_steps, fit.elided_replies, _ = ladder[found]
        fit.shortened_skills, fit.cut_skills, fit.dropped_skills_section = _skill_counts(present, ladder[found][3])
        return fitted, fit

    def _ladder(self, messages: list[Message], trajectory: Trajectory | None, present: Sequence[SkillBlock],
                head: int | None = None,
                section: str = "") -> tuple[Callable[[Variant], list[Message]], list[Variant]]:
        full = trajectory.render() if trajectory is not None else None
        if trajectory is not None and full and any(full in str(m.get("content") or "") for m in messages):
            def build_trajectory(variant: Variant) -> list[Message]:
                text = trajectory.render(variant[1], variant[2], dropped=variant[0])
                out = [{**m, "content": str(m.get("content") or "").replace(full, text)} for m in messages]
                return _apply_skills(out, present, variant[3], section)

            return build_trajectory, variants(trajectory.n_steps, 1, len(present), 1, elide_last_observation=True,
                                              section=bool(section))
        _, steps = _split_conversation(messages, head)
        return (lambda v: _conversation_variant(messages, v, present, head, section),
                variants(len(steps), self.keep_steps, len(present), CONVERSATION_BLOCK, section=bool(section)))


def _first_fitting(n: int, size: Callable[[int], int], available: int) -> int | None:
    """The first ladder index whose prompt fits (binary search; sizes do not grow along the ladder)."""
    if n <= 1 or size(n - 1) > available:
        return None
    low, high = 1, n - 1
    while low < high:
        middle = (low + high) // 2
        if size(middle) <= available:
            high = middle
        else:
            low = middle + 1
    return low
