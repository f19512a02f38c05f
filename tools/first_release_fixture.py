"""Rebuild the first release's databases that the upgrade tests start from.

``tests/runtime/test_first_release_upgrade.py`` starts today's daemon on a data dir the first
release (commit ``e16e814``) made, on both backends. This script makes those databases *with
the first release's own code*: it extracts that commit (``git archive``, nothing in the work
tree changes), runs a short scenario with its ``runtime/src`` on ``PYTHONPATH`` (its
``Runtime.open`` and ``ensure_local_token``: what its ``powercontext serve`` did at start-up,
then remember, revise, a narrowed ``token create``, two proposals and one approval), and
writes what the scenario left, compactly and deterministically (the scenario's random ids,
secrets and clock are fixed counters), to ``tests/support/first_release/``:

* ``sqlite.sql``: the SQLite database's ``.dump`` (the ``sqlite3`` shell's);
* ``oceanbase.sql``: every table's ``SHOW CREATE TABLE`` on seekdb and its rows as
  ``INSERT`` statements — the first release supported OceanBase, so its schema is its own
  SQLAlchemy metadata created there, not a translation;
* ``manifest.json``: the tokens (a fixture's, never a real secret) and what the scenario
  wrote (citations, texts, candidates), which the test checks after the upgrade.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python tools/first_release_fixture.py            # starts a throwaway seekdb
    .venv/bin/python tools/first_release_fixture.py --oceanbase-url mysql+pymysql://…/db
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from contextlib import ExitStack
from io import BytesIO
from pathlib import Path
from typing import Any

FIRST_RELEASE = "e16e814"
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "support" / "first_release"

#: Runs inside the first release's code: argv = data dir, database URL; prints the manifest.
SCENARIO = r"""
import itertools, json, secrets, sys, time
from pathlib import Path

_clock = itertools.count(1_767_225_600_000, 7)  # ms since the epoch: 2026-01-01, +7 ms a call
time.time = lambda: next(_clock) / 1000
_ids = itertools.count(1)
secrets.token_hex = lambda nbytes=32: format(next(_ids), "x").rjust(2 * nbytes, "0")
secrets.token_urlsafe = lambda nbytes=32: f"first-release-fixture-{next(_ids):04d}".ljust(43, "x")

from powercontext_runtime.composition import Runtime
from powercontext_runtime.contract.common import ArtifactRef
from powercontext_runtime.contract.memory import RememberMemoryRequest, ReviseMemoryEntryRequest
from powercontext_runtime.contract.review import (
    ApproveCandidateRequest, ExperienceProposal, ProposeExperienceRequest,
)
from powercontext_runtime.settings import Settings

SCOPE = "git:example.com/acme/api"
home, url = Path(sys.argv[1]), sys.argv[2]
rt = Runtime.open(Settings.load(env={}, home=home, database_url=url))
try:
    rt.ensure_local_token()  # what its serve did at start-up: auth/token
    ci = rt.tokens.create("ci", ["git:example.com/acme/*"])
    first = rt.memory.remember(RememberMemoryRequest(
        scope_id=SCOPE, kind="fact", text="Deploys go through the blue green switch.",
        tags=["deploy"],
    ))
    second = rt.memory.remember(RememberMemoryRequest(
        scope_id=SCOPE, kind="procedure", text="Rotate the signing keys every month.",
    ))
    revised = rt.memory.revise(ReviseMemoryEntryRequest(
        scope_id=SCOPE, citation=second.entry.citation,
        text="Rotate the signing keys on the first Monday of every month.",
    ))
    revision = revised.memory.revision
    evidence = [ArtifactRef(family="memory", artifact_id="memory", revision=revision)]
    def propose(lesson):
        return rt.review.propose_experience(ProposeExperienceRequest(
            scope_id=SCOPE, artifact_refs=evidence, proposal=ExperienceProposal(
                situation="A release needed new keys.", action="Rotated them early.",
                outcome="Nothing broke.", lesson=lesson,
            ),
        ))
    approved = propose("Rotate keys before a release, not during it.")
    rt.review.approve(ApproveCandidateRequest(
        scope_id=SCOPE, candidate_id=approved.candidate_id, expected_version=approved.version,
    ))
    pending = propose("Keep the previous key valid for a day.")
    print(json.dumps({
        "release": sys.argv[3],
        "scope_id": SCOPE,
        "operator_token": (home / "auth" / "token").read_text().strip(),
        "ci_token": ci,
        "entries": [
            {"citation": e.entry.citation.model_dump(mode="json"), "text": e.entry.text}
            for e in (first, revised)
        ],
        "superseded": second.entry.citation.model_dump(mode="json"),
        "memory_revision": revised.memory.revision,
        "approved_candidate": approved.candidate_id,
        "pending_candidate": pending.candidate_id,
        "pending_version": pending.version,
    }))
finally:
    rt.close()
"""


def extract_first_release(into: Path) -> Path:
    """The first release's tree under ``into`` (``git archive``: the work tree is untouched)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", FIRST_RELEASE, "runtime/src"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "runtime" / "src"


def run_scenario(source: Path, home: Path, url: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERCONTEXT_")}
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(source)!r})" + SCENARIO,
         str(home), url, FIRST_RELEASE],
        capture_output=True, text=True, env=env, cwd=home.parent, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the first release's scenario failed:\n{done.stderr[-4000:]}")
    manifest: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return manifest


def dump_sqlite(path: Path) -> str:
    """The ``sqlite3`` shell's ``.dump``: unlike Python's ``iterdump`` it handles the
    contentless FTS5 tables (their definition through ``writable_schema``, their data as the
    shadow tables' rows). Load it with ``executescript`` and reconnect."""
    shell = shutil.which("sqlite3")
    if shell is None:
        raise SystemExit("the sqlite3 shell is needed (apt-get install sqlite3)")
    return subprocess.run(
        [shell, str(path), ".dump"], capture_output=True, text=True, check=True
    ).stdout


def dump_oceanbase(url: str) -> str:
    """Each table's own DDL as the server reports it, then its rows, in name order."""
    import pymysql
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    conn = pymysql.connect(
        host=parsed.host,
        port=parsed.port or 3306,
        user=parsed.username,
        password=parsed.password or "",
        database=parsed.database,
    )
    lines = []
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW FULL TABLES WHERE Table_type = 'BASE TABLE'")
            names = sorted(row[0] for row in cur.fetchall())
            for name in names:
                cur.execute(f"SHOW CREATE TABLE `{name}`")
                lines.append(cur.fetchone()[1].strip() + ";")
            for name in names:
                cur.execute(f"SELECT * FROM `{name}`")
                columns = ", ".join(f"`{d[0]}`" for d in cur.description)
                for row in sorted(cur.fetchall(), key=repr):
                    values = ", ".join(conn.escape(value) for value in row)
                    lines.append(f"INSERT INTO `{name}` ({columns}) VALUES ({values});")
    finally:
        conn.close()
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oceanbase-url", help="an empty database's URL (else seekdb starts)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pc-first-")))
        source = extract_first_release(work / "release")
        sqlite_file = work / "sqlite-home" / "powercontext.db"
        manifest = run_scenario(source, work / "sqlite-home", f"sqlite:///{sqlite_file}")
        url = args.oceanbase_url
        if url is None:
            sys.path.insert(0, str(ROOT))
            from tools.seekdb import SeekdbServer

            url = stack.enter_context(SeekdbServer(database="first_release")).url
        oceanbase = run_scenario(source, work / "oceanbase-home", url)
        if oceanbase != manifest:  # the same scenario, the same counters: the same ids
            raise SystemExit("the two backends' scenarios differ")
        (OUT / "sqlite.sql").write_text(dump_sqlite(sqlite_file), encoding="utf-8")
        (OUT / "oceanbase.sql").write_text(dump_oceanbase(url), encoding="utf-8")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}/{{sqlite.sql,oceanbase.sql,manifest.json}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
