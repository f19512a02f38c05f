"""Skill candidates from approved Experience: the pure core (issue #31 item 5, spec 06).

RFC 0050's second learning arrow, ``Experience → Skill Candidate → Review → Skill Revision``:
when several *approved* Experiences are about the same thing, the ordered procedure they
add up to is proposed as one Skill candidate citing every one of them. Like the offline
distiller (:mod:`.offline`) this only ever *proposes*; a person approves or rejects, and an
approved Skill is never injected into a context pack. So the rules are conservative:
a wrong Skill costs a reviewer more than a wrong Experience (it is longer and it mixes
several), and a missed one costs nothing the Experiences do not already hold.

Pure: no I/O, no database, no clock; the same Experiences (in any order) give the same Skills.
The worker around it (reading approved heads after approvals, dedup against pending Skill
candidates on :attr:`SkillLesson.signature`) is not here.

What an Experience says, as read here
-------------------------------------
Only what is written in backticks counts (the offline distiller writes commands and paths
that way, and so do agents and people writing Markdown): a span with a known program and
arguments is a *command* (:func:`~.commands.parse_command`: wrappers, ``cd``, pipes and
verbosity flags dropped), a span shaped like a path is a *file*. Commands are *checks*
(test runners, type checkers, linters, compilers: they verify, :data:`CHECK_PROGRAMS`,
:data:`CHECK_SUBCOMMANDS`) or *steps* (everything that changes state: installs, services,
generators, migrations, builds). Free prose is never parsed for procedure: it is cited, not
rewritten.

The grouping rule (documented in docs/decisions/offline-distiller.md § Skills)
-------------------------------------------------------------------------------
Each Experience has *topics*: the normalised identity of every step command it mentions
(``make openapi``, ``docker compose up``; ``npm ci``/``npm install``/``npm i`` are one topic,
``npm install``; ``alembic`` and ``prisma`` and ``buf``/``protoc`` are one topic per tool;
Django's ``migrate``/``makemigrations`` one) and a few file areas that belong to one tool
(``package-lock.json`` → ``npm install``, ``alembic/versions/`` → ``alembic``,
``schema.prisma`` → ``prisma``, ``*.proto`` → ``protobuf``; :data:`FILE_TOPICS`). Checks
are never topics: two Experiences that only share ``pytest`` are not about the same thing,
and a group of Experiences about one flaky test has no procedure to propose.

A group is every Experience that names one topic (a star around the topic, never a chain
A~B~C), with at least :data:`MIN_EXPERIENCES` distinct artifacts. Groups are taken largest
first (ties by topic), each Experience in at most one proposed Skill. A group becomes a
Skill only when

* its steps can be ordered without contradiction (below),
* at least one check passed in the Experiences' outcomes (that is the ``validation``),
* the Skill holds more than any one of its Experiences (else it repeats an Experience:
  near-duplicates that were approved twice say nothing new together),
* and no text of any member looks like a credential (:func:`~.failures.looks_secret`):
  such an Experience is left out of every group, and a Skill whose own text would trip the
  check is dropped.

Ordering
--------
Steps keep the order each Experience states them in (``Ran `A`, then `B``` → A before B),
merged across Experiences by a topological sort; ties are broken by phase — setting up
(installs, services) before generating before applying (migrations) before building before
anything else — then by first mention. If two Experiences order the same two steps both ways
the group proposes nothing: a person should say which is right. Checks come last.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, get_args

from annotated_types import MaxLen

from ..contract.limits import MAX_EVIDENCE_REFS
from ..contract.review import SkillProposal
from .commands import Command, parse_command
from .failures import looks_secret, normalise
from .offline import GENERATORS

__all__ = [
    "CHECK_PROGRAMS",
    "CHECK_SUBCOMMANDS",
    "FILE_TOPICS",
    "MIN_EXPERIENCES",
    "ApprovedExperienceView",
    "SkillLesson",
    "propose_skills",
]

#: Distinct approved Experiences a group needs. Two, calibrated on the bench
#: (bench/distill_skills.py): three proposed nothing from the sessions at all, and the
#: "holds more than any one member" rule already keeps a pair of near-duplicates silent.
MIN_EXPERIENCES = 2
#: Steps and checks shown at most (a longer procedure is several Skills, or a wrong group).
MAX_STEPS = 12
#: Characters of one Experience's lesson repeated under "Why" in the instructions.
_WHY_CHARS = 600

#: Programs that verify and never change what they check.
CHECK_PROGRAMS = frozenset(
    {
        "pytest", "py.test", "jest", "vitest", "mocha", "ava", "tsc", "mypy", "pyright", "ruff",
        "flake8", "pylint", "black", "eslint", "prettier", "rspec", "phpunit", "playwright",
        "cypress", "golangci-lint", "shellcheck", "hadolint", "unittest", "tox", "nox",
    }
)  # fmt: skip
#: Subcommands that verify (``npm test``, ``cargo clippy``, ``go build``: compiling is a
#: check for compiled languages; ``npm run build`` is not, it writes ``dist/``).
CHECK_SUBCOMMANDS = frozenset(
    {"test", "tests", "check", "lint", "typecheck", "type-check", "types", "e2e", "vet",
     "clippy", "fmt", "spec", "verify"}
)  # fmt: skip
_COMPILERS = frozenset({"go", "cargo", "dotnet", "mvn", "gradle", "swift"})
_CHECK_KEYS = frozenset({"bundle exec", "manage.py test", "manage.py check"})

#: One topic per tool whose every subcommand is about the same thing.
_PROGRAM_TOPICS = {
    "alembic": "alembic",
    "prisma": "prisma",
    "buf": "protobuf",
    "protoc": "protobuf",
    "sqlc": "sqlc",
}
_DJANGO_MIGRATIONS = frozenset({"manage.py migrate", "manage.py makemigrations"})
_INSTALLERS = frozenset({"npm", "pnpm", "yarn", "bun", "pip", "pip3", "poetry", "bundle"})
_INSTALL_SUBCOMMANDS = frozenset({"install", "i", "ci", "add", "sync"})

#: File areas that belong to one tool's topic (the file alone says what the work is about).
FILE_TOPICS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:^|/)(?:package-lock|npm-shrinkwrap)\.json$"), "npm install"),
    (re.compile(r"(?:^|/)pnpm-lock\.yaml$"), "pnpm install"),
    (re.compile(r"(?:^|/)yarn\.lock$"), "yarn install"),
    (re.compile(r"(?:^|/)poetry\.lock$"), "poetry install"),
    (re.compile(r"(?:^|/)Gemfile\.lock$"), "bundle install"),
    (re.compile(r"(?:^|/)go\.sum$"), "go mod tidy"),
    (re.compile(r"(?:^|/)alembic(?:\.ini$|/)"), "alembic"),
    (re.compile(r"(?:^|/)migrations/\d{4}_\w+\.py$"), "django-migrations"),
    (re.compile(r"(?:^|/)schema\.prisma$"), "prisma"),
    (re.compile(r"\.proto$"), "protobuf"),
)

_PHASES = ("set up", "generate", "apply", "build", "run")
_SETUP_SUBCOMMANDS = _INSTALL_SUBCOMMANDS | {"tidy", "download", "up", "start", "restore"}
_GENERATE_SUBCOMMANDS = frozenset(
    {"generate", "gen", "codegen", "revision", "makemigrations", "merge"}
)
_APPLY_SUBCOMMANDS = frozenset({"upgrade", "migrate", "deploy", "push", "apply", "seed"})
_GENERATOR_KEYS = frozenset(key for g in GENERATORS for key in g.keys)

_SUDO = re.compile(r"^sudo\s+(?:-\S+\s+)*")
_SPAN = re.compile(r"`([^`\n]{1,300})`")
_PROGRAM = re.compile(r"^[a-z0-9][a-z0-9._+-]*$")
_PATHISH = re.compile(r"^[\w.@~+-]*(?:/[\w.@~*+-]*)+/?$|^[\w.@+-]+\.[A-Za-z0-9]{1,8}$")
_PASSED = re.compile(r"\b(?:pass(?:ed|es)?|succeed(?:ed|s)?|green|works?)\b", re.I)
_REF = re.compile(r"^experience:(?P<id>\S+):(?P<revision>[1-9]\d{0,18})$")


def _max_length(metadata: Iterable[object], what: str) -> int:
    """A length limit, read from the contract's field metadata (never copied)."""
    for item in metadata:
        if isinstance(item, MaxLen):
            return int(item.max_length)
    raise LookupError(f"SkillProposal.{what} has no max length")  # pragma: no cover


_FIELDS = SkillProposal.model_fields
_NAME_CHARS = _max_length(_FIELDS["name"].metadata, "name")
_DESCRIPTION_CHARS = _max_length(_FIELDS["description"].metadata, "description")
_INSTRUCTIONS_CHARS = _max_length(_FIELDS["instructions"].metadata, "instructions")
_VALIDATION_ITEMS = _max_length(_FIELDS["validation"].metadata, "validation")
#: One validation string's limit: the ``Field(max_length=…)`` inside the list's item type.
_VALIDATION_CHARS = _max_length(
    (
        limit
        for part in get_args(get_args(_FIELDS["validation"].annotation)[0])[1:]
        for limit in getattr(part, "metadata", ())
    ),
    "validation[]",
)


# -- input and output --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApprovedExperienceView:
    """One approved Experience head as the worker reads it: ``ref`` is its exact
    ``experience:<artifact_id>:<revision>``, the rest its content (spec 02)."""

    ref: str
    situation: str
    action: str
    outcome: str
    lesson: str

    @classmethod
    def from_artifact(cls, artifact: Mapping[str, Any]) -> ApprovedExperienceView:
        """From an ``ExperienceArtifact`` as dumped (``{"reference": {...}, "content": {...}}``),
        so the worker needs no string formatting of its own."""
        ref, content = artifact["reference"], artifact["content"]
        if ref.get("family") != "experience":
            raise ValueError("not an experience artifact")
        return cls(
            f"experience:{ref['artifact_id']}:{int(ref['revision'])}",
            content["situation"],
            content["action"],
            content["outcome"],
            content["lesson"],
        )

    def texts(self) -> tuple[str, str, str, str]:
        return (self.situation, self.action, self.outcome, self.lesson)


@dataclass(frozen=True, slots=True)
class SkillLesson:
    """One proposed Skill: the four proposal fields, the Experiences it cites
    (``experience:<id>:<revision>``, sorted), its ``group`` (the topic) and ``signature``.

    ``signature`` = ``skill|<topic>|<sorted artifact ids>``, without revisions: a revised
    Experience does not make the same Skill new, while a group that gained or lost a member
    is a different proposal. The worker matches a pending Skill candidate on it (or on
    ``group`` alone, to revise that candidate with the larger group)."""

    group: str
    signature: str
    name: str
    description: str
    instructions: str
    validation: tuple[str, ...]
    evidence: tuple[str, ...]

    def proposal(self) -> dict[str, Any]:
        """The ``proposal`` of ``propose_skill`` (spec 06)."""
        return {
            "name": self.name,
            "description": self.description,
            "instructions": self.instructions,
            "validation": list(self.validation),
        }

    def artifact_refs(self) -> list[dict[str, Any]]:
        """``evidence`` as ``ArtifactRef`` objects (``artifact_refs`` of ``propose_skill``)."""
        return [
            {"family": "experience", "artifact_id": artifact_id, "revision": revision}
            for artifact_id, revision in map(_parse_ref, self.evidence)
        ]


def _parse_ref(ref: str) -> tuple[str, int]:
    match = _REF.match(ref)
    if match is None:
        raise ValueError(f"not an experience reference: {ref!r}")
    return match.group("id"), int(match.group("revision"))


# -- reading one Experience --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Said:
    """What one Experience says, in the order it says it."""

    ref: str
    artifact_id: str
    steps: tuple[Command, ...]  # step commands of the action (else the lesson), in order
    sequences: tuple[tuple[Command, ...], ...]  # the step orders action and lesson state
    checks: tuple[Command, ...]  # checks its outcome says passed
    topics: frozenset[str]
    lesson: str


def _is_check(command: Command) -> bool:
    if command.program in CHECK_PROGRAMS or command.key in _CHECK_KEYS:
        return True
    sub = command.key.split(" ", 1)[1] if " " in command.key else ""
    if sub.split(":", 1)[0] in CHECK_SUBCOMMANDS:
        return True
    return command.program in _COMPILERS and sub == "build"


def _spans(text: str) -> Iterable[tuple[str, Command | None]]:
    """``(span, command)`` for each backticked span; ``command`` is ``None`` for a path."""
    for match in _SPAN.finditer(text):
        span = match.group(1).strip()
        if not span or span.startswith("-"):
            continue
        if _PATHISH.match(span):
            yield span, None
            continue
        command = parse_command(_SUDO.sub("", span))
        if not command.key or command.inert or not _PROGRAM.match(command.program):
            continue
        if " " not in span and command.program not in CHECK_PROGRAMS:
            continue  # one bare word: an identifier as likely as a program
        yield span, command


def _topic(command: Command) -> str:
    sub = command.key.split(" ", 1)[1] if " " in command.key else ""
    if command.program in _PROGRAM_TOPICS:
        return _PROGRAM_TOPICS[command.program]
    if command.key in _DJANGO_MIGRATIONS:
        return "django-migrations"
    if command.program in _INSTALLERS and (sub in _INSTALL_SUBCOMMANDS or not sub):
        return f"{command.program.rstrip('3')} install"
    return command.key


def _identity(command: Command) -> str:
    """Two mentions are the same step when key, flags, variables and targets agree (free-text
    arguments such as a migration message are not targets)."""
    targets = [p for p in command.positionals if not any(c.isspace() for c in p)]
    return normalise(" ".join([command.key, *command.env, *command.options, *targets]))


def _step_commands(text: str) -> list[Command]:
    """The step commands of one field, in order. The action says what was done; the lesson
    is read only when the action names no command (it also repeats the failing form: "run
    `X` with `--flag`" names `X` without the flag, which is not a step)."""
    return [c for _, c in _spans(text) if c is not None and not _is_check(c)]


def _read(view: ApprovedExperienceView) -> _Said | None:
    if any(looks_secret(text) for text in (view.ref, *view.texts())):
        return None
    artifact_id, _ = _parse_ref(view.ref)
    topics: set[str] = set()
    for text in view.texts():
        for span, command in _spans(text):
            if command is None:
                topics.update(t for pattern, t in FILE_TOPICS if pattern.search(span))
            elif not _is_check(command):
                topics.add(_topic(command))
    steps = _step_commands(view.action) or _step_commands(view.lesson)
    checks: list[Command] = []
    if _PASSED.search(view.outcome):
        checks = [c for _, c in _spans(view.outcome) if c is not None and _is_check(c)]
        if not checks:  # "`npm install --legacy-peer-deps` succeeded": the step is the check
            checks = [c for _, c in _spans(view.outcome) if c is not None][:1]
    sequences = (tuple(steps), tuple(_step_commands(view.lesson)))
    return _Said(
        view.ref,
        artifact_id,
        tuple(steps),
        sequences,
        tuple(checks[:1]),
        frozenset(topics),
        view.lesson,
    )


# -- grouping and ordering ---------------------------------------------------------------------


def propose_skills(experiences: Sequence[ApprovedExperienceView]) -> list[SkillLesson]:
    """The Skill candidates the approved Experiences of one scope support (module doc).

    Deterministic and independent of input order; one Skill per topic at most, each
    Experience cited by at most one, sorted by group. An empty list is the common answer.
    Raises ``ValueError`` for a ``ref`` that is not ``experience:<id>:<revision>``.
    """
    heads: dict[str, _Said] = {}
    revisions: dict[str, int] = {}
    for view in sorted(experiences, key=lambda v: v.ref):
        artifact_id, revision = _parse_ref(view.ref)
        if revision <= revisions.get(artifact_id, 0):
            continue
        revisions[artifact_id] = revision
        said = _read(view)
        if said is None:
            heads.pop(artifact_id, None)  # a newer revision that leaks replaces the old one
        else:
            heads[artifact_id] = said
    by_topic: dict[str, list[_Said]] = {}
    for said in sorted(heads.values(), key=lambda s: s.artifact_id):
        for topic in said.topics:
            by_topic.setdefault(topic, []).append(said)
    used: set[str] = set()
    skills: list[SkillLesson] = []
    for topic in sorted(by_topic, key=lambda t: (-len(by_topic[t]), t)):
        members = [s for s in by_topic[topic] if s.artifact_id not in used]
        members = members[:MAX_EVIDENCE_REFS]
        if len(members) < MIN_EXPERIENCES:
            continue
        skill = _skill(topic, members)
        if skill is None:
            continue
        used.update(s.artifact_id for s in members)
        skills.append(skill)
    return sorted(skills, key=lambda s: s.group)


def _phase(command: Command) -> int:
    sub = command.key.split(" ", 1)[1] if " " in command.key else ""
    sub = sub.rsplit(" ", 1)[-1]
    if _topic(command).endswith(" install") or sub in _SETUP_SUBCOMMANDS:
        return 0
    if (command.key in _GENERATOR_KEYS and sub != "build") or sub in _GENERATE_SUBCOMMANDS:
        return 1
    if sub in _APPLY_SUBCOMMANDS:
        return 2
    if sub in {"build", "compile"}:
        return 3
    return 4


def _absorbs(big: Command, small: Command) -> bool:
    """Does ``big`` stand for ``small`` in a merged procedure? The same command with more
    flags or variables (the form that worked: ``NODE_OPTIONS=… npm run build`` for ``npm
    run build``), or a run that checks at least what ``small`` checks (``pytest`` for
    ``pytest tests/test_x.py``)."""
    if _identity(big) == _identity(small) or big.key != small.key:
        return False
    mine, theirs = {*big.options, *big.env}, {*small.options, *small.env}
    if big.positionals == small.positionals and theirs < mine:
        return True
    return big.covers(small)


def _canonical(commands: Sequence[Command]) -> dict[str, Command]:
    """identity → the command that stands for it in this group (see :func:`_absorbs`)."""
    unique: dict[str, Command] = {}
    for command in commands:
        unique.setdefault(_identity(command), command)
    canon: dict[str, Command] = {}
    for key, command in unique.items():
        current = command
        for _ in range(len(unique)):  # follow absorption to a fixed point (no cycles: strict)
            bigger = sorted((c for c in unique.values() if _absorbs(c, current)), key=_identity)
            if not bigger:
                break
            current = bigger[0]
        canon[key] = current
    return canon


def _order(
    members: Sequence[_Said], canon: Mapping[str, Command]
) -> list[tuple[Command, list[str]]] | None:
    """The merged steps in an order every Experience agrees with, or ``None`` on a conflict.

    Kahn's algorithm; among the steps that are free to go next the earliest phase goes
    first, then the one mentioned first."""
    first: dict[str, int] = {}
    shown: dict[str, Command] = {}
    cited: dict[str, list[str]] = {}
    edges: dict[str, set[str]] = {}
    for said in members:
        for mention in said.steps:
            command = canon[_identity(mention)]
            key = _identity(command)
            if key not in first:
                first[key], shown[key], cited[key], edges[key] = len(first), command, [], set()
            if said.ref not in cited[key]:
                cited[key].append(said.ref)
    for said in members:
        for sequence in said.sequences:  # the action's order, and the lesson's ("A before B")
            known = [_identity(canon[_identity(c)]) for c in sequence if _identity(c) in canon]
            for before, after in pairwise(known):
                if before != after and after in first and before in first:
                    edges[before].add(after)
    waiting = {k: 0 for k in first}
    for targets in edges.values():
        for target in targets:
            waiting[target] += 1
    ready = [(_phase(shown[k]), first[k], k) for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    ordered: list[tuple[Command, list[str]]] = []
    while ready:
        _, _, key = heapq.heappop(ready)
        ordered.append((shown[key], cited[key]))
        for target in sorted(edges[key]):
            waiting[target] -= 1
            if waiting[target] == 0:
                heapq.heappush(ready, (_phase(shown[target]), first[target], target))
    return ordered if len(ordered) == len(first) else None


def _skill(topic: str, members: Sequence[_Said]) -> SkillLesson | None:
    members = sorted(members, key=lambda s: s.ref)
    canon = _canonical(
        [c for said in members for c in (*said.steps, *said.checks, *said.sequences[-1])]
    )

    steps = _order(members, canon)
    if not steps:
        return None  # no step at all, or the Experiences disagree on the order
    checks: dict[str, tuple[Command, list[str]]] = {}
    for said in members:
        for mention in said.checks:
            command = canon[_identity(mention)]
            entry = checks.setdefault(_identity(command), (command, []))
            if said.ref not in entry[1]:
                entry[1].append(said.ref)
    if not checks:
        return None  # nothing passed: the procedure was never shown to work
    step_keys = {_identity(c) for c, _ in steps}
    check_only = [k for k in checks if k not in step_keys]
    everything = step_keys | set(checks)
    for said in members:
        if everything <= {_identity(c) for c in (*said.steps, *said.checks)}:
            return None  # one Experience already says all of it, in its own words
    installs = [c for c, _ in steps if _topic(c).endswith(" install")]
    if len({_topic(c) for c in installs}) < len(installs):
        return None  # `npm ci` and `npm install --flag`: two ways to install, not two steps
    if len(steps) + len(check_only) > MAX_STEPS:
        return None  # too much for one procedure: more likely a loose group than a Skill
    refs = [s.ref for s in members]
    lines = [f"Steps for work that involves `{topic}`, from {len(refs)} approved Experiences:"]
    for command, cited in steps:
        lines.append(f"{len(lines)}. Run `{command.display}`. ({', '.join(cited)})")
    for key in check_only:
        command, cited = checks[key]
        lines.append(f"{len(lines)}. Check that `{command.display}` passes. ({', '.join(cited)})")
    lines.append("")
    lines.append("Why, in the approved Experiences' own words:")
    for said in members:
        lines.append(f"- {said.ref}: {_cut(_one_line(said.lesson), _WHY_CHARS)}")
    validation = [
        _cut(f"`{command.display}` passes.", _VALIDATION_CHARS) for command, _ in checks.values()
    ][:_VALIDATION_ITEMS]
    skill = SkillLesson(
        group=topic,
        signature="|".join(
            ["skill", normalise(topic), ",".join(sorted(s.artifact_id for s in members))]
        ),
        name=_cut(_kebab(f"{topic} workflow"), _NAME_CHARS),
        description=_cut(
            f"How to do work involving `{topic}` in this project: {len(steps)} ordered "
            f"step(s) and {len(checks)} check(s), learnt from {len(refs)} approved Experiences.",
            _DESCRIPTION_CHARS,
        ),
        instructions=_cut("\n".join(lines), _INSTRUCTIONS_CHARS),
        validation=tuple(validation),
        evidence=tuple(refs),
    )
    texts = (skill.name, skill.description, skill.instructions, *skill.validation)
    if any(looks_secret(text) for text in texts):
        return None  # the last gate: a Skill never repeats anything credential-shaped
    return skill


def _kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.casefold()).strip("-") or "skill"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
