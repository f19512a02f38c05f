"""Deeply nested JSON from a user's file, argument or capture (issue 30, item 6).

Python's parsers and serialisers recurse: JSON nested about a thousand levels deep used to end
``powercontext import`` and the CLI's ``@FILE`` arguments in a ``RecursionError`` traceback,
and a capture's metadata nested past 255 levels was stored but answered ``get_source`` with a
500. Each is now a typed error naming no value, and nothing is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from powercontext_runtime.contract.limits import JSON_MAX_DEPTH, SOURCE_METADATA_MAX_DEPTH
from tests.e2e.helpers import SOURCE_GET, SOURCES, assert_envelope, new_scope, run_cli
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "powercontext_runtime.cli.main"]


def _objects(depth: int) -> dict:
    """``depth`` objects inside each other (``{"a": {"a": 1}}`` is 2), built without recursion."""
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    assert isinstance(value, dict)
    return value


def _objects_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "RecursionError" not in stderr, stderr[-2000:]
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[-2000:]
    return lines[0]


def _import(
    tmp_path: Path, source: Path, home: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    return subprocess.run(
        [*CLI, "import", str(source), "--data-dir", str(home), *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_import_of_deeply_nested_json_is_import_invalid_and_writes_nothing(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    scope = new_scope("deep-import")
    with d.client() as client:
        captured = client.post(
            SOURCES,
            json={"scope_id": scope, "source_id": "p1", "content": "hi", "metadata": {"m": 1}},
        )
        assert captured.status_code == 202, captured.text
    exported = run_cli(d, "export", "--scope", scope)
    assert exported.returncode == 0, exported.stderr
    lines = exported.stdout.splitlines(keepends=True)
    (source_line,) = [i for i, line in enumerate(lines) if line.startswith('{"type":"source",')]
    assert '"metadata":{"m":1}' in lines[source_line]

    # A real export whose source metadata is nested past the bound (the decoder takes it, the
    # checks after it would recurse), and again just short of the interpreter's limit.
    files: dict[str, tuple[Path, int]] = {}
    for depth in (JSON_MAX_DEPTH + 1, 990):
        path = tmp_path / f"metadata-{depth}.export"
        edited = list(lines)
        edited[source_line] = lines[source_line].replace(
            '"metadata":{"m":1}', f'"metadata":{_objects_text(depth)}'
        )
        path.write_text("".join(edited))
        files[f"metadata-{depth}"] = (path, source_line + 1)
    # The file: a thousand arrays, line 1 (the decoder itself overflows).
    arrays = tmp_path / "arrays.json"
    arrays.write_text("[" * 1000 + "]" * 1000 + "\n")
    files["arrays"] = (arrays, 1)

    home = tmp_path / "target"
    for name, (path, line) in files.items():
        done = _import(tmp_path, path, home)
        assert done.returncode == 1, (name, done.returncode, done.stderr[-2000:])
        message = _one_error_line(done.stderr)
        assert message.startswith(
            f"powercontext: line {line}: JSON nested more than {JSON_MAX_DEPTH} levels deep"
        ), (name, message)
        assert "(import_invalid; line=" in message, message
        assert done.stdout == ""

        as_json = _import(tmp_path, path, home, "--json")
        assert as_json.returncode == 1 and as_json.stdout == "", name
        error = json.loads(_one_error_line(as_json.stderr))["error"]
        assert error["code"] == "import_invalid" and error["details"] == {"line": line}, error

    # Nothing was written: the untouched export still imports as new.
    good = tmp_path / "good.export"
    good.write_text(exported.stdout)
    dry = _import(tmp_path, good, home, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["imported"] == 1


def test_cli_json_arguments_nested_too_deeply_are_a_usage_error(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    scope = new_scope("deep-argument")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 1000 + "]" * 1000)
    parses = tmp_path / "parses.json"  # json.loads takes it; the bound refuses it
    parses.write_text(_objects_text(JSON_MAX_DEPTH + 1))
    s = ["--scope", scope]
    revise = ["candidate", "revise", *s, "cand_00000000000000000000", "--expected-version", "1"]
    for path in (deep, parses):
        cases = {
            "CONTENT": (["handoff", "commit", *s, f"@{path}"], None),
            "--proposal": ([*revise, "--proposal", f"@{path}"], None),
            "CONTENT (stdin)": (["handoff", "commit", *s, "-"], path.read_text()),
        }
        for name, (args, stdin) in cases.items():
            done = run_cli(d, *args, stdin=stdin)
            assert done.returncode == 2, (name, path.name, done.stderr[-2000:])
            argument = name.split()[0]
            assert _one_error_line(done.stderr) == (
                f"powercontext: {argument} must be JSON nested at most {JSON_MAX_DEPTH} levels deep"
            ), (name, path.name)
    # Nesting within the bound still goes to the daemon (which refuses it as a handoff).
    done = run_cli(d, "handoff", "commit", *s, f"{_objects_text(JSON_MAX_DEPTH)}")
    assert done.returncode == 1 and "(invalid_request" in done.stderr, done.stderr[-2000:]


def test_capture_refuses_metadata_nested_deeper_than_get_source_can_answer(
    module_daemon: Daemon,
) -> None:
    d = module_daemon
    scope = new_scope("deep-metadata")
    deepest = _objects(SOURCE_METADATA_MAX_DEPTH)
    with d.client() as client:
        body = {"scope_id": scope, "source_id": "ok", "content": "hi", "metadata": deepest}
        assert client.post(SOURCES, json=body).status_code == 202
        read = client.post(SOURCE_GET, json={"scope_id": scope, "source_id": "ok"})
        assert read.status_code == 200 and read.json()["metadata"] == deepest

        for depth in (SOURCE_METADATA_MAX_DEPTH + 1, 300, 900):
            source_id = f"deep-{depth}"
            body = {
                "scope_id": scope,
                "source_id": source_id,
                "content": "hi",
                "metadata": _objects(depth),
            }
            error = assert_envelope(client.post(SOURCES, json=body), 422, "invalid_request")
            (item,) = error["details"]["errors"]
            assert item["loc"] == ["body", "metadata"], item
            assert f"at most {SOURCE_METADATA_MAX_DEPTH} levels" in item["msg"], item
            missing = client.post(SOURCE_GET, json={"scope_id": scope, "source_id": source_id})
            assert_envelope(missing, 404, "source_not_found")
