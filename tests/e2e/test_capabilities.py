"""Token capabilities (issue 15 #2): each capability opens exactly its operations, on every
served route of a real daemon, through the CLI and the Python client.

The expected table is written out here by hand, independently of ``services/auth.py``: if the
daemon's own table changes what an operation needs, this fails.
"""

from __future__ import annotations

import uuid

import pytest

from powercontext_runtime.client import PowerContextClient
from powercontext_runtime.errors import ForbiddenError
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
    cli_json,
    create_token,
    new_scope,
    served_operations,
    valid_bodies,
)
from tests.support.daemon import Daemon

pytestmark = pytest.mark.e2e

JSON = {"content-type": "application/json"}
NEEDS = {
    PREPARE: "read", EXPLAIN: "read", BOOTSTRAP: "read", RECEIPTS: "read", SEARCH: "read",
    GET: "read", LIST: "read", VERSIONS: "read", CHANGES: "read", GET_EXPERIENCE: "read",
    GET_SKILL: "read", LIST_EXPERIENCES: "read", LIST_SKILLS: "read",
    CANDIDATES_LIST: "read", CANDIDATES_GET: "read", HANDOFF_GET: "read", REFS_GET: "read",
    HANDOFF_NEXT: "read", OVERVIEW: "read", ACTIVITY: "read", SOURCE_GET: "read",
    TASK_LIST: "read", TASK_GET: "read",
    REMEMBER: "write", REVISE: "write", RETIRE: "write", SOURCES: "write", FLUSH: "write",
    TASK_RECORD: "write",
    HANDOFF_COMMIT: "write", HANDOFF_WITHDRAW: "write",
    PROPOSE_EXPERIENCE: "propose", PROPOSE_SKILL: "propose",
    CANDIDATES_APPROVE: "review", CANDIDATES_REJECT: "review", CANDIDATES_REVISE: "review",
    REFS_SET: "admin",
}  # fmt: skip
CAPABILITIES = ("read", "write", "propose", "review", "admin")


def test_the_expected_table_covers_every_served_operation(module_daemon: Daemon) -> None:
    with module_daemon.client() as client:
        posts = {path for method, path, _ in served_operations(client) if method == "POST"}
    assert posts == set(NEEDS) == set(POST_PATHS)


@pytest.mark.parametrize("capability", CAPABILITIES)
def test_a_capability_opens_exactly_its_operations(module_daemon: Daemon, capability: str) -> None:
    scope = new_scope(f"cap-{capability}")
    token = create_token(
        module_daemon, f"only-{capability}-{uuid.uuid4().hex[:8]}", scope,
        capabilities=(capability,),
    )  # fmt: skip
    bodies = valid_bodies(scope)
    with module_daemon.client(token) as client:
        assert client.get("/v1/capabilities").status_code == 200  # any valid token
        metrics = client.get("/metrics")  # counts only: a read token may scrape them
        if capability == "read":
            assert metrics.status_code == 200, metrics.text
        else:
            assert_envelope(metrics, 403, "capability_forbidden")
        for path, needed in NEEDS.items():
            response = client.post(path, json=bodies[path])
            if needed == capability:
                assert response.status_code != 403, (path, response.text)
                assert response.status_code < 500, (path, response.text)
            else:
                error = assert_envelope(response, 403, "capability_forbidden")
                assert error["details"] == {"required": needed}, path
                assert needed in error["message"]


def test_the_capability_is_checked_before_the_body_and_the_scope(module_daemon: Daemon) -> None:
    scope = new_scope("cap-order")
    token = create_token(module_daemon, f"reader-{uuid.uuid4().hex[:8]}", scope,
                         capabilities=("read",))  # fmt: skip
    with module_daemon.client(token) as client:
        elsewhere = valid_bodies(new_scope("elsewhere"))[CANDIDATES_APPROVE]
        for response in (
            client.post(CANDIDATES_APPROVE, json=elsewhere),
            client.post(CANDIDATES_APPROVE, content=b"{not json", headers=JSON),
            client.post(CANDIDATES_APPROVE, json={"unknown": "fields"}),
        ):
            assert_envelope(response, 403, "capability_forbidden")


def test_the_agent_token_cannot_review_and_the_operator_token_can(module_daemon: Daemon) -> None:
    scope = new_scope("cap-agent")
    http_operator = module_daemon.client()
    proposal = valid_bodies(scope)[PROPOSE_EXPERIENCE]
    http_operator.post(SOURCES, json=valid_bodies(scope)[SOURCES]).raise_for_status()
    with module_daemon.client(module_daemon.agent_token) as agent:
        created = agent.post(PROPOSE_EXPERIENCE, json=proposal)
        assert created.status_code == 201, created.text
        candidate = created.json()
        approve = {"scope_id": scope, "candidate_id": candidate["candidate_id"],
                   "expected_version": candidate["version"]}  # fmt: skip
        assert_envelope(agent.post(CANDIDATES_APPROVE, json=approve), 403, "capability_forbidden")
        still = agent.post(
            CANDIDATES_GET, json={"scope_id": scope, "candidate_id": candidate["candidate_id"]}
        )
        assert still.json()["status"] == "pending"
    approved = http_operator.post(CANDIDATES_APPROVE, json=approve)
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "approved"


def test_the_client_raises_a_typed_forbidden_error(module_daemon: Daemon) -> None:
    scope = new_scope("cap-client")
    with (
        PowerContextClient(module_daemon.url, token=module_daemon.agent_token) as client,
        pytest.raises(ForbiddenError) as caught,
    ):
        client.set_context_references(scope_id=scope, references=["e2e:other"])
    assert caught.value.code == "capability_forbidden"
    assert caught.value.details == {"required": "admin"}


def test_token_create_takes_capabilities_and_list_shows_them(module_daemon: Daemon) -> None:
    name = f"reviewer-{uuid.uuid4().hex[:8]}"
    create_token(module_daemon, name, "git:e2e/*", capabilities=("read", "review"))
    listed = {row["name"]: row for row in cli_json(module_daemon, "token", "list")}
    assert listed[name]["capabilities"] == ["read", "review"]
    default = f"agent-{uuid.uuid4().hex[:8]}"
    create_token(module_daemon, default, "git:e2e/*")
    listed = {row["name"]: row for row in cli_json(module_daemon, "token", "list")}
    assert listed[default]["capabilities"] == ["read", "write", "propose"]
    local = [row for row in listed.values() if row["name"].startswith("local-")]
    live = sorted(tuple(r["capabilities"]) for r in local if not r["revoked"])
    assert live == [("read", "write", "propose"), CAPABILITIES]
