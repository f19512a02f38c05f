"""The plugins' ``doctor`` on a refused token: a token that the runtime replaced at start-up
(an upgrade) is named as such, with what to use instead; any other refusal stays generic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from powercontext_hook_kit.install.doctor import runtime_checks
from powercontext_hook_kit.settings import HookSettings
from tests.hook_kit.stub import Reply, StubRuntime


def _token_check(stub: StubRuntime, tmp_path: Path, code: str) -> dict[str, str]:
    error = {"error": {"code": code, "message": "refused", "details": {}}}
    stub.replies["/health/live"] = Reply(200, b'{"status":"live"}')
    stub.replies["/v1/capabilities"] = Reply(401, json.dumps(error).encode())
    env = {"POWERCONTEXT_URL": stub.url, "POWERCONTEXT_TOKEN": "pc_abc_old"}
    settings = HookSettings.load("codex", env, config_path=str(tmp_path / "missing.toml"))
    checks = {c.name: c for c in runtime_checks(settings, env)}
    assert checks["token"].status == "fail"
    return {"message": checks["token"].message, "fix": checks["token"].fix or ""}


@pytest.mark.parametrize("code", ["token_replaced", "unauthorized"])
def test_doctor_says_when_the_token_was_replaced_by_an_upgrade(
    stub: StubRuntime, tmp_path: Path, code: str
) -> None:
    token = _token_check(stub, tmp_path, code)
    if code == "token_replaced":
        assert token["message"].startswith("replaced when the runtime started (after an upgrade)")
        assert "auth/agent-token" in token["fix"]
    else:
        assert token["message"].startswith("rejected by the runtime (HTTP 401)")
    assert "pc_abc_old" not in token["message"] + token["fix"]
