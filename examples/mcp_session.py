"""An MCP client session with the runtime's ``/mcp`` endpoint, as an agent sees it.

Connects with the official MCP SDK (Streamable HTTP, the same SDK the runtime serves with) and
the *agent* token, lists the tools, remembers and searches, captures a task result and
proposes an Experience citing it — which then waits for a person: the agent's token is not
offered the review tools, and calling one anyway is refused.

    powercontext serve &
    python examples/mcp_session.py
    powercontext candidate list --scope example:mcp   # the proposal, waiting for you

``POWERCONTEXT_URL`` (``http://…`` or ``unix:/…``; default: the local data dir's socket),
``POWERCONTEXT_TOKEN`` (default: the data dir's ``auth/agent-token``), ``POWERCONTEXT_SCOPE_ID``
(default ``example:mcp``).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from powercontext_runtime.client import default_token, default_url

SCOPE = os.environ.get("POWERCONTEXT_SCOPE_ID", "example:mcp")


async def call(session: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's JSON result; a refused call (``isError``) comes back as the error envelope."""
    result = await session.call_tool(tool, arguments)
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def main() -> None:
    url, token = default_url(), default_token(agent=True)
    transport, base = None, url
    if url.startswith("unix:"):  # the local socket: the runtime expects Host: localhost
        transport, base = httpx2.AsyncHTTPTransport(uds=url[len("unix:") :]), "http://localhost"
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, transport=transport, timeout=60) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as session,
    ):
        tools = sorted(tool.name for tool in (await session.list_tools()).tools)
        review = [name for name in tools if name.startswith(("approve_", "reject_"))]
        print(f"{len(tools)} tools offered to the agent; review tools among them: {review}")

        text = "The importer must run before the nightly report"
        await call(
            session, "remember_memory", {"scope_id": SCOPE, "kind": "constraint", "text": text}
        )
        found = await call(
            session, "search_memory", {"scope_id": SCOPE, "query": "when does the importer run?"}
        )
        print(f"search_memory: {[hit['text'] for hit in found['hits']]}")

        recorded = await call(  # the task's result: exact evidence the proposal cites
            session,
            "record_task_result",
            {
                "scope_id": SCOPE,
                "task_id": f"run-{uuid.uuid4().hex[:8]}",
                "task": {
                    "goal": "Find out why the nightly report was empty",
                    "outcome": "succeeded",
                    "changes": [{"path": "cron/nightly.yaml", "added": 1, "removed": 1}],
                    "checks": [{"command": "make report", "exit_status": 0}],
                },
            },
        )
        candidate = await call(
            session,
            "propose_experience",
            {
                "scope_id": SCOPE,
                "source_refs": [recorded["source"]],
                "proposal": {
                    "situation": "The nightly report came out empty",
                    "action": "Moved the report after the importer",
                    "outcome": "The next report was complete",
                    "lesson": "Schedule the report only after the importer has finished",
                },
            },
        )
        print(f"proposed {candidate['candidate_id']}: {candidate['status']}, waits for review")
        refused = await call(
            session,
            "approve_artifact_candidate",
            {
                "scope_id": SCOPE,
                "candidate_id": candidate["candidate_id"],
                "expected_version": 1,
            },
        )
        print(f"approve with the agent token: {refused['error']['code']}")


if __name__ == "__main__":
    asyncio.run(main())
