"""Configuration never silently falls back, and unsafe binds refuse to start (spec 01, 03)."""

from __future__ import annotations

from pathlib import Path

import pytest

from powercontext_runtime.settings import ConfigError, Settings


def test_defaults_use_the_data_dir(tmp_path: Path) -> None:
    settings = Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path)})
    assert settings.database_url == f"sqlite:///{tmp_path / 'powercontext.db'}"
    assert settings.token_file == tmp_path / "auth" / "token"
    assert (settings.host, settings.port, settings.auth) == ("127.0.0.1", 7411, "token")
    assert settings.url == "http://127.0.0.1:7411"


def test_overrides_beat_environment(tmp_path: Path) -> None:
    env = {"POWERCONTEXT_HOME": str(tmp_path), "POWERCONTEXT_PORT": "9000"}
    assert Settings.load(env=env, port=9100).port == 9100
    assert Settings.load(env=env).port == 9000


@pytest.mark.parametrize(
    "env",
    [
        {"POWERCONTEXT_DATABASE_URL": ""},
        {"POWERCONTEXT_DATABASE_URL": "postgresql://x/y"},
        {"POWERCONTEXT_PORT": "seventy"},
        {"POWERCONTEXT_PORT": "70000"},
        {"POWERCONTEXT_AUTH": "maybe"},
        {"POWERCONTEXT_LOG_FORMAT": "xml"},
        {"POWERCONTEXT_AUTH": "none", "POWERCONTEXT_HOST": "0.0.0.0"},
        {"POWERCONTEXT_MAX_BODY_BYTES": "10"},
        {"POWERCONTEXT_WORKERS": "0"},
        {"POWERCONTEXT_WORKERS": "two"},
        {"POWERCONTEXT_WORKERS": "-1"},
        {"POWERCONTEXT_WORKERS": "65"},
        {"POWERCONTEXT_PROMPT_CACHE_MIB": "0"},
        {"POWERCONTEXT_PROMPT_CACHE_MIB": "4097"},
        {"POWERCONTEXT_PROMPT_CACHE_MIB": "64MB"},
    ],
)
def test_bad_configuration_is_an_error(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path), **env})


def test_auth_can_be_disabled_on_loopback_only(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "::1", "localhost"):
        settings = Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path)}, auth="none", host=host)
        assert settings.auth == "none"
    with pytest.raises(ConfigError):
        Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path)}, auth="none", host="10.1.2.3")


def test_in_memory_database_only_when_named(tmp_path: Path) -> None:
    assert not Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path)}).in_memory
    named = Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path)}, database_url="sqlite://")
    assert named.in_memory


def test_workers_default_to_one_and_accept_the_environment(tmp_path: Path) -> None:
    base = {"POWERCONTEXT_HOME": str(tmp_path)}
    assert Settings.load(env=base).workers == 1
    assert Settings.load(env={**base, "POWERCONTEXT_WORKERS": " 4 "}).workers == 4
    assert Settings.load(env={**base, "POWERCONTEXT_WORKERS": "4"}, workers=2).workers == 2


def test_the_prompt_cache_defaults_to_64_mib_32_with_embeddings_and_reaches_the_connection(
    tmp_path: Path,
) -> None:
    from powercontext_runtime.composition import Runtime

    base = {"POWERCONTEXT_HOME": str(tmp_path)}
    assert Settings.load(env=base).prompt_cache_mib == 64
    # With the semantic channel on, the model and index share the memory budget: 32 MiB,
    # unless set.
    local = {**base, "POWERCONTEXT_EMBEDDINGS": "local"}
    assert Settings.load(env=local).prompt_cache_mib == 32
    assert (
        Settings.load(env={**local, "POWERCONTEXT_PROMPT_CACHE_MIB": "64"}).prompt_cache_mib == 64
    )
    assert Settings.load(env=local, prompt_cache_mib=48).prompt_cache_mib == 48
    runtime = Runtime.open(Settings.load(env={**base, "POWERCONTEXT_PROMPT_CACHE_MIB": "8"}))
    try:
        with runtime.db.prompt_read() as conn:
            assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -8 * 1024
    finally:
        runtime.close()


def test_the_model_distiller_is_off_until_named_and_reads_its_own_endpoint(
    tmp_path: Path,
) -> None:
    base = {"POWERCONTEXT_HOME": str(tmp_path)}
    default = Settings.load(env=base)
    assert "openai-compatible" not in default.distill
    assert (default.distill_base_url, default.distill_model, default.distill_api_key) == (
        None,
        None,
        None,
    )
    assert default.distill_timeout == 30.0
    # The extractor's endpoint is not borrowed: a model for prompts does not get task results.
    extractor = {
        "POWERCONTEXT_EXTRACTOR": "openai-compatible",
        "POWERCONTEXT_EXTRACTOR_BASE_URL": "http://127.0.0.1:11434/v1",
        "POWERCONTEXT_EXTRACTOR_MODEL": "m",
    }
    assert Settings.load(env={**base, **extractor}).distill_base_url is None
    env = {
        **base,
        "POWERCONTEXT_DISTILL": "offline,openai-compatible",
        "POWERCONTEXT_DISTILL_BASE_URL": "https://models.example.com/v1",
        "POWERCONTEXT_DISTILL_MODEL": "lesson-model",
        "POWERCONTEXT_DISTILL_API_KEY": "sk-distill-secret",
        "POWERCONTEXT_DISTILL_TIMEOUT": "12.5",
    }
    settings = Settings.load(env=env)
    assert "openai-compatible" in settings.distill
    assert (settings.distill_base_url, settings.distill_model, settings.distill_timeout) == (
        "https://models.example.com/v1",
        "lesson-model",
        12.5,
    )
    assert settings.distill_api_key == "sk-distill-secret"
    assert "sk-distill-secret" not in repr(settings)
    assert Settings.load(env=env, distill_timeout=3).distill_timeout == 3.0


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"POWERCONTEXT_DISTILL_MODEL": "m"}, "needs POWERCONTEXT_DISTILL_BASE_URL"),
        ({"POWERCONTEXT_DISTILL_BASE_URL": "http://x/v1"}, "and POWERCONTEXT_DISTILL_MODEL"),
        (
            {"POWERCONTEXT_DISTILL_BASE_URL": "ftp://x/v1", "POWERCONTEXT_DISTILL_MODEL": "m"},
            "must be an http",
        ),
        ({"POWERCONTEXT_DISTILL_TIMEOUT": "0"}, "POWERCONTEXT_DISTILL_TIMEOUT"),
        ({"POWERCONTEXT_DISTILL_TIMEOUT": "soon"}, "POWERCONTEXT_DISTILL_TIMEOUT"),
        ({"POWERCONTEXT_DISTILL_MODEL": " "}, "set but empty"),
    ],
)
def test_an_incomplete_model_distiller_refuses_to_start(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    named = {"POWERCONTEXT_DISTILL": "openai-compatible"}
    with pytest.raises(ConfigError, match=message):
        Settings.load(env={"POWERCONTEXT_HOME": str(tmp_path), **named, **env})
