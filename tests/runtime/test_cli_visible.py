"""``cli.output.visible``: what the terminal shows is what is stored (issue 30).

The rendering is checked as a code: every stored string decodes back from what is shown (so a
shown ``\\x1b`` can only be a stored ESC, and a stored backslash-x-1-b shows differently), and
nothing shown is a character a terminal acts on or hides. The plugins' copy of the rules
(``powercontext_hook_kit.terminal``) must give the same output for the same input.
"""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from powercontext_hook_kit import terminal
from powercontext_runtime.cli.main import main as cli_main
from powercontext_runtime.cli.output import field_lines, json_text, visible

#: Characters that matter here, mixed with ordinary ones so escapes and backslashes meet.
_TRICKY = "\\xuUntr0123456789abcdefAB \n\r\t\x00\x07\x1b\x7f\x85\x9b\u00a0\u061c\u200b\u200c"
_TRICKY += "\u200d\u200e\u200f\u2028\u2029\u202a\u202e\u2066\u2069\ufeff\U000e0041é中😀\ud800"
TEXT = st.text(alphabet=st.sampled_from(_TRICKY) | st.characters(), max_size=40)
_UNESCAPE = {"n": "\n", "t": "\t", "r": "\r"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def decode(shown: str) -> str:
    """What a reader takes from shown text by the documented rule (docs/security.md)."""
    out: list[str] = []
    index = 0
    while index < len(shown):
        ch, after = shown[index], shown[index + 1 : index + 2]
        if ch != "\\" or after == "":
            out.append(ch)
            index += 1
        elif after == "\\":
            out.append("\\")
            index += 2
        elif after in _UNESCAPE:
            out.append(_UNESCAPE[after])
            index += 2
        elif after in _HEX_DIGITS:
            digits = _HEX_DIGITS[after]
            out.append(chr(int(shown[index + 2 : index + 2 + digits], 16)))
            index += 2 + digits
        else:  # any other backslash is itself
            out.append("\\")
            index += 1
    return "".join(out)


def _acts_on_terminal(ch: str) -> bool:
    return unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"} and ch not in "\u200c\u200d"


@given(TEXT)
def test_what_is_shown_decodes_to_what_is_stored(text: str) -> None:
    for multiline in (False, True):
        shown = visible(text, multiline=multiline)
        assert decode(shown) == text
        hidden = [ch for ch in shown if _acts_on_terminal(ch)]
        assert hidden == (["\n"] * text.count("\n") if multiline else []), (text, shown)


@given(TEXT)
def test_the_plugins_render_exactly_like_the_runtime_cli(text: str) -> None:
    for multiline in (False, True):
        assert terminal.visible(text, multiline=multiline) == visible(text, multiline=multiline)
    document = {"k": text, "list": [text, 1]}
    assert terminal.json_text(document, indent=2) == json_text(document, indent=2)


@given(TEXT)
def test_json_output_is_exact_and_terminal_safe(text: str) -> None:
    for indent in (None, 2):
        shown = json_text({"text": text}, indent=indent)
        assert json.loads(shown) == {"text": text}
        assert not [ch for ch in shown if _acts_on_terminal(ch) and ch != "\n"], shown


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("sh\r\x1b[2K  action: x", r"sh\r\x1b[2K  action: x"),
        ("\x9b31m\x07\x1b]52;c;aGk=\x07\x7f", r"\x9b31m\x07\x1b]52;c;aGk=\x07\x7f"),
        ("a\u202eb\u2066c\u2069\u200e\u200f\u061c", r"a\u202eb\u2066c\u2069\u200e\u200f\u061c"),
        ("x\u2028y\u2029z\x85", r"x\u2028y\u2029z\x85"),
        ("tab\tnew\nline", r"tab\tnew\nline"),
        ("\U000e0041\ud800", r"\U000e0041\ud800"),
        # a backslash stays itself unless it could read as an escape
        (r"C:\dev\d+", r"C:\dev\d+"),
        (r"C:\new \x1b \\", "C:\\\\new \\\\x1b \\\\\\"),  # the last one is single
        ("\\\x1b", r"\\\x1b"),
        ("中文 café 👨‍👩‍👧 a\u00a0b", "中文 café 👨‍👩‍👧 a\u00a0b"),
    ],
)
def test_the_notation(stored: str, shown: str) -> None:
    assert visible(stored) == shown


def test_multi_line_fields_break_only_at_newlines_and_stay_indented() -> None:
    value = "first\r\x1b[2Kfake: field\nsecond\u2028third\n  x: y"
    assert field_lines("action", value) == [
        "  action:",
        r"    first\r\x1b[2Kfake: field",
        r"    second\u2028third",
        "      x: y",
    ]


def test_kind_is_documented_as_free_form(capsys: pytest.CaptureFixture[str]) -> None:
    """Kinds are an open set (spec 02): ``--kind nosuchkind`` is accepted on purpose, and the
    help says so instead of leaving it to be found out."""
    for verb in ("remember", "revise"):
        with pytest.raises(SystemExit):
            cli_main(["memory", verb, "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        assert "free-form, any 1..128 characters (not checked against a list)" in help_text
        assert "fact, preference, decision, constraint, convention, working_note" in help_text
