"""Real processes: ``python -m powercontext_hook_kit hook <host> user-prompt-submit``.

What a host actually sees — stdout bytes, stderr lines, exit code — including the cases only a
real process has: empty or garbage stdin, a pipe that is never closed, start-up imports.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hook_kit.conftest import TOKEN, event, parse_lines
from tests.hook_kit.stub import PREPARE, Reply, StubRuntime, dead_port, prepared_body

GIT = shutil.which("git")

PACK = 'PowerContext prepared untrusted historical context.\n测试 "pack" \\ end'
SLACK = 1.5  # process start-up on a loaded machine, on top of the deadline


def process_env(url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("POWERCONTEXT_", "CLAUDE_PLUGIN_", "PLUGIN_"))
    }
    env.update(
        POWERCONTEXT_URL=url,
        POWERCONTEXT_TOKEN=TOKEN,
        PLUGIN_DATA=str(tmp_path / "plugin-data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_DATA_HOME=str(tmp_path / "data"),
    )
    env.update(extra)
    return env


def run_hook_process(
    stdin: bytes, env: dict[str, str], host: str = "codex"
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "powercontext_hook_kit", "hook", host, "user-prompt-submit"],
        input=stdin,
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )


def project(tmp_path: Path) -> str:
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    return str(folder)


@pytest.mark.parametrize("host", ["codex", "claude-code"])
def test_ready_prints_exactly_one_envelope(stub: StubRuntime, tmp_path: Path, host: str) -> None:
    stub.replies[PREPARE] = Reply(200, prepared_body(PACK))
    payload = json.dumps(event(cwd=project(tmp_path))).encode()
    completed = run_hook_process(payload, process_env(stub.url, tmp_path), host)
    assert completed.returncode == 0
    assert completed.stderr == b""
    assert completed.stdout.count(b"\n") == 1 and completed.stdout.endswith(b"\n")
    assert json.loads(completed.stdout) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": PACK}
    }
    assert stub.requests[0].json()["scope_id"].startswith("local:sha256:")


def test_server_down_prints_nothing_and_one_line(tmp_path: Path) -> None:
    payload = json.dumps(event(cwd=project(tmp_path))).encode()
    env = process_env(f"http://127.0.0.1:{dead_port()}", tmp_path)
    completed = run_hook_process(payload, env)
    assert (completed.returncode, completed.stdout) == (0, b"")
    [line] = parse_lines(completed.stderr.decode())
    assert line["component"] == "powercontext.codex.user-prompt-submit"
    assert (line["event"], line["outcome"]) == ("context_prepare", "server_unavailable")
    log = (tmp_path / "plugin-data" / "diagnostics.log").read_text()
    assert '"outcome":"server_unavailable"' in log


@pytest.mark.parametrize("stdin", [b"", b"garbage\x00\xff", b'{"prompt":', b"[]"])
def test_bad_stdin_prints_nothing_and_exits_zero(
    stub: StubRuntime, tmp_path: Path, stdin: bytes
) -> None:
    completed = run_hook_process(stdin, process_env(stub.url, tmp_path))
    assert (completed.returncode, completed.stdout) == (0, b"")
    [line] = parse_lines(completed.stderr.decode())
    assert line["outcome"] == "skipped"
    assert stub.requests == []


def test_a_stdin_that_never_closes_cannot_hang_the_hook(stub: StubRuntime, tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "powercontext_hook_kit", "hook", "codex", "user-prompt-submit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=process_env(stub.url, tmp_path),
    )
    assert process.stdin is not None
    process.stdin.write(b'{"prompt": "half an event"')
    process.stdin.flush()
    started = time.monotonic()
    try:
        code = process.wait(timeout=10)  # stdin stays open: the hook must give up by itself
        elapsed = time.monotonic() - started
    finally:
        process.kill()
        process.stdin.close()
    assert process.stdout is not None and process.stderr is not None
    assert code == 0
    assert process.stdout.read() == b""
    assert elapsed < 2.0 + SLACK
    assert parse_lines(process.stderr.read().decode())[0]["outcome"] == "skipped"
    process.stdout.close()
    process.stderr.close()


def test_usage_errors_still_exit_zero() -> None:
    for argv in ([], ["hook"], ["hook", "Bad Host!", "user-prompt-submit"], ["hook", "x", "nope"]):
        completed = subprocess.run(
            [sys.executable, "-m", "powercontext_hook_kit", *argv],
            input=b"{}",
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert (completed.returncode, completed.stdout) == (0, b""), argv
        assert b"usage:" in completed.stderr


@pytest.mark.parametrize("transport", ["tcp", "unix-default"])
def test_the_hot_path_imports_stay_lean(tmp_path: Path, transport: str) -> None:
    """A whole hook run (event in, refused connection, diagnostics out) loads none of the
    modules that made start-up slow: each costs milliseconds on every prompt (spec 08 P1) —
    over TCP, and over the default unix socket (data dir and agent token file located)."""
    listing = tmp_path / "modules.txt"
    code = (
        "import sys\n"
        "from powercontext_hook_kit.entry import run_hook_process\n"
        "run_hook_process('codex', 'user-prompt-submit')\n"
        "loaded = sorted(name for name, module in sys.modules.items() if module)\n"
        f"open({str(listing)!r}, 'w').write(' '.join(loaded))\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PLUGIN_DATA": str(tmp_path / "data"),
        "POWERCONTEXT_URL": f"http://127.0.0.1:{dead_port()}",
        "POWERCONTEXT_TOKEN": "pc_x_y",
        "POWERCONTEXT_SCOPE_ID": "lean:scope",
    }
    if transport == "unix-default":
        del env["POWERCONTEXT_URL"], env["POWERCONTEXT_TOKEN"]
    event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "hi", "cwd": "/"})
    completed = subprocess.run(
        [sys.executable, "-I", "-c", code],
        input=event.encode(),
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert (completed.returncode, completed.stdout) == (0, b""), completed.stderr
    assert b'"outcome":"server_unavailable"' in completed.stderr  # the flow really ran
    imported = set(listing.read_text().split())
    assert "powercontext_hook_kit.flows" in imported
    slow = {
        "powercontext_runtime": "the runtime",
        "httpx": "httpx (SSL context)",
        "http.client": "http.client (email, ssl)",
        "email": "email",
        "ssl": "ssl",
        "_hashlib": "OpenSSL via hashlib",
        "platformdirs": "platformdirs (Linux paths are computed directly)",
        "typing_extensions": "typing_extensions (hidden from msgspec by the entry)",
        "tomllib": "tomllib (no config file here)",
        "subprocess": "subprocess",
        "unicodedata": "unicodedata (only for non-ASCII scope ids)",
        "argparse": "argparse",
        "powercontext_hook_kit.install": "the install machinery",
    }
    loaded = [why for name, why in slow.items() if name in imported]
    assert not loaded, loaded


def test_the_kit_never_imports_the_runtime_or_httpx() -> None:
    """Separate distributions: the wire contract is shared by tests, never by an import."""
    import powercontext_hook_kit

    package = Path(powercontext_hook_kit.__file__).parent
    for source in package.glob("*.py"):
        for line in source.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                assert "powercontext_runtime" not in stripped, source.name
                assert "httpx" not in stripped, source.name


# --- a project full of FIFOs cannot hang the hook (issue 15, item 8) --------------------------


def _repo(tmp_path: Path, remote: str | None = "git@github.com:Owner/Repo.git") -> Path:
    repo = tmp_path / "project"
    (repo / ".git" / "powercontext").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    config = "[core]\n\tbare = false\n"
    if remote:
        config += f'[remote "origin"]\n\turl = {remote}\n'
    (repo / ".git" / "config").write_text(config)
    return repo


def _local(path: Path) -> str:
    return "local:sha256:" + hashlib.sha256(os.path.realpath(path).encode()).hexdigest()


def _fifo_in(repo: Path, where: str) -> str | None:
    """Put a FIFO at ``where``; the scope the hook must then send (``None``: it must skip)."""
    if where == ".git/config":
        (repo / ".git" / "config").unlink()
        os.mkfifo(repo / ".git" / "config")
        return _local(repo)
    if where == ".git":
        shutil.rmtree(repo / ".git")
        os.mkfifo(repo / ".git")
        return _local(repo)
    if where == ".git/commondir":
        os.mkfifo(repo / ".git" / "commondir")
        return "git:github.com/Owner/Repo"
    if where == "binding":
        os.mkfifo(repo / ".git" / "powercontext" / "workspace.json")
        return None
    if where == "include":  # only git reads includes: it must be a repository git accepts
        shutil.rmtree(repo / ".git")
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(repo.parent)}
        subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env, timeout=60)
        fifo = repo.parent / "included.config"
        os.mkfifo(fifo)
        with (repo / ".git" / "config").open("a") as handle:
            handle.write(f"[include]\n\tpath = {fifo}\n")
        return None
    raise AssertionError(where)


@pytest.mark.parametrize("where", [".git/config", ".git", ".git/commondir", "binding", "include"])
def test_a_fifo_anywhere_in_the_repository_cannot_hang_the_hook(
    stub: StubRuntime, tmp_path: Path, where: str
) -> None:
    """Through a real hook process: it finishes (``subprocess.run`` would time out and kill a
    hung one), exits 0, and either sends the scope the rules give or skips."""
    if where == "include" and GIT is None:
        pytest.skip("git is not installed")
    repo = _repo(tmp_path)
    expected = _fifo_in(repo, where)
    payload = json.dumps(event(cwd=str(repo))).encode()
    completed = run_hook_process(payload, process_env(stub.url, tmp_path))
    assert completed.returncode == 0
    assert completed.stdout == b""
    lines = parse_lines(completed.stderr.decode())
    prepared = [r.json()["scope_id"] for r in stub.requests if r.path == PREPARE]
    if expected is None:
        assert prepared == []
        assert [line["outcome"] for line in lines] == ["skipped"]
    else:
        assert prepared == [expected]
        assert [line["outcome"] for line in lines] == ["empty"]
