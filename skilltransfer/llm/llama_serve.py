"""``python -m skilltransfer.llm.llama_serve ARGS``: ``llama_cpp.server`` with ``ARGS``, made safe on CPUs with AMX.

llama.cpp repacks quantised weights into *extra buffer types* for faster kernels; on a CPU that advertises AMX
(``amx_tile`` in ``/proc/cpuinfo``) that is the AMX path, which faulted in this project's VMs (a general protection
fault at ``ldtilecfg`` in ``libggml-cpu.so``: the server died on its first completion and every call then failed to
connect). There the server loads the model with ``use_extra_bufts`` off (the plain CPU kernels); elsewhere nothing
changes. ``SKILLTRANSFER_LLAMA_EXTRA_BUFTS=1`` / ``0`` forces either way.
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path
from typing import Any


def cpu_has_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the CPU advertises AMX tiles (False when ``cpuinfo`` cannot be read)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    return any(line.startswith("flags") and " amx_tile" in line for line in text.splitlines())


def extra_buffers_wanted() -> bool:
    """``SKILLTRANSFER_LLAMA_EXTRA_BUFTS`` when set ("0" off, else on), else off on a CPU with AMX, on elsewhere."""
    forced = os.environ.get("SKILLTRANSFER_LLAMA_EXTRA_BUFTS")
    if forced is not None:
        return forced.strip() not in ("0", "false", "no", "")
    return not cpu_has_amx()


def disable_extra_buffers() -> None:
    """Make every model llama-cpp-python loads in this process use no extra buffer types."""
    import llama_cpp.llama_cpp as bindings

    default_params = bindings.llama_model_default_params

    def params() -> Any:
        out = default_params()
        out.use_extra_bufts = False
        return out

    bindings.llama_model_default_params = params


def main() -> None:
    if not extra_buffers_wanted():
        disable_extra_buffers()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
