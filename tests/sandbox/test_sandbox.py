"""The sandbox: persistence, limits and isolation; each hostile action becomes an observation and the runner goes on."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from skilltransfer.envs.base import Submission, WorkspaceEpisode
from skilltransfer.protocols import Score, TaskSpec
from skilltransfer.sandbox import Limits, NamespaceSpec, SandboxError, SandboxRunner, Services, check_code_loads
from skilltransfer.sandbox.inprocess import make_runner
from skilltransfer.sandbox.runner import _readable_paths
from skilltransfer.sandbox.services import function

LIMITS = Limits(wall_s=2.0, cpu_s=2.0, memory_mb=1024, max_processes=32, max_output_chars=2_000, file_size_mb=8)
TOY_SETUP = "sandbox_setups:toy_setup"
ROOT = os.geteuid() == 0


def scratch(answers: list[Any] | None = None) -> tuple[NamespaceSpec, Services]:
    """A namespace holding only a ``complete_task`` service stub (recording into ``answers``)."""
    services = Services()
    services.register("complete_task", lambda answer=None: (answers if answers is not None else []).append(answer))
    return NamespaceSpec(bindings={"complete_task": function("complete_task", lenient=True)}), services


def toy(greeting: str) -> NamespaceSpec:
    return NamespaceSpec(setup=TOY_SETUP, setup_kwargs={"greeting": greeting})


def _uid_processes(uid: int | None) -> list[int]:
    if uid is None:
        return []
    found = []
    for entry in os.listdir("/proc"):
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except (OSError, ValueError):
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 0").split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            found.append(int(entry))
    return found


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
def answers() -> list[Any]:
    return []


@pytest.fixture
def runner(workspace: Path, answers: list[Any]):
    sandbox = SandboxRunner(workspace, *scratch(answers), limits=LIMITS)
    yield sandbox
    sandbox.close()


def _still_works(runner: SandboxRunner) -> None:
    result = runner.execute("print(1 + 1)")
    assert result.error is None
    assert result.output == "2\n"


def test_variables_persist(runner: SandboxRunner, workspace: Path, answers: list[Any]) -> None:
    assert runner.execute("x = 41").error is None
    assert runner.execute("print(x + 1)").output == "42\n"
    assert runner.execute("import os; print(os.getcwd())").output.strip() == str(workspace.resolve())
    assert runner.execute("print(complete_task('done'))").error is None
    assert answers == ["done"]


def test_error_traceback_shows_only_agent_frames(runner: SandboxRunner) -> None:
    result = runner.execute("def f():\n    return 1 / 0\nf()")
    assert result.error is not None
    assert "ZeroDivisionError" in result.error
    assert "<action>" in result.error
    assert "sandbox_worker" not in result.error
    _still_works(runner)


def test_write_outside_workspace_fails(runner: SandboxRunner, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    result = runner.execute(f"open({str(outside / 'evil.txt')!r}, 'w').write('x')")
    assert result.error is not None
    assert "PermissionError" in result.error
    result = runner.execute("import os\nos.remove('/etc/hostname')")
    assert result.error is not None
    assert Path("/etc/hostname").exists()
    assert runner.execute("open('inside.txt', 'w').write('ok')").error is None
    assert (runner.workspace / "inside.txt").read_text() == "ok"
    assert not (outside / "evil.txt").exists()
    _still_works(runner)


@pytest.mark.skipif(not ROOT, reason="the private-uid layer needs root")
def test_write_outside_workspace_fails_below_python(runner: SandboxRunner, tmp_path: Path) -> None:
    outside = tmp_path / "outside2"
    outside.mkdir()
    marker = f"evil-{os.getpid()}.txt"
    targets = [outside / marker, Path("/tmp") / marker, Path("/dev/shm") / marker]
    for target in targets:
        code = f"import subprocess\nr = subprocess.run(['sh', '-c', 'echo x > {target}'])\nprint(r.returncode)"
        result = runner.execute(code)
        assert result.error is None
        assert result.output.strip().splitlines()[-1] != "0"
        assert not target.exists()
    code = "import subprocess\nprint(subprocess.run(['sh', '-c', 'echo ok > inside.txt && cat inside.txt']).returncode)"
    assert sorted(runner.execute(code).output.split()) == ["0", "ok"]  # shell output comes after print()s
    _still_works(runner)


def test_secrets_are_not_inherited(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    with SandboxRunner(workspace, *scratch(), limits=LIMITS) as sandbox:
        result = sandbox.execute("import os\nprint(os.environ.get('OPENAI_API_KEY'))\nprint(dict(os.environ))")
        assert "sk-test-secret-123" not in result.output
        assert result.output.startswith("None\n")
        result = sandbox.execute(f"print(open('/proc/{os.getpid()}/environ', 'rb').read())")
        assert "sk-test-secret-123" not in result.output + (result.error or "")
        _still_works(sandbox)


def test_infinite_loop_times_out_and_restarts(runner: SandboxRunner) -> None:
    runner.execute("x = 1")
    start = time.monotonic()
    result = runner.execute("while True:\n    pass")
    assert time.monotonic() - start < LIMITS.wall_s + 2
    assert result.timed_out or result.crashed
    assert result.error is not None
    assert "variables" in result.error
    _still_works(runner)
    assert "NameError" in (runner.execute("print(x)").error or "")
    assert runner.execute("print(callable(complete_task))").output == "True\n"  # namespace rebuilt by setup


def test_a_watcher_tick_while_a_worker_restarts_stops_nothing(runner: SandboxRunner,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded machine lets the watcher tick between a fresh worker's start and its first action: the sandbox's
    CPU time then still holds the killed action's, which must not stop the new worker nor be the next error."""
    start = SandboxRunner._start

    def start_then_tick(self: SandboxRunner) -> None:
        start(self)
        self.check_limits()

    monkeypatch.setattr(SandboxRunner, "_start", start_then_tick)
    spin = "import os\nos.fork()\nwhile True:\n    pass"  # two spinning processes: past cpu_s, stopped, restarted
    assert runner.execute(spin).error is not None
    _still_works(runner)
    _still_works(runner)


def test_setup_kwargs_and_rebuild_after_crash(workspace: Path) -> None:
    with SandboxRunner(workspace, toy("hi"), limits=LIMITS) as sandbox:
        assert sandbox.execute("print(greet('Ada'))").output == "hi, Ada\n"
        assert sandbox.execute("import os\nos._exit(1)").crashed
        assert sandbox.execute("print(greet('Bo'))").output == "hi, Bo\n"
        assert sandbox.restarts == 1


def test_huge_allocation_is_an_error(runner: SandboxRunner) -> None:
    start = time.monotonic()
    result = runner.execute("blob = bytearray(10 * 1024 ** 3)")
    assert time.monotonic() - start < LIMITS.wall_s + 2
    assert result.error is not None
    assert "MemoryError" in result.error
    _still_works(runner)


@pytest.mark.skipif(not ROOT, reason="RLIMIT_NPROC needs a private uid (root harness)")
def test_process_limit_stops_forking(runner: SandboxRunner) -> None:
    code = (
        "import os, time\nn = 0\ntry:\n    while n < 500:\n        if os.fork() == 0:\n"
        "            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError as exc:\n"
        "    print('stopped', n, type(exc).__name__)"
    )
    result = runner.execute(code)
    assert result.error is None
    words = result.output.split()
    assert words[0] == "stopped"
    assert int(words[1]) < LIMITS.max_processes
    runner.close()
    assert _uid_processes(runner.uid) == []


@pytest.mark.skipif(not ROOT, reason="RLIMIT_NPROC needs a private uid (root harness)")
def test_fork_bomb_becomes_an_error(runner: SandboxRunner) -> None:
    start = time.monotonic()
    result = runner.execute("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
    assert time.monotonic() - start < LIMITS.wall_s + 3
    assert result.error is not None
    assert result.timed_out or result.crashed
    assert _uid_processes(runner.uid) == []
    _still_works(runner)


def test_os_exit_and_segfault_are_crashes(runner: SandboxRunner) -> None:
    result = runner.execute("import os\nos._exit(7)")
    assert result.crashed
    assert result.error is not None
    assert "exit code 7" in result.error
    _still_works(runner)
    result = runner.execute("import ctypes\nctypes.string_at(0)")
    assert result.crashed
    assert "SIGSEGV" in (result.error or "")
    _still_works(runner)


def test_network_is_blocked(runner: SandboxRunner) -> None:
    result = runner.execute("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)")
    assert result.error is not None
    result = runner.execute("import socket\nsocket.getaddrinfo('example.com', 80)")
    assert result.error is not None
    _still_works(runner)


def test_output_is_truncated(runner: SandboxRunner) -> None:
    result = runner.execute("print('x' * 100_000)\nimport os\nos.system('echo from-a-shell')")
    assert len(result.output) < LIMITS.max_output_chars + 200
    assert "truncated" in result.output
    assert "from-a-shell" in result.output  # file-descriptor-level output is captured too


def test_close_kills_children_and_cleans_up(workspace: Path) -> None:
    sandbox = SandboxRunner(workspace, *scratch(), limits=LIMITS)
    sandbox.execute("import subprocess\np = subprocess.Popen(['sleep', '60'])")
    tmpdir = sandbox.tmpdir
    sandbox.close()
    assert not tmpdir.exists()
    assert _uid_processes(sandbox.uid) == []
    with pytest.raises(SandboxError):
        sandbox.execute("print(1)")


def test_setup_failure_raises(workspace: Path) -> None:
    with pytest.raises(SandboxError, match="no_such_setup"):
        SandboxRunner(workspace, NamespaceSpec(setup="sandbox_setups:no_such_setup"), limits=LIMITS)
    with pytest.raises(SandboxError, match="No module named 'skilltransfer'"):
        SandboxRunner(workspace, NamespaceSpec(setup="skilltransfer.envs.apps.api:setup"), limits=LIMITS)


def test_check_code_loads() -> None:
    assert check_code_loads("import json\n\ndef f(x):\n    return json.dumps(x)\n", "f") is None
    assert "not a callable" in (check_code_loads("f = 3", "f") or "")
    assert "SyntaxError" in (check_code_loads("def f(:\n", "f") or "")
    assert "ModuleNotFoundError" in (check_code_loads("import no_such_module_xyz\ndef f(): pass", "f") or "")
    assert "timed out" in (check_code_loads("while True:\n    pass", "f", timeout_s=1.0) or "")
    assert "crashed" in (check_code_loads("import os\nos._exit(1)", "f") or "")


def test_workspace_episode_load_code_through_sandbox(workspace: Path) -> None:
    task = TaskSpec(id="t1", instruction="say hi", difficulty=1, template="toy")

    def evaluator(folder: Path, submission: Submission) -> Score:
        return Score(reward=float(submission.answer == "hi, Cy"), success=submission.answer == "hi, Cy")

    episode = WorkspaceEpisode(task, workspace, setup=TOY_SETUP, setup_kwargs={"greeting": "hi"}, docs="greet(name)",
                               evaluator=evaluator, sandboxed=True, limits=LIMITS)
    with episode:
        loaded = episode.load_code("def shout(name):\n    return greet(name)\n")
        assert not loaded.error
        observation = episode.step("complete_task(shout('Cy'))")
        assert observation.done
        assert episode.evaluate().success


@pytest.mark.skipif(not ROOT, reason="namespaces and a private uid need root")
def test_isolation_layers_are_active(runner: SandboxRunner) -> None:
    assert runner.isolation["namespaces"] is True
    assert runner.isolation["read_only_fs"] is True
    assert runner.isolation["uid"] == runner.uid != 0
    result = runner.execute("import os\nprint(os.getpid(), os.getuid())")
    pid, uid = map(int, result.output.split())
    assert pid == 2  # PID 2 of a private PID namespace (PID 1 reaps orphans)
    assert uid == runner.uid


def test_without_privilege_drop_python_layers_still_hold(workspace: Path, tmp_path: Path) -> None:
    limits = Limits(wall_s=2.0, cpu_s=2.0, memory_mb=1024, drop_privileges=False)
    with SandboxRunner(workspace, *scratch(), limits=limits) as sandbox:
        assert sandbox.uid is None
        assert sandbox.execute("y = 5").error is None
        assert "PermissionError" in (sandbox.execute(f"open({str(tmp_path / 'x')!r}, 'w')").error or "")
        assert "PermissionError" in (sandbox.execute("import socket\nsocket.getaddrinfo('a.b', 80)").error or "")
        assert sandbox.execute("import os\nos._exit(0)").crashed
        _still_works(sandbox)
        assert not (tmp_path / "x").exists()


@pytest.fixture
def planted(tmp_path: Path):
    """Secret files where agent code has no business reading: the harness's cache, the repo, another episode."""
    marker = f"planted-secret-{os.getpid()}-{time.monotonic_ns()}"  # the files' content; their names differ
    name = f".probe-{os.getpid()}-{time.monotonic_ns()}.txt"
    cache = Path.home() / ".cache" / "skilltransfer"
    made_cache = not cache.exists()
    cache.mkdir(parents=True, exist_ok=True)
    files = [cache / name, Path(__file__).resolve().parents[1] / name,
             tmp_path / "other-episode" / "secret.txt"]
    files[-1].parent.mkdir()
    shm = Path(tempfile.mkdtemp(dir="/dev/shm")) if Path("/dev/shm").is_dir() else None
    if shm is not None:  # another episode's workspace in shared memory
        files.append(shm / "secret.txt")
    for path in files:
        path.write_text(marker)
    yield marker, files
    for path in files:
        path.unlink(missing_ok=True)
    if shm is not None:
        shm.rmdir()
    if made_cache:
        with contextlib.suppress(OSError):
            cache.rmdir()


def _try_reads(sandbox: SandboxRunner, files: list[Path]) -> str:
    code = "import os\n"
    for path in files:
        code += (f"try:\n    print(open({str(path)!r}).read())\nexcept OSError as exc:\n"
                 f"    print('refused', type(exc).__name__)\n")
    result = sandbox.execute(code)
    assert result.error is None
    return result.output


def test_reads_outside_the_episode_are_refused(workspace: Path, planted: tuple[str, list[Path]]) -> None:
    marker, files = planted
    for limits in (LIMITS, Limits(wall_s=2.0, cpu_s=2.0, memory_mb=1024, drop_privileges=False)):
        with SandboxRunner(workspace, *scratch(), limits=limits) as sandbox:
            output = _try_reads(sandbox, files)
            assert marker not in output
            assert output.split().count("refused") == len(files)
            (workspace / "mine.txt").write_text("own data")
            assert sandbox.execute("print(open('mine.txt').read())").output == "own data\n"
            assert sandbox.execute("import json, numpy\nprint(json.dumps([1]))").output == "[1]\n"
            _still_works(sandbox)


def test_listing_outside_the_episode_is_refused_without_namespaces(workspace: Path) -> None:
    limits = Limits(wall_s=2.0, cpu_s=2.0, memory_mb=1024, drop_privileges=False)
    repo = Path(__file__).resolve().parents[2]
    with SandboxRunner(workspace, *scratch(), limits=limits) as sandbox:
        for folder in (repo, Path.home(), repo / "tests"):
            result = sandbox.execute(f"import os\nprint(os.listdir({str(folder)!r}))")
            assert "PermissionError" in (result.error or ""), folder
        assert sandbox.execute("import os\nprint(os.listdir('.'))").error is None


@pytest.mark.skipif(not ROOT, reason="the mount namespace needs root")
def test_file_system_shows_only_what_the_worker_needs(workspace: Path, planted: tuple[str, list[Path]]) -> None:
    marker, files = planted
    repo = Path(__file__).resolve().parents[2]
    with SandboxRunner(workspace, *scratch(), limits=LIMITS) as sandbox:
        assert sandbox.isolation["reads_confined"] is True
        assert sandbox.isolation["read_capability"] is False  # no open_by_handle_at around the hidden files
        visible = [*_readable_paths(sandbox.runtime, None), str(sandbox.workspace), str(sandbox.tmpdir)]
        for folder in (repo.parent, repo, Path.home(), Path("/tmp"), Path(tempfile.gettempdir())):
            # What matters is what shows, not how it is hidden: a folder with nothing the worker needs may be absent,
            # unreadable or empty (which of these depends on where the checkout lives); none lists anything else.
            listed = sandbox.execute(f"import os\nprint(sorted(os.listdir({str(folder)!r})))")
            needed = {Path(p).relative_to(folder).parts[0] for p in visible if Path(p).is_relative_to(folder)}
            shown = set() if listed.error else set(eval(listed.output))  # noqa: S307 - a printed list of names
            assert listed.error is None or any(e in listed.error for e in ("FileNotFoundError", "PermissionError"))
            assert shown <= needed, folder
        for path in files:  # no planted file is readable from Python either
            read = sandbox.execute(f"print(open({str(path)!r}).read())")
            assert marker not in read.output, path
            assert read.error, path
        shell = " ; ".join(f"cat {path}" for path in files)
        result = sandbox.execute(f"import subprocess\nsubprocess.run(['sh', '-c', {shell!r}])")
        assert marker not in result.output
        assert "No such file" in result.output
        pids = sandbox.execute("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
        assert eval(pids.output) == [1, 2]  # noqa: S307 - only the namespace's own processes
        top_files = [str(path) for path in Path("/").iterdir() if path.is_file() and not path.is_symlink()]
        result = sandbox.execute(f"print([open(p, 'rb').read() for p in {top_files!r}])")
        assert eval(result.output) == [b""] * len(top_files)  # noqa: S307 - e.g. /container_info.json is empty


@pytest.mark.skipif(not ROOT, reason="the mount namespace needs root")
@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract-ocr is not installed (apt-get install "
                    "tesseract-ocr); the office env's OCR app needs it")
def test_tools_on_the_path_still_run_in_the_namespace(workspace: Path) -> None:
    with SandboxRunner(workspace, *scratch(), limits=LIMITS) as sandbox:
        result = sandbox.execute("import subprocess\nprint(subprocess.run(['tesseract', '--version']).returncode)")
        assert result.output.strip().splitlines()[0] == "0"


@pytest.mark.skipif(not ROOT, reason="the mount namespace needs root")
def test_workspace_in_dev_shm_and_setup_module_outside_the_package(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as folder, \
            SandboxRunner(Path(folder), toy("hey"), limits=LIMITS) as sandbox:
        assert sandbox.isolation["reads_confined"] is True
        assert sandbox.execute("print(greet('Di'))").output == "hey, Di\n"
        assert sandbox.execute("open('new.txt', 'w').write('x')").error is None
        assert (Path(folder) / "new.txt").read_text() == "x"
        listed = sandbox.execute(f"import os\nprint(os.listdir({str(Path(__file__).resolve().parents[1])!r}))")
        assert eval(listed.output) == ["sandbox_setups.py"]  # noqa: S307 - the setup's module, nothing else


@pytest.mark.parametrize("sandboxed", [False, True])
def test_an_actions_last_expression_is_shown_like_a_notebook_cell(tmp_path, sandboxed):
    runner = make_runner(tmp_path, sandboxed=sandboxed)
    try:
        assert runner.execute("values = [1, 2]\nvalues").output == "[1, 2]\n"
        assert runner.execute("values.append(3)\nlen(values)").output == "3\n"
        assert runner.execute("print('x')").output == "x\n"  # print returns None: nothing more
        assert runner.execute("for v in values:\n    v").output == ""  # only a top-level last statement
        failed = runner.execute("a = 1\na + undefined_name")
        assert "line 2" in (failed.error or "")
        assert "NameError" in (failed.error or "")
    finally:
        runner.close()


def test_echo_of_the_last_expression_can_be_switched_off(tmp_path):
    runner = make_runner(tmp_path, sandboxed=True, limits=Limits(echo_last_expression=False))
    try:
        assert runner.execute("values = [1, 2]\nvalues").output == ""
    finally:
        runner.close()


def test_an_object_in_the_namespace_is_importable_by_its_name(tmp_path):
    """`import tools` binds the namespace's object (a model writes `import apis`); a real module keeps its name."""
    runner = SandboxRunner(tmp_path, NamespaceSpec(setup="sandbox_setups:object_setup"), limits=LIMITS)
    try:
        assert runner.execute("import tools\nprint(tools.double(2))").output == "4\n"
        assert runner.execute("from tools import double\nprint(double(3))").output == "6\n"
        assert runner.execute("import json as real\nprint(real.dumps([1]))").output == "[1]\n"
        assert "not a package" in (runner.execute("import tools.double").error or "")
    finally:
        runner.close()
