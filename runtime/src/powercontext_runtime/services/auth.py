"""Who is calling, which scopes they may touch and what they may do (spec 03 § Authentication).

Every transport (HTTP routes, MCP tools, and so the clients and the CLI that speak HTTP) asks
the one question :meth:`Principal.authorize` answers, with the operation's id and the scope
its body names. What each operation needs is the :data:`OPERATION_CAPABILITIES` table below, so
an operation can never be reachable with a weaker capability on one transport than another,
and an operation missing from the table needs ``admin`` (fail closed). docs/security.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ..contract.capabilities import AGENT_CAPABILITIES, ALL_CAPABILITIES, Capability
from ..errors import ForbiddenError, UnauthorizedError
from ..files import write_private_file
from ..settings import read_token_file
from ..store.tokens import TokenInfo, TokenStore, scope_matches

__all__ = [
    "AGENT_CAPABILITIES",
    "ALL_CAPABILITIES",
    "OPERATION_CAPABILITIES",
    "Authenticator",
    "Capability",
    "Principal",
    "ensure_local_tokens",
    "required_capability",
]


#: The capability each operation (HTTP operationId = MCP tool name) requires. Operations that
#: only need a valid token (capabilities, health is public) are listed with ``None``.
OPERATION_CAPABILITIES: dict[str, Capability | None] = {
    "get_capabilities": None,
    # Counts and latencies only (runtime/metrics.py), so a read-only token can scrape them.
    "get_metrics": "read",
    # Reading, and the context packs the host integrations deliver.
    "prepare_context": "read",
    # The same pack and why (scores included): what prepare_context shows, nothing more.
    "explain_context": "read",
    "bootstrap_context": "read",
    "record_bootstrap_receipt": "read",
    "search_memory": "read",
    "get_memory_entry": "read",
    "list_memory_entries": "read",
    "list_memory_entry_versions": "read",
    "list_memory_changes": "read",
    "get_experience": "read",
    "list_experiences": "read",
    "get_skill": "read",
    "list_skills": "read",
    "list_artifact_candidates": "read",
    "get_artifact_candidate": "read",
    "get_handoff": "read",
    "next_handoff": "read",
    "get_context_references": "read",
    # The web console's Bootstrap and Activity pages: curated content, states and counts.
    "get_bootstrap_overview": "read",
    "get_activity": "read",
    # A captured source read back (what a candidate's evidence cites): the scope's own text.
    "get_source": "read",
    # Recorded task results (what an Experience candidate's evidence cites).
    "list_task_results": "read",
    "get_task_result": "read",
    # Direct writes: Memory, captured sources, Handoff.
    "remember_memory": "write",
    "revise_memory_entry": "write",
    "retire_memory_entry": "write",
    "capture_content_source": "write",
    "record_task_result": "write",
    "flush_memory": "write",
    "commit_handoff": "write",
    "withdraw_handoff": "write",
    # The Review Inbox: anyone may propose, only a reviewer decides.
    "propose_experience": "propose",
    "propose_skill": "propose",
    "approve_artifact_candidate": "review",
    "reject_artifact_candidate": "review",
    "revise_artifact_candidate": "review",
    # Which other scopes a scope's bootstrap pulls in is the operator's decision.
    "set_context_references": "admin",
}

#: The principal id of every caller while auth is off (``POWERCONTEXT_AUTH=none``).
UNAUTHENTICATED_ID = "auth-off"

_log = logging.getLogger("powercontext.auth")


def required_capability(operation: str) -> Capability | None:
    """What ``operation`` needs; an operation nobody classified needs ``admin``."""
    return OPERATION_CAPABILITIES.get(operation, "admin")


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: a stable id (the token's), its scope grants and its capabilities.

    The id binds what a caller creates for itself (bootstrap receipts) to that caller, so
    another token can neither read nor consume it.
    """

    principal_id: str
    scopes: tuple[str, ...]
    capabilities: frozenset[str]

    @classmethod
    def unrestricted(cls, principal_id: str = UNAUTHENTICATED_ID) -> Principal:
        return cls(principal_id, ("*",), frozenset(ALL_CAPABILITIES))

    def allows(self, scope_id: str) -> bool:
        return scope_matches(self.scopes, scope_id)

    def can(self, capability: Capability | None) -> bool:
        return capability is None or capability in self.capabilities

    def require(self, scope_id: str) -> None:
        if not self.allows(scope_id):
            raise ForbiddenError("this token is not granted the requested scope")

    def authorize(self, operation: str, scope_id: str | None) -> None:
        """The one check every operation runs. Transports call it with ``scope_id=None``
        before reading the body (the capability depends on the operation alone, so a caller
        who may not run it learns nothing about validation), then with the body's scope."""
        capability = required_capability(operation)
        if not self.can(capability):
            raise ForbiddenError(
                f"this token lacks the {capability} capability",
                code="capability_forbidden",
                details={"required": capability},
            )
        if scope_id is not None:
            self.require(scope_id)


#: The refusal of a replaced local token: what happened and what to do, nothing about the
#: data dir's location (the caller may be remote).
REPLACED_MESSAGE = (
    "this local token was replaced when the runtime started (after an upgrade, or because its "
    "token file held another token): use the one now in the runtime's data dir, auth/token "
    "for the CLI and scripts, auth/agent-token for the hooks and MCP clients"
)


class Authenticator:
    """Turns a bearer token into the caller (None when the token is not valid)."""

    def __init__(self, tokens: TokenStore) -> None:
        self._tokens = tokens

    def principal_for(self, token: str) -> Principal | None:
        """None for a token that is not valid; a typed 401 ``token_replaced`` for one that
        start-up replaced (docs/security.md § Tokens), which says what to use instead."""
        info = self._tokens.verify(token)
        if info is None:
            if self._tokens.was_replaced(token):
                raise UnauthorizedError(REPLACED_MESSAGE, code="token_replaced")
            return None
        return Principal(info.token_id, info.scopes, frozenset(info.capabilities))


def local_token_name(path: Path, role: str) -> str:
    """One token per token file (so per data dir and role): runtimes sharing a database never
    revoke each other's. The operator's keeps the name it had before roles existed."""
    digest = hashlib.sha256(str(path.resolve()).encode("utf-8")).hexdigest()[:12]
    suffix = "" if role == "operator" else f"-{role}"
    return f"local-{socket.gethostname()[:64]}-{digest}{suffix}"


@dataclass(frozen=True, slots=True)
class LocalToken:
    """A token the runtime keeps in its data dir for local clients of one role."""

    role: str
    file_name: str
    capabilities: tuple[Capability, ...]


#: The operator's token (CLI, later the web console) may review; the agent's (hooks, the
#: plugins' MCP tools) may not. Both are granted every scope.
LOCAL_TOKENS = (
    LocalToken("operator", "token", ALL_CAPABILITIES),
    LocalToken("agent", "agent-token", AGENT_CAPABILITIES),
)


def ensure_local_tokens(tokens: TokenStore, auth_dir: Path) -> list[str]:
    """Make sure each local token file holds a valid token of its role; the roles (re)issued.

    The operator's token of a release from before capabilities (``auth/token``, the only local
    token then, used by the CLI and the hooks alike and able to do everything) keeps its
    secret: its row is given the operator's capabilities in place (``local_token_upgraded``
    in the log), so a ``POWERCONTEXT_TOKEN``, script or MCP client holding it keeps working.
    A file whose token is unknown, revoked, or holds other capabilities than its role is
    replaced, and the log says which file and why (``local_token_reissued``). Secrets are
    written to files created 0600 from the start and moved into place atomically.
    """
    issued = []
    for local in LOCAL_TOKENS:
        path = auth_dir / local.file_name
        current = read_token_file(path)
        info = None if current is None else tokens.verify(current)
        if info is not None and _upgradable(info, local):
            if tokens.upgrade_legacy(info.token_id, local.capabilities):
                _log.warning(
                    "local_token_upgraded", extra={"token_file": str(path), "code": local.role}
                )
            info = tokens.verify(current or "")
        if info is not None and set(info.capabilities) == set(local.capabilities):
            if (path.stat().st_mode & 0o777) != 0o600:
                os.chmod(path, 0o600)
            continue
        name = local_token_name(path, local.role)
        secret = tokens.rotate_local(name, local.capabilities)
        write_private_file(path, secret + "\n")
        if current is not None:  # a first start writes the files without a word
            reason = "unknown_or_revoked" if info is None else "capabilities_changed"
            _log.warning("local_token_reissued", extra={"token_file": str(path), "code": reason})
        issued.append(local.role)
    return issued


def _upgradable(info: TokenInfo, local: LocalToken) -> bool:
    """The operator's local token as a release without capabilities made it: every scope, no
    capabilities stored, named by ``rotate_local`` (``local-…``) — never a narrowed token
    someone copied into the file, and never the agent's (that file did not exist then)."""
    return (
        local.role == "operator"
        and info.legacy
        and info.scopes == ("*",)
        and info.name.startswith("local-")
    )
