"""Configuration of the task-level and subtask-level agents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AgentLevel = Literal["task", "subtask"]
RetrievalQuery = Literal["instruction", "subtask"]
SkillExec = Literal["inline", "agent-skill", "subagent", "hybrid"]
"""How retrieved skills are executed (``skilltransfer.agents.skill_actions``)."""
LibraryOrganization = Literal["flat", "task-tree", "tree", "graph"]
LibraryExposure = Literal["retrieved", "whole"]
"""How retrieved skills are organised for the agent (``skilltransfer.memory.organization``)."""
SkillDisclosure = Literal["full", "progressive"]
"""How much of each retrieved skill the agent is shown (``skilltransfer.agents.disclosure``)."""
ROLE_MAX_TOKENS: dict[str, int] = {"executor": 1024, "planner": 96, "summarizer": 256, "induction": 768}
"""Completion budget per role (tokens) of the ``small-model`` and ``custom`` presets (``paper`` sends none)."""


def role_budgets(config: AgentConfig) -> tuple[dict[str, int], bool]:
    """(completion budget per role, whether each is capped at a quarter of the window): ``role_max_tokens`` when set
    (not capped); else none under ``paper`` (the paper keeps each provider's default: a reasoning model spends its
    cap thinking), `ROLE_MAX_TOKENS` (capped) under the other presets."""
    if config.role_max_tokens is not None:
        return dict(config.role_max_tokens), False
    if config.harness == "paper":
        return {}, False
    return dict(ROLE_MAX_TOKENS), True


class AgentSettings(BaseModel):
    """Settings of an agent at either level (a stream's ``agent`` settings; its condition gives the level).

    The switches of the harness features (``stop``, ``stuck_detection``, ``refuse_*``, ...; see
    `skilltransfer.agents.harness`) default to None: the value of the preset in ``harness``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step_limit: int = Field(default=50, ge=1)
    """ReAct step limit of the task-level agent, and the executor budget shared by all subtasks at subtask level."""
    subtask_limit: int = Field(default=15, ge=1)
    """Most subtasks the planner may propose (subtask level only)."""
    top_k: int = Field(default=5, ge=0)
    """Skills retrieved per query (seed §3.2: top 5 by description embedding)."""
    retrieval_min_score: float | None = Field(default=None, ge=-1, le=1)
    """Harness ``retrieval_floor``: embedding retrieval drops skills whose cosine with the query is below this, so an
    unrelated skill (another app's procedure, which a small model follows anyway) never fills an empty slot of the
    top-k. With all-MiniLM-L6-v2, skills of another app score about -0.1-0.2 against a query, skills of the same
    procedure 0.25-0.8. -1 keeps every top-k hit (the paper's plain top-5); None: the preset's (0.2 or -1). Routed
    retrieval (a ``retriever``) is left alone."""
    library_min_score: float | None = Field(default=None, ge=-1, le=1)
    """Similarity floor for retrieval from a frozen library (``--library``; a read-only memory): of the top-k, skills
    whose cosine with the query is below this are not shown (counted in `RetrievalStep.below_min_score` with those
    of ``retrieval_min_score``). Unlike ``retrieval_min_score`` it is no harness feature: no preset sets it, and it
    leaves a run's own memory alone. None: no floor. Routed retrieval (a ``retriever``) is left alone."""
    skill_disclosure: SkillDisclosure | None = None
    """How much of each retrieved skill the agent is shown (`skilltransfer.agents.disclosure`): ``full`` (each skill
    whole, the paper's agent) or ``progressive`` (the Agent Skills way: name and description always, the instructions
    when the agent loads the skill, its files when it reads them). None: ``full``; a stream that reads an external
    library (a SKILL.md folder or a .jsonl, not a run's memory) resolves it to ``progressive`` and records that."""
    inline_body_chars: int = Field(default=4000, ge=0)
    """Progressive disclosure with ``skill_exec: inline``: a skill whose instructions (body) have at most this many
    characters is shown whole; a longer one as its card (name, description, how to load it). 0: cards only."""
    skill_page_chars: int = Field(default=8000, ge=500)
    """Progressive disclosure: the most characters of a skill's instructions or of one of its files that one
    ``load_skill`` or ``read_skill_file`` shows (the page ends with the call that shows the next)."""
    retrieval_query: RetrievalQuery = "subtask"
    """Subtask level: query memory with the subtask text (default; it names the sub-procedure that subtask-level skills
    describe) or with the task instruction. The task-level agent always queries once with the instruction; the closing
    subtask (``close_unfinished``) queries with the instruction (its text is the same for every task)."""
    subagent_budget: Literal["caller", "own"] = "caller"
    """Whose steps a ``run_skill`` subagent spends: ``caller`` (default) draws them from the caller's remaining budget,
    so a task with subagents takes no more steps than one with agent skills (the study caps neither: a budget shared
    this way is the comparable one); ``own`` gives it ``subagent_step_limit`` steps of its own on top of the caller's
    (a task can then take the caller's budget + that many per ``run_skill``)."""
    subagent_step_limit: int | None = Field(default=15, ge=1)
    """A subagent's own step budget under ``subagent_budget: own`` (None there: drawn from the caller's, as
    ``caller``); unused under ``caller``. A subagent that spends its budget ends with ``limits_exceeded`` and the caller
    goes on (its ``run_skill`` observation says so)."""
    subagent_time_limit_s: float | None = Field(default=None, gt=0)
    """A subagent's wall-clock limit in seconds, checked before each of its steps (a model call in flight is not cut):
    past it the subagent ends with ``time_exceeded`` and the caller goes on; None: no limit."""
    task_timeout_s: float | None = Field(default=None, gt=0)
    """A task's wall-clock limit in seconds, enforced by the stream runner before each model call (a call in flight
    is not cut): past it the task ends and is recorded with exit status ``task_timeout``; None: no limit."""
    max_observation_chars: int = Field(default=4000, ge=200)
    """Observations longer than this are cut (head and tail kept) before they enter the context."""
    planner_retries: int = Field(default=2, ge=0)
    """How often the planner is re-asked after a reply that is neither ``SUBTASK: ...`` nor ``DONE``."""
    prompt_dir: str | None = None
    """A folder of replacement agent prompt files (same file names as ``skilltransfer/agents/prompts``)."""
    model_params: dict[str, Any] = Field(default_factory=dict)
    """Extra sampling parameters passed to every ``ChatModel.complete`` call of the agent."""
    role_max_tokens: dict[str, int] | None = None
    """Completion budget per role (executor, planner, summarizer, induction), sent as ``max_tokens`` unless the call's
    or the model's params set ``max_tokens``; context fitting reserves it. A role left out gets no ``max_tokens``.
    None: the preset's (`role_budgets`): none under ``paper`` (a model's own ``max_completion_tokens`` still
    applies), ``ROLE_MAX_TOKENS`` under ``small-model`` and ``custom``, each capped at a quarter of the window."""
    context_keep_steps: int = Field(default=4, ge=1)
    """Context fitting keeps the last this-many executor steps verbatim while eliding older ones (see
    ``skilltransfer.agents.context``)."""
    harness: Literal["paper", "small-model", "custom"] | None = None
    """Which harness features (guards, `skilltransfer.agents.harness`) are on: ``paper`` (none: the paper's agent),
    ``small-model`` (all) or ``custom`` (those in ``guards``); a switch below that is set wins over the preset. None:
    resolved by the model (``small-model`` for the embedded ``local`` model, ``paper`` otherwise;
    `skilltransfer.agents.harness.default_preset`), once: by a stream's settings, or by `Agent` when built without
    one. A resolved config names the preset here and the features that are on in
    ``guards``."""
    guards: list[str] | None = None
    """With ``harness: custom``: the features to switch on (names in `skilltransfer.agents.harness.GUARDS`). Once
    resolved: the features that are on."""
    stop: list[str] | None = None
    """Harness ``stop_sequence``: executor stop sequences (sent unless ``model_params`` has ``stop``): generation ends
    before the model invents an observation; text after the first code block from an ``Observation`` line on is also
    cut from the reply before it enters the context (the step log keeps the raw reply), and the summarizer's reply
    ends before its first heading line. [] is off; None: the preset's (``["\nObservation:"]`` or [])."""
    stuck_detection: bool | None = None
    """Harness ``stuck_detection``: detect loops (``agents.harness.observations``): hint once, then end the (sub)task
    with exit status ``stuck``; a subtask the planner plans again, word for word, after it ended ``stuck`` ends the
    task (exit status ``stuck``). None: the preset's."""
    stuck_temperature: float | None = Field(default=0.8, ge=0)
    """After a stuck hint or a refused ungrounded answer, the executor's remaining calls in that (sub)task sample at
    this temperature (a model at a low temperature otherwise answers the hint with the same reply); None keeps the
    run's temperature."""
    demonstration: Literal["turns", "inline"] | None = None
    """Harness ``demonstration``: how the executor shows the worked example at the end of an env's docs, if any: as
    earlier chat turns that the planner never sees (small models imitate them), or left inline in the docs (off).
    None: the preset's."""
    subtask_example: bool | None = None
    """A setting of ``demonstration`` (subtask level): show a subtask executor the worked example as one subtask that
    ends with ``SUBTASK DONE: <report>`` instead of ``complete_task`` (`Demonstration.as_subtask`); the example's task
    message is then in the subtask message's format. False: the task-level example. None: on with the turns."""
    example_plan: bool | None = None
    """Harness ``example_plan``: an env's example plan (``## Example plan (another task)``) is shown to the planner
    after the docs and never to the executor. None: the preset's."""
    error_hints: bool | None = None
    """Harness ``error_hints``: an ``AttributeError`` for an API the docs do not list, and a ``ModuleNotFoundError``
    for a name the docs use as an object, get a note (the documented APIs; do not import it). None: the preset's."""
    subtask_history: bool | None = None
    """Harness ``subtask_history``: the planner also sees every earlier subtask with its exit status and report (the
    paper's planner reads the goal and the running summary only). None: the preset's."""
    uncopy_subtasks: bool | None = None
    """Harness ``planner_copies``: a planned subtask in the form of the planner's own history line (``2. <subtask>
    -> stuck: ...``) is cut to the subtask. None: the preset's."""
    refuse_premature_done: bool | None = None
    """Refuse once, with the reason, a planner ``DONE`` before any subtask ran, a planner ``DONE`` while nobody has
    called ``complete_task`` (once per task), and a ``SUBTASK DONE`` before any code of the subtask ran without an
    error (once per subtask; the 1.5B executor reported a traceback as the result of "Read data/sales.xlsx")."""
    refuse_repeated_subtask: bool | None = None
    """Subtask level: refuse once per planner turn, with the earlier line of the subtask list, a planned subtask that
    is word for word (case and spacing aside) one that already ended ``subtask_done``, and ask again; the second
    answer stands. The 1.5B planner, copying the worked example's first subtask, planned "List Tina's events ..."
    twice and then stopped without adding the event."""
    close_unfinished: bool | None = None
    """Subtask level: when a planner ``DONE`` stands (after the unfinished-DONE refusal, when that is on) but nobody
    called ``complete_task``, run one closing subtask (``prompts/closing_subtask.md``) that asks the executor to
    submit the answer from the progress so far; its `PlanStep` has decision ``"closing"``."""
    done_on_repeat: bool | None = None
    """Subtask level: a reply that says ``SUBTASK DONE`` and re-sends code the subtask already ran without an error
    ends the subtask with that report; the code is not run again; a ``SUBTASK DONE`` line inside a code fence is the
    done reply."""
    refuse_early_completion: bool | None = None
    """Subtask level: refuse once per task, without running it, code that calls ``complete_task`` in a subtask whose
    text asks for neither ``complete_task`` nor a submission (the planner decides when the task is finished; a small
    executor copies the worked example's closing ``complete_task()`` into the first subtask). The closing subtask
    always may."""
    refuse_ungrounded_answer: bool | None = None
    """Refuse once per task, without running it, a ``complete_task`` whose literal answer holds a number or word that
    no output of the task shows (``agents.harness.grounding``): the model is told which parts it never saw."""
    refuse_ungrounded_report: bool | None = None
    """Refuse (at most twice per subtask) a ``SUBTASK DONE`` report with a number that neither an output nor the task
    message shows, or that claims a change ("removed", "sent") while no code of the task that ran called a function
    named for one."""
    refuse_unmade_completion: bool | None = None
    """Refuse (once per task) a ``complete_task`` while the instruction asks for a change ("change", "forward",
    "remove") and no code of the task that ran, nor the completing code, called a function named for one; the model is
    told which functions it called. The 1.5B executor printed the row to change and called ``complete_task()``."""
    induce_without_working_code: bool | None = None
    """Also induce a skill from a (sub)trajectory in which no code ran without an error. False (default) skips it
    (`InductionStep` status "skipped"): a small model's skill from a subtask that only failed records its invented
    calls ("apis.excel.open_file", "sheet_name='Sales'"), is retrieved at the top by the next similar subtask and
    copied there. True induces from every executed trajectory, as the paper does (harness ``induction_gate`` off)."""
    ground_skills: bool | None = None
    """Do not store an induced skill whose description or body (a code skill's code) names an ``apis.<app>.<api>``
    whose app or API name is not a word of the episode's docs and that no code of its trajectory that ran without an
    error names (`InductionStep` status "ungrounded", the names in its reason): the 1.5B inducer wrote
    ``apis.excel.load_workbook`` into a skill induced from ``apis.excel.read_file`` code, and the next task's
    executor, retrieving it at cosine 0.91, called that API until stuck."""
    ground_summary: bool | None = None
    """Subtask level: drop from the summarizer's reply each line that was not in the previous summary and holds a
    number that no output of the task (nor its instruction) shows, or claims a change ("forwarded", "added") while no
    code of the task that ran called a function named for one (``agents.harness.grounding``); the dropped lines
    are logged in the `SummaryStep`. A small summarizer writes the goal's outcome as done ("Forwarded email to
    Paul" after an empty mailbox listing) and the planner then stops."""


class AgentConfig(AgentSettings):
    """Settings of one agent (the task-level agent is ``level="task"``: one subtask, executor only)."""

    level: AgentLevel = "task"
    """"task": one flat ReAct loop over the whole task; "subtask": planner -> executor -> summarizer cycles."""
    skill_exec: SkillExec = "inline"
    """inline (skills in full in the context), agent-skill (``load_skill``), subagent (``run_skill``) or hybrid
    (groups opened inline, leaf skills as subagents); see ``skilltransfer.agents.skill_actions``."""
    library_organization: LibraryOrganization = "flat"
    """flat (retrieved skills at the top), task-tree, tree or graph (the agent opens groups with ``open_node``)."""
    library_exposure: LibraryExposure = "retrieved"
    """retrieved (the organisation over the top-k retrieved skills) or whole (the organised library is navigable; the
    top-k are only the first view); see ``skilltransfer.agents.skill_actions``."""
