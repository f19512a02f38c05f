"""Scope identity (spec 08 § Identity): case- and accent-variant scope ids stay distinct.

Scope ids are opaque and compared byte-for-byte (spec 02). SQLite's BINARY collation gives that
for free; MySQL-protocol servers compare case- and accent-insensitively unless every table and
derived index uses ``utf8mb4_bin``, and NFC ``é`` versus NFD ``e`` + U+0301 must not be unified by
any normalisation either. Each scope-keyed store is checked, on both backends (``runtime``): a
missed collation on any one table would merge two projects' data or raise a spurious conflict.
"""

from __future__ import annotations

from typing import Any

import pytest

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.bootstrap import (
    BootstrapContextRequest,
    CommitHandoffRequest,
    RecordReceiptRequest,
    SetContextReferencesRequest,
)
from powercontext_runtime.contract.context import PrepareContextRequest
from powercontext_runtime.contract.memory import (
    CaptureSourceRequest,
    ListMemoryEntriesRequest,
    RememberMemoryRequest,
    SearchMemoryRequest,
)
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest,
    ListCandidatesRequest,
    ProposeExperienceRequest,
)
from powercontext_runtime.errors import NotFoundError
from powercontext_runtime.services.auth import Principal

VARIANTS = [
    ("PC-x-Alpha", "pc-x-alpha"),  # case
    ("café", "cafe"),  # accent
    ("café", "cafe\u0301"),  # NFC (c3 a9) versus NFD (e + combining acute)
    ("git:github.com/Owner/Répo", "git:github.com/owner/repo"),  # both, in a realistic id
]
EVERYTHING = Principal.unrestricted()


def _grant(pattern: str) -> Principal:
    return Principal("limited", (pattern,), frozenset({"read"}))


def _remember(rt: Runtime, scope: str, text: str, **extra: Any) -> Any:
    body = {"scope_id": scope, "kind": "fact", "text": text, **extra}
    return rt.memory.remember(RememberMemoryRequest.model_validate(body))


def _search(rt: Runtime, scope: str, query: str) -> list[str]:
    hits = rt.memory.search(SearchMemoryRequest(scope_id=scope, query=query, limit=10)).hits
    return [hit.text for hit in hits]


def _capture(rt: Runtime, scope: str, content: str) -> int:
    request = CaptureSourceRequest(scope_id=scope, source_id="prompt-1", content=content)
    return rt.sources.capture(request).position


def _commit_first_handoff(rt: Runtime, scope: str, objective: str) -> int:
    result = rt.bootstrap.commit_handoff(CommitHandoffRequest.model_validate({
        "scope_id": scope, "base": None,
        "content": {"schema": "powercontext.handoff.v1", "objective": objective,
                    "state": ["started"], "disposition": "continuable"},
    }))  # fmt: skip
    return result.reference.revision


def _bootstrap(rt: Runtime, scope: str) -> Any:
    return rt.bootstrap.bootstrap(BootstrapContextRequest.model_validate({
        "scope_id": scope, "enabled": True, "profile": "powercontext.scope-bootstrap.v1",
        "lifecycle": "startup", "integration": "codex",
    }), EVERYTHING)  # fmt: skip


@pytest.mark.parametrize(("a", "b"), VARIANTS)
def test_case_and_accent_variant_scopes_stay_distinct(runtime: Runtime, a: str, b: str) -> None:
    # Memory: authoritative rows and the full-text index.
    _remember(runtime, a, "written to the first scope only", tags=["bootstrap-context"])
    assert _search(runtime, b, "first scope") == []
    assert runtime.memory.list(ListMemoryEntriesRequest(scope_id=b)).entries == []
    _remember(runtime, b, "written to the second scope only")
    assert _search(runtime, a, "scope") == ["written to the first scope only"]
    assert _search(runtime, b, "scope") == ["written to the second scope only"]

    # Sources: the same source id with other content is a new source, not a source_conflict.
    assert _capture(runtime, a, "first prompt") == 1
    assert _capture(runtime, b, "a different prompt") == 1

    # Review Inbox and the Experience index.
    proposed = runtime.review.propose_experience(ProposeExperienceRequest.model_validate({
        "scope_id": a,
        "proposal": {"situation": "zanzibar deploy", "action": "migrated first",
                     "outcome": "calm release", "lesson": "migrate zanzibar before deploying"},
        "source_refs": [{"name": "content", "source_id": "prompt-1"}],
    }))  # fmt: skip
    assert runtime.review.list(ListCandidatesRequest(scope_id=b)).candidates == []
    runtime.review.approve(ApproveCandidateRequest(
        scope_id=a, candidate_id=proposed.candidate_id, expected_version=1
    ))  # fmt: skip
    recalled = runtime.context.prepare(
        PrepareContextRequest(scope_id=a, query="zanzibar deploy"), EVERYTHING
    )
    assert recalled.content is not None and "migrate zanzibar" in recalled.content
    elsewhere = runtime.context.prepare(
        PrepareContextRequest(scope_id=b, query="zanzibar deploy"), EVERYTHING
    )
    assert elsewhere.status == "empty"

    # Handoff: each scope's first commit (base null) succeeds — no artifact_conflict.
    assert _commit_first_handoff(runtime, a, "first objective") == 1
    assert _commit_first_handoff(runtime, b, "second objective") == 1

    # Context References.
    runtime.bootstrap.set_references(SetContextReferencesRequest(scope_id=a, references=["x"]))
    assert runtime.bootstrap.get_references(b).references == []

    # Bootstrap receipts: a's receipt is unknown under b, and b has nothing curated.
    ready = _bootstrap(runtime, a)
    assert ready.status == "ready"
    with pytest.raises(NotFoundError):
        runtime.bootstrap.record_receipt(RecordReceiptRequest(
            scope_id=b, receipt_id=ready.receipt.receipt_id, state="injected"
        ), EVERYTHING)  # fmt: skip
    assert _bootstrap(runtime, b).status == "empty"

    # Token grants: neither an exact grant nor a grant of the scope and its children admits
    # the variant.
    for granted, other in ((a, b), (b, a)):
        assert _grant(granted).allows(granted)
        assert not _grant(granted).allows(other)
        assert not _grant(granted + "*").allows(other)


# -- invisible characters (issue 15 #8) ----------------------------------------------------------

INVISIBLE = {
    "zero-width space": "\u200b",
    "right-to-left override": "\u202e",
    "left-to-right isolate": "\u2066",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
    "soft hyphen": "\u00ad",
}


@pytest.mark.parametrize("char", list(INVISIBLE.values()), ids=list(INVISIBLE))
def test_scope_ids_with_invisible_or_bidi_characters_are_refused(api: Any, char: str) -> None:
    """``git:acme/app`` and ``git:acme/\u200bapp`` look the same on screen; a bidi override
    reorders the text around it where the id is shown. Neither can be a scope — nor a grant,
    a reference or a source id."""
    lookalike = f"git:example.com/acme/{char}app"
    for path, body in (
        ("/v1/memory/remember", {"scope_id": lookalike, "kind": "fact", "text": "t"}),
        ("/v1/memory/search", {"scope_id": lookalike, "query": "q"}),
        ("/v1/scopes/references/set", {"scope_id": "git:a", "references": [lookalike]}),
        ("/v1/sources/content",
         {"scope_id": "git:a", "source_id": f"src{char}1", "content": "c"}),
    ):  # fmt: skip
        response = api.post(path, json=body)
        assert response.status_code == 422, (path, response.text)
        [error] = response.json()["error"]["details"]["errors"]
        assert "invisible formatting" in error["msg"]
        assert char not in response.text
    assert api.post("/v1/memory/changes", json={"scope_id": "git:a"}).json()["changes"] == []
