"""Guards on what enters and leaves the skill memory: the skills retrieved for a query (hook ``retrieved``), whether
a trajectory is induced from at all (``induction_due``), and an induced skill before it is stored (``skill_induced``).
A small model follows any skill it is shown, so an unrelated or invented one costs a task: these guards keep skills
from another procedure, from a trajectory where nothing worked, and naming APIs the env does not have out of the
prompt and the library."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, InductionView, Refuse, Rewrite
from skilltransfer.agents.harness.grounding import ran_code, undocumented_apis
from skilltransfer.protocols import Retrieval
from skilltransfer.skill import Skill


class RetrievalFloor(Guard):
    """Retrieval floor: embedding retrieval leaves out top-k hits whose cosine with the query is below
    ``retrieval_min_score`` (`RetrievalStep.below_min_score` counts them): an unrelated skill (another app's procedure,
    which a small model follows anyway) never fills an empty slot of the top-k. Routed retrieval is left alone. Switch:
    ``agent.retrieval_min_score`` (-1 is off: the paper's plain top-5)."""

    name = "retrieval_floor"

    def retrieved(self, query: str, got: Retrieval) -> Decision:
        floor = self.config.retrieval_min_score if self.config.retrieval_min_score is not None else -1.0
        kept = [(skill, score) for skill, score in got.hits if score >= floor]
        if len(kept) == len(got.hits):
            return ACCEPT
        removed = tuple(skill.id for skill, score in got.hits if score < floor)
        return Rewrite(Retrieval(kept), "below_min_score", removed)


class InductionGate(Guard):
    """Induction gate: no skill is induced from a (sub)trajectory in which no code ran without an error
    (`InductionStep.status = "skipped"`): a small model's skill from a subtask that only failed records its invented
    calls, is retrieved at the top by the next similar subtask and copied there. Switch:
    ``agent.induce_without_working_code`` (true is off: the paper induces from every executed trajectory)."""

    name = "induction_gate"

    def induction_due(self, view: InductionView) -> Decision:
        if ran_code(view.actions):
            return ACCEPT
        return Refuse("skipped", "no code of this trajectory ran without an error")


class GroundedSkills(Guard):
    """Grounded skills: an induced skill whose description or body names an ``apis.<app>.<api>`` whose app or API name
    is not a word of the episode's docs, and that no code of its trajectory ran, is not stored (`InductionStep.status =
    "ungrounded"`): the 1.5B inducer wrote ``apis.excel.load_workbook`` into a skill induced from ``read_file`` code,
    and every later excel task retrieved it and called it until stuck. Switch: ``agent.ground_skills``."""

    name = "grounded_skills"

    def skill_induced(self, view: InductionView, skill: Skill) -> Decision:
        unknown = undocumented_apis(f"{skill.description}\n{skill.body}", view.docs, ran_code(view.actions))
        if not unknown:
            return ACCEPT
        return Refuse("ungrounded", f"names {', '.join(unknown)}, which the env's docs do not document and no code ran")
