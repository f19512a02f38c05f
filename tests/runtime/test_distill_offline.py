"""The offline distiller's pure core (issue #31 item 3): each rule on small hand-made tasks,
the cases it must stay silent on, determinism, contract limits, evidence and secrets.

Quality over many sessions is measured by ``bench/distill_quality.py``; these tests pin the
behaviour each rule promises in its docstring.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from powercontext_runtime.contract.review import ExperienceProposal
from powercontext_runtime.distill import (
    Change,
    Check,
    Lesson,
    TaskInput,
    propose_lessons,
    same_lesson,
    similar,
)
from powercontext_runtime.distill.commands import parse_command
from powercontext_runtime.distill.failures import failure_of, looks_secret, normalise

REF = "task-result/run_42"
SESSIONS = Path(__file__).resolve().parents[2] / "bench" / "data" / "distill_sessions"

PYTEST_FAIL = (
    "E       sqlalchemy.exc.IntegrityError: UNIQUE constraint failed: users.email\n"
    "tests/test_users.py:57: IntegrityError\n"
    "FAILED tests/test_users.py::test_duplicate_email - sqlalchemy.exc.IntegrityError: "
    "UNIQUE constraint failed\n1 failed, 13 passed in 0.91s"
)


def task(*checks: Check, changes: tuple[Change, ...] = (), outcome: str = "succeeded") -> TaskInput:
    return TaskInput(goal="do it", outcome=outcome, changes=changes, checks=checks)  # type: ignore[arg-type]


def fail(command: str, tail: str, status: int = 1) -> Check:
    return Check(command, status, tail)


def ok(command: str, tail: str = "") -> Check:
    return Check(command, 0, tail)


FIX = (Change("app/services/accounts.py", 12, 3),)


# -- fail-then-pass ------------------------------------------------------------------------


def test_fail_then_pass_names_the_failure_the_change_and_the_pass() -> None:
    [lesson] = propose_lessons(
        REF, task(fail("pytest tests/test_users.py", PYTEST_FAIL), ok("pytest"), changes=FIX)
    )
    assert lesson.rule == "fail-then-pass"
    assert "IntegrityError in tests/test_users.py::test_duplicate_email" in lesson.situation
    assert "`app/services/accounts.py`" in lesson.action
    assert lesson.outcome == "`pytest` passed afterwards."
    assert lesson.lesson.startswith("When `pytest tests/test_users.py` fails with IntegrityError")
    assert lesson.evidence == (REF,)
    assert lesson.signature == (
        "fail-then-pass|pytest|integrityerror|tests/test_users.py::test_duplicate_email|"
    )


def test_fail_then_pass_ignores_verbosity_flags_wrappers_and_pipes() -> None:
    checks = (
        fail(
            "cd api && .venv/bin/python -m pytest -q -x tests/test_users.py 2>&1 | tail",
            PYTEST_FAIL,
        ),
        ok("pytest tests/test_users.py --tb=short"),
    )
    [lesson] = propose_lessons(REF, task(*checks, changes=FIX))
    assert lesson.rule == "fail-then-pass"


@pytest.mark.parametrize(
    ("checks", "changes", "outcome", "why"),
    [
        ((fail("pytest", PYTEST_FAIL), ok("pytest")), (), "succeeded", "no change: flaky"),
        ((fail("pytest", PYTEST_FAIL), ok("pytest")), FIX, "failed", "the task failed"),
        ((fail("pytest", PYTEST_FAIL), ok("pytest")), FIX, "abandoned", "abandoned"),
        ((fail("pytest", PYTEST_FAIL), fail("pytest", PYTEST_FAIL)), FIX, "succeeded", "no pass"),
        ((fail("pytest", PYTEST_FAIL), ok("pytest -k duplicate")), FIX, "succeeded", "narrowed"),
        ((fail("pytest", "something went wrong"), ok("pytest")), FIX, "succeeded", "no signature"),
        (
            (fail("pytest", PYTEST_FAIL), ok("pytest")),
            (*FIX, Change("tests/test_users.py", 20, 0)),
            "succeeded",
            "the failing test itself was written in this task (TDD)",
        ),
        (
            (
                fail("python -c 'import app'", '  File "app/x.py", line 3\nSyntaxError: invalid'),
                ok("python -c 'import app'"),
            ),
            FIX,
            "succeeded",
            "the agent's own syntax error",
        ),
        (
            (
                fail("go test ./...", "--- FAIL: TestParseDuration (0.00s)\nFAIL\tacme/cfg\t0.01s"),
                ok("go test ./..."),
            ),
            (Change("cfg/duration.go", 4, 1),),
            "succeeded",
            "the test's name names the fix",
        ),
    ],
)
def test_fail_then_pass_stays_silent(checks, changes, outcome, why) -> None:
    assert propose_lessons(REF, task(*checks, changes=changes, outcome=outcome)) == [], why


def test_only_the_last_failure_before_the_pass_is_a_lesson() -> None:
    other = PYTEST_FAIL.replace("test_duplicate_email", "test_case_insensitive")
    checks = (
        fail("pytest", PYTEST_FAIL),
        fail("pytest", other),
        ok("pytest"),
    )
    [lesson] = propose_lessons(REF, task(*checks, changes=FIX))
    assert "test_case_insensitive" in lesson.signature


# -- flags-changed -------------------------------------------------------------------------

ERESOLVE = "npm error code ERESOLVE\nnpm error ERESOLVE unable to resolve dependency tree"


def test_flags_changed_without_file_changes() -> None:
    checks = (
        fail("cargo test", "error[E0432]: unresolved import `crate::s3`", 101),
        ok("cargo test --all-features"),
    )
    [lesson] = propose_lessons(REF, task(*checks))
    assert lesson.rule == "flags-changed"
    assert lesson.signature == "flags-changed|cargo test|+--all-features|-"
    assert lesson.lesson.startswith(
        "Run `cargo test --all-features`, not `cargo test`: that fails with"
    )


def test_flags_changed_shows_the_commands_as_typed() -> None:
    """Not the command's key, which drops `run` from `npm run build`."""
    checks = (
        fail("npm run build", "Error: error:0308010C:digital envelope routines::unsupported"),
        ok("npm run build -- --openssl-legacy-provider"),
    )
    lessons = [lesson for lesson in propose_lessons(REF, task(*checks))]
    assert [lesson.rule for lesson in lessons] == ["flags-changed"]
    assert lessons[0].lesson.startswith(
        "Run `npm run build -- --openssl-legacy-provider`, not `npm run build`:"
    )


def test_flags_changed_with_changes_only_for_command_line_failures() -> None:
    lock = (Change("package-lock.json", 300, 280),)
    checks = (fail("npm install", ERESOLVE), ok("npm install --legacy-peer-deps"))
    [lesson] = propose_lessons(REF, task(*checks, changes=lock))
    assert lesson.rule == "flags-changed"
    # a test failure fixed while files changed: the flags are not the explanation
    checks = (fail("cargo test", "error[E0308]: mismatched types", 101), ok("cargo test --release"))
    assert propose_lessons(REF, task(*checks, changes=FIX)) == []


def test_flags_changed_not_when_another_command_ran_between() -> None:
    checks = (fail("npm install", ERESOLVE), ok("npm cache clean --force"), ok("npm install -f"))
    assert all(lesson.rule != "flags-changed" for lesson in propose_lessons(REF, task(*checks)))


def test_a_credential_variable_is_named_never_valued() -> None:
    checks = (
        fail("pytest tests/test_billing.py", "E   KeyError: 'STRIPE_API_KEY'"),
        ok("STRIPE_API_KEY=[REDACTED] pytest tests/test_billing.py"),
    )
    [lesson] = propose_lessons(REF, task(*checks))
    assert "STRIPE_API_KEY=…" in lesson.lesson and "REDACTED" not in lesson.lesson
    raw = (fail("pytest", "E   KeyError: 'DATABASE_URL'"),
           ok("DATABASE_URL=postgresql://app:hunter2pw@db/app pytest"))  # fmt: skip
    assert propose_lessons(REF, task(*raw)) == []


# -- needs-prior-command -------------------------------------------------------------------

NO_TABLE = "E   sqlite3.OperationalError: no such table: invoices\n1 error in 0.2s"


def test_needs_prior_command() -> None:
    checks = (fail("pytest", NO_TABLE), ok("git status"), ok("alembic upgrade head"), ok("pytest"))
    [lesson] = propose_lessons(REF, task(*checks))
    assert lesson.rule == "needs-prior-command"
    assert lesson.lesson.startswith("Run `alembic upgrade head` before `pytest`")
    assert lesson.signature == "needs-prior-command|alembic upgrade head|pytest|no such table"


def test_needs_prior_command_with_changes_only_for_environment_failures() -> None:
    missing = "E   ModuleNotFoundError: No module named 'pydantic_settings'"
    checks = (fail("pytest", missing), ok("pip install -e ."), ok("pytest"))
    [lesson] = propose_lessons(REF, task(*checks, changes=FIX))
    assert lesson.rule == "needs-prior-command"
    # an assertion failure, files changed, a command between: which one fixed it is unknown
    checks = (fail("pytest", PYTEST_FAIL), ok("pip install -e ."), ok("pytest"))
    [lesson] = propose_lessons(REF, task(*checks, changes=FIX))
    assert lesson.rule == "fail-then-pass"


def test_needs_prior_command_when_the_failure_names_the_command() -> None:
    """Files changed, but the failing output itself says which command to run, and that is
    what ran: the order is the lesson (poetry's stale lock, terraform's boxed hint)."""
    deps = (Change("pyproject.toml", 1, 0),)
    stale = (
        "Installing dependencies from lock file\n\npyproject.toml changed significantly since "
        "poetry.lock was last generated. Run `poetry lock [--no-update]` to fix the lock file."
    )
    checks = (fail("poetry install", stale), ok("poetry lock --no-update"), ok("poetry install"))
    [lesson] = propose_lessons(REF, task(*checks, changes=deps))
    assert lesson.signature == (
        "needs-prior-command|poetry lock --no-update|poetry install|prerequisite not run"
    )
    assert "(poetry lock)" in lesson.situation
    boxed = (
        "╷\n│ Error: Inconsistent dependency lock file\n│ \n│ To update the locked dependency "
        "selections to match a changed\n│ configuration, run:\n│   terraform init -upgrade\n╵"
    )
    tf = (Change("infra/versions.tf", 1, 1),)
    checks = (
        fail("cd infra && terraform validate", boxed),
        ok("cd infra && terraform init -upgrade"),
        ok("cd infra && terraform validate"),
    )
    [lesson] = propose_lessons(REF, task(*checks, changes=tf))
    assert lesson.lesson.startswith("Run `terraform init -upgrade` before `terraform validate`")
    # the output names another command than the one that ran: no order is shown
    hint = "Something went wrong.\nRun `npm audit` for details."
    checks = (fail("npm run build", hint), ok("npm ci"), ok("npm run build"))
    assert propose_lessons(REF, task(*checks, changes=deps)) == []


def test_needs_prior_command_of_the_same_program_for_another_target() -> None:
    """``pnpm --filter @acme/ui build`` before ``pnpm --filter web build``: the same program and
    script, another workspace package, so a prior command — while a narrower rerun of the
    failing suite (``pytest tests/a.py`` between two ``pytest``) is not one."""
    unresolved = (
        '[vite]: Rollup failed to resolve import "@acme/ui" from "/w/apps/web/src/App.tsx".'
    )
    checks = (
        fail("pnpm --filter web build", unresolved),
        ok("pnpm --filter @acme/ui build"),
        ok("pnpm --filter web build"),
    )
    [lesson] = propose_lessons(REF, task(*checks, changes=(Change("apps/web/package.json", 1, 0),)))
    assert lesson.rule == "needs-prior-command"
    assert lesson.lesson.startswith("Run `pnpm --filter @acme/ui build` before `pnpm --filter web")
    checks = (fail("pytest", NO_TABLE), ok("pytest tests/test_a.py"), ok("pytest"))
    assert propose_lessons(REF, task(*checks)) == []


def test_needs_prior_command_not_when_two_commands_ran_between() -> None:
    checks = (fail("pytest", NO_TABLE), ok("make seed"), ok("alembic upgrade head"), ok("pytest"))
    assert propose_lessons(REF, task(*checks)) == []


def test_a_run_piped_into_a_filter_is_judged_by_its_output() -> None:
    """``npm test 2>&1 | tail -25`` exits 0 (``tail``'s status) even when tests failed: the
    runner's own failure lines count, and a later run without them is the pass."""
    cut = (
        "  ● invoice totals › sums line items with tax\n\n    expect(received).toBe(expected)\n\n"
        "Test Suites: 1 failed, 29 passed, 30 total\nTests:       1 failed, 212 passed, 213 total"
    )
    green = "Test Suites: 30 passed, 30 total\nTests:       213 passed, 213 total"
    fix = (Change("src/lib/rounding.ts", 2, 1),)
    checks = (ok("npm test 2>&1 | tail -25", cut), ok("npm test 2>&1 | tail -25", green))
    [lesson] = propose_lessons(REF, task(*checks, changes=fix))
    assert lesson.rule == "fail-then-pass"
    assert "invoice totals > sums line items with tax" in lesson.situation
    assert "`src/lib/rounding.ts`" in lesson.lesson
    # not piped: exit 0 is a pass whatever it printed; piped but no runner failure: a pass
    assert propose_lessons(REF, task(ok("npm test", cut), ok("npm test", green), changes=fix)) == []
    noisy = "error: deprecated option --foo\nTests:       213 passed, 213 total"
    piped = (ok("npm test | tail", noisy), ok("npm test | tail", green))
    assert propose_lessons(REF, task(*piped, changes=fix)) == []


def test_a_type_error_in_a_file_the_task_edited_is_the_agent_s_own() -> None:
    typo = "src/lib/format.ts:31:10 - error TS2552: Cannot find name 'reuslt'. Did you mean?"
    edited = (Change("src/lib/format.ts", 12, 0), Change("src/components/List.tsx", 2, 1))
    checks = (fail("npx tsc --noEmit", typo, 2), ok("npx tsc --noEmit"))
    assert propose_lessons(REF, task(*checks, changes=edited)) == []
    elsewhere = (Change("src/lib/other.ts", 3, 1),)
    [lesson] = propose_lessons(REF, task(*checks, changes=elsewhere))
    assert lesson.rule == "fail-then-pass" and "TS2552" in lesson.situation


def test_a_sleep_between_is_still_flakiness() -> None:
    checks = (fail("pytest", "E   TimeoutError: job not picked up"), ok("sleep 5"), ok("pytest"))
    assert propose_lessons(REF, task(*checks)) == []


# -- regenerate-after-edit -----------------------------------------------------------------

STALE = "FAILED tests/contract/test_openapi.py::test_schema_is_current - AssertionError: stale"


def test_regenerate_after_edit() -> None:
    changes = (Change("api/routes/orders.py", 20, 4), Change("openapi.json", 40, 2))
    checks = (fail("pytest tests/contract", STALE), ok("make openapi"), ok("pytest tests/contract"))
    [lesson] = propose_lessons(REF, task(*checks, changes=changes))
    assert lesson.rule == "regenerate-after-edit"
    assert lesson.signature == "regenerate-after-edit|make openapi|pytest"
    assert lesson.lesson.startswith("After editing `api/routes/orders.py`, run `make openapi`")
    assert "`openapi.json`" in lesson.lesson


def test_regenerate_needs_generated_output_or_a_generator_input() -> None:
    # a task recorded from a transcript never lists what a command wrote: a generator with no
    # input kind (make, go generate, package scripts) takes the edited code as its input …
    checks = (fail("pytest tests/contract", STALE), ok("make openapi"), ok("pytest tests/contract"))
    only_code = (Change("api/routes/orders.py", 20, 4), Change("tests/test_orders.py", 9, 0))
    [lesson] = propose_lessons(REF, task(*checks, changes=only_code))
    assert lesson.signature == "regenerate-after-edit|make openapi|pytest"
    assert lesson.situation.startswith("After editing `api/routes/orders.py`, ")
    assert "regenerates" not in lesson.lesson  # it names no output it did not see
    # … but not when the failure says something is missing: building it is a prior command
    missing = "Error: Cannot find module '@acme/ui'\nRequire stack:\n- /w/e2e/run.js"
    checks = (fail("npm run e2e", missing), ok("npm run build"), ok("npm run e2e"))
    [lesson] = propose_lessons(REF, task(*checks, changes=only_code))
    assert lesson.signature == "needs-prior-command|npm build|npm e2e|cannot find module"
    # a generator with an input kind still needs an input of that kind, or a generated output
    edited_go = (Change("internal/api/handler.go", 4, 1),)
    build = "internal/api/handler.go:31:21: q.ListActive undefined"
    checks = (fail("go build ./...", build), ok("sqlc generate"), ok("go build ./..."))
    lessons = propose_lessons(REF, task(*checks, changes=edited_go))
    assert all(lesson.rule != "regenerate-after-edit" for lesson in lessons)
    ts = "src/a.ts(1,2): error TS2339: Property 'archivedAt' does not exist on type 'Project'."
    schema = (Change("prisma/schema.prisma", 1, 0), Change("src/a.ts", 5, 1))
    checks = (fail("npx tsc --noEmit", ts, 2), ok("npx prisma generate"), ok("npx tsc --noEmit"))
    [lesson] = propose_lessons(REF, task(*checks, changes=schema))
    assert lesson.signature == "regenerate-after-edit|prisma generate|tsc"
    assert "`prisma/schema.prisma`" in lesson.situation


def test_a_generator_without_a_failing_check_is_no_lesson() -> None:
    changes = (Change("api/routes/orders.py", 20, 4), Change("openapi.json", 40, 2))
    checks = (ok("make openapi"), ok("pytest tests/contract"))
    assert propose_lessons(REF, task(*checks, changes=changes)) == []


# -- properties ----------------------------------------------------------------------------


def _fixture_tasks() -> list[tuple[str, TaskInput, str]]:
    out = []
    for path in sorted(SESSIONS.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        out.append((raw["id"], TaskInput.from_mapping(raw["task"]), json.dumps(raw["task"])))
    return out


def test_deterministic_and_within_the_contract_on_every_fixture() -> None:
    fixtures = _fixture_tasks()
    assert len(fixtures) >= 30
    for session_id, task_input, _ in fixtures:
        ref = f"task-result/{session_id}"
        lessons = propose_lessons(ref, task_input)
        assert lessons == propose_lessons(ref, task_input)
        assert len({lesson.signature for lesson in lessons}) == len(lessons)
        for lesson in lessons:
            ExperienceProposal.model_validate(lesson.proposal())  # the contract's own limits
            assert lesson.evidence == (ref,)


def test_never_a_secret_nor_a_verbatim_output_line() -> None:
    planted = 0
    for session_id, task_input, blob in _fixture_tasks():
        sentinels = [w for w in blob.replace('"', " ").split() if "SENTINEL" in w]
        planted += bool(sentinels) or "[REDACTED]" in blob
        for lesson in propose_lessons(f"task-result/{session_id}", task_input):
            for text in (*lesson.proposal().values(), lesson.signature):
                assert not looks_secret(text), (session_id, text)
                assert "SENTINEL" not in text and "REDACTED" not in text
                for check in task_input.checks:
                    for line in check.output_tail.splitlines():
                        assert len(line.strip()) < 30 or line.strip() not in text
    assert planted >= 3


def test_a_lesson_is_dropped_rather_than_carrying_a_secret() -> None:
    key = "sk-" + "a1B2c3D4" * 5
    checks = (fail("pytest", f"E   ModuleNotFoundError: No module named '{key}'"),
              ok("pip install -e ."), ok("pytest"))  # fmt: skip
    for lesson in propose_lessons(REF, task(*checks)):
        assert key not in json.dumps(lesson.proposal())


def test_fields_are_cut_to_the_contract_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from powercontext_runtime.distill import offline

    # The contract's limits are read from ExperienceProposal, not copied ...
    for field, limit in offline._FIELD_LIMITS.items():
        assert limit == ExperienceProposal.model_fields[field].metadata[1].max_length
    # ... and bounded inputs (paths <= 512, commands shown <= 160) stay far below them, so the
    # cut is shown with a tiny limit.
    monkeypatch.setitem(offline._FIELD_LIMITS, "action", 20)
    [lesson] = propose_lessons(REF, task(fail("pytest", PYTEST_FAIL), ok("pytest"), changes=FIX))
    assert len(lesson.action) == 20 and lesson.action.endswith("…")


def test_task_ref_is_required() -> None:
    with pytest.raises(ValueError):
        propose_lessons("", task(ok("pytest")))


def test_from_mapping_rejects_a_malformed_task() -> None:
    with pytest.raises(ValueError):
        TaskInput.from_mapping({"goal": "x", "outcome": "done"})
    with pytest.raises(ValueError):
        TaskInput.from_mapping(
            {"goal": "x", "outcome": "failed", "checks": [{"command": "a", "exit_status": "1"}]}
        )


# -- signatures and matching ---------------------------------------------------------------


def test_normalise_strips_numbers_paths_hex_and_timestamps() -> None:
    assert normalise(
        "/tmp/pytest-of-ci/pytest-7/x.py:12 at 0x7f3a2c1d9e50 2024-05-01T10:00:00Z"
    ) == ("x.py:# at # #")
    assert normalise("error[E0308] test_v2_api 12ms") == "error[e0308] test_v2_api #"


def test_failure_signatures_per_tool() -> None:
    go = failure_of("--- FAIL: TestParse (0.00s)\nFAIL\tgithub.com/a/b/cfg\t0.006s", 1)
    assert go is not None and (go.test, go.package) == ("TestParse", "github.com/a/b/cfg")
    rust = failure_of(
        "test api::tests::rejects ... FAILED\nthread 'api::tests::rejects' panicked at", 101
    )
    assert rust is not None and (rust.kind, rust.test) == ("panic", "api::tests::rejects")
    jest = failure_of(
        "FAIL src/a.test.ts\n  ● Cart › total\n\n    expect(received).toBe(expected)", 1
    )
    assert jest is not None and jest.test == "Cart > total" and jest.kind == "expect().toBe"
    assert failure_of("all good", 0) is None
    cmd = failure_of("bash: protoc: command not found", 127)
    assert cmd is not None and (cmd.kind, cmd.detail) == ("command not found", "protoc")
    expected = {
        "src/a.ts(3,7): error TS2339: Property 'x' does not exist": ("TS2339", None, "src/a.ts"),
        "\nAn error occurred (AccessDenied) when calling the ListObjectsV2 operation: Access "
        "Denied": ("AccessDenied", "ListObjectsV2", None),
        "make: *** No rule to make target 'check'.  Stop.": ("no make target", "check", None),
        "Could not find executable /w/build/tests/geo_tests\n***Not Run": (
            "missing build artifact", "geo_tests", None),
        "FAILURE: Build failed with an exception.\n\n* What went wrong:\nUnsupported class "
        "file major version 65": ("gradle build failed", "Unsupported class file major version",
                                  None),
        'error during build:\n[vite]: Rollup failed to resolve import "@acme/ui" from "/w/a.tsx"':
            ("Cannot find module", "@acme/ui", None),
        "Migrations are pending. To resolve this issue, run:\n\n        bin/rails db:migrate":
            ("database not up to date", None, None),
        "Lock file stale. Run `poetry lock [--no-update]` to fix it.": (
            "prerequisite not run", "poetry lock", None),
        "│ Error: Inconsistent dependency lock file\n│ Nothing to run here": (
            "error", "Inconsistent dependency lock file", None),
    }  # fmt: skip
    for output, (kind, detail, file) in expected.items():
        found = failure_of(output, 1)
        assert found is not None and (found.kind, found.detail, found.file) == (kind, detail, file)
    assert failure_of("Run `pip install -r requirements.txt` if needed\nall fine", 0) is None


def test_command_reduction() -> None:
    a = parse_command("cd web && npx vitest run -q src/cart 2>&1 | tail -40")
    assert (a.key, a.positionals) == ("vitest", ("run", "src/cart"))
    b = parse_command("uv run python -m pytest -x --tb=short tests/ -k slow")
    assert (b.key, b.positionals, b.selection, b.options) == (
        "pytest",
        ("tests/",),
        ("-k", "slow"),
        (),
    )
    assert parse_command("npm run build").key == parse_command("npm build").key == "npm build"
    assert parse_command("npm run build").display == "npm run build"
    assert parse_command("docker build --platform linux/amd64 .").positionals == (".",)
    assert parse_command("pytest").covers(parse_command("pytest tests/test_a.py"))
    assert not parse_command("pytest tests/test_a.py").covers(parse_command("pytest"))
    assert parse_command("git status").inert and not parse_command("git stash").inert
    web = parse_command("pnpm --filter web build")
    assert (web.key, web.positionals, web.selection) == ("pnpm build", ("web",), ())
    assert parse_command("pnpm -F=@acme/ui build").positionals == ("@acme/ui",)
    assert parse_command("make -C src check").key == "make check"
    tags = parse_command("go test -tags integration -race ./internal/search/...")
    assert (tags.options, tags.positionals) == (
        ("-tags", "integration", "-race"),
        ("./internal/search/...",),
    )
    assert tags.flag_difference(parse_command("go test -race ./internal/search/...")) == (
        ("-tags", "integration"),
        (),
    )
    configure = parse_command("./configure --prefix=/usr")
    assert (configure.key, configure.display) == ("configure", "./configure --prefix=/usr")
    assert parse_command("bin/rails db:migrate RAILS_ENV=test").key == "rails db:migrate"
    assert parse_command("./gradlew test").key == "gradlew test"
    assert parse_command("env | grep AWS").inert and parse_command("java -version").inert
    assert parse_command("pytest -q 2>&1 | tail -20").filtered
    assert not parse_command("pytest -q > log.txt").filtered


def _lesson(signature: str) -> Lesson:
    return Lesson(signature.split("|", 1)[0], signature, "s", "a", "o", "l", (REF,))


def test_similar_and_same_lesson() -> None:
    a = _lesson("fail-then-pass|pytest|assertionerror|tests/test_a.py::test_x|")
    b = _lesson("fail-then-pass|pytest|assertionerror|tests/test_a.py::test_y|")
    c = _lesson("needs-prior-command|pytest|assertionerror|tests/test_a.py::test_x|")
    assert similar(a, a) == 1.0 and same_lesson(a, a.signature)
    assert 0 < similar(a, b) < 1.0 and not same_lesson(a, b)
    assert similar(a, c) == 0.0


def test_near_duplicate_sessions_share_a_signature() -> None:
    lessons = {
        session_id: propose_lessons(f"task-result/{session_id}", task_input)
        for session_id, task_input, _ in _fixture_tasks()
    }
    pairs = [("s01-users-integrity", "s02-users-integrity-again"),
             ("s03-openapi-orders", "s04-openapi-users"),
             ("s15-vitest-npm-ci", "s16-vitest-npm-ci-again")]  # fmt: skip
    for first, second in pairs:
        [a], [b] = lessons[first], lessons[second]
        assert same_lesson(a, b), (first, second)
        assert a.lesson != b.lesson or first == second  # the wording may differ; the key not
