"""Failure signatures from a check's output tail (pure, no I/O).

The distiller never repeats an output tail: it keeps only a *signature* of the failure — the
error class (``AssertionError``, ``error[E0308]``, ``TS2339``, ``ModuleNotFoundError``), the
failing test id when the tool prints one, and for a few environment errors the one name that
makes them actionable (the missing module, the missing table). Each piece is matched by a
narrow pattern for the tool that prints it (pytest, jest/vitest, go test, cargo, tsc, npm,
shells, databases) and is short; anything that looks like a credential is dropped.

Signatures are normalised (:func:`normalise`) so that the same failure seen in two sessions
compares equal: numbers, absolute paths, hex ids, timestamps and durations are stripped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "GENERIC_KIND",
    "PREREQUISITE_KIND",
    "Failure",
    "failure_of",
    "hidden_failure",
    "is_test_path",
    "looks_secret",
    "normalise",
]

#: The kind of a failure known only from a tool's bare ``error: …`` line.
GENERIC_KIND = "error"
#: The kind of a failure whose output says which command to run first (``Run `poetry lock` to
#: fix the lock file``, terraform's ``run: terraform init -upgrade``); the detail names it.
PREREQUISITE_KIND = "prerequisite not run"

#: Failure classes caused by the environment, not by the code: another command (install,
#: migrate, start a service) fixes them, so they point at ``needs-prior-command``.
ENVIRONMENT_KINDS = frozenset(
    {
        "ModuleNotFoundError", "Cannot find module", "command not found", "relation does not exist",
        "no such table", "connection refused", "missing go.sum entry", "no required module",
        "database not up to date", "docker daemon not running", "missing node_modules",
        "ERR_MODULE_NOT_FOUND", "missing dependency", "missing build artifact",
        "no make target", PREREQUISITE_KIND,
    }
)  # fmt: skip
#: Failure classes of the command line itself: a different flag or variable fixes them.
INVOCATION_KINDS = frozenset(
    {"usage error", "unrecognized arguments", "unknown flag", "ERESOLVE", "ImproperlyConfigured"}
)
#: Mistakes an agent makes and fixes while typing (a syntax error in its own edit): a
#: reviewer keeps nothing from them.
SELF_INFLICTED_KINDS = frozenset(
    {"SyntaxError", "IndentationError", "TabError", "TS1005", "TS1128", "syntax error"}
)


@dataclass(frozen=True, slots=True)
class Failure:
    """What failed: ``kind`` (error class), ``test`` (a test id), ``file`` (the failing test's
    file when the output names it), ``package`` (a Go package), ``detail`` (one short name)."""

    kind: str | None
    test: str | None = None
    file: str | None = None
    package: str | None = None
    detail: str | None = None

    def describe(self) -> str:
        """``AssertionError in tests/test_api.py::test_create_user`` and the like."""
        kind = self.kind or "a failure"
        if self.detail:
            kind = f"{kind} ({self.detail})"
        where = self.test or self.file or self.package
        return f"{kind} in {where}" if where else kind

    def signature(self) -> str:
        """The normalised ``kind|test|detail`` used to recognise the same failure again."""
        where = self.test or self.file or self.package or ""
        return "|".join(normalise(part or "") for part in (self.kind, where, self.detail))

    @property
    def environmental(self) -> bool:
        return self.kind in ENVIRONMENT_KINDS

    @property
    def invocation(self) -> bool:
        return self.kind in INVOCATION_KINDS

    @property
    def self_inflicted(self) -> bool:
        return self.kind in SELF_INFLICTED_KINDS


# -- secrets --------------------------------------------------------------------------------

_SECRET = re.compile(
    r"\[REDACTED\]|sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{8,}|AKIA[0-9A-Z]{12,}|pc_[A-Za-z0-9]+_[A-Za-z0-9_-]{12,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}|-----BEGIN [A-Z ]*PRIVATE KEY"
    r"|[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@|(?i:bearer\s+[A-Za-z0-9._~+/-]{8,})"
    r"|(?i:(?:password|passwd|secret|token|api[_-]?key)\s*[=:]\s*\S{4,})"
    # Only from a run's first character: equivalent (a run's longest suffix is the run), and
    # linear — from every position, a long run without a digit cost quadratic time.
    r"|(?<![A-Za-z0-9+_-])(?=[A-Za-z0-9+_-]*\d)(?=[A-Za-z0-9+_-]*[A-Za-z])[A-Za-z0-9+_-]{32,}"
)


def looks_secret(text: str) -> bool:
    """Does ``text`` hold anything that resembles a credential (or a redaction marker)?

    Deliberately broad — any 32+ character run of letters and digits counts (a path's
    segments are shorter) — because a false alarm only costs one proposal, while a leaked key
    in a candidate would be shown to a reviewer and stored.
    """
    return _SECRET.search(text) is not None


# -- normalisation --------------------------------------------------------------------------

_ABS_PATH = re.compile(r"(?:[A-Za-z]:\\|/)(?:[\w.@+-]+[/\\])+(?=[\w.@+-])")
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"
)
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:ms|s|m|h|kb|mb|gb|%)?(?![\w.])")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lower case, absolute directories, timestamps, hex ids and free numbers stripped
    (``/tmp/pytest-7/x.py:12`` → ``x.py:#``), so reruns and other machines compare equal."""
    text = _ABS_PATH.sub("", text)
    text = _TIMESTAMP.sub("#", text)
    text = _HEX.sub("#", text)
    text = _NUMBER.sub("#", text)
    return _SPACE.sub(" ", text).strip().casefold()


# -- extraction -----------------------------------------------------------------------------

_FLAGS = re.MULTILINE
_PY_ERROR = r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Failure|Failed|Warning)"
_PYTEST_FAILED = re.compile(r"^(?:FAILED|ERROR)\s+(?P<id>\S+?)(?:\s+-\s+(?P<rest>.*))?$", _FLAGS)
_PY_E_LINE = re.compile(rf"^E\s+(?P<kind>{_PY_ERROR})\b(?::\s*(?P<rest>.*))?$", _FLAGS)
_PY_LAST = re.compile(rf"^(?P<kind>{_PY_ERROR}):\s*(?P<rest>.*)$", _FLAGS)
_PY_ASSERT = re.compile(r"^E\s+assert\b", _FLAGS)
_NO_MODULE = re.compile(r"No module named '(?P<name>[\w.]+)'")
_JEST_FILE = re.compile(
    r"^\s*FAIL\s+(?P<file>\S+\.(?:[cm]?[jt]sx?))\b(?:\s*>\s*(?P<test>.+))?$", _FLAGS
)
_JEST_TEST = re.compile(r"^\s*●\s+(?P<test>(?!Test suite failed).+?)\s*$", _FLAGS)
_JS_ERROR = re.compile(
    r"^\s*(?P<kind>(?:Type|Reference|Range|Syntax|Assertion)Error|Error)\b:?\s*(?P<rest>.*)$",
    _FLAGS,
)
_JEST_EXPECT = re.compile(r"^\s*expect\((?:received|actual)\)\.(?P<matcher>\w+)", _FLAGS)
_CANNOT_FIND = re.compile(r"Cannot find (?:module|package) '(?P<name>[^']+)'")
_TS = re.compile(r"error (?P<code>TS\d{4}):\s*(?P<rest>.*)$", _FLAGS)
#: tsc's location before the code, pretty (``src/a.ts:3:7 - error``) or plain (``src/a.ts(3,7):``).
_TS_AT = re.compile(
    r"^(?P<file>[\w./@-]+\.[cm]?[jt]sx?)(?::\d+:\d+ - |\(\d+,\d+\): )error TS\d{4}\b", _FLAGS
)
_JEST_SUMMARY = re.compile(r"^Tests:\s+\d+ failed\b", _FLAGS)
_GO_FAIL = re.compile(r"^\s*--- FAIL: (?P<test>\S+)", _FLAGS)
_GO_PKG = re.compile(r"^FAIL\s+(?P<pkg>[\w./-]+/[\w.-]+)\s", _FLAGS)
_GO_BUILD = re.compile(r"^(?:\.?/)?(?P<file>[\w./-]+\.go):\d+(?::\d+)?:\s*(?P<rest>.+)$", _FLAGS)
_GO_SUM = re.compile(r"missing go\.sum entry", _FLAGS)
_GO_NO_MODULE = re.compile(r"no required module provides package (?P<name>[\w./-]+)")
_RUST_TEST = re.compile(r"^test (?P<test>\S+) \.\.\. FAILED$", _FLAGS)
_RUST_ERROR = re.compile(r"^error\[(?P<code>E\d{4})\]:\s*(?P<rest>.*)$", _FLAGS)
_RUST_PANIC = re.compile(r"^thread '(?P<test>[^']+)' panicked at", _FLAGS)
_CMD_NOT_FOUND = re.compile(
    r"(?:^|\s)(?P<name>[\w.-]+): command not found$"
    r"|^(?:/bin/)?sh: \d+: (?P<sh>[\w.-]+): not found$",
    _FLAGS,
)
_RELATION = re.compile(r"relation \"(?P<name>[\w.]+)\" does not exist")
_NO_TABLE = re.compile(r"no such table: (?P<name>[\w.]+)")
_NOT_UP_TO_DATE = re.compile(
    r"Target database is not up to date|unapplied migration|Migrations are pending", re.I
)
#: Vite/Rollup cannot resolve a bare import: the package (a workspace one) is not built or
#: installed, the same situation as node's ``Cannot find module``.
_UNRESOLVED_IMPORT = re.compile(r"[Ff]ailed to resolve import \"(?P<name>[^\"]+)\"")
_NO_MAKE_TARGET = re.compile(
    r"^make(?:\[\d+\])?: \*\*\* No rule to make target '(?P<target>[^']+)'", _FLAGS
)
_CTEST_MISSING = re.compile(r"^Could not find executable (?P<path>\S+)", _FLAGS)
_AWS_ERROR = re.compile(
    r"An error occurred \((?P<code>[A-Za-z.]+)\) when calling the (?P<op>\w+) operation"
)
_GRADLE_WRONG = re.compile(r"^\* What went wrong:\s*\n(?P<what>.+)$", _FLAGS)
#: An output telling which command to run: ``Run `poetry lock [--no-update]` to …`` or a
#: ``run:`` line followed by the indented command (terraform, Rails; terraform boxes its lines
#: in ``│``).
_TOLD = re.compile(
    r"\b[Rr]un `(?P<quoted>[^`\n]{3,100})`"
    r"|\b[Rr]un:[ \t]*\n(?:[ \t│]*\n)*[ \t│]+(?P<line>\S[^\n]{2,100})$",
    _FLAGS,
)
_REFUSED = re.compile(r"Connection refused|ECONNREFUSED|could not connect to server", re.I)
_DOCKER_DOWN = re.compile(r"Cannot connect to the Docker daemon", re.I)
_NPM_CODE = re.compile(r"^npm (?:ERR!|error) code (?P<code>[A-Z][A-Z0-9_]+)$", _FLAGS)
_UNRECOGNIZED = re.compile(
    r"unrecognized arguments?:|unknown (?:flag|option|shorthand flag)|"
    r"flag provided but not defined|unexpected argument '|No such option|invalid option",
    re.I,
)
_USAGE = re.compile(r"^(?:usage|Usage): ", _FLAGS)
_IMPROPERLY = re.compile(r"ImproperlyConfigured")
_NODE_MODULES = re.compile(r"node_modules (?:missing|not found)|run `?npm (?:install|ci)`?", re.I)
_MISSING_DEPENDENCY = re.compile(
    r"Could not find gem|Run `(?:bundle|yarn|pnpm|poetry|composer) install`", re.I
)
_SHELL_SYNTAX = re.compile(r"syntax error", re.I)
_PYTEST_SUMMARY = re.compile(r"^=+ .*\b(?:failed|error)", _FLAGS)

_TEST_PATH = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec)/|(?:^|/)test_[^/]*\.py$|_test\.(?:py|go)$"
    r"|\.(?:test|spec)\.[cm]?[jt]sx?$|(?:^|/)conftest\.py$"
)


def is_test_path(path: str) -> bool:
    """A test file or test directory (its edit is part of writing tests, not of a fix)."""
    return _TEST_PATH.search(path) is not None


def _short(name: str | None, limit: int = 80) -> str | None:
    """A short name from the output, or ``None`` when it is long or looks like a credential;
    an absolute path keeps only its last two parts (the rest is one machine's layout)."""
    if not name:
        return None
    name = name.strip().strip("'\"`")
    if name.startswith("/") and name.count("/") > 2:
        name = "/".join(name.rsplit("/", 2)[-2:])
    if not name or looks_secret(name) or len(name) > limit:
        return None
    return name


def _error_kind(text: str | None) -> str | None:
    if not text:
        return None
    match = re.match(rf"\s*(?P<kind>{_PY_ERROR})\b", text)
    if match:
        return match.group("kind").rsplit(".", 1)[-1]
    if text.lstrip().startswith("assert"):
        return "AssertionError"
    return None


def failure_of(output_tail: str, exit_status: int) -> Failure | None:
    """The failure a non-zero run's output shows, or ``None`` when nothing is recognisable.

    ``None`` is the conservative answer: without a signature the distiller cannot say what
    went wrong, so it proposes nothing for that run.
    """
    if exit_status == 0:
        return None
    text = output_tail[-4000:]
    env = _environment_failure(text)
    if env is not None:
        return env
    invocation = _invocation_failure(text)
    if invocation is not None:
        return invocation
    for finder in (_pytest, _cargo, _go, _jest, _typescript, _traceback, _tools):
        found = finder(text)
        if found is not None:
            return found
    if _SHELL_SYNTAX.search(text):
        return Failure("syntax error")
    code = _NPM_CODE.search(text) or _TOOL_CODE.search(text)
    if code:
        return Failure(code.group("code"))
    return _told(text) or _generic(text)


def hidden_failure(output_tail: str) -> Failure | None:
    """A test runner's failure in the output of a run that exited 0 because it was piped into
    a filter (``pytest 2>&1 | tail -20`` reports ``tail``'s status): only the runners' own
    failure lines count (pytest ``FAILED``, jest ``FAIL``/``Tests: N failed``, ``--- FAIL``,
    cargo ``... FAILED``), never a generic ``error:`` line a passing run may print too."""
    text = output_tail[-4000:]
    if _GO_FAIL.search(text) and (found := _go(text)) is not None:
        return found
    for finder in (_pytest, _cargo, _jest):
        found = finder(text)
        if found is not None:
            return found
    return None


_GENERIC = re.compile(
    r"^[\s│]*(?:ERROR|[Ee]rror|FATAL ERROR|FAILED)(?:\[\w+\])?:\s*(?P<message>.+)$", _FLAGS
)
_TOOL_CODE = re.compile(r"^\s*(?P<code>ERR_PNPM_[A-Z_]+|E[A-Z]{4,}[A-Z_]*)\b", _FLAGS)
_WORDS = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")


def _generic(text: str) -> Failure | None:
    """The last resort: a tool's own ``error: …`` line, cut to its first few words (never the
    whole line: it may carry values), so the situation can still say what failed."""
    match = _GENERIC.search(text)
    if not match:
        return None
    message = match.group("message").rsplit(":", 1)[-1]
    words = _WORDS.findall(message)[:6]
    detail = _short(" ".join(words), 60)
    return Failure(GENERIC_KIND, detail=detail) if detail else None


def _words(text: str, n: int = 6) -> str | None:
    """The first ``n`` words of a message (never the whole line: it may carry values)."""
    return _short(" ".join(_WORDS.findall(text)[:n]), 60)


def _told(text: str) -> Failure | None:
    """The output says which command to run (see :data:`_TOLD`): its program and first
    subcommand word, never its arguments."""
    match = _TOLD.search(text)
    if not match:
        return None
    words = (match.group("quoted") or match.group("line")).split()
    program = words[0].rsplit("/", 1)[-1]
    sub = words[1] if len(words) > 1 and re.fullmatch(r"[a-z][\w:.-]*", words[1]) else ""
    detail = _short(f"{program} {sub}".strip(), 40)
    return Failure(PREREQUISITE_KIND, detail=detail) if detail else None


def _tools(text: str) -> Failure | None:
    """Build and cloud tools that print their own error shapes."""
    if m := _AWS_ERROR.search(text):
        return Failure(m.group("code"), detail=_short(m.group("op")))
    if m := _GRADLE_WRONG.search(text):
        return Failure("gradle build failed", detail=_words(m.group("what")))
    return None


def _environment_failure(text: str) -> Failure | None:
    if m := _NO_MODULE.search(text):
        return Failure("ModuleNotFoundError", detail=_short(m.group("name")))
    if m := _CANNOT_FIND.search(text):
        name = m.group("name")
        if not name.startswith("."):  # a relative import is the code's own mistake
            return Failure("Cannot find module", detail=_short(name))
    if (m := _UNRESOLVED_IMPORT.search(text)) and not m.group("name").startswith("."):
        return Failure("Cannot find module", detail=_short(m.group("name")))
    if "ERR_MODULE_NOT_FOUND" in text:
        return Failure("ERR_MODULE_NOT_FOUND")
    if m := _CMD_NOT_FOUND.search(text):
        return Failure("command not found", detail=_short(m.group("name") or m.group("sh")))
    if m := _RELATION.search(text):
        return Failure("relation does not exist", detail=_short(m.group("name")))
    if m := _NO_TABLE.search(text):
        return Failure("no such table", detail=_short(m.group("name")))
    if _NOT_UP_TO_DATE.search(text):
        return Failure("database not up to date")
    if _GO_SUM.search(text):
        return Failure("missing go.sum entry")
    if m := _GO_NO_MODULE.search(text):
        return Failure("no required module", detail=_short(m.group("name")))
    if _DOCKER_DOWN.search(text):
        return Failure("docker daemon not running")
    if _REFUSED.search(text):
        return Failure("connection refused")
    if _NODE_MODULES.search(text):
        return Failure("missing node_modules")
    if _MISSING_DEPENDENCY.search(text):
        return Failure("missing dependency")
    if m := _NO_MAKE_TARGET.search(text):
        return Failure("no make target", detail=_short(m.group("target")))
    if m := _CTEST_MISSING.search(text):
        return Failure("missing build artifact", detail=_short(m.group("path").rsplit("/", 1)[-1]))
    return None


def _invocation_failure(text: str) -> Failure | None:
    if _IMPROPERLY.search(text):
        return Failure("ImproperlyConfigured")
    if (m := _NPM_CODE.search(text)) and m.group("code") == "ERESOLVE":
        return Failure("ERESOLVE")
    if _UNRECOGNIZED.search(text):
        return Failure("unrecognized arguments")
    if _USAGE.search(text) and not _PYTEST_SUMMARY.search(text):
        return Failure("usage error")
    return None


def _pytest(text: str) -> Failure | None:
    ids = list(_PYTEST_FAILED.finditer(text))
    if not ids:
        return None
    first = ids[0]
    test_id = first.group("id")
    kind = _error_kind(first.group("rest"))
    if kind is None and (e_line := _PY_E_LINE.search(text)):
        kind = e_line.group("kind").rsplit(".", 1)[-1]
    if kind is None and _PY_ASSERT.search(text):
        kind = "AssertionError"
    file = test_id.split("::", 1)[0]
    test = test_id if "::" in test_id else None
    return Failure(kind or "test failure", test=_short(test, 160), file=_short(file, 160))


def _traceback(text: str) -> Failure | None:
    lasts = list(_PY_LAST.finditer(text)) or list(_PY_E_LINE.finditer(text))
    if not lasts:
        return None
    kind = lasts[-1].group("kind").rsplit(".", 1)[-1]
    return Failure(kind)


def _cargo(text: str) -> Failure | None:
    if m := _RUST_ERROR.search(text):
        return Failure(f"error[{m.group('code')}]")
    tests = list(_RUST_TEST.finditer(text))
    if not tests:
        return None
    panic = _RUST_PANIC.search(text)
    kind = "panic" if panic else "test failure"
    return Failure(kind, test=_short(tests[0].group("test"), 160))


def _go(text: str) -> Failure | None:
    fail = _GO_FAIL.search(text)
    pkg = _GO_PKG.search(text)
    if fail:
        kind = "panic" if "panic:" in text else "test failure"
        return Failure(
            kind,
            test=_short(fail.group("test"), 160),
            package=_short(pkg.group("pkg"), 160) if pkg else None,
        )
    build = _GO_BUILD.search(text)
    if build:
        rest = build.group("rest")
        kind = rest.split(":", 1)[0] if ":" in rest else rest
        kind = kind if len(kind) <= 40 else "build error"
        return Failure(f"go: {kind}", file=_short(build.group("file"), 160))
    return None


def _jest(text: str) -> Failure | None:
    file = _JEST_FILE.search(text)
    if not file and not _JEST_SUMMARY.search(text):
        return None  # a tail cut before ``FAIL <file>`` still ends with jest's summary
    name = file.group("test") if file else None
    if not name and (test := _JEST_TEST.search(text)):
        name = test.group("test")
    kind = None
    if err := _JS_ERROR.search(text):
        kind = err.group("kind")
    if (expect := _JEST_EXPECT.search(text)) and kind in {None, "Error"}:
        kind = f"expect().{expect.group('matcher')}"
    name = re.sub(r"\s*[›>]\s*", " > ", name) if name else None
    where = _short(file.group("file")) if file else None
    return Failure(kind or "test failure", test=_short(name, 160), file=where)


def _typescript(text: str) -> Failure | None:
    """tsc's first error: its code, and the file it is in (so an error in a file the task
    itself edited is recognised as the agent's own)."""
    if m := _TS_AT.search(text):
        code = _TS.search(text, m.start())
        return Failure(code.group("code") if code else "TS", file=_short(m.group("file"), 160))
    if m := _TS.search(text):
        return Failure(m.group("code"))
    return None
