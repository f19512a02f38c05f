"""Settings precedence: POWERCONTEXT_* > CLAUDE_PLUGIN_OPTION_* > plugins.toml > defaults."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from powercontext_hook_kit import HookSettings, SettingsError, config_file_path, plugin_data_dir
from powercontext_hook_kit.settings import (
    agent_token_file,
    check_scope_id,
    default_url,
    runtime_data_dir,
    runtime_socket_path,
    user_dir,
)
from powercontext_hook_kit.transport import Endpoint, UnixEndpoint
from tests.hook_kit.conftest import finishes

posix_only = pytest.mark.skipif(os.name != "posix", reason="the unix socket default is POSIX-only")


def write_toml(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.fixture
def missing(tmp_path: Path) -> str:
    """A config path that does not exist (not "/nonexistent": some machines have that dir)."""
    return str(tmp_path / "missing" / "plugins.toml")


@posix_only
def test_defaults(tmp_path: Path, isolated_user: Path) -> None:
    settings = HookSettings.load("codex", {}, config_path=str(tmp_path / "missing.toml"))
    socket = str(isolated_user / "data" / "powercontext" / "powercontext.sock")
    assert settings.url == f"unix:{socket}"
    assert settings.endpoint == UnixEndpoint(socket)
    assert settings.token is None
    assert settings.scope_id is None
    assert (settings.bootstrap, settings.capture_prompts) == (False, True)
    assert (settings.max_bytes, settings.bootstrap_max_bytes) == (8000, 4096)
    assert settings.deadline_seconds == 2.0


@posix_only
def test_the_default_socket_is_in_the_runtime_data_dir(runtime_home: Path, missing: str) -> None:
    """One helper places the data dir; the socket and the agent token are both in it."""
    env = {"POWERCONTEXT_HOME": str(runtime_home)}
    assert runtime_data_dir(env) == str(runtime_home)
    assert runtime_socket_path(env) == str(runtime_home / "powercontext.sock")
    assert agent_token_file(env) == str(runtime_home / "auth" / "agent-token")
    assert default_url(env) == f"unix:{runtime_home}/powercontext.sock"
    settings = HookSettings.load("codex", env, config_path=missing)
    assert settings.endpoint == UnixEndpoint(str(runtime_home / "powercontext.sock"))


@posix_only
def test_the_daemons_socket_setting_is_followed(runtime_home: Path, missing: str) -> None:
    """``POWERCONTEXT_SOCKET`` moves the daemon's socket (or turns it ``off``); hooks follow it
    like the runtime's own client, so they reach the socket the daemon actually made."""
    env = {"POWERCONTEXT_HOME": str(runtime_home)}
    moved = {**env, "POWERCONTEXT_SOCKET": "/run/pc/elsewhere.sock"}
    assert HookSettings.load("codex", moved, config_path=missing).endpoint == UnixEndpoint(
        "/run/pc/elsewhere.sock"
    )
    off = {**env, "POWERCONTEXT_SOCKET": "OFF"}
    assert HookSettings.load("codex", off, config_path=missing).endpoint == Endpoint(
        "127.0.0.1", 7411
    )
    with pytest.raises(SettingsError):
        HookSettings.load(
            "codex", {**env, "POWERCONTEXT_SOCKET": "relative.sock"}, config_path=missing
        )
    # An explicit URL wins over it.
    both = {**moved, "POWERCONTEXT_URL": "unix:/tmp/x.sock"}
    assert HookSettings.load("codex", both, config_path=missing).endpoint == UnixEndpoint(
        "/tmp/x.sock"
    )


def test_an_explicit_http_url_keeps_using_tcp(runtime_home: Path, missing: str) -> None:
    env = {"POWERCONTEXT_HOME": str(runtime_home), "POWERCONTEXT_URL": "http://127.0.0.1:7411"}
    settings = HookSettings.load("codex", env, config_path=missing)
    assert settings.endpoint == Endpoint("127.0.0.1", 7411)


@posix_only
@pytest.mark.parametrize("variable", ["POWERCONTEXT_URL", "CLAUDE_PLUGIN_OPTION_URL"])
def test_an_explicit_unix_url_is_used(tmp_path: Path, variable: str, missing: str) -> None:
    path = str(tmp_path / "elsewhere.sock")
    settings = HookSettings.load("claude-code", {variable: f"unix:{path}"}, config_path=missing)
    assert (settings.url, settings.endpoint) == (f"unix:{path}", UnixEndpoint(path))
    toml = write_toml(tmp_path / "p.toml", f'[codex]\nurl = "unix:{path}"\n')
    assert HookSettings.load("codex", {}, config_path=toml).endpoint == UnixEndpoint(path)


@pytest.mark.parametrize("home", ["relative/home", "./pc"])
def test_a_relative_runtime_data_dir_is_refused(home: str, missing: str) -> None:
    """The hook runs in the user's project: a relative data dir would name a project file."""
    with pytest.raises(SettingsError):
        HookSettings.load("codex", {"POWERCONTEXT_HOME": home}, config_path=missing)
    # Not needed when both the URL and the token are configured.
    configured = {
        "POWERCONTEXT_HOME": home,
        "POWERCONTEXT_URL": "http://127.0.0.1:7411",
        "POWERCONTEXT_TOKEN": "t",
    }
    assert HookSettings.load("codex", configured, config_path=missing).token == "t"


def test_the_agent_token_file_is_the_default_token(
    runtime_home: Path, isolated_user: Path, missing: str
) -> None:
    (runtime_home / "auth" / "agent-token").write_text("agent-from-home\n")
    (runtime_home / "auth" / "token").write_text("OPERATOR-SENTINEL\n")
    env = {"POWERCONTEXT_HOME": str(runtime_home)}
    assert HookSettings.load("codex", env, config_path=missing).token == "agent-from-home"
    # Without POWERCONTEXT_HOME: the platform data dir, like the runtime.
    data = isolated_user / "data" / "powercontext" / "auth"
    data.mkdir(parents=True)
    (data / "agent-token").write_text("agent-from-data-dir")
    assert HookSettings.load("codex", {}, config_path=missing).token == "agent-from-data-dir"
    explicit = {"POWERCONTEXT_TOKEN": "explicit"}
    assert HookSettings.load("codex", explicit, config_path=missing).token == "explicit"


def test_the_operator_token_is_never_read(runtime_home: Path, missing: str) -> None:
    """Only ``auth/token`` exists (an older runtime, or the agent token was deleted): the hook
    goes without a token rather than take the operator's, which can review."""
    (runtime_home / "auth" / "token").write_text("OPERATOR-SENTINEL\n")
    env = {"POWERCONTEXT_HOME": str(runtime_home)}
    assert HookSettings.load("codex", env, config_path=missing).token is None


@posix_only
def test_a_fifo_as_token_file_or_config_does_not_block(runtime_home: Path, tmp_path: Path) -> None:
    token = runtime_home / "auth" / "agent-token"
    os.mkfifo(token)
    config = tmp_path / "plugins.toml"
    os.mkfifo(config)
    env = {"POWERCONTEXT_HOME": str(runtime_home), "POWERCONTEXT_URL": "http://127.0.0.1:1"}

    done, result = finishes(
        lambda: HookSettings.load("codex", env, config_path=str(tmp_path / "none.toml")), [token]
    )
    assert done and isinstance(result, HookSettings) and result.token is None
    done, result = finishes(
        lambda: HookSettings.load("codex", env, config_path=str(config)), [config]
    )
    assert done and isinstance(result, SettingsError)


@pytest.mark.parametrize(
    "value",
    [
        "git:github.com/acme/pay\u200bments",  # zero-width space
        "git:github.com/acme/\u202epayments",  # right-to-left override
        "team\u2066x\u2069",  # bidi isolates
        "scope\ufeff",  # byte-order mark / zero-width no-break space
        "soft\u00adhyphen",
        "line\u2028separator",
        "paragraph\u2029separator",
        "lone\udc80surrogate",
        "c1\x85control",
        "del\x7f",
    ],
)
def test_invisible_and_bidi_characters_are_refused_in_scope_ids(value: str, missing: str) -> None:
    with pytest.raises(SettingsError):
        check_scope_id(value, "scope_id")
    with pytest.raises(SettingsError):
        HookSettings.load("codex", {"POWERCONTEXT_SCOPE_ID": value}, config_path=missing)


@pytest.mark.parametrize(
    "value", ["git:github.com/Owner/Répo", "团队:支付", "emoji:🚀", "a b", "x" * 256]
)
def test_visible_unicode_is_fine_in_scope_ids(value: str) -> None:
    assert check_scope_id(value, "scope_id") == value


def test_the_platform_config_file_is_read(isolated_user: Path) -> None:
    folder = isolated_user / "config" / "powercontext"
    folder.mkdir()
    (folder / "plugins.toml").write_text('[codex]\nscope_id = "from-toml"\n')
    assert config_file_path() == str(folder / "plugins.toml")
    assert HookSettings.load("codex", {}).scope_id == "from-toml"
    assert HookSettings.load("claude-code", {}).scope_id is None


KEYS = {
    "url": ("http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"),
    "token": ("env-token", "option-token", "toml-token"),
    "scope_id": ("git:env/x", "git:option/x", "git:toml/x"),
    "bootstrap": ("on", "yes", "true"),
    "capture_prompts": ("0", "no", "false"),
    "max_bytes": ("1000", "2000", "3000"),
    "bootstrap_max_bytes": ("1001", "2001", "3001"),
    "deadline_seconds": ("0.5", "1.5", "2.5"),
}
EXPECTED = {
    "bootstrap": (True, True, True),
    "capture_prompts": (False, False, False),
    "max_bytes": (1000, 2000, 3000),
    "bootstrap_max_bytes": (1001, 2001, 3001),
    "deadline_seconds": (0.5, 1.5, 2.5),
}


@pytest.mark.parametrize("key", sorted(KEYS))
def test_precedence_for_every_key(tmp_path: Path, key: str) -> None:
    env_value, option_value, toml_value = KEYS[key]
    expected = EXPECTED.get(key, KEYS[key])
    toml = write_toml(
        tmp_path / "plugins.toml",
        f'[codex]\n{key} = "{toml_value}"\n[claude-code]\n{key} = "{toml_value}"\n',
    )
    env_name, option_name = f"POWERCONTEXT_{key.upper()}", f"CLAUDE_PLUGIN_OPTION_{key.upper()}"

    def load(host: str, env: dict[str, str]) -> object:
        return getattr(HookSettings.load(host, env, config_path=toml), key)

    everything = {env_name: env_value, option_name: option_value}
    assert load("claude-code", everything) == expected[0]
    assert load("claude-code", {option_name: option_value}) == expected[1]
    assert load("claude-code", {}) == expected[2]
    assert load("claude-code", {env_name: "", option_name: "  "}) == expected[2]  # blank = unset
    # Claude Code userConfig variables mean nothing to Codex.
    assert load("codex", {option_name: option_value}) == expected[2]
    assert load("codex", everything) == expected[0]


def test_toml_native_types(tmp_path: Path) -> None:
    toml = write_toml(
        tmp_path / "p.toml",
        "[codex]\nbootstrap = true\ncapture_prompts = false\nmax_bytes = 4000\n"
        "deadline_seconds = 1\n",
    )
    settings = HookSettings.load("codex", {}, config_path=toml)
    assert (settings.bootstrap, settings.capture_prompts) == (True, False)
    assert (settings.max_bytes, settings.deadline_seconds) == (4000, 1.0)


@pytest.mark.parametrize("value", ["1", "0", "TRUE", "False", "Yes", "no", "ON", "off", " on "])
def test_boolean_spellings(value: str, missing: str) -> None:
    settings = HookSettings.load("codex", {"POWERCONTEXT_BOOTSTRAP": value}, config_path=missing)
    assert settings.bootstrap is (value.strip().lower() in ("1", "true", "yes", "on"))


@pytest.mark.parametrize(
    "env",
    [
        {"POWERCONTEXT_BOOTSTRAP": "maybe"},
        {"POWERCONTEXT_CAPTURE_PROMPTS": "2"},
        {"POWERCONTEXT_CAPTURE_PROMPTS": "enabled"},
        {"CLAUDE_PLUGIN_OPTION_BOOTSTRAP": "y"},
        {"POWERCONTEXT_MAX_BYTES": "511"},
        {"POWERCONTEXT_MAX_BYTES": "32769"},
        {"POWERCONTEXT_MAX_BYTES": "8k"},
        {"POWERCONTEXT_BOOTSTRAP_MAX_BYTES": "8193"},
        {"POWERCONTEXT_DEADLINE_SECONDS": "0"},
        {"POWERCONTEXT_DEADLINE_SECONDS": "nan"},
        {"POWERCONTEXT_DEADLINE_SECONDS": "60"},
        {"POWERCONTEXT_URL": "https://127.0.0.1:7411"},
        {"POWERCONTEXT_URL": "http://example.com"},
        {"POWERCONTEXT_URL": "unix:relative.sock"},
        {"POWERCONTEXT_URL": "unix://host/x.sock"},
        {"CLAUDE_PLUGIN_OPTION_URL": "unix:"},
        {"POWERCONTEXT_TOKEN": "has space"},
        {"POWERCONTEXT_TOKEN": "line\nbreak"},
        {"POWERCONTEXT_SCOPE_ID": " leading"},
        {"POWERCONTEXT_SCOPE_ID": "tab\tinside"},
        {"POWERCONTEXT_SCOPE_ID": "x" * 257},
    ],
)
def test_invalid_values_raise_settings_error(env: dict[str, str], missing: str) -> None:
    with pytest.raises(SettingsError):
        HookSettings.load("claude-code", env, config_path=missing)


@pytest.mark.parametrize(
    "text",
    [
        "[codex\nurl = 1",
        "[codex]\ncapture_prompt = true\n",  # a typo is an error, not silently ignored
        "[codex]\nbootstrap = 1\n",
        "[codex]\nmax_bytes = true\n",
        "[codex]\nmax_bytes = 1.5\n",
        "[codex]\nurl = 7411\n",
        "codex = 1\n",
    ],
)
def test_invalid_toml_raises_settings_error(tmp_path: Path, text: str) -> None:
    toml = write_toml(tmp_path / "plugins.toml", text)
    with pytest.raises(SettingsError):
        HookSettings.load("codex", {}, config_path=toml)


def test_other_hosts_tables_and_top_level_keys_are_ignored(tmp_path: Path) -> None:
    toml = write_toml(tmp_path / "p.toml", 'version = 1\n[claude-code]\nfuture_key = "x"\n')
    assert HookSettings.load("codex", {}, config_path=toml).max_bytes == 8000


def test_the_token_never_appears_in_repr(missing: str) -> None:
    settings = HookSettings.load(
        "codex",
        {"POWERCONTEXT_TOKEN": "SECRET-SENTINEL", "POWERCONTEXT_SCOPE_ID": "SCOPE-SENTINEL"},
        config_path=missing,
    )
    assert "SENTINEL" not in repr(settings)


def test_plugin_data_dir(tmp_path: Path, isolated_user: Path) -> None:
    codex, claude = str(tmp_path / "codex-data"), str(tmp_path / "claude-data")
    both = {"PLUGIN_DATA": codex, "CLAUDE_PLUGIN_DATA": claude}
    assert plugin_data_dir("codex", both) == codex
    assert plugin_data_dir("claude-code", both) == claude
    assert plugin_data_dir("claude-code", {"PLUGIN_DATA": codex}) == codex
    state = str(isolated_user / "state" / "powercontext")
    assert plugin_data_dir("codex", {}) == f"{state}/codex"
    assert plugin_data_dir("codex", {"PLUGIN_DATA": "relative"}) == f"{state}/codex"
    # Never inside the plugin root, which the host replaces on every update.
    root = tmp_path / "plugin-root"
    inside = {"PLUGIN_ROOT": str(root), "PLUGIN_DATA": str(root / "data")}
    assert plugin_data_dir("codex", inside) == f"{state}/codex"
    claude_inside = {"CLAUDE_PLUGIN_ROOT": str(root), "CLAUDE_PLUGIN_DATA": str(root)}
    assert plugin_data_dir("claude-code", claude_inside) == f"{state}/claude-code"


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": "/home/alice"},
        {
            "HOME": "/home/alice",
            "XDG_CONFIG_HOME": "/x/conf",
            "XDG_DATA_HOME": "/x/data",
            "XDG_STATE_HOME": "/x/state",
        },
        {"HOME": "/home/alice", "XDG_CONFIG_HOME": "relative/conf", "XDG_DATA_HOME": " /x"},
        {"HOME": "/home/alice", "XDG_DATA_HOME": ""},
        {"HOME": "relative-home"},
        {"XDG_STATE_HOME": "/x/state"},
    ],
)
@pytest.mark.parametrize("kind", ["config", "data", "state"])
def test_user_dirs_agree_with_platformdirs(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kind: str
) -> None:
    """The hook's fast path and the runtime (which uses platformdirs) must name the same files."""
    import platformdirs

    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = getattr(platformdirs, f"user_{kind}_dir")("powercontext")
    assert user_dir(kind) == expected  # type: ignore[arg-type]


def test_install_bootstrap_is_the_lowest_layer(tmp_path: Path, missing: str) -> None:
    """``install --bootstrap`` switches bootstrap on; every layer a user sets still wins."""
    on = {"bootstrap": True}
    assert HookSettings.load("codex", {}, config_path=missing, installed=on).bootstrap is True
    assert HookSettings.load("codex", {}, config_path=missing).bootstrap is False
    table = write_toml(tmp_path / "plugins.toml", "[codex]\nbootstrap = false\n")
    assert HookSettings.load("codex", {}, config_path=table, installed=on).bootstrap is False
    off = {"POWERCONTEXT_BOOTSTRAP": "0"}
    assert HookSettings.load("codex", off, config_path=missing, installed=on).bootstrap is False
    option = {"CLAUDE_PLUGIN_OPTION_BOOTSTRAP": "false"}
    loaded = HookSettings.load("claude-code", option, config_path=missing, installed=on)
    assert loaded.bootstrap is False
