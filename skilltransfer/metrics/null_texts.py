"""Off-topic texts for the embedder's null (issue 39 §6): what the best match of a skill unrelated to a task set looks
like under a given embedder and task set.

Written for this purpose, one or two sentences each, in the register of a skill description. Their topics avoid
the bundled envs' domains (office files, email, calendar, contacts, money, shopping, data analysis, science
experiments) and the planted off-domain skills of ``benchmarks/utility_planted.py`` (cooking, gardening, astronomy,
knitting, football, wine, birdwatching, yoga), so the benchmark that measures the flag does not test it on its own
null. Changing this list changes every null threshold: `NULL_ID` names the version.
"""

from __future__ import annotations

NULL_ID = "null-v1"
NULL_TEXTS: tuple[str, ...] = (
    "Open a chess game with the Sicilian Defence and answer the Open Sicilian with the Najdorf variation.",
    "Bow a violin string smoothly, keeping the bow parallel to the bridge and the wrist loose.",
    "Tie a bowline knot to make a fixed loop at the end of a sailing rope.",
    "Glaze a stoneware pot and fire it in a kiln until the glaze vitrifies.",
    "Inspect a beehive frame for the queen, capped brood and signs of varroa mites.",
    "Rope up for a multi-pitch rock climb and build a belay anchor from two bolts.",
    "Summarise the plot of a Verdi opera, from the overture to the final aria.",
    "Paddle into a breaking wave on a surfboard and pop up to a standing stance.",
    "Fold a paper crane in origami, starting from a square base.",
    "Recount the reign of the Roman emperor Hadrian and the wall he built in Britain.",
    "Voice a minor seventh jazz chord on the piano with a rootless left hand.",
    "Dance the basic eight-count step of Argentine tango with an embrace.",
    "Choose a fishing lure for trout in a cold mountain stream.",
    "Wax cross-country skis for grip on fresh snow below freezing.",
    "Scan a line of poetry into iambic pentameter and mark the stressed syllables.",
    "Hold the five positions of the feet in classical ballet.",
    "Groom a long-haired dog: brush out the mats and trim the nails.",
    "Perform a card trick in which the chosen card rises to the top of the deck.",
    "Write a haiku about the first frost of autumn.",
    "Shoot an arrow with a recurve bow, anchoring the string at the corner of the mouth.",
    "Parry and riposte in foil fencing, keeping the blade in line.",
    "Tell the myth of Persephone and how it explains the changing seasons.",
    "Describe the lighting and narration of a classic film noir.",
    "Explain the origin story of a masked comic-book hero.",
    "Teach the rules of a cooperative board game in which players fight outbreaks of a plague.",
    "Correct a slice in a golf swing by closing the club face at impact.",
    "Land an ollie on a skateboard by snapping the tail and sliding the front foot.",
    "Letter a word in italic calligraphy with a broad-edged pen held at forty-five degrees.",
    "Groom and saddle a horse, then mount from the left side.",
    "Change the oil of a motorcycle and check the chain tension.",
    "Compose a lullaby with a simple melody in three-four time.",
    "Retell the fairy tale of a girl who leaves a glass slipper at a palace ball.",
    "Name the gods of the Norse pantheon and the world tree that joins their realms.",
    "Perform a traditional tea ceremony bow and turn the bowl before drinking.",
    "Describe the top, heart and base notes of a floral perfume.",
    "Write heartfelt wedding vows that mention how the couple first met.",
    "Train a parrot to repeat a short phrase with daily repetition and rewards.",
    "Juggle three balls in a cascade pattern, throwing each ball in an arc.",
    "Row a racing shell in time with the crew, feathering the oar on the recovery.",
    "Sculpt a bust from clay, blocking out the head before adding the features.",
    "Build a sandcastle with towers and a moat at low tide.",
    "Plan a hiking route through an alpine pass and pack for a night in a mountain hut.",
    "Recite the lines of a Shakespeare sonnet about the passing of time.",
    "Ride a unicycle by finding the balance point and pedalling in half turns.",
    "Carve a wooden spoon from a green branch with a hook knife.",
    "Paint a watercolour sky, wetting the paper first and dropping in colour.",
    "Perform a magic coin vanish using a classic palm.",
    "Restore an antique clock by cleaning the gears and adjusting the pendulum.",
)
"""The null texts (48)."""
