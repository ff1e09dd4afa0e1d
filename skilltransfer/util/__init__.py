"""Shared helpers on the lowest floor (every part may use them; they use nothing of the package but ``errors``).

* ``files``: atomic writes, JSONL lines (split on ``\\n`` only), JSON files read with one-line errors;
* ``text``: cutting over-long text (head and tail kept);
* ``imports``: resolving ``module:attr`` targets (registries, plug-in envs, setup functions);
* ``prompts``: prompt templates in markdown files, with ids for the logs.
"""
