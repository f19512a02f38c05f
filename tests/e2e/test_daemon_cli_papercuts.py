"""CLI papercuts (issue 16 #7), as real ``powercontext`` processes against a real daemon.

``--json`` before or after the command; errors as one JSON document on stderr with the exit
codes of spec 01; unusable ``@FILE`` arguments as one-line usage errors; ``experience list`` /
``skill list``; ``candidate show`` with its evidence and reason; lists printed as lists; the
JSON shapes documented in ``--help`` with examples that work; the public ``/health``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from powercontext_runtime.cli.schemas import EXPERIENCE_EXAMPLE, HANDOFF_EXAMPLE, SKILL_EXAMPLE
from powercontext_runtime.client import AsyncPowerContextClient, NotFoundError, PowerContextClient
from tests.e2e.helpers import cli_json, new_scope, run_cli
from tests.support.daemon import Daemon, free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "task-result/run-42"
#: The recorded task result every proposal here cites, as a reference.
EVIDENCE = {"name": "task-result", "source_id": SOURCE}
TASK = {"goal": "the release", "outcome": "succeeded"}
GHOST = ["--revision", "1", "--entry-id", "mem_ent_ghost", "--version-id", "mem_ver_ghost"]


# -- helpers -----------------------------------------------------------------------------------


def _client(daemon: Daemon) -> PowerContextClient:
    return PowerContextClient(daemon.url, token=daemon.token)


def _run_all(
    daemon: Daemon, commands: dict[str, list[str]], **kw: Any
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run independent CLI commands concurrently (one process each)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(run_cli, daemon, *a, **kw) for name, a in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def _json_error(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """Nothing on stdout; stderr is exactly one JSON document on one line, the HTTP API's
    error envelope. Returns its ``error`` object."""
    assert done.stdout == "", done.stdout
    assert done.stderr.endswith("\n") and done.stderr.count("\n") == 1, done.stderr
    body = json.loads(done.stderr)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return dict(body["error"])


def _text_error(done: subprocess.CompletedProcess[str]) -> str:
    """Nothing on stdout, one ``powercontext: …`` line on stderr, never a traceback."""
    assert done.stdout == "", done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("powercontext: "), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.rstrip("\n")


def _experience(lesson: str) -> dict[str, str]:
    return {**EXPERIENCE_EXAMPLE, "lesson": lesson}


def _approve(client: PowerContextClient, scope: str, candidate_id: str, version: int) -> Any:
    approved = client.approve_artifact_candidate(
        scope_id=scope, candidate_id=candidate_id, expected_version=version
    )
    assert approved.result_artifact is not None
    return approved.result_artifact


def _new_experience(client: PowerContextClient, scope: str, lesson: str, **extra: Any) -> Any:
    proposed = client.propose_experience(
        scope_id=scope,
        proposal=_experience(lesson),
        source_refs=[EVIDENCE],
        **extra,
    )
    return _approve(client, scope, proposed.candidate_id, proposed.version)


_IDS = re.compile(r"\b(cand|exp|skill)_[0-9a-f]{20}\b")
_TIMES = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b")


def _normalised(text: str) -> str:
    """Ids and times replaced by placeholders: what a sample in the docs can match."""
    return _TIMES.sub("<time>", _IDS.sub(lambda m: f"{m.group(1)}_<id>", text))


def _json_blocks(text: str) -> list[Any]:
    """Every top-level JSON object of a help text or a Markdown page: from a line that is
    exactly ``{`` to the next line that is exactly ``}``."""
    return [json.loads(block) for block in re.findall(r"(?ms)^\{\n.*?^\}$", text)]


# -- --json anywhere, and errors as JSON --------------------------------------------------------


def test_json_url_and_token_go_before_or_after_the_command(module_daemon: Daemon) -> None:
    d = module_daemon
    scope = new_scope("cli-json-position")
    with _client(d) as client:
        client.remember_memory(scope_id=scope, kind="fact", text="Lint with ruff before pushing.")
    dead = f"http://127.0.0.1:{free_port()}"
    s = ["--scope", scope]
    done = _run_all(d, {
        "before": ["--json", "memory", "list", *s],
        "after": ["memory", "list", *s, "--json"],
        "both": ["--json", "memory", "list", *s, "--json"],
        "url_before": ["--json", "--url", dead, "memory", "list", *s],
        "command_wins": ["--url", dead, "memory", "list", *s, "--url", d.url, "--json"],
        "token_before": ["--token", "pc_000000000000_wrong", "--json", "memory", "list", *s],
        "human": ["memory", "list", *s],
    })  # fmt: skip

    for name in ("before", "after", "both", "command_wins", "human"):
        assert done[name].returncode == 0, (name, done[name].stderr)
    page = json.loads(done["before"].stdout)
    assert [e["text"] for e in page["entries"]] == ["Lint with ruff before pushing."]
    assert json.loads(done["after"].stdout) == page == json.loads(done["both"].stdout)
    assert json.loads(done["command_wins"].stdout) == page
    assert done["human"].stdout.startswith("mem_ent_")  # not JSON

    unreachable = _json_error(done["url_before"])
    assert done["url_before"].returncode == 1
    assert unreachable["code"] == "runtime_unreachable" and dead in unreachable["message"]
    assert done["token_before"].returncode == 1
    assert _json_error(done["token_before"])["code"] == "unauthorized"


def test_errors_are_one_json_document_on_stderr_and_keep_their_exit_codes(
    module_daemon: Daemon,
) -> None:
    d = module_daemon
    scope = new_scope("cli-json-errors")
    with _client(d) as client:
        client.record_task_result(scope_id=scope, task_id="run-42", task=TASK)
        candidate = client.propose_experience(
            scope_id=scope, proposal=_experience("v1"),
            source_refs=[EVIDENCE],
        )  # fmt: skip
        client.revise_artifact_candidate(
            scope_id=scope, candidate_id=candidate.candidate_id, expected_version=1,
            proposal=_experience("v2"),
        )  # fmt: skip
        client.commit_handoff(scope_id=scope, base=None, content=HANDOFF_EXAMPLE)
    s = ["--scope", scope]
    cid = candidate.candidate_id
    handoff = json.dumps(HANDOFF_EXAMPLE)
    done = _run_all(d, {
        # operation errors: exit 1
        "not_found": ["--json", "memory", "get", *s, *GHOST],
        "invalid": ["memory", "remember", *s, "   ", "--json"],
        "stale_candidate": ["--json", "candidate", "approve", *s, cid, "--expected-version", "1"],
        "stale_candidate_text": ["candidate", "approve", *s, cid, "--expected-version", "1"],
        "stale_handoff": ["handoff", "commit", *s, handoff, "--json"],
        "stale_handoff_text": ["handoff", "commit", *s, handoff],
        "bad_proposal": ["--json", "candidate", "revise", *s, cid, "--expected-version", "2",
                         "--proposal", '{"situation": "only this"}'],
        # usage errors: exit 2
        "unknown_flag": ["--json", "memory", "search", *s, "--no-such-flag", "q"],
        "missing_arg": ["memory", "get", *s, "--entry-id", "x", "--version-id", "y", "--json"],
        "no_scope": ["--json", "memory", "list"],
        "no_verb": ["--json", "memory"],
        "no_command": ["--json"],
        "bad_choice": ["candidate", "list", *s, "--status", "maybe", "--json"],
        "bad_ref": ["--json", "experience", "propose", *s, "--situation", "s", "--action", "a",
                    "--outcome", "o", "--lesson", "l", "--artifact-ref", "nonsense"],
        "not_json": ["--json", "candidate", "revise", *s, cid, "--expected-version", "2",
                     "--proposal", "{not json"],
        "not_json_text": ["candidate", "revise", *s, cid, "--expected-version", "2",
                          "--proposal", "{not json"],
    }, extra_env={"POWERCONTEXT_SCOPE_ID": ""})  # fmt: skip

    operation = {
        "not_found": "memory_not_found",
        "invalid": "invalid_request",
        "stale_candidate": "candidate_conflict",
        "stale_handoff": "artifact_conflict",
        "bad_proposal": "invalid_request",
    }
    errors = {}
    for name, code in operation.items():
        assert done[name].returncode == 1, (name, done[name].returncode, done[name].stderr)
        errors[name] = _json_error(done[name])
        assert errors[name]["code"] == code, (name, errors[name])
    assert errors["not_found"]["details"] is None
    assert errors["stale_candidate"]["details"] == {"expected_version": 1, "current_version": 2}
    assert errors["stale_handoff"]["details"] == {
        "current": {"family": "handoff", "artifact_id": "handoff", "revision": 1}
    }
    invalid_fields = {tuple(e["loc"]) for e in errors["bad_proposal"]["details"]["errors"]}
    assert ("body", "proposal", "action") in invalid_fields
    assert errors["invalid"]["details"]["errors"]

    for name in ("unknown_flag", "missing_arg", "no_scope", "no_verb", "no_command",
                 "bad_choice", "bad_ref", "not_json"):  # fmt: skip
        assert done[name].returncode == 2, (name, done[name].returncode, done[name].stderr)
        errors[name] = _json_error(done[name])
        assert errors[name]["code"] == "usage_error", (name, errors[name])
    for name in ("unknown_flag", "missing_arg", "no_verb", "no_command", "bad_choice"):
        assert errors[name]["details"]["usage"].startswith("usage: powercontext"), name
    assert "--no-such-flag" in errors["unknown_flag"]["message"]
    assert "--revision" in errors["missing_arg"]["message"]
    assert errors["no_scope"]["details"] == {"argument": "--scope"}
    assert errors["bad_ref"]["details"] == {"value": "nonsense"}
    assert errors["not_json"]["message"].startswith("--proposal must be JSON")

    # Without --json: one line for people, with the details that say what to do next.
    assert _text_error(done["stale_candidate_text"]) == (
        "powercontext: the candidate changed; review its current version "
        "(candidate_conflict; expected_version=1, current_version=2)"
    )
    assert _text_error(done["stale_handoff_text"]) == (
        "powercontext: the scope's Handoff is at revision 1: pass --base 1 to continue it "
        "(`powercontext handoff get --revision 1` shows it) "
        "(artifact_conflict; current=handoff:handoff:1)"
    )
    # docs/api.md shows these two very lines.
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert done["stale_candidate"].stderr in api
    assert done["stale_candidate_text"].stderr in api
    assert done["not_json_text"].returncode == 2
    assert _text_error(done["not_json_text"]).startswith("powercontext: --proposal must be JSON")


def test_an_unusable_at_file_or_stdin_is_a_one_line_usage_error(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    scope = new_scope("cli-files")
    directory = tmp_path / "a-directory"
    directory.mkdir()
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes('{"situation": "café"}'.encode("latin-1"))
    cases = {
        "missing": (str(tmp_path / "nope.json"), "no such file"),
        "directory": (str(directory), "is a directory"),
        "not_utf8": (str(latin1), "is not UTF-8 text"),
        "no_name": ("", "must be followed by a file name"),
    }
    if hasattr(os, "geteuid") and os.geteuid() != 0:  # root reads a mode-000 file anyway
        unreadable = tmp_path / "unreadable.json"
        unreadable.write_text("{}")
        unreadable.chmod(0)
        cases["unreadable"] = (str(unreadable), "permission denied")
    s = ["--scope", scope]
    commands: dict[str, list[str]] = {}
    for name, (path, _) in cases.items():
        commands[f"revise-{name}"] = [
            "candidate",
            "revise",
            *s,
            "cand_00000000000000000000",
            "--expected-version",
            "1",
            "--proposal",
            f"@{path}",
        ]
        commands[f"handoff-{name}"] = ["handoff", "commit", *s, f"@{path}"]
        commands[f"json-{name}"] = ["--json", "handoff", "commit", *s, f"@{path}"]
    done = _run_all(d, commands)

    for name, (path, reason) in cases.items():
        for command, argument in (("revise", "--proposal"), ("handoff", "CONTENT")):
            result = done[f"{command}-{name}"]
            assert result.returncode == 2, (command, name, result.stderr)
            line = _text_error(result)
            assert line.startswith(f"powercontext: {argument}: "), line
            assert reason in line, line
        result = done[f"json-{name}"]
        assert result.returncode == 2, (name, result.stderr)
        error = _json_error(result)
        assert error["code"] == "usage_error" and reason in error["message"], error
        assert error["details"] == {"argument": "CONTENT", "path": path}, error
    with _client(d) as client, pytest.raises(NotFoundError):  # nothing was sent
        client.get_handoff(
            scope_id=scope, artifact={"family": "handoff", "artifact_id": "handoff", "revision": 1}
        )

    # Standard input that is not UTF-8: the same kind of one-line usage error.
    piped = subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", "memory", "remember", *s, "-"],
        env=d.env(), input=b"caf\xe9\n", capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert piped.returncode == 2 and piped.stdout == b""
    assert piped.stderr.decode() == (
        "powercontext: the text: standard input is not UTF-8 text (invalid byte at offset 3)\n"
    )


# -- approved Experience and Skills ---------------------------------------------------------


def test_experience_and_skill_list_page_through_the_approved_heads(
    module_daemon: Daemon,
) -> None:
    d = module_daemon
    scope = new_scope("cli-lists")
    with _client(d) as client:
        client.record_task_result(scope_id=scope, task_id="run-42", task=TASK)
        refs = [_new_experience(client, scope, f"lesson {i}") for i in range(3)]
        changed = client.propose_experience(
            scope_id=scope, proposal=_experience("lesson 0, revised"),
            source_refs=[EVIDENCE],
            artifact_refs=[refs[0].model_dump()], target=refs[0].model_dump(),
        )  # fmt: skip
        head = _approve(client, scope, changed.candidate_id, 1)
        client.propose_experience(  # pending: not an artifact, never listed
            scope_id=scope, proposal=_experience("pending"),
            source_refs=[EVIDENCE],
        )  # fmt: skip
        skill = client.propose_skill(
            scope_id=scope, proposal=SKILL_EXAMPLE,
            source_refs=[EVIDENCE],
        )  # fmt: skip
        skill_ref = _approve(client, scope, skill.candidate_id, 1)
        exact = {
            ref.artifact_id: client.get_experience(scope_id=scope, artifact=ref).model_dump(
                mode="json"
            )
            for ref in (head, refs[1], refs[2])
        }

    s = ["--scope", scope]
    empty = new_scope("cli-lists-empty")
    done = _run_all(d, {
        "page": ["experience", "list", *s, "--limit", "2", "--json"],
        "skills": ["--json", "skill", "list", *s],
        "human": ["experience", "list", *s, "--limit", "2"],
        "skills_human": ["skill", "list", *s],
        "no_experience": ["experience", "list", "--scope", empty],
        "no_skills": ["skill", "list", "--scope", empty],
    })  # fmt: skip
    assert all(r.returncode == 0 for r in done.values()), {n: r.stderr for n, r in done.items()}
    page = json.loads(done["page"].stdout)
    assert len(page["experiences"]) == 2 and page["next_cursor"]
    rest = cli_json(d, "experience", "list", *s, "--limit", "2", "--cursor", page["next_cursor"])
    assert rest["next_cursor"] is None
    listed = page["experiences"] + rest["experiences"]
    # Every approved Experience once, at its current head, exactly as get_experience has it.
    assert {e["reference"]["artifact_id"]: e for e in listed} == exact
    assert len(listed) == 3
    assert {e["reference"]["revision"] for e in listed} == {1, 2}

    skills = json.loads(done["skills"].stdout)
    assert [x["reference"] for x in skills["skills"]] == [skill_ref.model_dump()]
    assert skills["next_cursor"] is None

    first, second = (e["reference"] for e in page["experiences"])
    blocks = done["human"].stdout.rstrip("\n").split("\n\n")
    assert [b.splitlines()[0] for b in blocks[:2]] == [
        f"experience {first['artifact_id']} r{first['revision']}",
        f"experience {second['artifact_id']} r{second['revision']}",
    ]
    assert blocks[2] == f"more: --cursor {page['next_cursor']}"
    assert "  lesson: " in blocks[0] and "  evidence:" in blocks[0]
    assert done["skills_human"].stdout.startswith(f"skill {skill_ref.artifact_id} r1\n")
    assert done["no_experience"].stdout == "no approved Experience\n"
    assert done["no_skills"].stdout == "no approved Skills\n"


def test_both_clients_list_approved_artifacts_and_read_health(module_daemon: Daemon) -> None:
    d = module_daemon
    scope = new_scope("client-lists")
    with _client(d) as client:
        client.record_task_result(scope_id=scope, task_id="run-42", task=TASK)
        ref = _new_experience(client, scope, "listed by both clients")
        assert client.get_health() == client.get_readiness()
        page = client.list_experiences(scope_id=scope, limit=1)
        assert [e.reference for e in page.experiences] == [ref]
        assert page.next_cursor is None
        assert client.list_skills(scope_id=scope).skills == []

    async def scenario() -> None:
        async with AsyncPowerContextClient(d.url, token=d.token) as client:
            assert (await client.get_health()).status == "ready"
            listed = await client.list_experiences(scope_id=scope)
            assert [e.reference for e in listed.experiences] == [ref]
            assert (await client.list_skills(scope_id=scope)).next_cursor is None

    asyncio.run(scenario())


def test_health_is_public_and_answers_like_readiness(module_daemon: Daemon) -> None:
    with httpx.Client(base_url=module_daemon.url, timeout=30) as anonymous:
        ready = anonymous.get("/health/ready")
        for headers in ({}, {"Authorization": "Bearer nope"}):
            health = anonymous.get("/health", headers=headers)
            assert health.status_code == 200, health.text
            assert health.json() == ready.json()
            assert (ready.json()["status"], ready.json()["database"]) == ("ready", "sqlite")


# -- what people read --------------------------------------------------------------------------

SHOW_SAMPLE = """\
cand_<id> v1 skill pending
  created <time>, updated <time>
  name: regenerate-openapi
  description: Keep the committed OpenAPI document in step with the routes
  instructions:
    Run make openapi.
    Commit runtime/openapi/powercontext.json together with the change that caused it.
  validation:
    - test_committed_openapi_matches_the_app passes
    - git status shows no other generated file
  evidence:
    source task-result/run-42 (task-result)
    artifact memory:memory:1
  reason: Seen in the last three releases
"""

SKILL_SAMPLE = """\
skill skill_<id> r1
  name: regenerate-openapi
  description: Keep the committed OpenAPI document in step with the routes
  instructions:
    Run make openapi.
    Commit runtime/openapi/powercontext.json together with the change that caused it.
  validation:
    - test_committed_openapi_matches_the_app passes
    - git status shows no other generated file
  evidence:
    source task-result/run-42 (task-result)
    artifact memory:memory:1
"""


def test_candidate_show_prints_evidence_and_reason_and_lists_as_lists(
    module_daemon: Daemon,
) -> None:
    """The samples in docs/review.md are these very outputs (ids and times aside)."""
    d = module_daemon
    scope = new_scope("cli-show")
    with _client(d) as client:
        client.record_task_result(scope_id=scope, task_id="run-42", task=TASK)
        client.remember_memory(scope_id=scope, kind="convention", text="Release from main")
    proposed = cli_json(
        d, "skill", "propose", "--scope", scope, "--name", SKILL_EXAMPLE["name"],
        "--description", SKILL_EXAMPLE["description"], "--instructions", "-",
        *(arg for step in SKILL_EXAMPLE["validation"] for arg in ("--validation", step)),
        "--source-ref", SOURCE, "--artifact-ref", "memory:memory:1",
        "--reason", "Seen in the last three releases",
        stdin=SKILL_EXAMPLE["instructions"],
    )  # fmt: skip
    assert proposed["proposal"] == SKILL_EXAMPLE
    cid = proposed["candidate_id"]
    shown = run_cli(d, "candidate", "show", "--scope", scope, cid)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{cid} v1 skill pending\n")
    assert _normalised(shown.stdout) == SHOW_SAMPLE
    inbox = run_cli(d, "candidate", "list", "--scope", scope)
    assert inbox.stdout == shown.stdout

    with _client(d) as client:
        ref = _approve(client, scope, cid, 1)
    done = _run_all(d, {
        "get": ["skill", "get", "--scope", scope, ref.artifact_id, "--revision", "1"],
        "list": ["skill", "list", "--scope", scope],
        "approved": ["candidate", "show", "--scope", scope, cid],
    })  # fmt: skip
    assert done["get"].returncode == 0, done["get"].stderr
    assert _normalised(done["get"].stdout) == SKILL_SAMPLE
    assert done["list"].stdout == done["get"].stdout
    approved = done["approved"].stdout.splitlines()
    assert approved[0] == f"{cid} v1 skill approved"
    assert approved[2] == f"  approved as skill:{ref.artifact_id}:1"
    for result in done.values():
        assert "['" not in result.stdout and "{'" not in result.stdout, result.stdout

    docs = _normalised((ROOT / "docs" / "review.md").read_text(encoding="utf-8"))
    assert SHOW_SAMPLE in docs, "update the candidate show sample in docs/review.md"
    assert SKILL_SAMPLE in docs, "update the skill get sample in docs/review.md"


def test_help_documents_the_json_shapes_with_examples_that_work(
    module_daemon: Daemon, tmp_path: Path
) -> None:
    d = module_daemon
    helps = _run_all(d, {
        "revise": ["candidate", "revise", "--help"],
        "experience": ["experience", "propose", "--help"],
        "skill": ["skill", "propose", "--help"],
        "handoff": ["handoff", "commit", "--help"],
        "top": ["--help"],
    })  # fmt: skip
    assert all(r.returncode == 0 for r in helps.values())
    text = {name: r.stdout for name, r in helps.items()}
    assert _json_blocks(text["revise"]) == [EXPERIENCE_EXAMPLE]
    assert _json_blocks(text["experience"]) == [EXPERIENCE_EXAMPLE]
    assert _json_blocks(text["skill"]) == [SKILL_EXAMPLE]
    assert _json_blocks(text["handoff"]) == [HANDOFF_EXAMPLE]
    for field in ("situation", "action", "outcome", "lesson", "name", "description",
                  "instructions", "validation"):  # fmt: skip
        assert f'"{field}"' in text["revise"], field
    for field in ("schema", "objective", "state", "disposition", "next_action", "omissions"):
        assert field in text["handoff"], field
    assert "exit status" in text["top"] and '{"error": {"code"' in text["top"]

    # The examples are accepted as they are.
    scope = new_scope("cli-help-examples")
    with _client(d) as client:
        client.record_task_result(scope_id=scope, task_id="run-42", task=TASK)
        experience = client.propose_experience(
            scope_id=scope, proposal=_experience("to be replaced"),
            source_refs=[EVIDENCE],
        )  # fmt: skip
        skill = client.propose_skill(
            scope_id=scope, proposal={**SKILL_EXAMPLE, "name": "to-be-replaced"},
            source_refs=[EVIDENCE],
        )  # fmt: skip
    files = {}
    for name in ("revise", "skill", "handoff"):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(_json_blocks(text[name])[0]), encoding="utf-8")
    # An editor's byte-order mark is no obstacle.
    files["handoff"].write_text(files["handoff"].read_text(), encoding="utf-8-sig")
    s = ["--scope", scope]
    revised = cli_json(
        d,
        "candidate",
        "revise",
        *s,
        experience.candidate_id,
        "--expected-version",
        "1",
        "--proposal",
        f"@{files['revise']}",
    )
    assert revised["proposal"] == EXPERIENCE_EXAMPLE and revised["version"] == 2
    revised = cli_json(
        d,
        "candidate",
        "revise",
        *s,
        skill.candidate_id,
        "--expected-version",
        "1",
        "--proposal",
        f"@{files['skill']}",
    )
    assert revised["proposal"] == SKILL_EXAMPLE
    first = cli_json(d, "handoff", "commit", *s, f"@{files['handoff']}")
    second = cli_json(d, "handoff", "commit", *s, f"@{files['handoff']}", "--base", "1")
    assert (first["reference"]["revision"], second["reference"]["revision"]) == (1, 2)
    assert cli_json(d, "handoff", "get", *s, "--revision", "2")["content"] == HANDOFF_EXAMPLE

    # The documentation shows the same documents.
    review = _json_blocks((ROOT / "docs" / "review.md").read_text(encoding="utf-8"))
    assert EXPERIENCE_EXAMPLE in review and SKILL_EXAMPLE in review
    bootstrap = _json_blocks((ROOT / "docs" / "bootstrap.md").read_text(encoding="utf-8"))
    assert HANDOFF_EXAMPLE in bootstrap
