"""The ``powercontext`` command as real subprocesses against a real daemon."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.helpers import cli_json, new_scope, run_cli, secret_part
from tests.support.daemon import Daemon, free_port

pytestmark = pytest.mark.e2e


def _cite(entry: dict) -> list[str]:
    c = entry["citation"]
    return [
        "--revision",
        str(c["memory_ref"]["revision"]),
        "--entry-id",
        c["entry_id"],
        "--version-id",
        c["entry_version_id"],
    ]


def test_memory_verbs_with_json_output(module_daemon: Daemon) -> None:
    d = module_daemon
    scope = new_scope("cli")
    s = ["--scope", scope]

    first = cli_json(
        d, "memory", "remember", *s, "Run migrations with alembic upgrade head.",
        "--kind", "convention", "--tag", "db", "--tag", "migrations", "--reason", "from docs",
    )  # fmt: skip
    assert first["memory"]["revision"] == 1
    entry = first["entry"]
    assert entry["text"] == "Run migrations with alembic upgrade head."
    assert entry["kind"] == "convention"
    assert entry["tags"] == ["db", "migrations"]
    assert entry["reason"] == "from docs"

    piped = cli_json(d, "memory", "remember", *s, "-", stdin="Lint with ruff before pushing.\n")
    assert piped["memory"]["revision"] == 2
    assert piped["entry"]["text"] == "Lint with ruff before pushing."
    assert piped["entry"]["kind"] == "fact"

    found = cli_json(d, "memory", "search", *s, "alembic migrations")
    assert [h["citation"]["entry_id"] for h in found["hits"]] == [entry["citation"]["entry_id"]]

    page = cli_json(d, "memory", "list", *s, "--limit", "1")
    assert [e["text"] for e in page["entries"]] == [entry["text"]]
    rest = cli_json(d, "memory", "list", *s, "--limit", "1", "--cursor", page["next_cursor"])
    assert [e["text"] for e in rest["entries"]] == [piped["entry"]["text"]]
    assert rest["next_cursor"] is None

    got = cli_json(d, "memory", "get", *s, *_cite(entry))
    assert got == entry

    revised = cli_json(
        d, "memory", "revise", *s, *_cite(entry), "--text", "Run migrations with make migrate."
    )
    assert revised["memory"]["revision"] == 3
    assert revised["entry"]["version"] == 2
    assert revised["entry"]["text"] == "Run migrations with make migrate."
    assert revised["entry"]["tags"] == ["db", "migrations"]

    tagged = cli_json(
        d, "memory", "tag", *s, *_cite(revised["entry"]), "--add", "ops", "--remove", "db"
    )
    assert tagged["memory"]["revision"] == 4
    assert tagged["entry"]["tags"] == ["migrations", "ops"]
    assert tagged["entry"]["text"] == "Run migrations with make migrate."

    retired = cli_json(d, "memory", "retire", *s, *_cite(tagged["entry"]), "--reason", "moved")
    assert retired["memory"]["revision"] == 5
    assert retired["entry"]["state"] == "inactive"

    changes = cli_json(d, "memory", "changes", *s, "--since", "0")
    assert [(c["revision"], c["operation"]) for c in changes["changes"]] == [
        (1, "remember"),
        (2, "remember"),
        (3, "revise"),
        (4, "revise"),
        (5, "retire"),
    ]


def test_exit_codes_for_operation_and_usage_errors(module_daemon: Daemon) -> None:
    d = module_daemon
    scope = new_scope("cli-errors")
    ghost = ["--revision", "1", "--entry-id", "mem_ent_ghost", "--version-id", "mem_ver_ghost"]
    commands = {
        "not_found": ["memory", "get", "--scope", scope, *ghost],
        "invalid": ["memory", "remember", "--scope", scope, "   "],
        "unknown_flag": ["memory", "search", "--scope", scope, "--no-such-flag", "q"],
        "missing_arg": ["memory", "get", "--scope", scope, "--entry-id", "x", "--version-id", "y"],
        "no_scope": ["memory", "list"],
        "no_verb": ["memory"],
    }
    env_without_scope = {"POWERCONTEXT_SCOPE_ID": ""}
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {
            name: pool.submit(run_cli, d, *args, extra_env=env_without_scope)
            for name, args in commands.items()
        }
        done = {name: f.result() for name, f in futures.items()}

    for name in ("not_found", "invalid"):
        assert done[name].returncode == 1, (name, done[name].stderr)
        assert done[name].stdout == ""
    assert done["not_found"].stderr.startswith("powercontext: ")
    assert "memory_not_found" in done["not_found"].stderr
    assert "invalid_request" in done["invalid"].stderr

    for name in ("unknown_flag", "missing_arg", "no_scope", "no_verb"):
        assert done[name].returncode == 2, (name, done[name].returncode, done[name].stderr)
        assert done[name].stdout == ""
        assert done[name].stderr.strip(), name
    assert "--scope" in done["no_scope"].stderr


def test_doctor_reports_health_and_fails_on_a_dead_url(module_daemon: Daemon) -> None:
    d = module_daemon
    with ThreadPoolExecutor(max_workers=2) as pool:
        healthy_f = pool.submit(run_cli, d, "doctor", "--json")
        dead_f = pool.submit(
            run_cli, d, "doctor", "--json", "--url", f"http://127.0.0.1:{free_port()}"
        )
        healthy, dead = healthy_f.result(), dead_f.result()

    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    report = json.loads(healthy.stdout)
    assert report["ok"] is True
    checks = {c["check"]: c["ok"] for c in report["checks"]}
    assert checks.get("daemon") is True and checks.get("token") is True
    assert all(checks.values())

    assert dead.returncode != 0
    dead_report = json.loads(dead.stdout)
    assert dead_report["ok"] is False
    assert {c["check"]: c["ok"] for c in dead_report["checks"]}["daemon"] is False


def test_token_create_list_revoke(module_daemon: Daemon) -> None:
    d = module_daemon
    name = f"acme-{new_scope('tok').rsplit('/', 1)[1]}"
    created = cli_json(d, "token", "create", "--name", name, "--scope", "git:acme/*")
    assert created["name"] == name and created["scopes"] == ["git:acme/*"]
    secret = created["token"]
    assert isinstance(secret, str) and len(secret) >= 32

    duplicate = run_cli(d, "token", "create", "--name", name, "--scope", "x")
    assert duplicate.returncode == 1 and "powercontext:" in duplicate.stderr

    allowed_scope = f"git:acme/{name}"
    with d.client(secret) as limited:
        ok = limited.post(
            "/v1/memory/remember",
            json={"scope_id": allowed_scope, "kind": "fact", "text": "granted write"},
        )
        assert ok.status_code == 200, ok.text
        denied = limited.post("/v1/memory/entries/list", json={"scope_id": "git:other/repo"})
        assert denied.status_code == 403
        assert denied.json()["error"]["code"] == "scope_forbidden"
        # The grant is a prefix: "git:acme" itself and look-alikes are outside it.
        for outside in ("git:acme", "git:acmeX/repo", "GIT:acme/repo"):
            assert (
                limited.post("/v1/memory/entries/list", json={"scope_id": outside}).status_code
                == 403
            ), outside

    # The CLI with the limited token gets the same answer (exit 1, typed code on stderr).
    cli_denied = run_cli(d, "memory", "list", "--scope", "git:other/repo", "--token", secret)
    assert cli_denied.returncode == 1 and "scope_forbidden" in cli_denied.stderr

    listed = run_cli(d, "token", "list", "--json")
    assert listed.returncode == 0
    assert secret not in listed.stdout and secret_part(secret) not in listed.stdout
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows[name]["scopes"] == ["git:acme/*"] and rows[name]["revoked"] is False
    # The local token the daemon issued on first start is listed too, granted every scope.
    assert any(r["scopes"] == ["*"] and not r["revoked"] for r in rows.values())

    revoked = cli_json(d, "token", "revoke", name)
    assert revoked == {"name": name, "revoked": True}
    rows = {row["name"]: row for row in cli_json(d, "token", "list")}
    assert rows[name]["revoked"] is True

    # Verified tokens are cached for up to 2 s: poll (bounded) until the revocation bites.
    deadline = time.monotonic() + 10
    status = None
    with d.client(secret) as limited:
        while time.monotonic() < deadline:
            status = limited.post(
                "/v1/memory/entries/list", json={"scope_id": allowed_scope}
            ).status_code
            if status == 401:
                break
            assert status == 200
            time.sleep(0.1)
    assert status == 401
    # The local all-scopes token is unaffected.
    with d.client() as local:
        assert local.post("/v1/memory/entries/list", json={"scope_id": allowed_scope}).is_success


def test_doctor_checks_the_daemon_and_token_of_its_data_dir(
    module_daemon: Daemon, tmp_path: object
) -> None:
    """``doctor --data-dir X`` checks X's socket with X's token, whatever POWERCONTEXT_HOME
    says (issue 15 #8: it used to read the token of the default home)."""
    from pathlib import Path

    decoy = Path(str(tmp_path)) / "decoy-home"
    (decoy / "auth").mkdir(parents=True)
    (decoy / "auth" / "token").write_text("pc_000000000000_decoy\n")
    env = {**module_daemon.env(), "POWERCONTEXT_HOME": str(decoy)}
    env.pop("POWERCONTEXT_URL")  # the default transport: the data dir's own unix socket
    done = subprocess.run(
        [sys.executable, "-m", "powercontext_runtime.cli.main", "doctor", "--json",
         "--data-dir", str(module_daemon.home)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["token"]["ok"] is True
    assert str(module_daemon.socket_path) in checks["daemon"]["detail"]
