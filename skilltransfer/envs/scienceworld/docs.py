"""What the agent reads about the ScienceWorld env: its functions and, in brief, the simulator's action grammar."""

from __future__ import annotations

FUNCTIONS = {
    "act": "act(action: str) -> str: take one ScienceWorld action (a text command, see below); returns the "
           "simulator's observation text. Every act() takes one step of simulated time.",
    "look": "look() -> str: describe the room you are in (free: takes no time).",
    "inventory": "inventory() -> str: what you carry (free).",
    "task_description": "task_description() -> str: the task, as the simulator states it (free).",
    "valid_actions": "valid_actions() -> list[str]: every action the simulator accepts right now (long: search it, "
                     "e.g. [a for a in valid_actions() if 'thermometer' in a]).",
    "action_templates": "action_templates() -> list[str]: the action templates below, as the simulator lists them.",
}
"""Function name -> one-line documentation (also each stub's docstring)."""

GRAMMAR = """\
Actions (OBJ and LOC are object and place names as observations show them; the simulator matches names loosely and
asks you to choose when a name is ambiguous: answer with act("0"), act("1"), ...):
  look around | look at OBJ | look in OBJ | read OBJ | inventory | task
  go to LOC (a neighbouring place, through an open door: "open door to LOC" first)
  open OBJ | close OBJ | pick up OBJ | put down OBJ | move OBJ to OBJ | pour OBJ in OBJ | dunk OBJ in OBJ | mix OBJ
  activate OBJ | deactivate OBJ | use OBJ on OBJ (e.g. "use thermometer in inventory on water")
  connect OBJ to OBJ | disconnect OBJ (electrical components, e.g. "connect battery anode to red wire terminal 1")
  eat OBJ | flush OBJ | wait (10 steps of time) | wait1 (1 step)
  focus on OBJ: declare the object the task is about. Focus only as the task asks: focusing on a wrong object
    fails the task at once (the episode ends).
"""


def overview() -> str:
    """The docs given to the agent at the start of every ScienceWorld episode."""
    functions = "\n".join(f"- {text}" for text in FUNCTIONS.values())
    return (
        "ScienceWorld: a text-based science simulator (rooms, objects, devices, substances, living things). You act "
        "by calling these Python functions; print what they return to see it:\n"
        f"{functions}\n"
        "- complete_task(): stop acting (the task is scored from the simulator's state either way).\n"
        "The episode ends by itself when the simulator says the task is completed or failed; act() then refuses "
        "further actions.\n\n"
        f"{GRAMMAR}\n"
        "Example:\n"
        "```python\n"
        "print(look())\n"
        "print(act(\"open door to kitchen\"))\n"
        "print(act(\"go to kitchen\"))\n"
        "print([a for a in valid_actions() if a.startswith('pick up')])\n"
        "```"
    )
