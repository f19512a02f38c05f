"""The redaction rules (runtime/redaction.py): every kind of secret the task-result contract
names is replaced, what names it is kept, ordinary text is untouched, and redacting twice
changes nothing. Pure: no runtime, no database.

Every secret below is a sentinel: a value of the secret's real shape that contains
``SENTINEL`` (or, where the shape allows no such letters, a fixed unique value listed in
:data:`SENTINELS`), so a test elsewhere can search storage, exports and logs for it.
"""

from __future__ import annotations

import pytest

from powercontext_runtime.redaction import MARK, redact

#: (text holding one secret, the secret, what the redacted text must be)
CASES: list[tuple[str, str, str]] = [
    # Tokens and keys of well-known shapes, anywhere in the text.
    ("key sk-proj-SENTINELopenai0123456789 used", "sk-proj-SENTINELopenai0123456789",
     f"key {MARK} used"),
    ("sk-ant-api03-SENTINELanthropic01234567", "sk-ant-api03-SENTINELanthropic01234567", MARK),
    ("push with ghp_SENTINELgithub0123456789abcdef", "ghp_SENTINELgithub0123456789abcdef",
     f"push with {MARK}"),
    ("github_pat_11SENTINEL_finegrained0123456789", "github_pat_11SENTINEL_finegrained0123456789",
     MARK),
    ("glpat-SENTINELgitlab012345678", "glpat-SENTINELgitlab012345678", MARK),
    ("slack xoxb-1234-SENTINEL-slackbot", "xoxb-1234-SENTINEL-slackbot", f"slack {MARK}"),
    ("aws AKIAZ7SENTINEL5QXYZW ok", "AKIAZ7SENTINEL5QXYZW", f"aws {MARK} ok"),
    ("AIzaSENTINELgoogle0123456789abcdefghijklm", "AIzaSENTINELgoogle0123456789abcdefghijklm",
     MARK),
    ("sk_live_SENTINELstripe012345", "sk_live_SENTINELstripe012345", MARK),
    ("npm_SENTINELnpm0123456789abcdefghijklmnopq", "npm_SENTINELnpm0123456789abcdefghijklmnopq",
     MARK),
    ("token pc_0a1b2c3d4e5f_SENTINELpowercontext01234567",
     "pc_0a1b2c3d4e5f_SENTINELpowercontext01234567", f"token {MARK}"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTRU5USU5FTCJ9.SENTINELsignature0",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJTRU5USU5FTCJ9.SENTINELsignature0", f"jwt {MARK}"),
    # Passwords, secrets, tokens and keys in assignments and options: the name is kept.
    ("export DB_PASSWORD=SENTINEL-pw1 && make", "SENTINEL-pw1",
     f"export DB_PASSWORD={MARK} && make"),
    ('PASSWORD="SENTINEL pw with spaces" ./run', "SENTINEL pw with spaces",
     f'PASSWORD="{MARK}" ./run'),
    ("api_key: SENTINEL-yaml-key", "SENTINEL-yaml-key", f"api_key: {MARK}"),
    ('{"client_secret": "SENTINEL-json-secret"}', "SENTINEL-json-secret",
     f'{{"client_secret": "{MARK}"}}'),
    ("GITHUB_TOKEN='SENTINEL-single'", "SENTINEL-single", f"GITHUB_TOKEN='{MARK}'"),
    ("aws_secret_access_key = SENTINEL/aws+secret", "SENTINEL/aws+secret",
     f"aws_secret_access_key = {MARK}"),
    ("mysql -u root --password SENTINEL-opt -e 'select 1'", "SENTINEL-opt",
     f"mysql -u root --password {MARK} -e 'select 1'"),
    ("deploy --api-key=SENTINEL-eq", "SENTINEL-eq", f"deploy --api-key={MARK}"),
    # Authorization headers: the scheme is kept.
    ('curl -H "Authorization: Bearer SENTINEL.bearer" https://api', "SENTINEL.bearer",
     f'curl -H "Authorization: Bearer {MARK}" https://api'),
    ("authorization: Basic U0VOVElORUw6cGFzcw==", "U0VOVElORUw6cGFzcw==",
     f"authorization: Basic {MARK}"),
    ("Proxy-Authorization: SENTINEL-raw-credential\nnext", "SENTINEL-raw-credential",
     f"Proxy-Authorization: {MARK}\nnext"),
    # Passwords in URLs: the user and host are kept.
    ("postgres://shop:SENTINEL-url-pw@db:5432/shop", "SENTINEL-url-pw",
     f"postgres://shop:{MARK}@db:5432/shop"),
    # Private-key blocks, whole or cut off at either end (an output tail).
    ("x\n-----BEGIN RSA PRIVATE KEY-----\nMIIESENTINELrsa0\nAAAA\n-----END RSA PRIVATE KEY-----\ny",
     "MIIESENTINELrsa0",
     f"x\n-----BEGIN RSA PRIVATE KEY-----{MARK}-----END RSA PRIVATE KEY-----\ny"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaSENTINELcut", "b3BlbnNzaSENTINELcut",
     f"-----BEGIN OPENSSH PRIVATE KEY-----{MARK}"),
    ("SENTINELorphan0base64\nQUJD\n-----END PRIVATE KEY-----\ndone", "SENTINELorphan0base64",
     f"{MARK}\n-----END PRIVATE KEY-----\ndone"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQSENTINELpgp\n-----END PGP PRIVATE KEY BLOCK-----",
     "lQSENTINELpgp",
     f"-----BEGIN PGP PRIVATE KEY BLOCK-----{MARK}-----END PGP PRIVATE KEY BLOCK-----"),
]  # fmt: skip

#: Every secret of :data:`CASES` (the sentinels other tests search storage and logs for).
SENTINELS = [secret for _, secret, _ in CASES]

#: Ordinary text from tasks: none of it may change.
ORDINARY = [
    "212 passed, 3 skipped in 9.84s",
    "Add a route for order refunds and keep the OpenAPI document in step",
    "src/shop/routes/refunds.py:12: error: Incompatible return value type",
    "max_tokens=512 temperature=0.2",
    "PASSWORD_FILE=/run/secrets/db make migrate",
    "the tokenizer splits tokens: words, numbers",
    "if token == expected: return",
    "https://github.com/acme/shop/pull/42 and http://localhost:8080/health",
    "git push origin HEAD:refs/for/main",
    "see docs/security.md § Secrets; the [REDACTED] marker is ours",
    "日本語のテスト: 成功",
    "",
]


@pytest.mark.parametrize(("text", "secret", "expected"), CASES)
def test_each_kind_of_secret_is_replaced_and_what_names_it_kept(
    text: str, secret: str, expected: str
) -> None:
    redacted, count = redact(text)
    assert redacted == expected
    assert count == 1
    assert secret not in redacted and "SENTINEL" not in redacted


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert redact(text) == (text, 0)


def test_redacting_twice_changes_nothing() -> None:
    for text, _, _ in CASES:
        once, _ = redact(text)
        assert redact(once) == (once, 0), text
    # All of them in one text (a cut-off key block then runs to the next END line: one).
    once, _ = redact("\n".join(text for text, _, _ in CASES))
    assert redact(once) == (once, 0)
    assert not any(secret in once for secret in SENTINELS)


def test_several_secrets_in_one_text_are_each_counted() -> None:
    text = (
        "DB_PASSWORD=SENTINEL-a curl -H 'Authorization: token SENTINEL-b' "
        "ghp_SENTINELc0123456789abcdefgh"
    )
    redacted, count = redact(text)
    assert count == 3 and "SENTINEL" not in redacted
