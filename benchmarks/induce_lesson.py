"""One lessons-from-failures induction call (``induction_source: lessons``) on a model: a short failed office
trajectory (a wrong API, then a guessed answer; written below) -> the lesson, its prompt id, time and tokens.

    python benchmarks/induce_lesson.py [--model local]
"""

from __future__ import annotations

import argparse
import time

from skilltransfer.agents.steps import CallLog
from skilltransfer.induction.inducer import Inducer, InductionConfig
from skilltransfer.llm import make_model

STEPS = """Step 1
Action:
print(apis.excel.read_file('sales.xlsx'))
Observation: AttributeError: module 'apis.excel' has no attribute 'read_file'
Step 2
Action:
complete_task('The total is 0')
Observation: Task completed."""


class Text:
    """The trajectory as the inducer renders it (nothing to elide)."""

    n_steps = 2

    def render(self, elided_observations: int = 0, elided_replies: int = 0, *, dropped: int = 0) -> str:
        return STEPS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local")
    model = make_model(parser.parse_args().model)
    inducer = Inducer(model, config=InductionConfig(format="text", lessons=True))
    start = time.perf_counter()
    out = inducer.induce("Sum the Amount column of sales.xlsx and report the total.", Text(), level="task",
                         calls=CallLog(), succeeded=False)
    print(f"{time.perf_counter() - start:.0f} s, prompt {out.prompt_id}, status {out.status}, "
          f"{out.completion_tokens} tokens")
    print(out.reply)
    if out.skill is not None:
        print("lesson:", out.skill.extra.get("lesson"), "|", out.skill.name, "|", out.skill.description)
    close = getattr(model, "close", None)
    if close:
        close()


if __name__ == "__main__":
    main()
