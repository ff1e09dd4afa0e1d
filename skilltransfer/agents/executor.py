"""The executor: a ReAct loop whose state is a list of messages; h_t = h_{t-1} + (a_t, o_t).

Each step asks the model for a reply (a short thought and one ```python block), runs the code in the episode and
appends the observation. The loop ends when the agent calls ``complete_task`` (the observation says done), when a
subtask-mode executor replies ``SUBTASK DONE: ...``, or when its step budget is spent. A reply without a code block
is a step too: its observation is a format error that tells the model the expected format.

The harness (`skilltransfer.agents.harness`) is consulted at named hooks: the sampling parameters, the reply as it
enters the context, the opening, the code before it runs (``code_form``, ``code_proposed``: refused, or the run
ended), a ``SUBTASK DONE`` report (``subtask_report``) and each observed step (``step_observed``: rewritten, or the
run ended). The loop names no guard; every non-accept decision is a `GuardRecord` on the step.

A code block that is a skill action (``skilltransfer.agents.skill_actions``) is handled here, not run in the episode:
``load_skill``/``open_node`` answer with text; ``run_skill`` runs a *subagent*: a fresh executor run in the same
episode whose context is only the system prompt (rules, docs) and the skill's seed message (instructions + the
caller's inputs). Its steps come out of the caller's remaining budget (``subagent_budget: caller``, the default), or
it runs on a budget of its own (``own``: ``subagent_step_limit`` steps), and within its wall-clock limit
(``subagent_time_limit_s``); its steps are kept in ``ExecutorRun.delegated`` and its model calls are recorded under a
window of its own; the caller sees only its ``SUBTASK DONE`` output, or a one-line failure with the exit status it
ended with (``limits_exceeded``, ``time_exceeded``, ...) and goes on. A subagent that calls ``complete_task`` ends the
task (the world is submitted): the caller's run ends too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.context import SkillBlock
from skilltransfer.agents.decisions import End, Refuse
from skilltransfer.agents.exceptions import ContextExceeded, Ended, FormatError, LimitsExceeded, Submitted
from skilltransfer.agents.harness.base import Harness
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.replies import SUBTASK_DONE, SUBTASK_DONE_OBSERVATION, parse_action
from skilltransfer.agents.skill_actions import SkillCall, SubagentRequest, parse_skill_call
from skilltransfer.agents.steps import CallLog
from skilltransfer.agents.views import Opening, RunContext
from skilltransfer.llm.context import count_prompt_tokens
from skilltransfer.log import ActionStep
from skilltransfer.protocols import ChatModel, Message
from skilltransfer.util.text import truncate


@dataclass
class ExecutorRun:
    """The state and outcome of one executor run (the whole task, one subtask, or a subagent)."""

    context: RunContext
    steps: list[ActionStep] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    exit_status: str = ""
    """"submitted" (complete_task called), "subtask_done", "limits_exceeded", "context_exceeded", or the exit status
    a guard ended the run with (``stuck``)."""
    result: str = ""
    """The final observation, or the executor's ``SUBTASK DONE`` report."""
    head: int = 2
    """Leading messages (system prompt, demonstration, task message) that context fitting keeps verbatim."""
    delegated: list[ActionStep] = field(default_factory=list)
    """Steps its subagents took (``run_skill``)."""
    own_budget_steps: int = 0
    """Those of them taken on the subagents' own budgets (not this run's)."""
    guard_state: dict[str, Any] = field(default_factory=dict)
    """Each guard's state for this run, by guard name (`skilltransfer.agents.harness.base.Guard.run_state`)."""

    @property
    def used(self) -> int:
        """Steps taken: its own and its subagents' (the next step's index is ``first_index + used``)."""
        return len(self.steps) + len(self.delegated)

    @property
    def spent(self) -> int:
        """Steps of this run's budget spent: its own, and its subagents' that drew from it."""
        return self.used - self.own_budget_steps


class Executor:
    """Runs the ReAct loop on one (sub)task.

    Args:
        model: the policy.
        prompts: the agent prompts.
        config: agent settings (observation cut, sampling parameters).
        calls: the task's call log (every model call is recorded there).
        harness: the task's guards (default: a fresh set from ``config``, resolved by
            `skilltransfer.agents.harness.resolve_for` when it is not).
        take_step: called before each step when set; False ends the run as ``limits_exceeded`` (a step budget
            shared with other executors, e.g. the concurrent nodes of `skilltransfer.coordination`).
    """

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog, *,
                 harness: Harness | None = None, take_step: Callable[[], bool] | None = None) -> None:
        from skilltransfer.agents.harness.presets import make_harness, resolve_for

        self.model = model
        self.prompts = prompts
        self.config = resolve_for(config, model)
        self.calls = calls
        self.harness = harness if harness is not None else make_harness(self.config, prompts)
        self.take_step = take_step

    def opening(self, context: RunContext) -> list[Message]:
        """The first messages: the system prompt (rules and docs), the turns the harness puts before the task (a
        worked example), then the task message (a subagent: its seed message)."""
        opening = self.harness.opening(context, Opening(context.episode.docs().strip()))
        rules = self.prompts.executor_subtask_rules.render() if context.subtask_mode else ""
        if context.subagent:
            rules = self.prompts.subagent_rules.render()
        system = {"role": "system", "content": self.prompts.executor_system.render(docs=opening.docs.strip(),
                                                                                  subtask_rules=rules)}
        if not opening.turns:
            return [system, {"role": "user", "content": context.task_message}]
        turns = list(opening.turns)
        turns[-1] = {"role": "user", "content": f"{turns[-1]['content']}\n{context.task_message}"}
        return [system, *turns]

    def run(self, context: RunContext) -> ExecutorRun:
        """Run until submission, a ``SUBTASK DONE`` (subtask mode), an end by a guard, or until ``context.budget``
        steps are used."""
        run = ExecutorRun(context, messages=self.opening(context))
        run.head = len(run.messages)
        while True:
            steps_before = len(run.steps)
            try:
                self._step(run)
            except FormatError as exc:
                run.messages.append({"role": "user", "content": exc.message})
            except Submitted as exc:
                run.exit_status = "submitted" if exc.scope == "task" else "subtask_done"
                run.result = exc.message
                return run
            except (LimitsExceeded, ContextExceeded) as exc:
                run.exit_status = "limits_exceeded" if isinstance(exc, LimitsExceeded) else "context_exceeded"
                run.result = exc.message
                return run
            except Ended as exc:
                run.exit_status = exc.exit_status
                run.result = exc.message
                return run
            finally:
                if len(run.steps) > steps_before:
                    self.calls.emit("step_end", step=run.steps[-1])

    def _step(self, run: ExecutorRun) -> None:
        context = run.context
        if run.spent >= context.budget:
            raise LimitsExceeded(f"step limit reached ({context.first_index + run.used} executor steps)")
        if context.deadline is not None and time.monotonic() >= context.deadline:
            raise Ended(f"time limit reached after {len(run.steps)} steps", exit_status="time_exceeded")
        if self.take_step is not None and not self.take_step():
            raise LimitsExceeded("the task's shared step budget is spent")
        self.calls.emit("step_start", index=context.first_index + run.used, subtask_index=context.subtask_index)
        params = self.harness.sampling("executor", dict(self.config.model_params), run)
        self.calls.window = context.window
        completion = self.calls.complete(self.model, run.messages, "executor", head=run.head, **params)
        reply = completion.text
        shown = self.harness.reply("executor", reply, run)
        run.messages.append({"role": "assistant", "content": shown})
        thought, code, n_blocks = parse_action(shown, complete=completion.finish_reason != "length")
        step = ActionStep(index=context.first_index + run.used, subtask_index=context.subtask_index, reply=reply,
                          thought=thought, action=code, observation="", prompt_tokens=completion.prompt_tokens,
                          completion_tokens=completion.completion_tokens, latency_s=completion.latency_s,
                          window=context.window)
        run.steps.append(step)
        if code is not None:
            form = self.harness.code_form(run, step, code)
            step.guards.extend(form.records)
            code = step.action = form.value
        if code is None:
            self._no_code(run, step, shown)
        call = parse_skill_call(code, context.actions.offered) if context.actions is not None else None
        if call is not None:
            self._skill_action(run, step, call)
            return
        verdict = self.harness.code_proposed(run, step, code, shown)
        step.guards.extend(verdict.records)
        if isinstance(verdict.stop, End):
            step.observation = verdict.stop.observation or ""
            self._end(verdict.stop)
        if isinstance(verdict.stop, Refuse):
            step.observation = verdict.stop.message
            self._observed(run, step, ran=False)
            run.messages.append({"role": "user", "content": self.prompts.observation.render(output=step.observation)})
            return
        observation = context.episode.step(code)
        output = truncate(observation.output, self.config.max_observation_chars)
        if n_blocks > 1:
            output += f"\n(note: only the first of your {n_blocks} code blocks was run)"
        step.observation, step.error, step.done = output, observation.error, observation.done
        step.skill_calls = dict(observation.skill_calls)
        if observation.done:
            run.messages.append({"role": "user", "content": self.prompts.observation.render(output=output)})
            raise Submitted(output, scope="task")
        self._observed(run, step, ran=True)
        run.messages.append({"role": "user", "content": self.prompts.observation.render(output=step.observation)})

    def _no_code(self, run: ExecutorRun, step: ActionStep, shown: str) -> NoReturn:
        """A reply without code: a ``SUBTASK DONE`` (subtask mode) ends the run unless the harness refuses its report;
        anything else is a format error. Raises the signal the loop acts on."""
        done = SUBTASK_DONE.search(shown) if run.context.subtask_mode else None
        if done is not None:
            report = done.group(1).split("```")[0].strip()
            verdict = self.harness.subtask_report(run, step, report)
            step.guards.extend(verdict.records)
            if not isinstance(verdict.stop, Refuse):
                step.observation = SUBTASK_DONE_OBSERVATION
                raise Submitted(report or "(no report)", scope="subtask")
            step.observation = verdict.stop.message
        else:
            hint = " (or a `SUBTASK DONE: <result>` line when the subtask is finished)" if run.context.subtask_mode \
                else ""
            step.format_error = True
            step.observation = self.prompts.format_error.render(subtask_hint=hint)
        self._observed(run, step, ran=False)
        raise FormatError(step.observation)

    def _observed(self, run: ExecutorRun, step: ActionStep, *, ran: bool) -> None:
        """Show the step to the harness: it may rewrite the observation, or end the run."""
        out = self.harness.step_observed(run, step, ran=ran)
        step.guards.extend(out.records)
        if isinstance(out.stop, End):
            self._end(out.stop)

    @staticmethod
    def _end(decision: End) -> NoReturn:
        if decision.exit_status == "subtask_done":
            raise Submitted(decision.message, scope="subtask")
        raise Ended(decision.message, exit_status=decision.exit_status)

    def _skill_action(self, run: ExecutorRun, step: ActionStep, call: SkillCall | str) -> None:
        """Handle a skill action step (see the module docstring); its answer is the step's observation."""
        actions = run.context.actions
        assert actions is not None
        if isinstance(call, str):
            step.error, answer = True, call
        else:
            step.skill_action = {"action": call.action, "target": call.target}
            if call.path:
                step.skill_action.update(path=call.path, start=call.start)
            skill_id = actions.skill_id(call.target) if call.action != "open_node" else None
            if skill_id is not None:  # a pick (`skilltransfer.log.selection`)
                step.skill_action["skill_id"] = skill_id
            handled = actions.handle(call)
            if isinstance(handled, SubagentRequest):
                answer = self._subagent(run, step, handled)
            elif isinstance(handled, SkillBlock):  # a page of a skill: context fitting may shorten it
                answer = handled.text
                self.calls.skills = [*self.calls.skills, handled]
            else:
                answer = handled
                step.error = " error: " in answer.partition("\n")[0]
        step.observation = truncate(answer, self.config.max_observation_chars) if step.skill_action is None or \
            step.skill_action["action"] == "run_skill" else answer  # a loaded skill or a listing is never cut
        self._observed(run, step, ran=False)
        run.messages.append({"role": "user", "content": self.prompts.observation.render(output=step.observation)})

    def _subagent(self, run: ExecutorRun, step: ActionStep, request: SubagentRequest) -> str:
        """Run ``request`` as a subagent in a fresh context; its output, or a clear failure line."""
        assert step.skill_action is not None
        context = run.context
        own = self.config.subagent_step_limit if self.config.subagent_budget == "own" else None
        left = own if own is not None else context.budget - run.spent
        limit_s = self.config.subagent_time_limit_s
        info = step.skill_action
        info.update(step_limit=left, own_budget=own is not None, time_limit_s=limit_s)
        if left <= 0:
            info.update(status="no_budget", steps=0)
            return f"run_skill({request.target!r}) FAILED: no steps are left in the task's budget for a subagent"
        self.calls.windows += 1
        window = self.calls.windows
        caller_window = self.calls.window

        def tokens(text: str) -> int:
            return count_prompt_tokens(self.model, [{"role": "user", "content": text}])[0]

        info.update(window=window, sent_tokens=tokens(request.inputs_text), seed_tokens=tokens(request.seed))
        start = time.monotonic()
        try:
            sub = self.run(RunContext(context.episode, request.seed, budget=left, first_index=context.first_index
                                      + run.used, subtask_index=context.subtask_index, subtask_mode=True,
                                      actions=request.actions, window=window,
                                      deadline=start + limit_s if limit_s is not None else None))
        finally:
            self.calls.window = caller_window
        run.delegated.extend([*sub.steps, *sub.delegated])
        if own is not None:
            run.own_budget_steps += sub.used
        info.update(status=sub.exit_status, steps=sub.used, seconds=round(time.monotonic() - start, 3))
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
