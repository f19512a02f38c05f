"""The offline distiller's pure core: lessons a reviewer would keep, from one task result.

Issue #31 item 3, spec 06 § Task results. A distiller only ever *proposes*: what this module
returns becomes a pending Experience candidate citing the task result, and nothing reaches a
context pack before a person approves it. That is why every rule here is conservative —
precision over recall. A wrong proposal costs a reviewer's attention on every task; a missed
one costs nothing that was not already missing. Each rule needs *exact* evidence in the
task's own check sequence (a run that failed, a run that passed, what happened in between),
and proposes nothing when the evidence is ambiguous.

Pure: no I/O, no database, no clock, no randomness; the same input gives the same lessons in
the same order. The worker around it (reading task results, dedup into candidates) is not
here.

The rules (ids are stable: they are stored and compared later)
---------------------------------------------------------------
``fail-then-pass``
    A check failed, the same check (same program, subcommand, flags; it covers what failed)
    passed later, and the task changed files. Situation: the failure's signature; action: the
    changed files (top 3); outcome: the check passed afterwards. Not for: failed or abandoned
    tasks (the change may not be the fix), a failing test whose own file was edited (a test
    being written, TDD), a test whose name already names every fixed file, a syntax error (the
    agent's own typo), a failure known only from a tool's bare ``error:`` line.
``flags-changed``
    A run failed and the next run of the same program with *only* different flags or
    variables passed, with nothing state-changing in between — and either the task changed no
    files, or the failure was about the command line itself (usage, unknown flag, ERESOLVE,
    settings), or the failing output itself named the long flag that then worked. Narrowing a
    suite (``-k``, ``-run``, one file) is not a flag lesson.
``needs-prior-command``
    B failed, exactly one state-changing command A ran and succeeded, then B passed — and
    either the task changed no files or B's failure was environmental (missing module, table,
    service). Lesson: run A before B.
``regenerate-after-edit``
    A check failed, a known generator (:data:`GENERATORS`) ran and succeeded, then the check
    passed, in a succeeded task that edited inputs X and either changed generated files Y or
    edited the generator's own input kind (a ``.proto``, a Prisma schema). A generator that
    names no input kind (``make mocks``, ``go generate``, a package script) may read any file,
    and what it writes never shows in a task recorded from a transcript (the host sees the
    agent's edits, not a command's writes): there the edited code files are its inputs, unless
    the failure was environmental (something missing, so ``needs-prior-command``).
    Lesson: after editing X, regenerate with the command.

A run piped into a filter (``npm test 2>&1 | tail -20``) exits with the filter's status; when
its output shows a test runner's failure (:func:`~.failures.hidden_failure`) it counts as
failed.

Nothing for: abandoned tasks; tasks without a failing→passing pair; a fail→pass with no change
and no command in between (flakiness: one sample is no rule — the dedup step may later count
repeats); anything whose text would hold a credential (:func:`~.failures.looks_secret`).

Matching (for the dedup step)
-----------------------------
:attr:`Lesson.signature` is ``rule|…`` built only from normalised, stable parts (the program
key, the generator, the error class, the test id, the flags), never from line numbers, paths
of temp dirs, durations or the goal's wording. Two lessons are the same when their signatures
are equal (:func:`same_lesson`); :func:`similar` grades the rest (token Jaccard, 0 across
rules) and is only a hint for a reviewer. Calibration on the bench fixtures is in
docs/decisions/offline-distiller.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from annotated_types import MaxLen

from ..contract.limits import MAX_EVIDENCE_REFS, SOURCE_ID_MAX_CHARS
from ..contract.review import ExperienceProposal
from .commands import SECRET_NAME, Command, parse_command, within
from .failures import (
    GENERIC_KIND,
    PREREQUISITE_KIND,
    Failure,
    failure_of,
    hidden_failure,
    is_test_path,
    looks_secret,
    normalise,
)

__all__ = [
    "GENERATORS",
    "MATCH_THRESHOLD",
    "RULES",
    "Change",
    "Check",
    "Lesson",
    "TaskInput",
    "propose_lessons",
    "same_lesson",
    "similar",
]

Outcome = Literal["succeeded", "failed", "abandoned"]
RULES = ("fail-then-pass", "flags-changed", "needs-prior-command", "regenerate-after-edit")
#: :func:`similar` at or above this means "the same lesson"; below, different. Signatures are
#: built to be equal for near-duplicates, so the threshold is equality (see the module doc).
MATCH_THRESHOLD = 1.0
#: At most this many lessons from one task: more would mean the rules are guessing.
MAX_LESSONS_PER_TASK = 3
_ACTION_PATHS = 3
_COMMAND_CHARS = 160


def _max_length(field: str) -> int:
    """The Experience field's length limit, read from the contract (never copied)."""
    for item in ExperienceProposal.model_fields[field].metadata:
        if isinstance(item, MaxLen):
            return int(item.max_length)
    raise LookupError(f"ExperienceProposal.{field} has no max length")  # pragma: no cover


_FIELD_LIMITS = {f: _max_length(f) for f in ("situation", "action", "outcome", "lesson")}


# -- input -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    added: int
    removed: int


@dataclass(frozen=True, slots=True)
class Check:
    command: str
    exit_status: int
    output_tail: str = ""


@dataclass(frozen=True, slots=True)
class TaskInput:
    """The ``task`` object of a task result (docs: the task-result wire contract), as stored:
    already validated by the route and redacted. Checks are in the order they ran; changes
    are a summary of the whole task, with no order relative to the checks."""

    goal: str
    outcome: Outcome
    changes: tuple[Change, ...] = ()
    checks: tuple[Check, ...] = ()
    host: str | None = None
    session_ref: str | None = None

    @classmethod
    def from_mapping(cls, task: Mapping[str, Any]) -> TaskInput:
        """The stored canonical JSON's ``task`` object, parsed; raises ``ValueError`` on a
        shape the contract does not allow (wrong types, unknown outcome)."""
        outcome = task.get("outcome")
        if outcome not in ("succeeded", "failed", "abandoned"):
            raise ValueError("task.outcome must be succeeded, failed or abandoned")
        goal = task.get("goal")
        if not isinstance(goal, str):
            raise ValueError("task.goal must be a string")
        try:
            changes = tuple(
                Change(_str(c["path"]), _int(c["added"]), _int(c["removed"]))
                for c in task.get("changes") or ()
            )
            checks = tuple(
                Check(_str(c["command"]), _int(c["exit_status"]), _str(c.get("output_tail", "")))
                for c in task.get("checks") or ()
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"task changes/checks malformed: {exc}") from None
        return cls(goal, outcome, changes, checks, task.get("host"), task.get("session_ref"))


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("expected an integer")
    return value


# -- output ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lesson:
    """One proposed Experience: the four proposal fields, its evidence (task-result source
    ids, e.g. ``task-result/run_42``), the rule that produced it and its dedup signature."""

    rule: str
    signature: str
    situation: str
    action: str
    outcome: str
    lesson: str
    evidence: tuple[str, ...]

    def proposal(self) -> dict[str, str]:
        """The ``proposal`` of ``propose_experience`` (spec 06)."""
        return {
            "situation": self.situation,
            "action": self.action,
            "outcome": self.outcome,
            "lesson": self.lesson,
        }


# -- generators --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Generator:
    """A command that writes files from other files. ``inputs``: paths it reads (an edit of
    one is evidence enough on its own); ``outputs``: paths it writes."""

    name: str
    keys: tuple[str, ...]
    inputs: re.Pattern[str] | None
    outputs: re.Pattern[str]


_GENERATED = (
    r"(?:^|/)(?:generated|__generated__|gen)/|_pb2(?:_grpc)?\.pyi?$|\.pb\.go$|_pb\.[jt]s$"
    r"|_grpc\.pb\.go$|(?:^|/)openapi\.(?:json|ya?ml)$|(?:^|/)(?:alembic|migrations)/versions/"
    r"|(?:^|/)migrations/\d{4}_\w+\.py$|\.gen\.(?:go|ts)$|_gen\.go$|zz_generated|\.sql\.go$"
    r"|(?:^|/)mocks?/|(?:^|/)mock_\w+\.go$|(?:^|/)dist/|\.d\.ts$"
)
_ANY_GENERATED = re.compile(_GENERATED)

#: The small, documented generator vocabulary (docs/decisions/offline-distiller.md). A command
#: is a generator when its program key is one of ``keys``.
GENERATORS: tuple[Generator, ...] = (
    Generator(
        "make",
        tuple(
            f"make {t}"
            for t in (
                "openapi",
                "generate",
                "gen",
                "codegen",
                "proto",
                "protos",
                "schema",
                "client",
                "mocks",
                "api",
            )
        ),
        None,
        _ANY_GENERATED,
    ),
    Generator("protoc", ("protoc", "buf generate"), re.compile(r"\.proto$"), _ANY_GENERATED),
    Generator(
        "alembic",
        ("alembic revision",),
        re.compile(r"(?:^|/)models?(?:/|\.py$)"),
        re.compile(r"(?:^|/)(?:alembic|migrations)/versions/"),
    ),
    Generator(
        "django",
        ("manage.py makemigrations",),
        re.compile(r"models\.py$"),
        re.compile(r"(?:^|/)migrations/\d{4}_\w+\.py$"),
    ),
    Generator("go generate", ("go generate",), None, _ANY_GENERATED),
    Generator("sqlc", ("sqlc generate",), re.compile(r"\.sql$"), re.compile(r"\.sql\.go$|/db/")),
    Generator("prisma", ("prisma generate",), re.compile(r"schema\.prisma$"), _ANY_GENERATED),
    Generator(
        "graphql-codegen",
        ("graphql-codegen", "gql-gen"),
        re.compile(r"\.graphqls?$"),
        _ANY_GENERATED,
    ),
    Generator(
        "openapi-generator",
        ("openapi-generator generate", "openapi-generator-cli generate", "openapi-typescript"),
        re.compile(r"openapi\.(?:json|ya?ml)$"),
        _ANY_GENERATED,
    ),
    Generator(
        "package script",
        tuple(
            f"{tool} {script}"
            for tool in ("npm", "pnpm", "yarn")
            for script in (
                "generate",
                "gen",
                "codegen",
                "openapi",
                "gen:api",
                "gen:types",
                "generate:api",
                "generate:types",
                "proto",
                "build",
            )
        ),
        None,
        _ANY_GENERATED,
    ),
)


def _generator(command: Command) -> Generator | None:
    return next((g for g in GENERATORS if command.key in g.keys), None)


# -- the rules ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Run:
    index: int
    check: Check
    command: Command
    failure: Failure | None

    @property
    def passed(self) -> bool:
        return self.check.exit_status == 0 and self.failure is None


def propose_lessons(task_ref: str, task: TaskInput) -> list[Lesson]:
    """The lessons one task result supports, citing ``task_ref`` (``task-result/<id>``).

    Deterministic; at most :data:`MAX_LESSONS_PER_TASK`, one per signature, in the order of
    the failures they come from. An empty list is the common, correct answer.
    """
    if not task_ref or len(task_ref) > SOURCE_ID_MAX_CHARS:
        raise ValueError("task_ref must be a task result's source id")
    if task.outcome == "abandoned" or not task.checks:
        return []
    runs = [_run(i, check) for i, check in enumerate(task.checks)]
    found: list[Lesson] = []
    seen: set[str] = set()
    for run in runs:
        if run.passed or run.failure is None or not run.command.key:
            continue
        lesson = _lesson_for_failure(task_ref, task, runs, run)
        if lesson is None or lesson.signature in seen or _leaks(lesson):
            continue
        seen.add(lesson.signature)
        found.append(lesson)
        if len(found) == MAX_LESSONS_PER_TASK:
            break
    return found


def _run(index: int, check: Check) -> _Run:
    command = parse_command(check.command)
    failure = failure_of(check.output_tail, check.exit_status)
    if check.exit_status == 0 and command.filtered:
        failure = hidden_failure(check.output_tail)  # the filter's status hid the runner's
    return _Run(index, check, command, failure)


def _same_check(run: Command, failed: Command) -> bool:
    """Is ``run`` the failed check again (the whole of it or a part, any flags), rather than
    another command of the same program (``pnpm --filter ui build`` before ``--filter web``)?"""
    if run.key != failed.key:
        return False
    if not run.positionals or not failed.positionals:
        return True
    return all(any(within(t, s) for s in failed.positionals) for t in run.positionals) or all(
        any(within(t, s) for s in run.positionals) for t in failed.positionals
    )


def _lesson_for_failure(
    task_ref: str, task: TaskInput, runs: Sequence[_Run], failed: _Run
) -> Lesson | None:
    """The one lesson this failed run supports, judged by the next run of the same program."""
    assert failed.failure is not None
    for later in runs[failed.index + 1 :]:
        if later.command.key != failed.command.key:
            continue
        if later.command.covers(failed.command):
            if not later.passed:
                return None  # it failed again: the later failure speaks for itself
            between = runs[failed.index + 1 : later.index]
            return _explain_pass(task_ref, task, failed, later, between)
        if later.passed and (diff := later.command.flag_difference(failed.command)):
            between = runs[failed.index + 1 : later.index]
            return _flags_changed(task_ref, task, failed, later, between, diff)
        # a narrowed or otherwise different run of the same program: keep looking
    return None


def _explain_pass(
    task_ref: str, task: TaskInput, failed: _Run, passed: _Run, between: Sequence[_Run]
) -> Lesson | None:
    failure = failed.failure
    assert failure is not None
    acting = [r for r in between if r.passed and not r.command.inert and r.command.key]
    if task.outcome == "succeeded" and task.changes:
        for run in acting:
            generator = _generator(run.command)
            if generator is not None and (
                lesson := _regenerate(task_ref, task, failed, passed, run, generator)
            ):
                return lesson
    others = [r for r in acting if not _same_check(r.command, failed.command)]
    distinct = {_command_identity(r.command) for r in others}
    if len(distinct) == 1 and (not task.changes or _explains(failure, others[-1].command)):
        return _needs_prior(task_ref, failed, passed, others[-1])
    if not task.changes or task.outcome != "succeeded":
        return None  # nothing changed: flaky, or explained by nothing we can see
    if failure.self_inflicted or failure.environmental or failure.invocation:
        return None
    if failure.kind in (None, GENERIC_KIND) or _test_file_changed(failure, task.changes):
        return None  # a bare "error: …" line is too little to point at code
    if _points_at(failure, _fix_paths(task.changes)):
        return None
    return _fail_then_pass(task_ref, task, failed, passed)


def _explains(failure: Failure, prior: Command) -> bool:
    """Does an environment failure point at ``prior`` (files changed too, so the failure must
    say it was the environment)? An output naming the command to run counts only when that is
    the command that ran (npm's "Run `npm audit` for details" is no order)."""
    if not failure.environmental:
        return False
    if failure.kind != PREREQUISITE_KIND:
        return True
    named = (failure.detail or "").split()
    return bool(named) and named[0] == prior.program and " ".join(named) in f"{prior.key} "


def _test_file_changed(failure: Failure, changes: Sequence[Change]) -> bool:
    """Was the failing test itself edited in this task? Then the run shows a test being
    written (red, then green), not a lesson about the code."""
    paths = [c.path for c in changes]
    if failure.file:
        target = failure.file.lstrip("./")
        if any(p == target or p.endswith("/" + target) or target.endswith("/" + p) for p in paths):
            return True
    if failure.package:
        tail = failure.package.rsplit("/", 1)[-1]
        if any(p.endswith("_test.go") and f"{tail}/" in p for p in paths):
            return True
    if failure.test and not failure.file:
        # cargo / go print no file: a changed test file of the same module counts
        module = failure.test.split("::", 1)[0].lower()
        if any(is_test_path(p) and module and module in p.lower() for p in paths):
            return True
    return False


def _points_at(failure: Failure, paths: Sequence[str]) -> bool:
    """Does the failing test's *name* already name every fixed file (``TestParseDuration`` →
    ``duration.go``, ``parser::tests::…`` → ``parser.rs``)? Then "look at that file" teaches
    nothing the failure did not say. Only the name counts, not the test's file: that
    ``tests/test_users.py`` fails says little about *which* users module (route, service,
    model) held the fix."""
    name = failure.test.rsplit("::", 1)[-1] if failure.test else failure.file
    if failure.test and "::" in failure.test and not failure.file:
        name = failure.test  # cargo: the module path is part of the name
    where = re.sub(r"[\W_]+", "", name or "").lower()
    if not where or not paths:
        return False
    stems = [_stem(p) for p in paths]
    return all(len(stem) >= 3 and stem in where for stem in stems)


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1].split(".", 1)[0].lower()
    name = re.sub(r"^test_|_test$|_spec$", "", name)
    return re.sub(r"[\W_]+", "", name)


def _fail_then_pass(task_ref: str, task: TaskInput, failed: _Run, passed: _Run) -> Lesson | None:
    failure = failed.failure
    assert failure is not None
    paths = _fix_paths(task.changes)
    if not paths:
        return None
    shown = ", ".join(f"`{p}`" for p in paths)
    check = _show(failed.command)
    return _make(
        rule="fail-then-pass",
        parts=(failed.command.key, failure.signature()),
        situation=f"{check} failed: {failure.describe()}.",
        action=f"Changed {shown}{_more(task.changes, paths)}.",
        outcome=f"{_show(passed.command)} passed afterwards.",
        lesson=(
            f"When {check} fails with {failure.describe()}, look at {shown} first: "
            "the change there made it pass."
        ),
        task_ref=task_ref,
    )


def _flags_changed(
    task_ref: str,
    task: TaskInput,
    failed: _Run,
    passed: _Run,
    between: Sequence[_Run],
    diff: tuple[tuple[str, ...], tuple[str, ...]],
) -> Lesson | None:
    failure = failed.failure
    assert failure is not None
    if any(not r.command.inert for r in between):
        return None  # something else ran: it, not the flags, may have fixed it
    told = any(
        len(t) > 3 and t.startswith("--") and t.split("=", 1)[0] in failed.check.output_tail
        for t in diff[0]
    )
    if task.changes and not (failure.invocation or told):
        return None  # files changed too: they, not the flags, may have fixed it
    added, removed = (tuple(_mask(t) for t in side) for side in diff)
    if any(looks_secret(t) for t in (*added, *removed)):
        return None
    parts = []
    if added:
        parts.append(f"with `{' '.join(added)}`")
    if removed:
        parts.append(f"without `{' '.join(removed)}`")
    how = " and ".join(parts)
    return _make(
        rule="flags-changed",
        parts=(
            failed.command.key,
            "+" + " ".join(sorted(_flag_name(t) for t in added)),
            "-" + " ".join(sorted(_flag_name(t) for t in removed)),
        ),
        situation=f"{_show(failed.command)} failed: {failure.describe()}.",
        action=f"Ran it {how}: {_show(passed.command)}.",
        outcome=f"{_show(passed.command)} succeeded, with no file changed in between.",
        # The commands as typed, not their keys: a key drops words (`npm run build` → `npm
        # build`) that a reader would type.
        lesson=(
            f"Run {_show(passed.command)}, not {_show(failed.command)}: that fails with "
            f"{failure.describe()}."
        ),
        task_ref=task_ref,
    )


def _needs_prior(task_ref: str, failed: _Run, passed: _Run, prior: _Run) -> Lesson | None:
    failure = failed.failure
    assert failure is not None
    first, then = _show(prior.command), _show(failed.command)
    return _make(
        rule="needs-prior-command",
        parts=(_command_identity(prior.command), failed.command.key, failure.kind or ""),
        situation=f"{then} failed: {failure.describe()}.",
        action=f"Ran {first}, then {then} again, changing no code in between.",
        outcome=f"{_show(passed.command)} passed after {first}.",
        lesson=f"Run {first} before {then}; otherwise it fails with {failure.describe()}.",
        task_ref=task_ref,
    )


def _regenerate(
    task_ref: str,
    task: TaskInput,
    failed: _Run,
    passed: _Run,
    generator_run: _Run,
    generator: Generator,
) -> Lesson | None:
    failure = failed.failure
    assert failure is not None
    outputs = [c for c in task.changes if generator.outputs.search(c.path)]
    edited = [
        c
        for c in task.changes
        if not _ANY_GENERATED.search(c.path) and not generator.outputs.search(c.path)
    ]
    inputs = [c for c in edited if generator.inputs and generator.inputs.search(c.path)]
    if generator.inputs is None and not outputs and not failure.environmental:
        # See the module docstring. Not for a failure that says something is *missing* (a
        # module, a build artifact): building it is a prior command, not a regeneration.
        inputs = [c for c in edited if not is_test_path(c.path)]
    if not edited or not (outputs or inputs):
        return None
    sources = _top(inputs or [c for c in edited if not is_test_path(c.path)] or edited, 2)
    made = _top(outputs, 2)
    gen, check = _show(generator_run.command), _show(failed.command)
    shown_sources = ", ".join(f"`{p}`" for p in sources)
    regenerates = f" (it regenerates {', '.join(f'`{p}`' for p in made)})" if made else ""
    return _make(
        rule="regenerate-after-edit",
        parts=(generator_run.command.key, failed.command.key),
        situation=(f"After editing {shown_sources}, {check} failed: {failure.describe()}."),
        action=f"Ran {gen}{regenerates}.",
        outcome=f"{_show(passed.command)} passed after regenerating.",
        lesson=(
            f"After editing {shown_sources}, run {gen} to regenerate{regenerates}; "
            f"{check} fails otherwise."
        ),
        task_ref=task_ref,
    )


# -- rendering ---------------------------------------------------------------------------------


def _show(command: Command) -> str:
    """The command as a lesson shows it, with credential-looking variables masked."""
    words = []
    for env in command.env:
        name = env.split("=", 1)[0]
        words.append(f"{name}=…" if looks_secret(env) else _mask(env))
    text = command.display
    for env in command.env:
        text = text.replace(env + " ", "", 1)
    shown = " ".join([*words, text]).strip()
    if len(shown) > _COMMAND_CHARS:
        shown = shown[: _COMMAND_CHARS - 1] + "…"
    return f"`{shown}`"


def _command_identity(command: Command) -> str:
    """What makes two runs the same command for a signature: key, targets and flags."""
    return " ".join([command.key, *command.positionals, *command.options])


def _flag_name(token: str) -> str:
    """``--workers=4`` → ``--workers``; ``NODE_ENV=test`` keeps its value (it is the lesson)."""
    if token.startswith("-"):
        return token.split("=", 1)[0]
    return token


def _mask(token: str) -> str:
    """``API_TOKEN=abc`` → ``API_TOKEN=…``: a credential's *name* can be a lesson (the suite
    needs it set), its value never is."""
    name, eq, _ = token.partition("=")
    return f"{name}=…" if eq and SECRET_NAME.search(name.lstrip("-")) else token


def _top(changes: Sequence[Change], n: int) -> list[str]:
    ordered = sorted(changes, key=lambda c: (-(c.added + c.removed), c.path))
    return [c.path for c in ordered[:n]]


def _fix_paths(changes: Sequence[Change]) -> list[str]:
    """The top changed files, code before tests and generated files."""
    code = [c for c in changes if not is_test_path(c.path) and not _ANY_GENERATED.search(c.path)]
    return _top(code or list(changes), _ACTION_PATHS)


def _more(changes: Sequence[Change], shown: Sequence[str]) -> str:
    rest = len(changes) - len(shown)
    return f" and {rest} more file{'s' if rest > 1 else ''}" if rest > 0 else ""


def _bounded(text: str, field: str) -> str:
    limit = _FIELD_LIMITS[field]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _make(
    *, rule: str, parts: Sequence[str], situation: str, action: str, outcome: str, lesson: str,
    task_ref: str,
) -> Lesson:  # fmt: skip
    evidence = (task_ref,)
    assert len(evidence) <= MAX_EVIDENCE_REFS
    return Lesson(
        rule=rule,
        signature="|".join([rule, *(normalise(p) for p in parts)]),
        situation=_bounded(situation, "situation"),
        action=_bounded(action, "action"),
        outcome=_bounded(outcome, "outcome"),
        lesson=_bounded(lesson, "lesson"),
        evidence=evidence,
    )


def _leaks(lesson: Lesson) -> bool:
    """The last gate: a lesson whose text resembles a credential is never proposed."""
    return any(looks_secret(text) for text in (*lesson.proposal().values(), lesson.signature))


# -- matching ----------------------------------------------------------------------------------

_TOKEN = re.compile(r"[\w.:/-]+")


def same_lesson(a: Lesson, b: Lesson | str) -> bool:
    """Is ``b`` (a lesson or a stored signature) the same lesson as ``a``? Equal signatures."""
    return similar(a, b) >= MATCH_THRESHOLD


def similar(a: Lesson, b: Lesson | str) -> float:
    """How alike two lessons are, in 0..1, from their signatures alone.

    1.0 for equal signatures; 0.0 across rules; otherwise the Jaccard overlap of the
    signature's tokens (``pytest``, ``assertionerror``, ``tests/test_api.py::test_x``).
    Only equality counts as a match (:data:`MATCH_THRESHOLD`): two different failing tests
    of one suite share most tokens yet are different lessons.
    """
    other = b.signature if isinstance(b, Lesson) else b
    if a.signature == other:
        return 1.0
    if a.signature.split("|", 1)[0] != other.split("|", 1)[0]:
        return 0.0
    mine, theirs = set(_TOKEN.findall(a.signature)), set(_TOKEN.findall(other))
    if not mine or not theirs:
        return 0.0
    return min(len(mine & theirs) / len(mine | theirs), 0.99)
