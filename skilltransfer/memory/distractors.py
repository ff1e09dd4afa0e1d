"""Distracting skills (study "Subagents vs Agent Skills", Fig. 3): procedural skills unrelated to every bundled env,
added to a frozen library to lengthen what the agent is shown (a stream's ``distractors``).

Each is a well-formed procedural skill with input and output contracts (so it looks like the real ones) about an
off-domain chore: cooking, gardening, bicycle repair, ... `distractor_skills(n)` is deterministic: the first ``n`` of a
fixed sequence (domain x procedure, names unique), each with its own source task (``distractor/<domain>``), so a task
tree groups them by domain as it groups real skills by task.
"""

from __future__ import annotations

from skilltransfer.errors import InputError
from skilltransfer.skill import Provenance, Skill

_DOMAINS: list[tuple[str, list[tuple[str, str, str, str]]]] = [
    ("baking", [("proof-sourdough", "Proof a sourdough loaf until it passes the poke test.",
                 "the dough's weight and the room temperature", "the proofing time in hours"),
                ("temper-chocolate", "Temper dark chocolate on a marble slab for a glossy finish.",
                 "the chocolate's cocoa share", "the working temperature reached"),
                ("laminate-croissant-dough", "Fold butter into croissant dough in three single turns.",
                 "the dough and butter block sizes", "the number of layers made")]),
    ("gardening", [("prune-roses", "Prune rose bushes in late winter above an outward-facing bud.",
                    "the variety and the bush's height", "the canes kept"),
                   ("compost-balance", "Balance a compost heap's greens and browns and turn it.",
                    "the heap's volume and smell", "the ratio added"),
                   ("sow-tomatoes", "Sow tomato seeds indoors and prick out the seedlings.",
                    "the sowing date and tray size", "the seedlings potted on")]),
    ("bicycle", [("true-a-wheel", "True a buckled bicycle wheel with a spoke key.",
                  "the wheel size and where it rubs", "the remaining wobble in millimetres"),
                 ("index-gears", "Index a rear derailleur with the barrel adjuster.",
                  "the number of sprockets", "the gears that shift cleanly"),
                 ("bleed-brakes", "Bleed hydraulic disc brakes with a syringe kit.",
                  "the brake model and fluid type", "whether the lever feels firm")]),
    ("knitting", [("cast-on-long-tail", "Cast on stitches with the long-tail method.",
                   "the yarn weight and stitch count", "the cast-on row"),
                  ("knit-cable", "Knit a six-stitch cable with a cable needle.",
                   "the row of the cable cross", "the crossed stitches"),
                  ("block-a-shawl", "Wet-block a lace shawl on foam mats.",
                   "the shawl's target size", "the pinned dimensions")]),
    ("astronomy", [("polar-align", "Polar-align an equatorial telescope mount.",
                    "the site's latitude", "the alignment error in arcminutes"),
                   ("log-meteors", "Count meteors during a shower and log the rate.",
                    "the shower name and sky darkness", "the hourly rate"),
                   ("collimate-reflector", "Collimate a Newtonian reflector with a laser.",
                    "the telescope's focal length", "whether the spot is centred")]),
    ("aquarium", [("cycle-a-tank", "Cycle a new aquarium until ammonia and nitrite read zero.",
                   "the tank volume", "the days until the cycle completed"),
                  ("change-water", "Change a quarter of the aquarium water at matched temperature.",
                   "the tank volume and temperature", "the litres changed"),
                  ("trim-plants", "Trim stem plants and replant the tops.", "the plant species",
                   "the stems replanted")]),
    ("woodwork", [("sharpen-a-chisel", "Sharpen a chisel on water stones to a mirror edge.",
                   "the bevel angle", "the grits used"),
                  ("cut-dovetails", "Cut through dovetails by hand for a drawer.", "the board thickness",
                   "the number of tails"),
                  ("oil-a-tabletop", "Finish a tabletop with three coats of hard-wax oil.", "the wood species",
                   "the coats applied")]),
    ("birdwatching", [("identify-by-song", "Identify a garden bird by its song.", "a description of the song",
                       "the likely species"),
                      ("clean-a-feeder", "Clean and disinfect a bird feeder.", "the feeder type",
                       "when it was refilled"),
                      ("keep-a-sightings-diary", "Keep a sightings diary with counts per species.",
                       "the day's sightings", "the diary entry")]),
    ("cycling-nutrition", [("plan-ride-fuel", "Plan carbohydrate intake for a long ride.", "the ride's duration",
                            "grams per hour"),
                           ("mix-electrolytes", "Mix an electrolyte drink for hot weather.", "the bottle size",
                            "the sodium added")]),
    ("music", [("tune-a-guitar", "Tune a guitar to drop-D by ear.", "the reference pitch", "the string pitches"),
               ("restring-a-violin", "Restring a violin one string at a time.", "the string set",
                "whether the bridge stayed upright"),
               ("practise-scales", "Plan a week of scale practice with a metronome.", "the target tempo",
                "the tempo reached")]),
]


DISTRACTOR_SOURCE = "distractor/"
"""The start of a distracting skill's ``provenance.source_task_id`` (``distractor/<domain>``): what tells it apart in
the records (a retrieval of one is no transfer event)."""


def distractor_skills(n: int) -> list[Skill]:
    """The first ``n`` distracting skills.

    Raises:
        InputError: ``n`` above `max_distractors`.
    """
    pool: list[Skill] = []
    rounds = 0
    while len(pool) < n:
        rounds += 1
        if rounds > 20:
            raise InputError(f"distractors: at most {max_distractors()} distracting skills, asked for {n}")
        for domain, procedures in _DOMAINS:
            for name, what, inputs, outputs in procedures:
                suffix = "" if rounds == 1 else f"-v{rounds}"
                body = (f"1. Gather what {name.replace('-', ' ')} needs: {inputs}.\n2. {what}\n"
                        f"3. Check the result and note {outputs}.")
                pool.append(Skill(name=f"{name}{suffix}", description=what, body=body, inputs=inputs.capitalize(),
                                  outputs=outputs.capitalize(),
                                  provenance=Provenance(source_task_id=f"{DISTRACTOR_SOURCE}{domain}")))
    return pool[:n]


def max_distractors() -> int:
    """How many distinct distracting skills `distractor_skills` can give."""
    return 20 * sum(len(procedures) for _, procedures in _DOMAINS)
