"""Progressive disclosure of a skill library (the Agent Skills format's model, agentskills.io): what the agent sees of
each skill, and when.

A skill's **card** (name, description, contracts, and how to see more) is always shown; its **instructions** (the
body) when the agent loads it; its **files** (``references/``, ``scripts/``, ...) when the agent reads one. A stream
reading an external library (a SKILL.md folder or a ``.jsonl``) discloses this way (``agent.skill_disclosure:
progressive``); a run's own induced memory, and another run's memory given as a library, are shown in full as the
paper's agent saw them (``full``; `full_block`). Beside the agent's own growing memory (``library_use: beside``)
the library's retrieved skills are disclosed under their own header and the induced ones are shown in full, as the
paper shows them, in the section before it.

The header says whose skills these are (`DisclosureOrigin`, each its own prompt,
`skilltransfer.agents.prompts.DISCLOSURE_SECTIONS`): a library's ("written for many tasks, not learned from
yours"), a library's beside the agent's own skills ("not learned on your earlier tasks"), or the agent's own memory
shown progressively (``agent.skill_disclosure: progressive`` on a memory condition: "learned on earlier tasks").

Under ``progressive``, per skill execution mode (`skilltransfer.agents.skill_actions`):

- ``inline``: a skill whose body is at most ``agent.inline_body_chars`` characters is shown whole (card and body:
  a short skill as its author wrote it); a longer one as its card. ``load_skill`` and ``read_skill_file`` are offered.
- ``agent-skill``: every skill as its card; ``load_skill`` and ``read_skill_file``.
- ``subagent`` / ``hybrid``: every skill as its card; ``run_skill`` gives a helper agent the instructions (their first
  page) and the file listing, and that helper is offered ``read_skill_file`` for the skill's files. The caller reads
  nothing of the skill (the point of a subagent).

Bounds: ``load_skill`` shows the first ``agent.skill_page_chars`` characters of the instructions, and
``read_skill_file(name, path, start)`` a page of that many characters of a file (``SKILL.md``: the instructions) from
``start``, each page ending with the call that shows the next; a folder's path lists it (one level, folders with
their file counts). Cards never list files (a count). Names and descriptions are shown on one line each (collapsed
whitespace, at most `NAME_CHARS` / `DESCRIPTION_CHARS` characters), contracts within
`skilltransfer.skill.CONTRACT_CHARS` each with any line that would open a heading or a fence escaped, so no text of a
card can start a heading, a section or a code block of its own: it stays text inside its card. Instructions and files
(a page, or a short body shown inline) sit in a code fence longer than any run of backticks in them
(`skilltransfer.util.text.fence_for`), which no line of theirs can close: their own headings and fences stay inside
it, whether or not the model's window is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from skilltransfer.agents.context import SkillBlock
from skilltransfer.skill import INSTRUCTION_FILE, Skill
from skilltransfer.util.text import fence_for

DESCRIPTION_CHARS = 1024
"""A card shows at most this many characters of a description (the Agent Skills spec's limit)."""
NAME_CHARS = 100
"""A card's heading shows at most this many characters of a skill's name."""
DisclosureOrigin = Literal["library", "beside", "memory"]
"""Whose skills are disclosed: a library (the agent's only skills), a library beside the agent's own induced skills,
or the agent's own memory."""


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace (line breaks included) collapsed to single spaces, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _chars(n: int) -> str:
    return f"{n:,} character{'s' if n != 1 else ''}"


def _files(n: int) -> str:
    return f"{n} file{'s' if n != 1 else ''}"


def call_text(action: str, *args: object) -> str:
    """An action call as the agent writes it, with literal arguments (``load_skill("x")``)."""
    return f"{action}({', '.join(json.dumps(a, ensure_ascii=False) for a in args)})"


def _heading(skill: Skill) -> str:
    kind = "Code skill" if skill.format == "code" else "Skill"
    return f"### {kind}: {one_line(skill.name, NAME_CHARS)}\n"


def _contracts(skill: Skill) -> str:
    """The skill's ``Input:`` / ``Output:`` lines (`Skill.contracts` without its resource list)."""
    return skill.model_copy(update={"resources": {}}).contracts()


def full_block(skill: Skill) -> SkillBlock:
    """A skill shown in full (`Skill.render`, the paper's inline skills section), with its parts for fitting."""
    body = skill.body.strip()
    if skill.format == "code":
        call = f"Callable as `{skill.code.signature}`.\n" if skill.code else ""
        return SkillBlock(skill.render(), card=skill.render_card(), body=body, before=f"{call}```python\n",
                          after="```\n", more="the whole function is defined in your interpreter",
                          description=skill.description)
    return SkillBlock(skill.render(), card=skill.render_card(), body=body, description=skill.description)


@dataclass(frozen=True)
class Page:
    """A page of a text: its characters from ``start`` and the line that says what is left."""

    text: str
    note: str


@dataclass(frozen=True)
class Disclosure:
    """How an agent discloses the library it reads (see the module docstring).

    Attributes:
        library: the library's name as the header shows it (its folder or file name).
        inline_body_chars: under ``inline``, bodies of at most this many characters are shown whole.
        page_chars: the most characters one ``load_skill`` or ``read_skill_file`` shows.
        origin: whose skills these are (the header's prompt and wording).
    """

    library: str
    inline_body_chars: int = 4000
    page_chars: int = 8000
    origin: DisclosureOrigin = "library"

    @property
    def holder(self) -> str:
        """What holds the skills, as the header's first sentence names it ("The library", "Your memory")."""
        return "Your memory" if self.origin == "memory" else "The library"

    # ------------------------------------------------------------------ what the listing shows
    def card(self, skill: Skill, how: str) -> SkillBlock:
        """A skill's card: heading, description, contracts and one line saying how to see or use the rest.

        ``how``: ``load`` (``load_skill``) or ``run`` (``run_skill``)."""
        name, size = skill.name, len(skill.body.strip())
        if how == "run":
            line = f"Use it with {call_text('run_skill', name, {'key': 'value'})}: a helper agent follows its " \
                   f"instructions ({_chars(size)}) and returns the output"
        else:
            line = f"Instructions: {_chars(size)}, not shown; {call_text('load_skill', name)} shows them"
        files = len(skill.resources)
        line += f". Files: {files}.\n" if files else ".\n"
        description = one_line(skill.description, DESCRIPTION_CHARS)
        return SkillBlock(f"{_heading(skill)}{description}\n{_contracts(skill)}{line}", description=description)

    def inline(self, skill: Skill) -> SkillBlock:
        """A skill within ``inline_body_chars`` shown whole (card and body, the body in a fence no line of it can
        close), else its card with ``load_skill``."""
        body = skill.body.strip()
        if len(body) > self.inline_body_chars:
            return self.card(skill, "load")
        files = len(skill.resources)
        note = f"Files: {files}; {call_text('read_skill_file', skill.name, '.')} lists them.\n" if files else ""
        description = one_line(skill.description, DESCRIPTION_CHARS)
        card = f"{_heading(skill)}{description}\n{_contracts(skill)}{note}"
        closing = fence_for(body)
        fence = closing + ("python" if skill.format == "code" else "")
        if skill.format == "code":
            call = f"Callable as `{skill.code.signature}`.\n" if skill.code else ""
            return SkillBlock(f"{card}{call}{fence}\n{body}\n{closing}\n", card=card, body=body,
                              before=f"{call}{fence}\n", after=f"{closing}\n",
                              more="the whole function is defined in your interpreter", description=description)
        return SkillBlock(f"{card}{fence}\n{body}\n{closing}\n", card=card, body=body, before=f"{fence}\n",
                          after=f"{closing}\n", more=f"{call_text('load_skill', skill.name)} shows them all",
                          description=description)

    # ------------------------------------------------------------------ what the actions show
    def page(self, text: str, start: int, again: tuple[str, str]) -> Page:
        """The page of ``text`` from ``start`` (at most ``page_chars`` characters, ending at a line break in its second
        half when there is one); ``again``: (skill name, path) of the call that reads on."""
        end = min(len(text), start + self.page_chars)
        line_end = text.rfind("\n", start, end)
        if end < len(text) and line_end >= start + self.page_chars // 2:  # end the page at a line break when near
            end = line_end + 1
        if start == 0 and end == len(text):
            return Page(text, "")
        shown = f"characters {start + 1:,}-{end:,} of {len(text):,} shown" if end > start else \
            f"nothing from character {start + 1:,}: the text has {_chars(len(text))}"
        if end < len(text):
            shown += f"; {call_text('read_skill_file', *again, end)} shows the next part"
        return Page(text[start:end], f"[{shown}]\n")

    def loaded(self, skill: Skill, folder: str | None) -> SkillBlock:
        """What ``load_skill`` shows: the first page of the instructions, then the skill's top-level files (a block
        context fitting may shorten, the files listing kept)."""
        body = skill.body.strip()
        page = self.page(body, 0, (skill.name, INSTRUCTION_FILE))
        head = f"Loaded skill {skill.name!r} (instructions: {_chars(len(body))}):\n"
        return self._paged(head, page, skill.format == "code", self.files(skill, folder),
                           _rest(skill.name, INSTRUCTION_FILE), 0)

    @staticmethod
    def _paged(head: str, page: Page, code: bool, files: str, more: str, offset: int) -> SkillBlock:
        """A page of a library's text in a fence no line of it can close: its headings and fences stay its own."""
        shown = page.text.rstrip()
        fence = fence_for(shown)
        before, after = (f"{fence}python\n" if code else f"{fence}\n"), f"{fence}\n"
        return SkillBlock(f"{head}{before}{shown}\n{after}{page.note}{files}", card=head, body=shown, before=before,
                          after=after + files, more=more, offset=offset)

    def files(self, skill: Skill, folder: str | None) -> str:
        """The skill's top-level files and folders (a folder with its file count), and how to read them ('' when it
        has none); ``folder``: where they were placed in the workspace, if they were."""
        if not skill.resources:
            return ""
        where = f"; they are also in your workspace folder `{folder}/`" if folder else ""
        reads = call_text("read_skill_file", skill.name, "PATH")
        return (f"Files of this skill ({len(skill.resources)}{where}; {reads} reads one, a folder's PATH lists it):\n"
                f"{self.listing(skill, '')}")

    @staticmethod
    def listing(skill: Skill, folder: str) -> str:
        """One level of the skill's files below ``folder`` ('' for the top): files, then folders with counts."""
        prefix = f"{folder}/" if folder else ""
        names: list[str] = []
        folders: dict[str, int] = {}
        for path in skill.resources:
            if not path.startswith(prefix):
                continue
            first, _, rest = path[len(prefix):].partition("/")
            if rest:
                folders[first] = folders.get(first, 0) + 1
            else:
                names.append(first)
        lines = [f"- {prefix}{name}\n" for name in names]
        lines += [f"- {prefix}{name}/ ({_files(n)})\n" for name, n in folders.items()]
        return "".join(lines)

    def read(self, skill: Skill, path: str, start: int) -> str | SkillBlock:
        """What ``read_skill_file(name, path, start)`` shows: a page of a file (``SKILL.md``: the instructions) as a
        block context fitting may shorten, a folder's listing, or an error line."""
        clean = path.strip().strip("/")
        while clean.startswith("./"):
            clean = clean[2:]
        clean = "" if clean == "." else clean
        if clean == INSTRUCTION_FILE or clean in skill.resources:
            text = skill.body.strip() if clean == INSTRUCTION_FILE else skill.resources[clean]
            what = f"Instructions of skill {skill.name!r} ({INSTRUCTION_FILE}, " if clean == INSTRUCTION_FILE else \
                f"File {clean} of skill {skill.name!r} ("
            page = self.page(text, start, (skill.name, clean))
            code = clean == INSTRUCTION_FILE and skill.format == "code"
            return self._paged(f"{what}{_chars(len(text))}):\n", page, code, "", _rest(skill.name, clean), start)
        listed = self.listing(skill, clean)
        if listed or (not clean and not skill.resources):
            where = f"folder {clean}/" if clean else "top level"
            shown = listed or "(no files beside its instructions)\n"
            cut = shown if len(shown) <= self.page_chars else shown[: self.page_chars].rsplit("\n", 1)[0] + "\n...\n"
            return f"Files of skill {skill.name!r}, {where} (read one with " \
                   f"{call_text('read_skill_file', skill.name, 'PATH')}):\n{cut}"
        return (f"read_skill_file error: skill {skill.name!r} has no file or folder {path!r}; "
                f"{call_text('read_skill_file', skill.name, '.')} lists its files")


def _rest(name: str, path: str) -> str:
    """The hint of a shortened page: the call that reads on from where it was cut (``{end}``: that character)."""
    return f"{call_text('read_skill_file', name, path)[:-1]}, {{end}}) shows the rest"
