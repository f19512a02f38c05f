"""Hostile input, authentication, privacy of logs and storage, and graceful shutdown.

Everything runs against real ``powercontext serve`` processes: a malformed request must come
back as the error envelope from the real ASGI stack (uvicorn + middleware + FastAPI), and the
real process's stderr log and SQLite file are what the privacy checks read.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import (
    ACTIVITY,
    BOOTSTRAP,
    CANDIDATES_APPROVE,
    CANDIDATES_GET,
    CANDIDATES_LIST,
    CANDIDATES_REJECT,
    CANDIDATES_REVISE,
    CHANGES,
    EXPLAIN,
    FLUSH,
    GET,
    GET_EXPERIENCE,
    GET_SKILL,
    HANDOFF_COMMIT,
    HANDOFF_GET,
    HANDOFF_NEXT,
    HANDOFF_WITHDRAW,
    LIST,
    LIST_EXPERIENCES,
    LIST_SKILLS,
    OVERVIEW,
    POST_PATHS,
    PREPARE,
    PROPOSE_EXPERIENCE,
    PROPOSE_SKILL,
    RECEIPTS,
    REFS_GET,
    REFS_SET,
    REMEMBER,
    RETIRE,
    REVISE,
    SEARCH,
    SOURCE_GET,
    SOURCES,
    TASK_GET,
    TASK_LIST,
    TASK_RECORD,
    VERSIONS,
    assert_envelope,
    create_token,
    memory_ref,
    new_scope,
    remember,
    secret_part,
    served_operations,
    valid_bodies,
)
from tests.support.daemon import Daemon, start_daemon

pytestmark = pytest.mark.e2e

MAX_BODY = 1024 * 1024  # the default server limit (spec 03: 1 MiB)
ALL = ("read", "write", "propose", "review", "admin")
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def http(module_daemon: Daemon) -> Iterator[httpx.Client]:
    with module_daemon.client() as client:
        yield client


def _post_raw(client: httpx.Client, path: str, raw: bytes) -> httpx.Response:
    return client.post(path, content=raw, headers=JSON)


def _dumps(value: Any) -> bytes:
    # ensure_ascii keeps lone surrogates as "\udxxx" escapes: valid JSON text, invalid Unicode.
    return json.dumps(value).encode("ascii")


def _raw_utf8(value: Any) -> bytes:
    """JSON text as raw UTF-8, lone surrogates included as their 3-byte (CESU-style) encoding.

    Not valid UTF-8, but Python's JSON reader decodes it with ``surrogatepass``: the lone
    surrogate then reaches validation as a character, not as an escape.
    """
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _with_raw(body: dict[str, Any], key: str, raw: bytes) -> bytes:
    """``body`` as JSON text with ``key`` set to ``raw``, a JSON text ``json.dumps`` won't write."""
    members = [_dumps(k) + b": " + _dumps(v) for k, v in body.items() if k != key]
    return b"{" + b", ".join([*members, _dumps(key) + b": " + raw]) + b"}"


def _nested(depth: int, kind: str) -> bytes:
    """``depth`` arrays (``[[[]]]``) or objects (``{"a": {"a": 1}}``) inside each other."""
    if kind == "arrays":
        return b"[" * depth + b"]" * depth
    return b'{"a": ' * depth + b"1" + b"}" * depth


def _leaves(
    value: Any, kind: type[str] | type[int], path: tuple[str | int, ...] = ()
) -> Iterator[tuple[str | int, ...]]:
    """The path of every string (or integer) inside ``value``, nested ones included."""
    if isinstance(value, kind) and not isinstance(value, bool):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, kind, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, kind, (*path, index))


def _replaced(value: Any, path: tuple[str | int, ...], leaf: Any) -> Any:
    """A copy of ``value`` with the item at ``path`` replaced by ``leaf``."""
    if not path:
        return leaf
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, leaf)}
    return [_replaced(item, rest, leaf) if i == head else item for i, item in enumerate(value)]


def _log_size(daemon: Daemon) -> int:
    return len(daemon.log_text())


def _no_internal_errors(daemon: Daemon, since: int) -> None:
    """No request since log offset ``since`` ended in a 500.

    The handler logs ``internal_error`` before it answers, so by the time the client has the
    response the line is in the log: no waiting needed.
    """
    assert '"internal_error"' not in daemon.log_text()[since:], "a request ended in a 500"


# -- hostile input --------------------------------------------------------------------------

OVER_LIMIT: dict[str, dict[str, Any]] = {
    REMEMBER: {"text": "x" * 8193, "kind": "k" * 129, "reason": "r" * 513,
               "tags": [f"t{i}" for i in range(17)]},
    SEARCH: {"query": "q" * 8193, "limit": 51},
    GET: {"citation": {"memory_ref": memory_ref(1), "entry_id": "e" * 129,
                       "entry_version_id": "v"}},
    LIST: {"limit": 101, "cursor": "c" * 513, "kind": "k" * 129, "tag": "Bad Tag",
           "state": "retired"},
    VERSIONS: {"limit": 101, "cursor": "c" * 513, "entry_id": "e" * 129},
    REVISE: {"text": "x" * 8193},
    RETIRE: {"reason": "r" * 513},
    CHANGES: {"limit": 1001},
    SOURCES: {"content": "c" * 200_001, "source_id": "s" * 257,
              "metadata": {"k": "v" * 17_000}},
    SOURCE_GET: {"source_id": "s" * 257},
    FLUSH: {"max_sources": 101},
    BOOTSTRAP: {"max_bytes": 8193, "lifecycle": "reboot", "integration": "Codex!",
                "profile": "powercontext.scope-bootstrap.v2", "event_id": "e" * 257},
    RECEIPTS: {"state": "pending", "receipt_id": "r" * 129},
    OVERVIEW: {"receipts": 101, "handoffs": 51},
    ACTIVITY: {"days": 91, "utc_offset_minutes": 841},
    HANDOFF_COMMIT: {"content": {"schema": "powercontext.handoff.v1", "objective": "o" * 8193,
                                 "state": [], "disposition": "paused"}},
    HANDOFF_GET: {"artifact": {"family": "handoff", "artifact_id": "other", "revision": 1}},
    HANDOFF_NEXT: {"scope_id": "s" * 257},
    HANDOFF_WITHDRAW: {"scope_id": ""},
    REFS_SET: {"references": [f"s{i}" for i in range(33)], "expected_version": -1},
    REFS_GET: {"scope_id": "s" * 257},
    PREPARE: {"query": "q" * 8193, "max_bytes": 511, "bootstrap_receipt_id": "r" * 129},
    EXPLAIN: {"query": "q" * 8193, "max_bytes": 32769, "bootstrap_receipt_id": ""},
    PROPOSE_EXPERIENCE: {"proposal": {"situation": "s" * 8001, "action": "a", "outcome": "o",
                                      "lesson": "l"},
                         "source_refs": [{"name": "content", "source_id": f"s{i}"}
                                         for i in range(33)],
                         "reason": "r" * 2001},
    GET_EXPERIENCE: {"artifact": {"family": "experience", "artifact_id": "e" * 129,
                                  "revision": 1}},
    PROPOSE_SKILL: {"proposal": {"name": "n" * 129, "description": "d", "instructions": "i",
                                 "validation": ["v"] * 33}},
    GET_SKILL: {"artifact": {"family": "skill", "artifact_id": "s", "revision": 0}},
    LIST_EXPERIENCES: {"limit": 101, "cursor": "c" * 513},
    LIST_SKILLS: {"limit": 0, "cursor": ""},
    CANDIDATES_LIST: {"limit": 101, "status": "archived"},
    CANDIDATES_GET: {"candidate_id": "c" * 129, "version": 0},
    CANDIDATES_APPROVE: {"expected_version": 0},
    CANDIDATES_REJECT: {"decision_reason": "d" * 2001},
    CANDIDATES_REVISE: {"expected_version": -1},
    TASK_RECORD: {"task_id": "-bad", "task": {"goal": "g" * 2001, "outcome": "done",
                                              "changes": [{"path": "p", "added": -1,
                                                           "removed": 0}] * 101,
                                              "checks": [{"command": "c" * 1001,
                                                          "exit_status": 256}],
                                              "host": "Codex!", "session_ref": "s" * 257}},
    TASK_LIST: {"limit": 101, "cursor": "c" * 513},
    TASK_GET: {"task_id": "t" * 129},
}  # fmt: skip


# Room for a huge string or array while the whole body stays under the server limit, so the
# request is parsed and validated rather than refused with 413 unread.
HUGE = MAX_BODY - 8192
# Deep enough to be absurd, shallow enough for Python's JSON reader, so validation sees it.
PARSEABLE_DEPTH = 500
# Parsing this deep exhausts the reader's recursion: the body must still be a clean 4xx.
ABSURD_DEPTH = 100_000
# Content types that are not JSON; a valid JSON body sent with one of them is refused.
WRONG_CONTENT_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "application/octet-stream",
)
# An error answer stays small whatever the request: no echo of huge keys, no per-key flood.
MAX_ERROR_BYTES = 16 * 1024


# Integer fields the valid bodies leave out, so that the huge-number test reaches them too.
OPTIONAL_INTEGERS: dict[str, dict[str, Any]] = {
    REMEMBER: {"expected_revision": 0},
    CHANGES: {"since_revision": 0},
    SOURCES: {"metadata": {"n": 1}},
    BOOTSTRAP: {"handoff_ref": {"family": "handoff", "artifact_id": "handoff", "revision": 1}},
    REFS_SET: {"expected_version": 0},
    OVERVIEW: {"receipts": 5, "handoffs": 2},
    ACTIVITY: {"days": 7, "utc_offset_minutes": -300},
    CANDIDATES_GET: {"version": 1},
    CANDIDATES_LIST: {"limit": 10},
    LIST_EXPERIENCES: {"limit": 10},
    LIST_SKILLS: {"limit": 10},
    LIST: {"limit": 10},
    VERSIONS: {"limit": 10},
    SEARCH: {"limit": 10},
    PREPARE: {"max_bytes": 4096},
    EXPLAIN: {"max_bytes": 4096},
    FLUSH: {"max_sources": 10},
    HANDOFF_COMMIT: {"base": {"family": "handoff", "artifact_id": "handoff", "revision": 1}},
    PROPOSE_EXPERIENCE: {"artifact_refs": [memory_ref(1)]},
    PROPOSE_SKILL: {"artifact_refs": [memory_ref(1)]},
    TASK_RECORD: {"task": {"goal": "g", "outcome": "failed",
                           "changes": [{"path": "a.py", "added": 1, "removed": 2}],
                           "checks": [{"command": "make test", "exit_status": 1}]}},
    TASK_LIST: {"limit": 10},
}  # fmt: skip
# Keys of a valid body that may be left out (the rest must be there: leaving one out is a 4xx).
OPTIONAL_KEYS: dict[str, tuple[str, ...]] = {TASK_RECORD: ("task_id",)}
# The operations whose bodies have no integer field at all.
NO_INTEGERS = (RECEIPTS, REFS_GET, HANDOFF_NEXT, HANDOFF_WITHDRAW, SOURCE_GET, TASK_GET)


def _bad_variants(path: str, scope: str) -> list[tuple[str, bytes]]:
    """(label, raw body) pairs, each of which must be rejected with a 4xx envelope."""
    valid = valid_bodies(scope)[path]
    variants: list[tuple[str, bytes]] = [
        ("malformed json", b'{"scope_id": "' + scope.encode() + b'", '),
        ("not json at all", b"scope_id=abc"),
        ("empty body", b""),
        ("json null", b"null"),
        ("json array", b"[]"),
        ("array of the valid body", _dumps([valid])),
        ("json string", b'"scope_id"'),
        ("invalid utf-8 bytes", b"\xff\xfe\xfd"),
        ("invalid utf-8 inside a string", b'{"scope_id": "\xc3\x28\xa0\xa1"}'),
        ("unknown field", _dumps({**valid, "unexpected_field": True})),
        ("blank scope", _dumps({**valid, "scope_id": "   "})),
        ("scope with outer whitespace", _dumps({**valid, "scope_id": f" {scope}"})),
        ("scope with a control character", _dumps({**valid, "scope_id": f"{scope}\u0007"})),
        ("scope too long", _dumps({**valid, "scope_id": "s" * 257})),
        ("overlong utf-8", b'{"scope_id": "\xc0\xaf"}'),
        ("truncated utf-8 sequence", b'{"scope_id": "a\xe4\xb8"}'),
        ("non-finite number", _with_raw(valid, "scope_id", b"NaN")),
        ("huge unknown key", _dumps({**valid, "k" * HUGE: 1})),
        ("many unknown keys", _dumps({**valid, **{f"k{i}": 0 for i in range(HUGE // 14)}})),
        ("deeply nested arrays", _nested(ABSURD_DEPTH, "arrays")),
        ("deeply nested objects", _nested(ABSURD_DEPTH, "objects")),
        ("deeply nested scope", _with_raw(valid, "scope_id", _nested(ABSURD_DEPTH, "arrays"))),
    ]
    for key, value in valid.items():
        if key not in OPTIONAL_KEYS.get(path, ()):
            missing = {k: v for k, v in valid.items() if k != key}
            variants.append((f"missing {key}", _dumps(missing)))
        wrong = 12345 if isinstance(value, str | dict) else "not-a-number"
        variants.append((f"wrong type for {key}", _dumps({**valid, key: wrong})))
        variants.append((f"list for {key}", _dumps({**valid, key: [value]})))
        copies = HUGE // (len(_dumps(value)) + 2)
        variants.append((f"huge array for {key}", _dumps({**valid, key: [value] * copies})))
        for kind in ("arrays", "objects"):
            nested = _nested(PARSEABLE_DEPTH, kind)
            variants.append((f"nested {kind} for {key}", _with_raw(valid, key, nested)))
        if isinstance(value, str):
            variants.append((f"lone surrogate in {key}", _dumps({**valid, key: "ok\ud800"})))
            raw = _raw_utf8({**valid, key: "ok\ud800"})
            variants.append((f"raw utf-8 surrogate in {key}", raw))
    for leaf in _leaves(valid, str):
        huge = _raw_utf8(_replaced(valid, leaf, "\u4e2d" * (HUGE // 3)))  # 3 UTF-8 bytes each
        variants.append((f"huge string at {'.'.join(map(str, leaf))}", huge))
    for key, value in OVER_LIMIT[path].items():
        variants.append((f"over the limit: {key}", _dumps({**valid, key: value})))
    if path == REMEMBER:
        variants += [
            ("lone surrogate in kind", _dumps({**valid, "kind": "\udfff"})),
            ("lone surrogate in tags", _dumps({**valid, "tags": ["\ud800"]})),
            ("upper-case tag", _dumps({**valid, "tags": ["Bad"]})),
            ("float revision", _dumps({**valid, "expected_revision": 1.0})),
            ("bool revision", _dumps({**valid, "expected_revision": True})),
            ("negative revision", _dumps({**valid, "expected_revision": -1})),
            ("unknown source name", _dumps({**valid, "source_refs": [{"name": "x",
                                                                      "source_id": "a"}]})),
        ]  # fmt: skip
    if path == LIST:
        both = {**valid, "state": "any", "include_inactive": True}
        variants.append(("state with include_inactive", _dumps(both)))
    if path == REVISE:
        no_change = {k: v for k, v in valid.items() if k != "text"}
        variants.append(("revise without a change", _dumps(no_change)))
        variants.append(("lone surrogate in kind", _dumps({**valid, "kind": "\ud800"})))
    if path == SOURCES:
        variants.append(("surrogate in metadata", _dumps({**valid, "metadata": {"k": "\ud800"}})))
        variants.append(("metadata not an object", _dumps({**valid, "metadata": [1]})))
        # Python's reader accepts these; none is JSON, so none may be stored. A source id of
        # its own each: were one stored, the next could not hide behind a 409 for the same id.
        for number in ("NaN", "Infinity", "-Infinity", "1e400"):
            own = {**valid, "source_id": f"src-{number}"}
            raw = _with_raw(own, "metadata", b'{"n": [' + number.encode() + b"]}")
            variants.append((f"metadata number {number}", raw))
    if path in (LIST, VERSIONS, LIST_EXPERIENCES, LIST_SKILLS):
        for forged in ([True, "a"], [2**70, "a"], [1, "\ud800"], [1.5, "a"], {"a": 1}):
            cursor = _b64(json.dumps(forged))
            variants.append((f"forged cursor {forged!r}", _dumps({**valid, "cursor": cursor})))
        variants.append(("non-base64 cursor", _dumps({**valid, "cursor": "%%%"})))
    return variants


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode().rstrip("=")


@pytest.mark.parametrize("path", POST_PATHS)
def test_bad_input_is_a_4xx_envelope_never_a_500(
    module_daemon: Daemon, http: httpx.Client, path: str
) -> None:
    scope = new_scope("bad-input")
    log_start = _log_size(module_daemon)
    # Give the scope real content so that queries reach the database, not an empty short-cut.
    remember(http, scope, "seed entry so every read touches stored rows")
    requests = [(label, raw, JSON) for label, raw in _bad_variants(path, scope)]
    valid = _dumps(valid_bodies(scope)[path])
    requests += [(f"content type {ct}", valid, {"content-type": ct}) for ct in WRONG_CONTENT_TYPES]
    failures = []
    for label, raw, headers in requests:
        assert len(raw) <= MAX_BODY, label  # under the limit: these are parsed, not refused
        response = http.post(path, content=raw, headers=headers)
        try:
            _assert_rejected(response)
            # Refused by validation, not by the later look-up of a proposal's evidence.
            assert response.json()["error"]["code"] != "evidence_not_found"
        except AssertionError as exc:
            failures.append(f"{label}: {exc} :: {response.text[:300]}")
    assert failures == []
    _no_internal_errors(module_daemon, log_start)


def _assert_rejected(response: httpx.Response) -> None:
    """A 4xx envelope that stays small and never echoes the offending input back."""
    status = response.status_code
    assert 400 <= status < 500, status
    error = assert_envelope(response, status)
    if status == 422:
        assert error["code"] == "invalid_request"
    for item in (error["details"] or {}).get("errors", []):
        assert set(item) == {"loc", "msg", "type"}, item
    assert "\\ud800" not in response.text and "\\udfff" not in response.text
    assert len(response.content) <= MAX_ERROR_BYTES, len(response.content)


def test_a_hostile_proposal_revision_gets_a_small_report(
    module_daemon: Daemon, http: httpx.Client
) -> None:
    """The review inbox validates a revised proposal itself (its family is the candidate's),
    so hostile proposals need a real candidate to get that far."""
    scope = new_scope("hostile-proposal")
    log_start = _log_size(module_daemon)
    http.post(SOURCES, json=valid_bodies(scope)[SOURCES]).raise_for_status()  # the evidence
    proposed = http.post(PROPOSE_EXPERIENCE, json=valid_bodies(scope)[PROPOSE_EXPERIENCE])
    assert proposed.status_code == 201, proposed.text
    candidate = proposed.json()
    base = {"scope_id": scope, "candidate_id": candidate["candidate_id"], "expected_version": 1}
    proposal = candidate["proposal"]
    hostile = {
        "huge unknown key": _dumps({**base, "proposal": {**proposal, "k" * HUGE: 1}}),
        "many unknown keys": _dumps(
            {**base, "proposal": {**proposal, **{f"k{i}": 0 for i in range(HUGE // 14)}}}
        ),
        "lone surrogate key": _dumps({**base, "proposal": {**proposal, "\ud800": "x"}}),
        "raw utf-8 surrogate key": _raw_utf8({**base, "proposal": {**proposal, "\udfff": "x"}}),
        "non-finite number": _with_raw(base, "proposal", b'{"situation": NaN}'),
        "nested objects": _with_raw(
            base, "proposal", b'{"situation": ' + _nested(PARSEABLE_DEPTH, "objects") + b"}"
        ),
        "nested arrays": _with_raw(
            base, "proposal", b'{"situation": ' + _nested(PARSEABLE_DEPTH, "arrays") + b"}"
        ),
    }
    for label, raw in hostile.items():
        assert len(raw) <= MAX_BODY, label
        response = _post_raw(http, CANDIDATES_REVISE, raw)
        _assert_rejected(response)
        assert response.status_code == 422, (label, response.text[:300])
    current = http.post(CANDIDATES_GET, json={k: base[k] for k in ("scope_id", "candidate_id")})
    assert current.status_code == 200 and current.json() == candidate
    _no_internal_errors(module_daemon, log_start)


def test_get_operations_ignore_a_hostile_body_and_query(
    module_daemon: Daemon, http: httpx.Client
) -> None:
    """The GET operations (health, capabilities) read no body and no query string: whatever
    comes with them is ignored — only a body over the limit is refused, unread, with 413."""
    gets = [path for method, path, _ in served_operations(http) if method == "GET"]
    assert "/v1/capabilities" in gets and "/health/live" in gets
    log_start = _log_size(module_daemon)
    junk = [
        ("malformed json", b'{"scope_id": ', JSON),
        ("invalid utf-8", b"\xff\xfe\xfd", JSON),
        ("deeply nested", _nested(ABSURD_DEPTH, "arrays"), JSON),
        ("huge body under the limit", b'"' + b"h" * HUGE + b'"', JSON),
        ("not json", b"scope_id=%ff", {"content-type": "application/x-www-form-urlencoded"}),
    ]
    # Percent-escapes of a UTF-8-encoded surrogate, invalid UTF-8 and NUL; a long value.
    query = "?scope_id=%ED%A0%80&%FF=%FE&%00=%00&limit=-1&q=" + "x" * 4000
    for path in gets:
        clean = http.get(path)
        assert clean.status_code == 200, path
        for label, raw, headers in junk:
            response = http.request("GET", path + query, content=raw, headers=headers)
            assert response.status_code == 200, (path, label, response.text[:300])
            if path == "/metrics":  # counters move between two scrapes: same document kind
                assert response.headers["content-type"] == clean.headers["content-type"]
                assert "powercontext_http_requests_total" in response.text, label
            else:
                assert response.json() == clean.json(), (path, label)
        too_big = http.request("GET", path, content=b"x" * (MAX_BODY + 1))
        assert_envelope(too_big, 413, "payload_too_large")
    _no_internal_errors(module_daemon, log_start)


def test_a_wrong_method_is_a_405_envelope_naming_the_right_one(http: httpx.Client) -> None:
    for method, path, _ in served_operations(http):
        for wrong in sorted({"GET", "POST", "PUT", "PATCH", "DELETE"} - {method}):
            response = http.request(wrong, path, content=b"{}", headers=JSON)
            assert_envelope(response, 405, "method_not_allowed")
            # RFC 9110 § 15.5.6: a 405 lists the methods the resource does support.
            allowed = {m.strip() for m in response.headers["allow"].split(",")}
            assert method in allowed, (wrong, path, allowed)


@pytest.mark.parametrize("path", [p for p in POST_PATHS if p not in NO_INTEGERS])
def test_huge_numbers_are_answered_without_a_server_error(
    module_daemon: Daemon, http: httpx.Client, path: str
) -> None:
    """Every integer of every body, just past 64 bits and far past: no number reaches the
    database driver unchecked (where it would overflow into a 500)."""
    scope = new_scope("huge-ints")
    log_start = _log_size(module_daemon)
    entry = remember(http, scope, "seed entry for huge numbers")["entry"]
    body = {**valid_bodies(scope)[path], **OPTIONAL_INTEGERS.get(path, {})}
    if "citation" in body:
        body["citation"] = entry["citation"]  # a real one: only the number is wrong
    leaves = list(_leaves(body, int))
    assert leaves, f"{path} has an integer field: add it to OPTIONAL_INTEGERS"
    for leaf in leaves:
        for number in (2**63, 2**70):
            response = _post_raw(http, path, _dumps(_replaced(body, leaf, number)))
            assert response.status_code < 500, (leaf, number, response.text)
            if response.status_code >= 400:
                assert_envelope(response, response.status_code)
    _no_internal_errors(module_daemon, log_start)


@pytest.mark.parametrize("path", POST_PATHS)
def test_bodies_over_the_limit_are_rejected_with_413(module_daemon: Daemon, path: str) -> None:
    big = b'{"scope_id": "' + b"a" * (2 * MAX_BODY) + b'"}'
    with module_daemon.client() as client:
        declared = _post_raw(client, path, big)
    assert_envelope(declared, 413, "payload_too_large")
    assert declared.headers["x-request-id"]

    def chunks() -> Iterator[bytes]:
        yield b'{"scope_id": "'
        for _ in range(24):  # 24 x 64 KiB = 1.5 MiB, no Content-Length
            yield b"b" * 65536
        yield b'"}'

    with module_daemon.client() as client:
        chunked = client.post(path, content=chunks(), headers=JSON)
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in chunked.request.headers
    assert_envelope(chunked, 413, "payload_too_large")

    # Without a token the size check still answers first: nothing of the body is read.
    with httpx.Client(base_url=module_daemon.url, timeout=30) as anonymous:
        assert_envelope(_post_raw(anonymous, path, big), 413, "payload_too_large")


def test_a_chunked_body_under_the_limit_is_accepted(http: httpx.Client) -> None:
    scope = new_scope("chunked-ok")
    body = _dumps({"scope_id": scope, "kind": "fact", "text": "sent in chunks " + "z" * 5000})

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    response = http.post(REMEMBER, content=chunks(), headers=JSON)
    assert response.status_code == 200, response.text
    assert response.json()["entry"]["text"] == "sent in chunks " + "z" * 5000


def test_request_id_is_echoed_when_valid_and_generated_otherwise(http: httpx.Client) -> None:
    scope = new_scope("request-id")
    ok_body = {"scope_id": scope}
    valid_id = f"trace-{uuid.uuid4().hex}:attempt.1"
    echoed = http.post(LIST, json=ok_body, headers={"X-Request-ID": valid_id})
    assert echoed.status_code == 200
    assert echoed.headers["x-request-id"] == valid_id
    # Errors carry it too.
    invalid_body = http.post(LIST, json={"scope_id": ""}, headers={"X-Request-ID": valid_id})
    assert invalid_body.status_code == 422 and invalid_body.headers["x-request-id"] == valid_id

    seen = set()
    for bad in ("has spaces in it", "x" * 129, "semi;colon", ""):
        response = http.post(LIST, json=ok_body, headers={"X-Request-ID": bad})
        generated = response.headers["x-request-id"]
        assert generated != bad
        assert re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", generated)
        seen.add(generated)
    missing = http.post(LIST, json=ok_body).headers["x-request-id"]
    seen.add(missing)
    assert len(seen) == 5, "generated ids are unique per request"


# -- authentication -------------------------------------------------------------------------


PUBLIC_OPERATIONS = {("GET", "/health"), ("GET", "/health/live"), ("GET", "/health/ready")}


def _guarded_operations(daemon: Daemon) -> list[tuple[str, str, dict[str, Any]]]:
    """Every served operation except the public health checks, from the daemon's own OpenAPI.

    The document must declare exactly the health checks public (``security: []``), every
    other operation must have a valid body in ``helpers.valid_bodies`` (POST) and the
    hand-kept ``POST_PATHS`` (which the bad-input tests iterate) must list every POST: a new
    route therefore fails here until the security tests cover it.
    """
    with daemon.client() as client:
        operations = served_operations(client)
    public = {(method, path) for method, path, op in operations if op.get("security") == []}
    assert public == PUBLIC_OPERATIONS
    guarded = [(m, p, op) for m, p, op in operations if (m, p) not in PUBLIC_OPERATIONS]
    posts = {path for method, path, _ in guarded if method == "POST"}
    assert posts == set(valid_bodies("x")) == set(POST_PATHS), "update helpers.valid_bodies"
    assert {method for method, _, _ in guarded} <= {"GET", "POST"}
    return guarded


def test_every_operation_requires_a_valid_token(module_daemon: Daemon) -> None:
    real = module_daemon.token
    token_id, secret = real.split("_", 2)[1:]
    wrong_headers = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": f"Basic {real}"},
        {"Authorization": "Bearer not-a-powercontext-token"},
        {"Authorization": f"Bearer pc_{token_id}_{secret[:-1]}x"},  # right id, wrong secret
        {"Authorization": f"Bearer pc_000000000000_{secret}"},  # unknown id
        {"Authorization": f"Bearer {real}extra"},
    ]
    scope = new_scope("auth")
    bodies = valid_bodies(scope)
    requests: list[tuple[str, str, bytes | None]] = []
    for method, path, _ in _guarded_operations(module_daemon):
        if method == "GET":
            requests.append((method, path, None))
        else:
            requests.append((method, path, _dumps(bodies[path])))
            # Authentication comes before validation: a bad body still gets 401.
            requests.append((method, path, b"{not json"))
    with httpx.Client(base_url=module_daemon.url, timeout=30) as anonymous:
        for headers in wrong_headers:
            for method, path, raw in requests:
                response = anonymous.request(method, path, content=raw, headers={**headers, **JSON})
                label = (headers, path)
                assert response.status_code == 401, label
                assert response.headers.get("www-authenticate") == "Bearer", label
                assert_envelope(response, 401, "unauthorized")
                assert response.headers["x-request-id"]
        # Health stays public even with a bogus token.
        for _, path in sorted(PUBLIC_OPERATIONS):
            assert anonymous.get(path).status_code == 200
            assert anonymous.get(path, headers={"Authorization": "Bearer nope"}).status_code == 200
    # The same requests with the real token get past authentication (so the 401s above came
    # from the credentials alone), and nothing was written by any rejected request.
    with module_daemon.client() as client:
        assert client.post(CHANGES, json={"scope_id": scope}).json()["changes"] == []
        for method, path, raw in requests:
            response = client.request(method, path, content=raw, headers=JSON)
            assert response.status_code != 401, (path, response.text)


def test_a_scoped_token_is_forbidden_elsewhere_for_every_operation(
    module_daemon: Daemon, http: httpx.Client
) -> None:
    base = f"git:e2e-team-{uuid.uuid4().hex[:8]}/"
    limited = create_token(module_daemon, f"limited-{base[8:-1]}", base + "*", capabilities=ALL)
    inside, outside = base + "repo", new_scope("foreign")
    entry = remember(http, outside, "owned by another team")["entry"]
    outside_bodies, inside_bodies = valid_bodies(outside), valid_bodies(inside)
    with module_daemon.client(limited) as client:
        for method, path, _ in _guarded_operations(module_daemon):
            if method == "GET":  # unscoped reads (capabilities): any valid token
                assert client.get(path).status_code == 200, path
                continue
            body = outside_bodies[path]
            if "citation" in body:
                body["citation"] = entry["citation"]  # real citation: 403 must win over 200
            assert_envelope(client.post(path, json=body), 403, "scope_forbidden")
            response = client.post(path, json=inside_bodies[path])
            assert response.status_code in (200, 201, 202, 404), (path, response.text)
    # The foreign scope is untouched.
    listed = http.post(LIST, json={"scope_id": outside}).json()
    assert [e["text"] for e in listed["entries"]] == ["owned by another team"]
    assert listed["memory"] == memory_ref(1)


def test_token_file_is_private_and_the_database_stores_only_hashes(
    module_daemon: Daemon,
) -> None:
    token_file = module_daemon.home / "auth" / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) & 0o077 == 0

    extra = create_token(module_daemon, f"hash-check-{uuid.uuid4().hex[:8]}", "git:x/*")
    secrets_ = [module_daemon.token, extra]
    database = module_daemon.home / "powercontext.db"
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tokens)")]
        rows = conn.execute("SELECT * FROM tokens").fetchall()
    finally:
        conn.close()
    assert len(rows) >= 2 and columns
    stored = "\n".join(str(value) for row in rows for value in row)
    for token in secrets_:
        secret = secret_part(token)
        assert len(secret) >= 32
        assert token not in stored and secret not in stored
    # Nor anywhere else in the database files (main file and write-ahead log).
    for path in Path(module_daemon.home).glob("powercontext.db*"):
        raw = path.read_bytes()
        for token in secrets_:
            assert secret_part(token).encode() not in raw, path.name


# -- privacy --------------------------------------------------------------------------------


def test_logs_never_contain_request_content_scopes_or_tokens(tmp_path: Path) -> None:
    mark = f"SENTINEL-7f3a-{uuid.uuid4().hex[:10]}"
    low = mark.lower()  # tags must be lower-case
    with start_daemon(tmp_path / "privacy-home") as daemon:
        limited = create_token(daemon, "privacy-limited", f"git:acme/{mark}-*")
        scope = f"git:acme/{mark}-scope"
        foreign = f"git:other/{mark}-foreign"
        bogus_token = f"pc_{mark}_{mark}"
        statuses = []

        def send(client: httpx.Client, path: str, raw: bytes | dict) -> httpx.Response:
            content = raw if isinstance(raw, bytes) else _dumps(raw)
            response = client.post(path, content=content, headers=JSON)
            statuses.append(response.status_code)
            return response

        with daemon.client(limited) as c:
            written = send(c, REMEMBER, {
                "scope_id": scope, "kind": f"{mark}-kind", "text": f"{mark} text body",
                "tags": [f"{low}-tag"], "reason": f"{mark} reason",
                "source_refs": [{"name": "content", "source_id": f"{mark}-ref"}],
            }).json()["entry"]  # fmt: skip
            send(c, SEARCH, {"scope_id": scope, "query": f"{mark} query"})
            send(c, LIST, {"scope_id": scope})
            send(c, GET, {"scope_id": scope, "citation": written["citation"]})
            revised = send(
                c,
                REVISE,
                {
                    "scope_id": scope,
                    "citation": written["citation"],
                    "text": f"{mark} revised",
                    "reason": f"{mark} why",
                },
            )
            assert revised.status_code == 200
            # 409: a stale citation, and a source captured twice with different content.
            stale = send(
                c,
                REVISE,
                {"scope_id": scope, "citation": written["citation"], "text": f"{mark} stale"},
            )
            assert stale.status_code == 409 and mark not in stale.text
            source = {
                "scope_id": scope,
                "source_id": f"{mark}-src",
                "content": f"{mark} prompt",
                "metadata": {f"{mark}-key": f"{mark}-value"},
            }
            assert send(c, SOURCES, source).status_code == 202
            conflict = send(c, SOURCES, {**source, "content": f"{mark} other prompt"})
            assert conflict.status_code == 409 and mark not in conflict.text
            # 404 with a sentinel in the cited ids.
            ghost = dict(written["citation"], entry_id=f"{mark}-e", entry_version_id=f"{mark}-v")
            assert send(c, GET, {"scope_id": scope, "citation": ghost}).status_code == 404
            # 403: a scope outside the token's grant, carrying content.
            denied = send(c, REMEMBER, {"scope_id": foreign, "kind": "fact", "text": mark})
            assert denied.status_code == 403 and mark not in denied.text
            send(c, SEARCH, {"scope_id": foreign, "query": mark})
            # 422s: over-long text, bad scope, unknown field, malformed and non-UTF-8 bodies.
            too_long = send(
                c, REMEMBER, {"scope_id": scope, "kind": "fact", "text": f"{mark} " * 1000}
            )
            assert too_long.status_code == 422 and mark not in too_long.text
            send(c, REMEMBER, {"scope_id": f" {mark}", "kind": "fact", "text": mark})
            send(c, SEARCH, {"scope_id": scope, "query": mark, mark: mark})
            send(c, SOURCES, f'{{"scope_id": "{scope}", "content": "{mark}'.encode())
            send(c, SEARCH, f'{{"scope_id": "{scope}", "query": "{mark}\xff"}}'.encode("latin-1"))
            send(c, SOURCES, {"scope_id": scope, "source_id": mark, "content": "x" * 200_001})
        with daemon.client(bogus_token) as wrong:
            assert send(wrong, SEARCH, {"scope_id": scope, "query": mark}).status_code == 401
        # The all-scopes local token, for the last reads and writes.
        with daemon.client() as c:
            send(c, CHANGES, {"scope_id": scope})
            send(c, RETIRE, {"scope_id": scope, "citation": revised.json()["entry"]["citation"],
                             "reason": f"{mark} retire"})  # fmt: skip
        local_token = daemon.token
        # Stopping flushes the access-log lines written after each response went out.
        assert daemon.stop() == 0
        log = daemon.log_text()

    assert {200, 202, 401, 403, 404, 409, 422} <= set(statuses)
    # The log did record these requests (so an empty log cannot pass) ...
    request_lines = [json.loads(line) for line in log.splitlines() if '"http_request"' in line]
    assert len(request_lines) >= len(statuses)
    assert {401, 403, 404, 409, 422} <= {line["status"] for line in request_lines}
    assert {line["path"] for line in request_lines} >= {REMEMBER, SEARCH, SOURCES}
    # ... and none of the content, scope ids, ids or tokens.
    assert "sentinel-7f3a" not in log.lower()
    for token in (local_token, limited, bogus_token):
        assert token not in log
        assert secret_part(token) not in log


# -- lifecycle ------------------------------------------------------------------------------


def test_sigterm_shuts_down_cleanly_and_data_survives_a_restart(tmp_path: Path) -> None:
    home = tmp_path / "shutdown-home"
    scope = new_scope("shutdown")
    with start_daemon(home) as daemon:
        token = daemon.token
        with daemon.client() as client:
            written = remember(client, scope, "Survives a restart.")["entry"]
        assert daemon.stop() == 0
        log = daemon.log_text()
    assert '"internal_error"' not in log

    with start_daemon(home) as again:
        assert again.token == token  # the local token is reused, not rotated
        with again.client() as client:
            got = client.post(GET, json={"scope_id": scope, "citation": written["citation"]})
            assert got.status_code == 200 and got.json() == written
            hits = client.post(SEARCH, json={"scope_id": scope, "query": "survives restart"})
            assert [h["citation"] for h in hits.json()["hits"]] == [written["citation"]]
        assert again.stop() == 0
    assert not os.path.exists(home / "auth" / "token.tmp")
