"""Grounded skills: an induced skill whose description or body names an ``apis.<app>.<api>`` whose app or API name is
not a word of the episode's docs, and that no code of its trajectory ran, is not stored (`InductionStep.status =
"ungrounded"`): the 1.5B inducer wrote ``apis.excel.load_workbook`` into a skill induced from ``read_file`` code, and
every later excel task retrieved it and called it until stuck. Switch: ``agent.ground_skills``."""

from __future__ import annotations

from skilltransfer.agents.harness.base import ACCEPT, Decision, Guard, InductionView, Refuse
from skilltransfer.agents.harness.grounding import undocumented_apis
from skilltransfer.agents.harness.text import ran_code
from skilltransfer.skill import Skill


class GroundedSkills(Guard):
    name = "grounded_skills"

    def skill_induced(self, view: InductionView, skill: Skill) -> Decision:
        unknown = undocumented_apis(f"{skill.description}\n{skill.body}", view.docs, ran_code(view.actions))
        if not unknown:
            return ACCEPT
        return Refuse("ungrounded", f"names {', '.join(unknown)}, which the env's docs do not document and no code ran")
