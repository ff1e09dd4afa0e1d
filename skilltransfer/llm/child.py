"""Run a Python module as a child process that exits when the process that started it dies.

``python -m skilltransfer.llm.child PARENT_PID MODULE [ARGS...]`` runs ``MODULE`` as ``__main__`` with ``ARGS``; a
daemon thread checks once a second whether its parent is still ``PARENT_PID`` and ends the process when it is not.
The embedded model server is started this way, so a run killed with SIGTERM or SIGKILL (no ``atexit``) leaves no
server behind, computing an answer nobody waits for. (``PR_SET_PDEATHSIG`` would fire when the *thread* that started
the server ends, which in a grid is a stream's worker thread, not the process.)
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time

POLL_S = 1.0


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    os._exit(0)


def main() -> None:
    parent, module, *args = sys.argv[1:]
    threading.Thread(target=_watch, args=(int(parent),), daemon=True, name="parent-watch").start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
