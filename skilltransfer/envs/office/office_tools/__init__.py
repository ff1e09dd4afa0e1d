"""The office env's agent-side code: the apps the agent calls (``apps``) and the document formats (``files``).

Self-contained (relative imports only) and free of evaluation state: the sandbox worker imports this package as
``office_tools`` from its runtime folder; the harness imports it as ``skilltransfer.envs.office.office_tools``
(world building and checks use ``files`` too). Templates, reference solutions and checks stay outside it.
"""
