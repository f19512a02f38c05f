"""Shell commands as the offline distiller compares them (pure, no I/O).

A task result records each command exactly as the agent ran it: ``cd web && npx vitest run
-q 2>&1 | tail -40``, ``.venv/bin/python -m pytest -x tests/``. Two runs are "the same check"
when they start the same program (``pytest``), the same subcommand (``cargo test``) and the
same significant arguments; wrappers (``python -m``, ``npx``, ``uv run``, a venv's ``bin/``),
a leading ``cd``, trailing pipes into ``tail``/``head``, redirections and pure verbosity flags
(``-q``, ``-x``, ``--tb=short``) say nothing about *what* was checked, so they are dropped.
Selection flags (``-k``, ``--lf``, ``-run``) narrow a run instead: a narrowed run that passes is
no evidence that the whole check passes, so they are kept apart.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

__all__ = ["SECRET_NAME", "Command", "parse_command", "within"]

#: Programs whose first positional argument is a subcommand that changes what runs.
_SUBCOMMAND_TOOLS = frozenset(
    {
        "npm", "pnpm", "yarn", "bun", "cargo", "go", "make", "docker", "docker-compose",
        "alembic", "git", "poetry", "uv", "pip", "pip3", "manage.py", "terraform", "helm",
        "kubectl", "buf", "sqlc", "prisma", "dotnet", "mvn", "mvnw", "gradle", "gradlew",
        "bundle", "rake", "rails", "mix", "composer", "deno", "tox", "nox", "hatch", "just",
        "task", "openapi-generator", "openapi-generator-cli",
    }
)  # fmt: skip
#: ``npm run test`` and ``npm test`` are the same; the script name is the subcommand.
_RUN_SCRIPT_TOOLS = frozenset({"npm", "pnpm", "yarn", "bun"})
#: Options that may come *before* a subcommand and take the next token as their value
#: (``pnpm --filter web build``, ``make -C src check``, ``git -C repo status``): that value is
#: not the subcommand.
_GLOBAL_VALUE_FLAGS = frozenset(
    {"--filter", "-F", "-C", "--dir", "--prefix", "-w", "--workspace", "--cwd", "-f", "--file",
     "--manifest-path", "--project-name", "--project-directory"}
)  # fmt: skip
#: The workspace package a package manager runs a script in (``pnpm --filter web build``): a
#: target, like a test path, not a narrowing of one run (``--filter ui`` builds another package).
_WORKSPACE_FLAGS = frozenset({"--filter", "-F", "--workspace", "-w"})
#: ``-tags integration``, ``-timeout 30s``: single-dash words (Go, Java, terraform style) that
#: are options with a value when the next token is not a target.
_SINGLE_DASH_WORD = re.compile(r"^-[A-Za-z][A-Za-z-]+$")
#: Second-level subcommands that belong to the program key (``docker compose up``).
_NESTED = {("docker", "compose"), ("go", "mod"), ("cargo", "nextest")}

#: Wrappers that only choose *how* a program is started.
_WRAPPERS = frozenset({"npx", "pnpx", "bunx", "exec", "time", "env", "nice", "command"})
_RUNNER_PREFIXES = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("hatch", "run")}

#: Flags that change only how much is printed or when a run stops, never what is checked.
_VERBOSITY = re.compile(
    r"^(?:-q+|-v+|-s|-x|-rA|-ra|-rf|--quiet|--verbose|--silent|--no-header|--tb=\w+|"
    r"--color(?:=\w+)?|--no-color|--maxfail=\d+|--exitfirst|--failfast|-count=1|--nocapture|"
    r"--reporter=\w+|--progress=\w+|--colors|--no-colors|--ci)$"
)
#: Flags that select a subset of a suite; the token after a bare one is its value.
_SELECTION_FLAGS = frozenset(
    {"-k", "-m", "--lf", "--last-failed", "--ff", "-run", "--run", "-t", "--testNamePattern",
     "--filter", "-p", "--package", "--test", "--lib", "--bin", "--exact", "--grep", "-g",
     "--onlyChanged", "-o", "--changed", "--deselect"}
)  # fmt: skip
_SELECTION_PREFIXES = ("-k=", "-m=", "-run=", "--run=", "--testNamePattern=", "--filter=",
                       "--grep=", "--deselect=", "--package=", "-p=", "--test=")  # fmt: skip

_ENV_ASSIGNMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$", re.S)
#: Names whose value is a credential: such an assignment is never repeated in a lesson.
SECRET_NAME = re.compile(
    r"(?i)(pass(word|wd)?|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth|"
    r"credential|session[_-]?id|cookie)"
)
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;)\s*")
_PIPE_SPLIT = re.compile(r"\s+\|\s+|\s*\|\s*(?=[A-Za-z])")
_REDIRECTION = re.compile(r"^(?:\d?>>?&?\d*|\d?>>?\S+|<\S*|&>\S*)$")
_FILTERS = frozenset({"tail", "head", "grep", "tee", "less", "more", "cat", "sort", "uniq", "cut"})

#: Commands that only look at things: they cannot be what made a later check pass.
_INERT_PROGRAMS = frozenset(
    {"ls", "cat", "head", "tail", "less", "more", "grep", "rg", "ag", "find", "fd", "echo",
     "printf", "pwd", "which", "type", "whereis", "wc", "tree", "stat", "file", "env",
     "printenv", "diff", "man", "sed", "awk", "jq", "true", "date", "whoami", "id", "uname",
     "history", "clear", "open", "xdg-open", "code", "vim", "nano", "bat", "du", "df",
     "sleep", "wait", "ps", "top", "htop", "lsof", "curl", "wget", "http"}
)  # fmt: skip
_INERT_GIT = frozenset(
    {"status", "diff", "log", "show", "branch", "add", "commit", "push", "fetch", "blame",
     "rev-parse", "remote", "describe", "ls-files", "grep", "tag"}
)  # fmt: skip
_VERSION_FLAGS = frozenset({"--version", "-version", "-V", "version", "--help", "-h", "help"})
#: Read-only subcommands of tools that otherwise change things.
_INERT_KEYS = frozenset(
    {"alembic current", "alembic history", "alembic heads", "alembic check", "docker ps",
     "docker images", "docker logs", "docker inspect", "docker compose ps",
     "docker compose logs", "npm ls", "npm list", "npm outdated", "npm view", "pip list",
     "pip show", "pip freeze", "pip check", "go env", "go version", "go list", "cargo tree",
     "cargo metadata", "kubectl get", "kubectl describe", "kubectl logs", "terraform plan",
     "terraform show", "poetry show", "uv tree", "manage.py showmigrations", "make help"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Command:
    """One run's command, reduced to what decides whether two runs are the same check.

    ``display`` is the reduced command as a person would retype it (no ``cd``, pipes or
    redirections); ``key`` is program plus subcommand (``cargo test``); ``positionals`` what it
    checks (``tests/test_api.py``; a package manager's workspace package too); ``options`` its
    significant flags and flag values in the order given; ``selection`` its narrowing flags;
    ``env`` leading ``NAME=value`` assignments; ``filtered``: its output was piped into a
    filter (``| tail -20``), so its exit status is the filter's, not its own.
    """

    display: str
    key: str
    program: str
    positionals: tuple[str, ...]
    options: tuple[str, ...]
    selection: tuple[str, ...]
    env: tuple[str, ...]
    filtered: bool = False

    @property
    def inert(self) -> bool:
        """Does this run only look at things (so it cannot explain a later pass)? A command
        with no program left (a bare ``env``) only prints."""
        if not self.key or self.program in _INERT_PROGRAMS or self.key in _INERT_KEYS:
            return True
        if self.program == "git":
            sub = self.key.split(" ", 1)[1] if " " in self.key else ""
            return sub in _INERT_GIT
        return bool(set(self.options) & _VERSION_FLAGS) or self.key.endswith(" --version")

    def covers(self, other: Command) -> bool:
        """Does a pass of this run show that ``other`` (a failed run) now passes?

        Same program key, same significant flags and environment, no narrowing selection of
        its own, and it checks at least what ``other`` checked: the same targets, no targets
        (the whole suite), or a directory that contains each of ``other``'s targets.
        """
        if self.key != other.key or self.options != other.options or self.env != other.env:
            return False
        if self.selection and self.selection != other.selection:
            return False
        if self.positionals == other.positionals or not self.positionals:
            return True
        if not other.positionals:
            return False
        return all(
            any(within(target, scope) for scope in self.positionals) for target in other.positionals
        )

    def flag_difference(self, other: Command) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """``(added, removed)`` significant flags and env from ``other`` to this run, when the
        two differ *only* in those (same key and targets, no selection change); else ``None``.
        """
        if self.key != other.key or self.positionals != other.positionals:
            return None
        if self.selection != other.selection:
            return None
        mine, theirs = (*self.options, *self.env), (*other.options, *other.env)
        added = tuple(t for t in mine if t not in theirs)
        removed = tuple(t for t in theirs if t not in mine)
        if not added and not removed:
            return None
        return added, removed


def within(target: str, scope: str) -> bool:
    """Is the test target ``target`` (a path, a test id) inside ``scope`` (a path, ``./...``)?"""
    target, scope = target.split("::", 1)[0].rstrip("/"), scope.rstrip("/")
    return target == scope or target.startswith(scope + "/") or scope in {".", "./...", "..."}


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def _program_name(token: str) -> str:
    """``.venv/bin/pytest`` and ``pytest`` are the same program."""
    return token.rsplit("/", 1)[-1]


def _main_segment(command: str) -> tuple[str, bool]:
    """The segment that is the check: after a leading ``cd x &&`` or ``source …;``, before a
    pipe into a filter such as ``tail``; and whether it was piped into such a filter."""
    segments = [s for s in _SEGMENT_SPLIT.split(command.strip()) if s]
    while (
        len(segments) > 1
        and _split(segments[0])[:1]
        and _split(segments[0])[0]
        in {
            "cd",
            "source",
            ".",
            "export",
            "set",
            "pushd",
        }
    ):
        segments = segments[1:]
    main = segments[0] if segments else command
    pieces = _PIPE_SPLIT.split(main)
    kept = [pieces[0]]
    filtered = False
    for piece in pieces[1:]:
        words = _split(piece)
        if words and _program_name(words[0]) in _FILTERS:
            filtered = True
            break
        kept.append(piece)
    return " | ".join(kept), filtered


def parse_command(command: str) -> Command:
    """Reduce one recorded command (see the module docstring). Never raises."""
    main, filtered = _main_segment(command)
    tokens = [t for t in _split(main) if not _REDIRECTION.match(t)]
    env: list[str] = []
    while tokens and _ENV_ASSIGNMENT.match(tokens[0]):
        env.append(tokens.pop(0))
    while tokens:
        head = _program_name(tokens[0])
        if head in _WRAPPERS:
            tokens.pop(0)
            while tokens and (tokens[0].startswith("-") or _ENV_ASSIGNMENT.match(tokens[0])):
                if _ENV_ASSIGNMENT.match(tokens[0]):
                    env.append(tokens[0])
                tokens.pop(0)
            continue
        if len(tokens) > 1 and (head, tokens[1]) in _RUNNER_PREFIXES:
            tokens = tokens[2:]
            continue
        if re.fullmatch(r"python(?:\d(?:\.\d+)?)?", head) and len(tokens) > 2 and tokens[1] == "-m":
            tokens = tokens[2:]
            continue
        break
    if not tokens:
        return Command(command.strip()[:200], "", "", (), (), (), tuple(env), filtered)
    program = _program_name(tokens[0])
    if program.startswith("python") and len(tokens) > 1 and tokens[1].endswith("manage.py"):
        program, tokens = "manage.py", ["manage.py", *tokens[2:]]
    rest = tokens[1:]
    key_parts = [program]
    # Shown as typed (a person retypes it; ``pnpm --filter web build`` is not ``pnpm build
    # --filter web``), the program without its folder but for ``./configure``, ``./gradlew``.
    shown = [*env, tokens[0] if tokens[0].startswith("./") else program, *tokens[1:]]
    if program in _SUBCOMMAND_TOOLS:
        index = _subcommand_index(rest)
        if index is not None:
            sub = rest.pop(index)
            if program in _RUN_SCRIPT_TOOLS and sub in {"run", "run-script"} and rest:
                nxt = next((i for i, t in enumerate(rest) if not t.startswith("-")), None)
                if nxt is not None:
                    sub = rest.pop(nxt)
            key_parts.append(sub)
            if (program, sub) in _NESTED:
                nxt = next((i for i, t in enumerate(rest) if not t.startswith("-")), None)
                if nxt is not None:
                    key_parts.append(rest.pop(nxt))
    positionals: list[str] = []
    options: list[str] = []
    selection: list[str] = []
    after_selection = False
    after_option = False
    after_workspace = False
    for token in rest:
        if token == "--":
            continue
        if after_workspace:
            positionals.append(token)
            after_workspace = False
            continue
        if program in _RUN_SCRIPT_TOOLS and token.split("=", 1)[0] in _WORKSPACE_FLAGS:
            if "=" in token:
                positionals.append(token.split("=", 1)[1])
            else:
                after_workspace = True
            continue
        if after_selection:
            selection.append(token)
            after_selection = False
            continue
        if token.startswith("-") and len(token) > 1:
            after_option = False
            if _VERBOSITY.match(token):
                continue
            if token in _SELECTION_FLAGS:
                selection.append(token)
                after_selection = True
            elif token.startswith(_SELECTION_PREFIXES):
                selection.append(token)
            else:
                options.append(token)
                after_option = "=" not in token and (
                    token.startswith("--") or _SINGLE_DASH_WORD.match(token) is not None
                )
            continue
        if after_option and not _looks_like_target(token):
            options.append(token)  # the value of the long option before it
            after_option = False
            continue
        after_option = False
        positionals.append(token)
    display = " ".join(shlex.quote(w) if _needs_quotes(w) else w for w in shown)
    return Command(
        display=display[:200],
        key=" ".join(key_parts),
        program=program,
        positionals=tuple(positionals),
        options=tuple(options),
        selection=tuple(selection),
        env=tuple(sorted(env)),
        filtered=filtered,
    )


def _subcommand_index(rest: list[str]) -> int | None:
    """Where the subcommand is: the first word that is neither an option nor the value of an
    option that takes one before the subcommand (:data:`_GLOBAL_VALUE_FLAGS`)."""
    skip = False
    for i, token in enumerate(rest):
        if skip:
            skip = False
            continue
        if token.startswith("-"):
            skip = token in _GLOBAL_VALUE_FLAGS
            continue
        return i
    return None


_TARGET = re.compile(r"::|^\.{1,2}(?:/|$)|^\.\.\.$|\.(?:py|[cm]?[jt]sx?|go|rs|rb|java|kt)$")


def _looks_like_target(token: str) -> bool:
    """A file, directory or test id rather than a long option's value: ``--cov app tests/x.py``
    has the value ``app`` and the target ``tests/x.py``; ``--platform linux/amd64`` a value."""
    return _TARGET.search(token) is not None


def _needs_quotes(word: str) -> bool:
    return any(c.isspace() for c in word) or any(c in word for c in "\"'$`\\")
