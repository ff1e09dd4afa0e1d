"""The executor: a ReAct loop whose state is a list of messages; h_t = h_{t-1} + (a_t, o_t).

Each step asks the model for a reply (a short thought and one ```python block), runs the code in the episode and
appends the observation. The loop ends when the agent calls ``complete_task`` (the observation says done), when a
subtask-mode executor replies ``SUBTASK DONE: ...``, or when its step budget is spent. A reply without a code block
is a step too: its observation is a format error that tells the model the expected format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from skilltransfer.agents.config import AgentConfig
from skilltransfer.agents.exceptions import ContextExceeded, FormatError, LimitsExceeded, Submitted
from skilltransfer.agents.prompts import AgentPrompts
from skilltransfer.agents.steps import ActionStep, CallLog
from skilltransfer.envs.base import truncate
from skilltransfer.protocols import ChatModel, Episode, Message

_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_SUBTASK_DONE = re.compile(r"^[ \t>*#]*SUBTASK[ _]DONE\b[ \t]*:?[ \t]*(.*)", re.MULTILINE | re.IGNORECASE | re.DOTALL)


def parse_action(reply: str) -> tuple[str, str | None, int]:
    """Split a reply into (thought, code of the first python block or None, number of code blocks)."""
    blocks = list(_CODE_BLOCK.finditer(reply))
    if not blocks:
        return reply.strip(), None, 0
    return reply[: blocks[0].start()].strip(), blocks[0].group(1), len(blocks)


@dataclass
class ExecutorRun:
    """The outcome of one executor run (the whole task, or one subtask)."""

    steps: list[ActionStep] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    exit_status: str = ""
    """"submitted" (complete_task called), "subtask_done", "limits_exceeded" or "context_exceeded"."""
    result: str = ""
    """The final observation, or the executor's ``SUBTASK DONE`` report."""


class Executor:
    """Runs the ReAct loop on one (sub)task.

    Args:
        model: the policy.
        prompts: the agent prompts.
        config: agent settings (observation cut, sampling parameters).
        calls: the task's call log (every model call is recorded there).
    """

    def __init__(self, model: ChatModel, prompts: AgentPrompts, config: AgentConfig, calls: CallLog) -> None:
        self.model = model
        self.prompts = prompts
        self.config = config
        self.calls = calls

    def system_prompt(self, episode: Episode, *, subtask_mode: bool) -> str:
        rules = self.prompts.executor_subtask_rules.render() if subtask_mode else ""
        return self.prompts.executor_system.render(docs=episode.docs().strip(), subtask_rules=rules)

    def run(self, episode: Episode, task_message: str, *, subtask_index: int | None, first_index: int, budget: int,
            subtask_mode: bool) -> ExecutorRun:
        """Run until submission or until ``budget`` steps are used.

        Args:
            episode: the running task.
            task_message: the first user message (goal, summary, skills).
            subtask_index: the subtask being executed (None at task level).
            first_index: index of this run's first step in the task's shared budget.
            budget: most steps this run may take (format errors count).
            subtask_mode: accept ``SUBTASK DONE: ...`` as the end of the run.
        """
        system = self.system_prompt(episode, subtask_mode=subtask_mode)
        run = ExecutorRun(messages=[{"role": "system", "content": system}, {"role": "user", "content": task_message}])
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
            except ContextExceeded as exc:
                run.exit_status = "context_exceeded"
                run.result = exc.message
                return run
            finally:
                if len(run.steps) > steps_before:
                    self.calls.emit("step_end", step=run.steps[-1])

    def _step(self, run: ExecutorRun, episode: Episode, subtask_index: int | None, first_index: int, budget: int,
              subtask_mode: bool) -> None:
        if len(run.steps) >= budget:
            raise LimitsExceeded(f"step limit reached ({first_index + len(run.steps)} executor steps)")
        self.calls.emit("step_start", index=first_index + len(run.steps), subtask_index=subtask_index)
        completion = self.calls.complete(self.model, run.messages, "executor", **self.config.model_params)
        reply = completion.text
        run.messages.append({"role": "assistant", "content": reply})
        thought, code, n_blocks = parse_action(reply)
        step = ActionStep(index=first_index + len(run.steps), subtask_index=subtask_index, reply=reply,
                          thought=thought, action=code, observation="", prompt_tokens=completion.prompt_tokens,
                          completion_tokens=completion.completion_tokens, latency_s=completion.latency_s)
        run.steps.append(step)
        if code is None:
            done = _SUBTASK_DONE.search(reply) if subtask_mode else None
            if done is not None:
                step.observation = "(subtask marked done)"
                raise Submitted(done.group(1).strip() or "(no report)", scope="subtask")
            hint = " (or a `SUBTASK DONE: <result>` line when the subtask is finished)" if subtask_mode else ""
            step.format_error = True
            step.observation = self.prompts.format_error.render(subtask_hint=hint)
            raise FormatError(step.observation)
        observation = episode.step(code)
        output = truncate(observation.output, self.config.max_observation_chars)
        if n_blocks > 1:
            output += f"\n(note: only the first of your {n_blocks} code blocks was run)"
        step.observation, step.error, step.done = output, observation.error, observation.done
        run.messages.append({"role": "user", "content": self.prompts.observation.render(output=output)})
        if observation.done:
            raise Submitted(output, scope="task")
