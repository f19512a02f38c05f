"""The console's two languages say the same things: every key in both, with the same
placeholders, and every key app.js names literally is defined."""

from __future__ import annotations

import re
from pathlib import Path

import powercontext_runtime.http as http_package

CONSOLE = Path(http_package.__file__).parent / "console"
ENTRY = re.compile(r'^\s*"([a-z0-9_.]+)":\s*"((?:[^"\\]|\\.)*)",?\s*$')


def dictionaries() -> dict[str, dict[str, str]]:
    languages: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in (CONSOLE / "i18n.js").read_text(encoding="utf-8").splitlines():
        opened = re.match(r"^\s*(en|zh):\s*\{\s*$", line)
        if opened:
            current = languages.setdefault(opened.group(1), {})
            continue
        found = ENTRY.match(line)
        if found and current is not None:
            assert found.group(1) not in current, f"{found.group(1)} twice"
            current[found.group(1)] = found.group(2)
    return languages


def test_english_and_chinese_have_the_same_keys_and_placeholders() -> None:
    found = dictionaries()
    assert set(found) == {"en", "zh"}
    en, zh = found["en"], found["zh"]
    assert len(en) > 300
    assert sorted(set(en) ^ set(zh)) == []
    for key, text in en.items():
        wanted = sorted(re.findall(r"\{(\w+)\}", text))
        assert sorted(re.findall(r"\{(\w+)\}", zh[key])) == wanted, key


def test_every_key_app_js_names_is_defined() -> None:
    en = dictionaries()["en"]
    source = (CONSOLE / "app.js").read_text(encoding="utf-8")
    named = set(re.findall(r'\bt\("([a-z0-9_.]+)"\s*[,)]', source))  # not t("x." + y)
    assert {"review.revise", "review.revise.save", "evidence.memory"} <= named
    assert sorted(named - set(en)) == []
