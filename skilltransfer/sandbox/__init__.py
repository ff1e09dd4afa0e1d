"""Isolated execution of agent code: a sandboxed worker per episode, harness services reached through stubs.

* ``runner.SandboxRunner``: the worker process and its channel (isolation layers, threat model);
* ``inprocess.InProcessRunner`` / ``make_runner``: the unisolated runner for trusted test doubles;
* ``services``: harness-side services and the bindings that put their stubs into the agent's namespace;
* ``codecheck``: what a code skill's module body may hold; ``check_code_loads``: loading it in a fresh worker;
* ``scratch``: the toolkit's per-process temporary root (leftovers of killed runs are removed at the next start);
* ``runtime/``: the worker's own code (standard library only), the only toolkit code the worker can import.
"""

from skilltransfer.sandbox.codecheck import loading_action, skill_body_problem
from skilltransfer.sandbox.inprocess import InProcessRunner, make_runner
from skilltransfer.sandbox.runner import SandboxRunner, check_code_loads
from skilltransfer.sandbox.services import Services
from skilltransfer.sandbox.values import ExecResult, Limits, NamespaceSpec, Runner, SandboxError

__all__ = ["ExecResult", "InProcessRunner", "Limits", "NamespaceSpec", "Runner", "SandboxError", "SandboxRunner",
           "Services", "check_code_loads", "loading_action", "make_runner", "skill_body_problem"]
