"""Operator verbs that work on the configured database directly: token, reindex, compact,
doctor."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..contract.capabilities import AGENT_CAPABILITIES, ALL_CAPABILITIES
from ..contract.common import check_scope_pattern
from ..errors import PowerContextError
from ..settings import Settings, read_token_file
from .output import compaction_pending, emit, visible
from .progress import Progress

if TYPE_CHECKING:
    from ..composition import Runtime
    from ..contract.system import EmbeddingStatus


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    db_args = argparse.ArgumentParser(add_help=False)
    db_args.add_argument("--data-dir", dest="home", help="data directory (POWERCONTEXT_HOME)")
    db_args.add_argument("--database-url", help="override POWERCONTEXT_DATABASE_URL")

    token = sub.add_parser("token", help="create, list and revoke API tokens")
    verbs = token.add_subparsers(dest="verb", required=True, metavar="VERB")
    p = verbs.add_parser(
        "create", help="create a token (the secret is printed once)", parents=[common, db_args]
    )
    p.add_argument("--name", required=True)
    p.add_argument(
        "--scope",
        action="append",
        required=True,
        dest="scopes",
        help="exact scope id or trailing-* prefix (repeatable)",
    )
    p.add_argument(
        "--capability",
        action="append",
        dest="capabilities",
        choices=ALL_CAPABILITIES,
        help=(
            "what the token may do (repeatable; default: "
            + ", ".join(AGENT_CAPABILITIES)
            + " — an agent's share; add review for a person who approves proposals)"
        ),
    )
    p.set_defaults(handler=_token_create)
    p = verbs.add_parser(
        "list", help="list tokens (never their secrets)", parents=[common, db_args]
    )
    p.set_defaults(handler=_token_list)
    p = verbs.add_parser("revoke", help="revoke a token by name", parents=[common, db_args])
    p.add_argument("name")
    p.set_defaults(handler=_token_revoke)

    p = sub.add_parser(
        "reindex", help="rebuild the derived search index", parents=[common, db_args]
    )
    p.add_argument(
        "--embeddings",
        action="store_true",
        help=(
            "also embed every active entry version that has no vector for the configured "
            "model (the semantic channel, POWERCONTEXT_EMBEDDINGS); a progress bar on a TTY"
        ),
    )
    p.set_defaults(handler=_reindex)

    p = sub.add_parser(
        "compact",
        help="merge what a bulk load left in the search index (OceanBase: a major compaction)",
        description=(
            "After an import, a migration or a reindex, bring the full-text index to its "
            "fastest state now instead of waiting for the server. SQLite: merge every FTS5 "
            "segment (the daemon also does this, a step at a time). OceanBase: start a major "
            "compaction of the tenant (ALTER SYSTEM privilege; it rewrites every table of "
            "the tenant and loads the server meanwhile) and wait for it."
        ),
        parents=[common, db_args],
    )
    p.add_argument(
        "--wait",
        type=_seconds,
        default=3600.0,
        metavar="SECONDS",
        help="OceanBase: wait at most this long (default 3600; 0 starts it and returns); the "
        "server finishes a compaction it started either way",
    )
    p.set_defaults(handler=_compact)

    p = sub.add_parser(
        "doctor", help="check the daemon, the database and the token", parents=[common, db_args]
    )
    p.set_defaults(handler=_doctor)


def _open(args: argparse.Namespace) -> Runtime:
    from ..composition import Runtime  # the database stack loads only for these verbs

    settings = Settings.load(home=args.home, database_url=args.database_url)
    return Runtime.open(settings)


def _token_create(args: argparse.Namespace) -> int:
    for pattern in args.scopes:
        try:
            check_scope_pattern(pattern)
        except ValueError as exc:
            raise PowerContextError(
                f"{exc} (scope patterns are exact ids or end with a single trailing *)",
                code="invalid_request",
            ) from None
    # Listed in the documented order, each once.
    wanted = set(args.capabilities or AGENT_CAPABILITIES)
    capabilities = [c for c in ALL_CAPABILITIES if c in wanted]
    runtime = _open(args)
    try:
        secret = runtime.tokens.create(args.name, args.scopes, capabilities)
    finally:
        runtime.close()
    emit(
        {"name": args.name, "token": secret, "scopes": args.scopes, "capabilities": capabilities},
        as_json=args.json,
        human=(
            f"{secret}\n(shown once; grants: {', '.join(visible(s) for s in args.scopes)}; "
            f"may: {', '.join(capabilities)})"
        ),
    )
    return 0


def _token_list(args: argparse.Namespace) -> int:
    runtime = _open(args)
    try:
        infos = runtime.tokens.list()
    finally:
        runtime.close()
    rows = [
        {
            "name": i.name,
            "token_id": i.token_id,
            "scopes": list(i.scopes),
            "capabilities": list(i.capabilities),
            "created_at": datetime.fromtimestamp(i.created_at / 1000, UTC).isoformat(),
            "revoked": i.revoked,
        }
        for i in infos
    ]
    human = (
        "\n".join(
            f"{visible(r['name'])}  {', '.join(visible(s) for s in r['scopes'])}  "
            f"[{', '.join(r['capabilities'])}]"
            f"{'  (revoked)' if r['revoked'] else ''}"
            for r in rows
        )
        or "no tokens"
    )
    emit(rows, as_json=args.json, human=human)
    return 0


def _token_revoke(args: argparse.Namespace) -> int:
    runtime = _open(args)
    try:
        runtime.tokens.revoke(args.name)
    finally:
        runtime.close()
    emit(
        {"name": args.name, "revoked": True},
        as_json=args.json,
        human=f"revoked {visible(args.name)}",
    )
    return 0


def _reindex(args: argparse.Namespace) -> int:
    runtime = _open(args)
    try:
        counts = runtime.reindex()
        embedded = rebuilt = None
        if getattr(args, "embeddings", False):
            embedded = runtime.backfill_embeddings(Progress(sys.stderr, quiet=args.json))
            if embedded and runtime.semantic is not None and runtime.semantic.rebuilds_index:
                if not args.json:
                    # Online, but long at scale (14 min at 100k vectors on 2 cores): say so.
                    print(
                        "asking the database server to rebuild its vector index (online;"
                        " minutes at 100k entries)",
                        file=sys.stderr,
                        flush=True,
                    )
                rebuilt = runtime.semantic.rebuild_index()
    finally:
        runtime.close()
    human = "rebuilt the search indexes: " + ", ".join(
        f"{count} {name}" for name, count in counts.items()
    )
    result: dict[str, object] = {"indexed": counts}
    if embedded is not None:
        result["embedded"] = embedded
        human += f"; embedded {embedded} entry versions"
    if rebuilt is not None:
        result["vector_index_seconds"] = round(rebuilt, 1)
        human += f"; vector index checked and rebuilt if needed in {rebuilt:.1f} s"
    if any(counts.values()):
        human += compaction_pending(runtime.backend)
    emit(result, as_json=args.json, human=human)
    return 0


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 <= seconds <= 7 * 24 * 3600:
        raise argparse.ArgumentTypeError("seconds must be between 0 and 604800")
    return seconds


def _compact(args: argparse.Namespace) -> int:
    runtime = _open(args)
    try:
        if runtime.backend == "oceanbase" and not args.json:
            print(
                "asking the database server for a major compaction (it rewrites every table"
                " of the tenant; seconds to minutes)",
                file=sys.stderr,
                flush=True,
            )
        done = runtime.compact_storage(args.wait)
    finally:
        runtime.close()
    if done.backend == "sqlite":
        human = (
            f"merged the full-text index in {done.merge_steps} steps ({done.seconds:.1f} s)"
            if done.merge_steps
            else "the full-text index was already merged"
        )
    elif done.finished:
        human = f"the server finished its major compaction in {done.seconds:.1f} s"
    else:
        human = (
            f"the server is still compacting after {done.seconds:.1f} s; it finishes by "
            "itself (oceanbase.DBA_OB_MAJOR_COMPACTION shows its status)"
        )
    result = {
        "backend": done.backend,
        "finished": done.finished,
        "seconds": round(done.seconds, 1),
        "merge_steps": done.merge_steps,
    }
    emit(result, as_json=args.json, human=human)
    return 0


def _doctor(args: argparse.Namespace) -> int:
    checks: list[dict[str, object]] = []

    def check(name: str, ok: bool, detail: str) -> None:
        checks.append({"check": name, "ok": ok, "detail": detail})

    settings = Settings.load(home=args.home, database_url=args.database_url)
    from ..files import UnsafeDataDirError
    from ..store.database import NotWritableError  # the database stack loads only here

    try:
        runtime = _open(args)  # commits a test write first: refuses a database it cannot write
        try:
            runtime.ping()
            stale = runtime.stale_indexes()
        finally:
            runtime.close()
        check("database", True, f"{runtime.backend} reachable, schema ready")
        check("writes", True, "a test write committed")
        check(
            "search_index",
            not stale,
            f"stale ({', '.join(stale)}): run `powercontext reindex`" if stale else "consistent",
        )
    except NotWritableError as exc:
        check("database", True, "reachable")
        check("writes", False, exc.message)
    except UnsafeDataDirError as exc:
        # Nothing else is checked: the token file and the socket there may be someone else's,
        # and a token given with --token must not be sent to their socket.
        check("data_dir", False, exc.message)
        return _doctor_report(checks, as_json=args.json)
    except PowerContextError as exc:
        check("database", False, exc.message)
    # The client is imported here, as in ``output.scoped_client``: httpx (and, through it,
    # rich and click) is resident memory that ``serve`` never uses.
    from ..client import PowerContextClient
    from ..client._common import default_token, default_url

    # The daemon and the token of *this* data dir (--data-dir), not the default one's.
    url = args.url or default_url(home=settings.home)
    token = args.token or default_token(home=settings.home)
    with PowerContextClient(url, token=token) as client:
        try:
            ready = client.get_readiness()
            check("daemon", True, f"ready at {client.url} ({ready.database})")
            embeddings = ready.embeddings
            check("embeddings", embeddings.state != "failing", _embedding_line(embeddings))
        except PowerContextError as exc:
            where = "" if client.url in exc.message else f" ({client.url})"
            check("daemon", False, f"{exc.message}{where} — start it with `powercontext serve`")
        else:
            try:
                client.get_capabilities()
                check("token", True, "accepted")
            except PowerContextError as exc:
                hint = (
                    ""
                    if args.token or read_token_file(settings.token_file)
                    else (f" (no token given and {settings.token_file} is missing)")
                )
                check("token", False, exc.message + hint)
    return _doctor_report(checks, as_json=args.json)


#: A failure that is a setting to fix, with the fix (the surfaces show a failure by its type).
_EMBEDDING_HINTS = {
    "EmbeddingDimensionError": ": the endpoint's vectors are not POWERCONTEXT_EMBEDDINGS_DIMENSION "
    "long; set it to the model's size",
}


def _embedding_line(status: EmbeddingStatus) -> str:
    """The daemon's embedding progress in a line: ``off``, or the worker's state, the pending
    count, the vectors stored and the model; a failure by its kind (never content)."""
    if status.state == "off":
        return "off (the semantic channel: POWERCONTEXT_EMBEDDINGS=local or openai)"
    error = f"{status.error}{_EMBEDDING_HINTS.get(status.error or '', '')}"
    state = f"failing ({error})" if status.state == "failing" else status.state
    pending = f"{status.pending or 0:,}{'+' if status.pending_capped else ''}"
    line = f"{state}: {pending} pending, {status.vectors or 0:,} vectors ({status.model})"
    return line + (f", last round {status.last_round}" if status.last_round else "")


def _doctor_report(checks: list[dict[str, object]], *, as_json: bool) -> int:
    ok = all(c["ok"] for c in checks)
    human = "\n".join(
        f"{'ok ' if c['ok'] else 'FAIL'} {c['check']}: {visible(str(c['detail']))}" for c in checks
    )
    emit({"ok": ok, "checks": checks}, as_json=as_json, human=human)
    return 0 if ok else 1
