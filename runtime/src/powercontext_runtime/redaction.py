"""Secrets out of agent-written text before it is stored: pure functions, no I/O.

A task result carries what an agent's host saw: commands, their output, file paths. Those
routinely hold credentials (``export GITHUB_TOKEN=…``, a failing ``curl -H "Authorization: …"``,
a test printing a connection URL), and what the runtime stores it serves back, exports and
shows in the console. So every free-text field of a task result goes through :func:`redact`
before storage, and only the result is ever kept (not even a hash of the original).

The rules, applied in this order (each replaces only the secret, keeping what names it, so a
reader still sees *that* a secret was there — ``PASSWORD=[REDACTED]``):

1. private-key blocks (``-----BEGIN … PRIVATE KEY-----`` to its ``END`` line, or to the end of
   the text when the block was cut off; base64 lines right before an ``END`` line whose
   ``BEGIN`` was cut off);
2. ``Authorization:`` / ``Proxy-Authorization:`` header values (the scheme word is kept);
3. passwords in URLs (``scheme://user:[REDACTED]@host``);
4. assignments and options whose name *ends* in a secret word — password, passwd, passphrase,
   secret, token, api key, access key, secret key, private key, credential(s) — in
   ``NAME=value``, ``NAME: value``, ``"name": "value"`` and ``--name value`` forms
   (``max_tokens=5`` and ``PASSWORD_FILE=…`` do not end in one and are kept);
5. tokens of well-known shapes anywhere: OpenAI/Anthropic ``sk-…``, GitHub ``ghp_…`` and
   ``github_pat_…``, GitLab ``glpat-…``, Slack ``xox?-…``, AWS access key ids ``AKIA…`` /
   ``ASIA…``, Google ``AIza…``, Stripe ``sk_live_…``, npm ``npm_…``, PowerContext
   ``pc_<id>_<secret>`` and JWTs.

Limits (docs/decisions/task-results.md): a secret in none of these shapes — a bare password on
a line of its own, a high-entropy string with no name — is kept; the rules prefer redacting a
harmless value that *looks* named like a secret over keeping a real one. :func:`redact` is
idempotent: its output redacts to itself with a count of 0.
"""

from __future__ import annotations

import re

__all__ = ["MARK", "redact"]

#: What a secret is replaced by.
MARK = "[REDACTED]"

_PEM_LABEL = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?"
_PEM_BLOCK = re.compile(
    rf"(-----BEGIN {_PEM_LABEL}-----)(.*?)(-----END {_PEM_LABEL}-----|\Z)", re.S
)
#: The base64 lines before an END line whose BEGIN is not in the text (an output tail).
_PEM_ORPHAN = re.compile(rf"((?:^[A-Za-z0-9+/=]+[ \t]*\r?\n)+)(-----END {_PEM_LABEL}-----)", re.M)

_AUTHORIZATION = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?:((?:bearer|basic|token|digest|negotiate|bot)[ \t]+))?"
    r"([^\s\"'\\][^\r\n\"'\\]*)"
)

_URL_PASSWORD = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"'<>]*:)([^\s@/\"'<>]+)(@)")

_SECRET_WORD = (
    r"(?:passw(?:or)?d|passphrase|secret|token|api[_-]?key|access[_-]?key|"
    r"secret[_-]?key|private[_-]?key|credentials?)"
)
_VALUE = r"(?:\"([^\"\r\n]*)\"|'([^'\r\n]*)'|([^\s\"',;=][^\s\"',;]*))"
#: ``NAME=value``, ``NAME: value``, ``"name": "value"``, ``NAME => value``; the name ends in a
#: secret word (a name is letters, digits and ``_ . -``, so ``--token=x`` is one too).
_ASSIGNMENT = re.compile(
    rf"(?i)(?<![A-Za-z0-9_.-])([A-Za-z0-9_.-]*{_SECRET_WORD}[\"']?[ \t]*(?:=>|=|:)[ \t]*)" + _VALUE
)
#: ``--password value`` (a value that is not itself an option).
_OPTION = re.compile(rf"(?i)(?<![A-Za-z0-9_-])(--?[A-Za-z0-9-]*{_SECRET_WORD}[ \t]+)(?!-)" + _VALUE)

_TOKENS = re.compile(
    "|".join(
        (
            r"\bsk-[A-Za-z0-9_-]{16,}",
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
            r"\bAIza[A-Za-z0-9_-]{35,}",
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
            r"\bnpm_[A-Za-z0-9]{36,}",
            r"\bpc_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        )
    )
)


def redact(text: str) -> tuple[str, int]:
    """``text`` with every secret the rules find replaced by :data:`MARK`, and how many."""
    count = 0

    def pem(match: re.Match[str]) -> str:
        nonlocal count
        if match[2] == MARK:
            return match[0]
        count += 1
        return match[1] + MARK + match[3]

    def orphan(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return MARK + "\n" + match[2]

    def authorization(match: re.Match[str]) -> str:
        nonlocal count
        value = match[3].rstrip()
        if value == MARK:
            return match[0]
        count += 1
        return match[1] + (match[2] or "") + MARK + match[3][len(value) :]

    def url(match: re.Match[str]) -> str:
        nonlocal count
        if match[2] == MARK:
            return match[0]
        count += 1
        return match[1] + MARK + match[3]

    def named(match: re.Match[str]) -> str:
        nonlocal count
        double, single, bare = match[2], match[3], match[4]
        value = next(v for v in (double, single, bare) if v is not None)
        if value in ("", MARK):
            return match[0]
        count += 1
        quote = '"' if double is not None else "'" if single is not None else ""
        return match[1] + quote + MARK + quote

    def token(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return MARK

    text = _PEM_BLOCK.sub(pem, text)
    text = _PEM_ORPHAN.sub(orphan, text)
    text = _AUTHORIZATION.sub(authorization, text)
    text = _URL_PASSWORD.sub(url, text)
    text = _ASSIGNMENT.sub(named, text)
    text = _OPTION.sub(named, text)
    text = _TOKENS.sub(token, text)
    return text, count
