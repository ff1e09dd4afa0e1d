"""The executor: a ReAct loop whose state is a list of messages; h_t = h_{t-1} + (a_t, o_t).

Each step asks the model for a reply (a short thought and one ```python block), runs the code in the episode and
appends the observation. The loop ends when the agent calls ``complete_task`` (the observation says done), when a
subtask-mode executor replies ``SUBTASK DONE: ...`` (also inside a code fence, or while re-sending code the subtask
already ran), or when its step budget is spent. A reply without a code block is a step too: its observation is a
format error that tells the model the expected format.

A code block that is a skill action (``skilltransfer.agents.skill_actions``) is handled here, not run in the episode:
``load_skill``/``open_node`` answer with text; ``run_skill`` runs a *subagent*: a fresh executor run in the same
episode whose context is only the system prompt (rules, docs) and the skill's seed message (instructions + the
caller's inputs). Its steps are drawn from the caller's remaining budget (``ExecutorRun.delegated``) and its model
calls are recorded under a window of its own; the caller sees only its ``SUBTASK DONE`` output, or a one-line
failure. A subagent that calls ``complete_task`` ends the task (the world is submitted): the caller's run ends too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.demonstration import (
    SUBTASK_DONE_OBSERVATION,
    plan_subtasks,
    split_demonstration,
    split_plan_example,
)
from skilltransfer.agents.exceptions import ContextExceeded, FormatError, LimitsExceeded, Stuck, Submitted
from skilltransfer.agents.grounding import (
    called_listing,
    calls_complete_task,
    literal_answers,
    makes_change,
    missing_numbers,
    missing_parts,
    requested_change,
    unmade_change,
)
from skilltransfer.agents.prompts import NO_HISTORY, NO_SUMMARY, AgentPrompts, history_line
from skilltransfer.agents.skill_actions import SkillActions, SkillCall, SubagentRequest, parse_skill_call
from skilltransfer.agents.steps import ActionStep, CallLog
from skilltransfer.agents.stuck import detect, repeats
from skilltransfer.llm.context import count_prompt_tokens
from skilltransfer.protocols import ChatModel, Episode, Message
from skilltransfer.util.text import truncate

_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_OPEN_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n(.*)\Z", re.DOTALL | re.IGNORECASE)
_INVENTED = re.compile(r"^[ \t>*#]*Observation\b", re.MULTILINE | re.IGNORECASE)
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][\w.]*)'")
REPORT_REFUSALS = 2
"""How often a subtask's ungrounded ``SUBTASK DONE`` report is refused (a small model that computed the value after
the first refusal often re-sends its old report once)."""
_SUBTASK_DONE = re.compile(r"^[ \t>*#]*SUBTASK[ _]DONE\b[ \t]*:?[ \t]*(.*)", re.MULTILINE | re.IGNORECASE | re.DOTALL)


def parse_action(reply: str, *, complete: bool = True) -> tuple[str, str | None, int]:
    """Split a reply into (thought, code of the first python block or None, number of code blocks).

    A final ```python block without its closing fence counts as code when the reply ended normally (a stop sequence
    cut the fence off), not when the token limit cut it (``complete=False``: the code is probably unfinished).
    """
    blocks = list(_CODE_BLOCK.finditer(reply))
    if blocks:
        return reply[: blocks[0].start()].strip(), blocks[0].group(1), len(blocks)
    opened = _OPEN_BLOCK.search(reply) if complete else None
    if opened is None or not opened.group(1).strip():
        return reply.strip(), None, 0
    return reply[: opened.start()].strip(), opened.group(1), 1


def trim_reply(reply: str) -> str:
    """The reply without what a model invents after its first code block: an ``Observation:`` it did not get, or a
    ``SUBTASK DONE`` report written before the code ran (and everything after either). The trimmed reply is what
    enters the context; the step log keeps the raw one."""
    block = _CODE_BLOCK.search(reply)
    if block is None:
        return reply
    cuts = [m.start() for m in (_INVENTED.search(reply, block.end()), _SUBTASK_DONE.search(reply, block.end())) if m]
    return reply[: min(cuts)].rstrip() if cuts else reply


def outputs_of(steps: Sequence[ActionStep]) -> list[str]:
    """The observations of ``steps`` that sent code (a reply without code has no output)."""
    return [s.observation for s in steps if s.action is not None]


def ran_code(steps: Sequence[ActionStep]) -> list[str]:
    """The code of ``steps`` that ran without an error (refused replies never ran)."""
    return [s.action for s in steps if s.action is not None and not s.error and s.refused is None]


def import_hint(output: str, docs: str) -> str:
    """A note for code that imports a name the env provides as an object (``import apis`` -> ModuleNotFoundError)."""
    missing = _NO_MODULE.search(output)
    if missing is None:
        return ""
    name = missing.group(1).split(".")[0]
    if not re.search(rf"\b{re.escape(name)}\.", docs):
        return ""
    return (f"\n(note: `{name}` is not a module you can import: it is an object already defined in your namespace. "
            f"Do not import it; call it directly, e.g. `{name}.<name>(...)` as the documentation shows.)")


_NO_ATTRIBUTE = re.compile(r"AttributeError: '\w+' object has no attribute '(\w+)'")


def api_hint(output: str, code: str, docs: str) -> str:
    """A note for a call of an API the docs do not list (``apis.excel.delete_file`` -> AttributeError): the object's
    documented APIs, found in the docs as ``<object>.<name>(``; "" when the docs list none for it."""
    missing = _NO_ATTRIBUTE.search(output)
    if missing is None:
        return ""
    name = missing.group(1)
    called = re.search(rf"\b([A-Za-z_]\w*(?:\.\w+)*)\.{re.escape(name)}\b", code)
    if called is None:
        return ""
    owner = called.group(1)
    documented = sorted(set(re.findall(rf"\b{re.escape(owner)}\.(\w+)\(", docs)) - {name})
    if not documented:
        return ""
    return (f"\n(note: `{owner}` has no API `{name}`. Its documented APIs are: {', '.join(documented)}. Use one of "
            "them; do not invent API names.)")


@dataclass
class ExecutorRun:
    """The outcome of one executor run (the whole task, or one subtask)."""

    steps: list[ActionStep] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    exit_status: str = ""
    """"submitted" (complete_task called), "subtask_done", "stuck", "limits_exceeded" or "context_exceeded"."""
    result: str = ""
    """The final observation, or the executor's ``SUBTASK DONE`` report."""
    hinted_at: int | None = None
    """Index (in ``steps``) of the step whose observation carried a stuck hint."""
    refused_done: bool = False
    """Whether a ``SUBTASK DONE`` before any code ran without an error was already refused once."""
    subtask: str = ""
    """The subtask this run executes ('' at task level)."""
    may_complete: bool = True
    """Whether this run may call ``complete_task`` without the early-completion refusal (see
    ``AgentSettings.refuse_early_completion``)."""
    head: int = 2
    """Leading messages (system prompt, demonstration, task message) that context fitting keeps verbatim."""
    delegated: list[ActionStep] = field(default_factory=list)
    """Steps its subagents took (``run_skill``), drawn from this run's budget."""
    actions: SkillActions | None = None
    """The skill actions this context is offered (None: none)."""
    window: int = 0
    """This run's context window (0: the main agent)."""
    earlier_outputs: Sequence[str] = ()
    """Observations of the task's earlier (sub)task runs (what grounds a submitted answer besides this run's)."""
    earlier_codes: Sequence[str] = ()
    """Code of the task's earlier runs that ran without an error (what grounds a report's claimed change)."""

    @property
    def used(self) -> int:
        """Steps of this run's budget spent: its own and its subagents'."""
        return len(self.steps) + len(self.delegated)


class Executor:
    """Runs the ReAct loop on one (sub)task.

    Args:
        model: the policy.
        prompts: the agent prompts.
        config: agent settings (observation cut, sampling parameters).
        calls: the task's call log (every model call is recorded there).
        take_step: called before each step when set; False ends the run as ``limits_exceeded`` (a step budget
            shared with other executors, e.g. the concurrent nodes of `skilltransfer.coordination`).
    """

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog, *,
                 take_step: Callable[[], bool] | None = None) -> None:
        self.model = model
        self.prompts = prompts
        self.config = config
        self.calls = calls
        self.take_step = take_step
        self.refused_answer = False
        """Whether an ungrounded ``complete_task`` answer was already refused (once per executor, i.e. per task)."""
        self.refused_completion = False
        """Whether a ``complete_task`` in a subtask that did not ask for it was already refused (once per task)."""
        self.refused_unmade = False
        """Whether a ``complete_task`` before the change the task asks for was already refused (once per task)."""

    def opening(self, episode: Episode, task_message: str, *, subtask_mode: bool,
                subagent: bool = False, may_complete: bool = True, subtask_index: int = 0) -> list[Message]:
        """The first messages: the system prompt (rules and docs), the docs' worked example as earlier turns (see
        ``skilltransfer.agents.demonstration``), then the task message (a subagent: its seed message). The
        ``subtask_index``-th subtask of a task, if it may not complete the task, sees the example as the example's
        subtask of that position (``subtask_example``), under the example's earlier reports; one that may (it asks
        for ``complete_task``) sees the whole example, ending with ``complete_task``, in the subtask format."""
        (docs, plan), demo = split_plan_example(episode.docs().strip()), None
        if self.config.demonstration == "turns":
            docs, demo = split_demonstration(docs)
        rules = self.prompts.executor_subtask_rules.render() if subtask_mode else ""
        if subagent:
            rules = self.prompts.subagent_rules.render()
        system = {"role": "system", "content": self.prompts.executor_system.render(docs=docs.strip(),
                                                                                  subtask_rules=rules)}
        if demo is None:
            return [system, {"role": "user", "content": task_message}]
        if subtask_mode and not subagent and self.config.subtask_example:
            summary, history, subtask = NO_SUMMARY, NO_HISTORY, demo.task
            if demo.reports and not may_complete:
                k, planned = demo.segment(subtask_index), plan_subtasks(plan)
                if k < len(planned):
                    subtask = planned[k]
                    earlier = [report for _, report in demo.reports[:k]]
                    summary = "\n".join(f"- {report}" for report in earlier) or NO_SUMMARY
                    history = "\n".join(history_line(i, planned[i - 1], "subtask_done", report)
                                         for i, report in enumerate(earlier, start=1)) or NO_HISTORY
                else:
                    k = 0  # no plan line for it: the example's first subtask, under the example task
                demo = demo.as_subtask(k)
            elif not may_complete:
                demo = demo.as_subtask()
            opening = self.prompts.executor_subtask.render(instruction=demo.task, summary=summary, history=history,
                                                           subtask=subtask, skills="")
        else:
            opening = self.prompts.executor_task.render(instruction=demo.task, skills="")
        example = demo.messages(opening, lambda output: self.prompts.observation.render(output=output))
        example[-1] = {"role": "user", "content": f"{example[-1]['content']}\n{task_message}"}
        return [system, *example]

    def run(self, episode: Episode, task_message: str, *, subtask_index: int | None, first_index: int, budget: int,
            subtask_mode: bool, actions: SkillActions | None = None, window: int = 0,
            earlier_outputs: Sequence[str] = (), earlier_codes: Sequence[str] = (), subtask: str = "",
            may_complete: bool = True) -> ExecutorRun:
        """Run until submission or until ``budget`` steps are used.

        Args:
            episode: the running task.
            task_message: the first user message (goal, summary, skills).
            subtask_index: the subtask being executed (None at task level).
            first_index: index of this run's first step in the task's shared budget.
            budget: most steps this run may take (format errors count).
            subtask_mode: accept ``SUBTASK DONE: ...`` as the end of the run.
            actions: the skill actions offered in this context (None: none).
            window: the context window (0: the main agent; k: the task's k-th subagent).
            earlier_outputs: the observations of the task's earlier runs (they ground a submitted answer too).
            earlier_codes: the code of the task's earlier runs that ran without an error (it grounds a reported change).
            subtask: the subtask's text (quoted by the early-completion refusal).
            may_complete: False when this subtask did not ask for ``complete_task`` (``refuse_early_completion``).
        """
        opening = self.opening(episode, task_message, subtask_mode=subtask_mode, subagent=window > 0,
                               subtask_index=subtask_index or 0,
                               may_complete=may_complete)
        run = ExecutorRun(messages=opening, actions=actions, window=window,
                          earlier_outputs=earlier_outputs, earlier_codes=earlier_codes, subtask=subtask,
                          may_complete=may_complete)
        run.head = len(run.messages)
        while True:
            steps_before = len(run.steps)
            try:
                self._step(run, episode, subtask_index, first_index, budget, subtask_mode)
            except FormatError as exc:
                run.messages.append({"role": "user", "content": exc.message})
            except Submitted as exc:
                run.exit_status = "submitted" if exc.scope == "task" else "subtask_done"
                run.result = exc.message
                return run
            except LimitsExceeded as exc:
                run.exit_status = "limits_exceeded"
                run.result = exc.message
                return run
            except Stuck as exc:
                run.exit_status = "stuck"
                run.result = exc.message
                return run
            except ContextExceeded as exc:
                run.exit_status = "context_exceeded"
                run.result = exc.message
                return run
            finally:
                if len(run.steps) > steps_before:
                    self.calls.emit("step_end", step=run.steps[-1])

    def _step(self, run: ExecutorRun, episode: Episode, subtask_index: int | None, first_index: int, budget: int,
              subtask_mode: bool) -> None:
        if run.used >= budget:
            raise LimitsExceeded(f"step limit reached ({first_index + run.used} executor steps)")
        if self.take_step is not None and not self.take_step():
            raise LimitsExceeded("the task's shared step budget is spent")
        self.calls.emit("step_start", index=first_index + run.used, subtask_index=subtask_index)
        params = dict(self.config.model_params)
        if self.config.stop:
            params.setdefault("stop", list(self.config.stop))
        hinted = run.hinted_at is not None or any(s.refused in ("ungrounded_answer", "ungrounded_report")
                                                  for s in run.steps)
        if hinted and self.config.stuck_temperature is not None:
            params["temperature"] = self.config.stuck_temperature  # a greedy model repeats itself after a hint
        self.calls.window = run.window
        completion = self.calls.complete(self.model, run.messages, "executor", head=run.head, **params)
        reply = completion.text
        shown = trim_reply(reply) if self.config.stop else reply
        run.messages.append({"role": "assistant", "content": shown})
        thought, code, n_blocks = parse_action(shown, complete=completion.finish_reason != "length")
        step = ActionStep(index=first_index + run.used, subtask_index=subtask_index, reply=reply,
                          thought=thought, action=code, observation="", prompt_tokens=completion.prompt_tokens,
                          completion_tokens=completion.completion_tokens, latency_s=completion.latency_s,
                          window=run.window)
        run.steps.append(step)
        if subtask_mode and code is not None and _SUBTASK_DONE.match(code.strip()):
            code = step.action = None  # a done line put in a code fence is the done reply, not Python
        if code is None:
            done = _SUBTASK_DONE.search(shown) if subtask_mode else None
            report = done.group(1).split("```")[0].strip() if done is not None else ""
            if done is not None and not self._refuse_done(run, step) and not self._refuse_report(run, step, report):
                step.observation = SUBTASK_DONE_OBSERVATION
                raise Submitted(report or "(no report)", scope="subtask")
            if done is None:
                hint = " (or a `SUBTASK DONE: <result>` line when the subtask is finished)" if subtask_mode else ""
                step.format_error = True
                step.observation = self.prompts.format_error.render(subtask_hint=hint)
            self._check_stuck(run, step)
            raise FormatError(step.observation)
        call = parse_skill_call(code, run.actions.offered) if run.actions is not None else None
        if call is not None:
            self._skill_action(run, episode, step, call, subtask_index, first_index, budget)
            return
        if subtask_mode:
            self._done_by_repeat(run, step, shown, code)
        if self._refuse_completion(run, step, code, subtask_mode) or self._refuse_answer(run, step, code) or \
                self._refuse_unmade_completion(run, step, code, episode.task.instruction):
            self._check_stuck(run, step)
            run.messages.append({"role": "user", "content": self.prompts.observation.render(output=step.observation)})
            return
        observation = episode.step(code)
        output = truncate(observation.output, self.config.max_observation_chars)
        if n_blocks > 1:
            output += f"\n(note: only the first of your {n_blocks} code blocks was run)"
        if observation.error:
            output += import_hint(output, run.messages[0]["content"]) + api_hint(output, code,
                                                                                  run.messages[0]["content"])
        step.observation, step.error, step.done = output, observation.error, observation.done
        if observation.done:
            run.messages.append({"role": "user", "content": self.prompts.observation.render(output=output)})
            raise Submitted(output, scope="task")
        self._check_stuck(run, step)
        run.messages.append({"role": "user", "content": self.prompts.observation.render(output=step.observation)})

    def _skill_action(self, run: ExecutorRun, episode: Episode, step: ActionStep, call: SkillCall | str,
                      subtask_index: int | None, first_index: int, budget: int) -> None:
        """Handle a skill action step (see the module docstring); its answer is the step's observation."""
        assert run.actions is not None
        if isinstance(call, str):
            step.error, answer = True, call
        else:
            step.skill_action = {"action": call.action, "target": call.target}
            handled = run.actions.handle(call)
            if isinstance(handled, SubagentRequest):
                answer = self._subagent(run, episode, step, handled, subtask_index, first_index, budget)
            else:
                answer = handled
                step.error = " error: " in answer.partition("\n")[0]
        step.observation = truncate(answer, self.config.max_observation_chars) if step.skill_action is None or \
            step.skill_action["action"] == "run_skill" else answer  # a loaded skill or a listing is never cut
        self._check_stuck(run, step)
        run.messages.append({"role": "user", "content": self.prompts.observation.render(output=step.observation)})

    def _subagent(self, run: ExecutorRun, episode: Episode, step: ActionStep, request: SubagentRequest,
                  subtask_index: int | None, first_index: int, budget: int) -> str:
        """Run ``request`` as a subagent in a fresh context; its output, or a clear failure line."""
        assert step.skill_action is not None
        left = budget - run.used
        info = step.skill_action
        if left <= 0:
            info.update(status="no_budget", steps=0)
            return f"run_skill({request.target!r}) FAILED: no steps are left in the task's budget for a subagent"
        self.calls.windows += 1
        window = self.calls.windows
        caller_window = self.calls.window

        def tokens(text: str) -> int:
            return count_prompt_tokens(self.model, [{"role": "user", "content": text}])[0]

        info.update(window=window, sent_tokens=tokens(request.inputs_text), seed_tokens=tokens(request.seed))
        try:
            sub = self.run(episode, request.seed, subtask_index=subtask_index, first_index=first_index + run.used,
                           budget=left, subtask_mode=True, actions=request.actions, window=window)
        finally:
            self.calls.window = caller_window
        run.delegated.extend([*sub.steps, *sub.delegated])
        info.update(status=sub.exit_status, steps=sub.used)
        if sub.exit_status == "submitted":
            info["returned_tokens"] = 0
            step.observation = f"run_skill({request.target!r}): the subagent called complete_task; the task ended"
            step.done = True
            raise Submitted(sub.result, scope="task")
        if sub.exit_status == "subtask_done":
            output = f"run_skill({request.target!r}) returned:\n{sub.result}"
        else:
            reason = " ".join(sub.result.split())[:300]
            output = (f"run_skill({request.target!r}) FAILED: the subagent ended with status {sub.exit_status} "
                      f"after {sub.used} steps ({reason}); it returned no output. Its actions may have changed the "
                      "environment.")
        info["returned_tokens"] = tokens(output)
        return output

    def _refuse_done(self, run: ExecutorRun, step: ActionStep) -> bool:
        """Refuse (once per subtask) a ``SUBTASK DONE`` sent before any code of this subtask ran without an error:
        none ran ("premature_subtask_done") or all of it failed ("failed_subtask_done"); the refusal is the
        observation."""
        if not self.config.refuse_premature_done or run.refused_done or ran_code(run.steps):
            return False
        prompt = self.prompts.failed_subtask_done if any(s.action for s in run.steps) else \
            self.prompts.premature_subtask_done
        run.refused_done = True
        step.refused = prompt.name
        step.observation = prompt.render()
        return True

    def _done_by_repeat(self, run: ExecutorRun, step: ActionStep, reply: str, code: str) -> None:
        """A reply that says ``SUBTASK DONE`` and re-sends code this subtask already ran without an error ends the
        subtask, without running the code again (a small model reports its result and repeats its last action).

        Raises ``Submitted`` (scope "subtask") with the report, or the earlier run's output when the report is empty.
        """
        if not self.config.done_on_repeat:
            return
        done = _SUBTASK_DONE.search(_CODE_BLOCK.sub("", reply))
        if done is None:
            return
        same = " ".join(code.split())
        earlier = next((s for s in run.steps[:-1] if s.action is not None and not s.error and s.skill_action is None
                        and " ".join(s.action.split()) == same), None)
        if earlier is None:
            return
        step.observation = (f"(subtask marked done: the code repeats step {earlier.index + 1}, which already ran; "
                            "it was not run again)")
        report = done.group(1).strip().split("\n\n")[0].strip()
        raise Submitted(report or earlier.observation.strip() or "(no report)", scope="subtask")

    def _refuse_report(self, run: ExecutorRun, step: ActionStep, report: str) -> bool:
        """Refuse (up to `REPORT_REFUSALS` times per subtask) a ``SUBTASK DONE`` report holding a number that no output
        of the task and not the task message shows (`skilltransfer.agents.grounding.missing_numbers`); the refusal is
        the observation."""
        refused = [i for i, s in enumerate(run.steps[:-1]) if s.refused == "ungrounded_report"]
        if not self.config.refuse_ungrounded_answer or len(refused) >= REPORT_REFUSALS:
            return False
        task_message = run.messages[run.head - 1]["content"]  # not the worked example's turns before it
        seen = [*run.earlier_outputs, *(s.observation for s in run.steps[:-1] if s.action is not None), task_message]
        missing = missing_numbers(report, seen)
        codes = [*run.earlier_codes, *ran_code(run.steps[:-1])]
        claim = None if missing else unmade_change(report, codes)
        if not missing and claim is None:
            return False
        step.refused = "ungrounded_report"
        if claim is not None:
            step.observation = self.prompts.unmade_change.render(report=report[:300], claim=claim,
                                                                 called=called_listing(codes))
            return True
        ran = [s for s in run.steps[refused[-1] + 1: -1] if s.action is not None and not s.error] if refused else []
        shown = (f"\nThe output of your code after the previous refusal:\n{truncate(ran[-1].observation.strip(), 600)}"
                 "\nReport what it shows.") if ran else ""  # a model that computed the value re-sends its old report
        step.observation = self.prompts.ungrounded_report.render(
            report=report[:300], missing=", ".join(f'"{n}"' for n in missing), last_output=shown)
        return True

    def _refuse_completion(self, run: ExecutorRun, step: ActionStep, code: str, subtask_mode: bool) -> bool:
        """Refuse (once per task, without running it) code that calls ``complete_task`` in a subtask that did not ask
        for it (``AgentSettings.refuse_early_completion``); the refusal is the observation."""
        if not (subtask_mode and self.config.refuse_early_completion) or run.may_complete or self.refused_completion:
            return False
        if not calls_complete_task(code):
            return False
        self.refused_completion = True
        step.refused = "early_completion"
        step.observation = self.prompts.early_completion.render(subtask=run.subtask.strip())
        return True

    def _refuse_answer(self, run: ExecutorRun, step: ActionStep, code: str) -> bool:
        """Refuse (once per task, without running the code) a ``complete_task`` whose literal answer holds parts that
        no output of the task shows (`skilltransfer.agents.grounding`); the refusal is the observation."""
        if not self.config.refuse_ungrounded_answer or self.refused_answer:
            return False
        outputs = [*run.earlier_outputs, *(s.observation for s in run.steps[:-1] if s.action is not None)]
        for answer in literal_answers(code):
            missing = missing_parts(answer, outputs)
            if missing:
                self.refused_answer = True
                step.refused = "ungrounded_answer"
                step.observation = self.prompts.ungrounded_answer.render(
                    answer=answer, missing=", ".join(f'"{part}"' for part in missing))
                return True
        return False

    def _refuse_unmade_completion(self, run: ExecutorRun, step: ActionStep, code: str, instruction: str) -> bool:
        """Refuse (once per task, without running the code) a ``complete_task`` while the task's instruction asks for
        a change (`skilltransfer.agents.grounding.requested_change`) and neither this code nor any code of the task
        that ran without an error called a function named for one; the refusal is the observation."""
        if not self.config.refuse_ungrounded_answer or self.refused_unmade or not calls_complete_task(code):
            return False
        verb = requested_change(instruction)
        codes = [*run.earlier_codes, *ran_code(run.steps[:-1]), code]
        if verb is None or makes_change(codes):
            return False
        self.refused_unmade = True
        step.refused = "unmade_completion"
        step.observation = self.prompts.unmade_completion.render(
            verb=verb, called=called_listing(codes, frozenset({"print", "complete_task"})))
        return True

    def _check_stuck(self, run: ExecutorRun, step: ActionStep) -> None:
        """After a step: on a detected loop, append a hint the first time; end the run when the next step repeats the
        hinted one, or when a loop shows again later."""
        if not self.config.stuck_detection:
            return
        since = 0 if run.hinted_at is None else run.hinted_at
        hinted = run.steps[since] if run.hinted_at is not None else None
        if hinted is not None and since == len(run.steps) - 2 and repeats(step, hinted):
            step.stuck = hinted.stuck
            raise Stuck(f"stuck: {hinted.stuck} again right after the hint (the step repeats the hinted one)")
        stuck = detect(run.steps[since:])
        if stuck is None:
            return
        step.stuck = stuck.pattern
        if run.hinted_at is not None:
            raise Stuck(f"stuck: {stuck.pattern} after a hint (the last {stuck.length} steps repeat)")
        run.hinted_at = len(run.steps) - 1
        step.observation = f"{step.observation}\n(stuck: {stuck.hint})"
