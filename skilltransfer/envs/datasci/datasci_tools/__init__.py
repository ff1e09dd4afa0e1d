"""The datasci env's agent-side code: the file-browsing app the agent calls (``apps``).

Self-contained (standard library only) and free of evaluation state: the sandbox worker imports this package as
``datasci_tools`` from its runtime folder. Questions, answers and reference pipelines stay outside it.
"""
