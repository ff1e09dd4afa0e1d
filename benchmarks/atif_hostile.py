"""What reading a hostile ATIF file costs: for each case of ``tests/helpers_atif.py`` (100 MB, 100,000 steps, nesting
100,000 deep, subagents 40 deep, control characters, reference loops), the line or notes `read_atif` gives, the peak
memory (RSS) of a fresh process reading it, and the seconds; plus a 60 MB trajectory of 15,000 steps that is read.

    python benchmarks/atif_hostile.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers_atif import hostile_cases  # noqa: E402

PROBE = """
import json, sys, time
def peak():  # VmHWM: this process's own peak RSS (reset by exec, unlike ru_maxrss), MiB
    line = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
from skilltransfer.log.atif_files import read_atif
base = peak()
start = time.perf_counter()
read = read_atif([sys.argv[1]])
out = {"seconds": time.perf_counter() - start, "rss_mib": peak(),
       "base_mib": base, "read": len(read.trajectories), "lines": read.unusable,
       "notes": [n for t in read.trajectories for n in t.notes]}
print(json.dumps(out))
"""


def large(folder: Path) -> Path:
    """A valid 60 MB trajectory: 15,000 shell steps of 4,000-character observations."""
    steps = [{"step_id": 1, "source": "user", "message": "do it"}]
    steps += [{"step_id": i + 2, "source": "agent", "message": "m",
               "tool_calls": [{"tool_call_id": f"c{i}", "function_name": "bash", "arguments": {"cmd": "ls"}}],
               "observation": {"results": [{"source_call_id": f"c{i}", "content": "x" * 4000}]}}
              for i in range(15_000)]
    path = folder / "large-60mb.json"
    path.write_text(json.dumps({"schema_version": "ATIF-v1.8", "agent": {"name": "a", "version": "1"},
                                "steps": steps}))
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cases = hostile_cases(Path(tmp))
        cases["60 MB, 15,000 steps (read)"] = large(Path(tmp))
        print(f"{'case':<30} {'read':>4} {'peak RSS MiB':>12} {'(import)':>8} {'s':>5}  line / notes")  # s: the read
        for name, path in cases.items():
            done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True,
                                  cwd=ROOT, check=True)
            row = json.loads(done.stdout)
            said = row["lines"] or row["notes"] or ["(read, no note)"]
            shown = "; ".join(line.replace(tmp, "")[:110] for line in said[:2])
            print(f"{name:<30} {row['read']:>4} {row['rss_mib']:>12.0f} {row['base_mib']:>8.0f} "
                  f"{row['seconds']:>5.1f}  {shown}")


if __name__ == "__main__":
    main()
