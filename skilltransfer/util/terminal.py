"""Every line the package prints to a terminal goes through this module: what it prints may quote text from outside
the toolkit (a library's skill names, an endpoint's model id or error, a run folder's task ids, a spec's labels), and
that text must not act on the terminal nor show a secret.

- `shown` is the one conversion: secrets redacted by value (`skilltransfer.util.secrets.redact`), then every control
  character a terminal acts on made visible (`skilltransfer.util.text.terminal_safe`: C0 but newline and tab, DEL,
  C1, bidirectional overrides), so an OSC 52 clipboard write, a title change (ended by BEL or ``ESC \\``) or a
  screen clear prints as escapes.
- `echo` prints a line as ``typer.echo`` does, through `shown`.
- `Console` is rich's console with rich's own interpretation of text turned off by default (markup: a skill named
  ``[link=...]`` stays text; highlighting; emoji codes), whose every text segment passes through `shown` after
  layout (rich lets escape sequences through), while rich's own styles and cursor controls still draw.
- `install_log_handler` gives the package's log records and Python's warnings the same treatment on stderr (the CLI
  installs it).

A test forbids printing any other way in the package (``print``, ``typer.echo``, ``sys.stdout.write``, rich's
``Console``), but in the agent's own sandbox and the developer scripts it names.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from collections.abc import Iterable
from typing import IO, Any

import typer
from rich.console import Console as RichConsole
from rich.console import ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from skilltransfer.util.secrets import known, redact
from skilltransfer.util.text import terminal_safe


def shown(text: object, secrets: list[str] | None = None) -> str:
    """``text`` as it may reach a terminal: secrets redacted (``secrets``: their forms, `known` asked now when not
    given), control characters visible (see the module docstring)."""
    return terminal_safe(redact(str(text), secrets))


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``message`` through `shown` to stdout (stderr with ``err``), then a line break unless not ``nl``."""
    typer.echo(shown(message), err=err, nl=nl)


class Console(RichConsole):
    """rich's console for text from outside: no markup, highlighting or emoji codes unless a call asks for them, and
    every text segment shown through `shown` (rich's own style codes and cursor controls are not text segments)."""

    def __init__(self, *, markup: bool = False, highlight: bool = False, emoji: bool = False, **kwargs: Any) -> None:
        super().__init__(markup=markup, highlight=highlight, emoji=emoji, **kwargs)
        self._rendering = threading.local()
        """``depth``: whether this thread is inside a `render` already (its outermost call makes the segments safe)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """A string as rich text, made safe before rich measures and wraps it."""
        return super().render_str(shown(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """rich's segments with every text segment made safe (`Text` objects built elsewhere included), once: by the
        outermost call on this thread (rich renders a table's cells through nested calls)."""
        if getattr(self._rendering, "depth", 0):
            yield from super().render(renderable, options)
            return
        self._rendering.depth = 1
        try:
            yield from self._safe_segments(super().render(renderable, options))
        finally:
            self._rendering.depth = 0

    @staticmethod
    def _safe_segments(segments: Iterable[Segment]) -> Iterable[Segment]:
        forms = known()
        for segment in segments:
            text, style, control = segment
            if control:  # rich's own cursor movements (live displays)
                yield segment
                continue
            safe = shown(text, forms) if text else text
            if style is not None and style.link and shown(style.link, forms) != style.link:
                style = style.update_link(shown(style.link, forms))
            yield segment if safe is text and style is segment.style else Segment(safe, style, control)


class _SafeFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return shown(super().format(record))


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (a test's capture included), as logging's last resort does."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_SafeFormatter("%(message)s"))

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _value: IO[str]) -> None:  # set by StreamHandler.__init__; the property always reads sys.stderr
        pass


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: IO[str] | None = None, line: str | None = None) -> None:
    """Python's warnings (a ``SyntaxWarning`` of a library's code skill parsed here quotes its text) through
    `shown`."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    try:
        (file or sys.stderr).write(shown(text))
    except OSError:  # as warnings.showwarning: a closed stream loses the warning
        pass


def install_log_handler() -> None:
    """Print the package's log records of level WARNING and above, and Python's warnings, on stderr through `shown`
    (once per process; the CLI's entry point calls it)."""
    logger = logging.getLogger("skilltransfer")
    if not any(isinstance(handler, _StderrHandler) for handler in logger.handlers):
        handler = _StderrHandler()
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)
    warnings.showwarning = _show_warning
