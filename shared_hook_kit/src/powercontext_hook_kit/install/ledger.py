"""The install ledger: how every file and folder looked before ``install`` touched it.

``uninstall`` must hand the user back exactly the machine they had, not just one without our
entries: the same bytes in every file we (or the host CLI on our behalf) changed, the same
permissions, no file or folder that was not there before and no backups left behind. Removing
our entries is not enough for that — a re-serialised JSON file, a ``settings.json`` the host CLI
created, a ``config.toml`` the host rewrote with mode 0600 or an empty ``plugins/cache/<market>``
all survive it — so ``install`` writes down what it found before each change, and
``uninstall`` puts that back once the host no longer lists anything of ours.

What is kept, and where:

* one backup per file, ``<file>.powercontext-backup``, made before the first change and kept
  (never replaced, never timestamped) until ``uninstall`` has restored from it, so repeated
  installs cannot pile copies up;
* the ledger itself, ``<user data dir>/powercontext/hosts/<host>/install-ledger.json``: for each
  file whether it existed (its mode, its backup) or not (what install left in it), and each
  folder that did not exist.

Restoring never loses something the user wrote after ``install``: a file goes back to its old
bytes only if, apart from containers the host left empty, it now means exactly what the backup
means; a file install created is deleted only if everything left in it was put there by
install; a folder install created is removed only if nothing but empty folders is left in it.
Anything else stays, with a note saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .report import Change, InstallError, Report
from .user_files import atomic_write, dump_json

__all__ = ["BACKUP_SUFFIX", "LEDGER_FILE_NAME", "InstallLedger"]

#: The one backup of a user file: ``<file>.powercontext-backup`` next to it, while installed.
BACKUP_SUFFIX = ".powercontext-backup"
LEDGER_FILE_NAME = "install-ledger.json"
_LEDGER_SCHEMA = "powercontext.install-ledger.v1"
#: Registry files larger than this (JSON/TOML config files are far smaller) are not copied
#: when a watched folder is noted.
_TEXT_KEPT = 1 << 20
#: No folder walk goes deeper than this below a watched root (a bound, not a real limit).
_MAX_DEPTH = 32
_UNPARSED = object()


class InstallLedger:
    """The ledger of one host's installation, opened for one ``install``/``uninstall`` run.

    ``install`` calls :meth:`before_change` before each change to a user file (and before each
    host CLI command that rewrites one), :meth:`before_create_dir` before creating a folder of
    ours, :meth:`watch` on the folders the host CLI writes into, and :meth:`settle` at the end.
    ``uninstall`` writes through :meth:`write` (so a file whose prior version comes back is
    restored byte-for-byte in one step) and calls :meth:`restore` once the host CLI has
    reversed its own registration.
    """

    def __init__(self, path: Path, report: Report, *, restoring: bool = False) -> None:
        self.path = Path(path)
        self._report = report
        self._restoring = restoring
        self._files: dict[str, dict[str, Any]] = {}
        self._folders: set[str] = set()
        #: Watched folder → (paths below it when noted, whether it is host state, top-level
        #: names left out).
        self._watched: dict[str, tuple[set[str], bool, frozenset[str]]] = {}
        self._host_used = False
        #: Config files directly in a watched root, as found: path → (bytes, mode).
        self._found: dict[str, tuple[bytes, int]] = {}
        #: Files install created (now or in an earlier run) that this run may change, with
        #: their content when the run started (``None``: not there), so :meth:`settle` adds
        #: to what counts as ours exactly what this run added — never what the user wrote.
        self._run_start: dict[str, bytes | None] = {}
        #: Files this run changed (or had the host CLI change): only their modes are put back
        #: at the end of an install — a chmod the user made since is theirs.
        self._touched: set[str] = set()
        self._host_cli = False
        self._dirty = False
        self._loaded = False  # read on first use: ``doctor`` never needs (or fails on) it

    # ---- the ledger file ----------------------------------------------------------------

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise InstallError(f"cannot read {self.path}: {exc.strerror}") from exc
        try:
            document = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise InstallError(f"{self.path} is not valid JSON; move it away, then retry") from exc
        if not isinstance(document, dict) or document.get("schema") != _LEDGER_SCHEMA:
            raise InstallError(f"{self.path} is not a PowerContext install ledger; move it away")
        files = document.get("files")
        folders = document.get("folders")
        if isinstance(files, dict):
            self._files = {str(k): dict(v) for k, v in files.items() if isinstance(v, dict)}
        if isinstance(folders, list):
            self._folders = {str(folder) for folder in folders}
        self._host_cli = document.get("host_cli") is True
        self._host_used = document.get("host_used_since_install") is True

    def _save(self) -> None:
        """Write the ledger (0600: it may hold config text) — the first time, noting the
        folders that writing it creates, so ``uninstall`` removes those too."""
        if not self._dirty or self._restoring:
            return
        self._note_missing_folders(self.path.parent)
        document = {
            "schema": _LEDGER_SCHEMA,
            "files": dict(sorted(self._files.items())),
            "folders": sorted(self._folders),
            "host_cli": self._host_cli,
            "host_used_since_install": self._host_used,
        }
        atomic_write(self.path, dump_json(document), new_file_mode=0o600)
        self._dirty = False

    @property
    def used_host_cli(self) -> bool:
        """Whether an install ran the host CLI, whose registrations only it can undo."""
        self._load()
        return self._host_cli

    def uses_host_cli(self) -> None:
        """This install runs the host CLI (see :attr:`used_host_cli`)."""
        self._load()
        if not self._host_cli:
            self._host_cli = True
            self._dirty = True

    # ---- install: record before changing ---------------------------------------------------

    def _note_missing_folders(self, folder: Path) -> None:
        """Record ``folder`` and each missing parent of it: whoever creates them, they did not
        exist before this installation."""
        folder = Path(os.path.abspath(folder))
        for candidate in (folder, *folder.parents):
            if os.path.lexists(candidate):
                break
            if str(candidate) not in self._folders:
                self._folders.add(str(candidate))
                self._dirty = True

    def before_create_dir(self, folder: Path) -> None:
        """``folder`` (a folder of ours, e.g. the marketplace) is about to be created."""
        self._load()
        self._note_missing_folders(folder)
        self._save()

    def before_change(self, path: Path) -> Path | None:
        """Record how ``path`` is now, once per installation; return its backup (if any).

        The first time: an existing file is copied to ``<file>.powercontext-backup`` (mode and
        bytes) and its mode noted; a missing one is noted as missing, with the folders that
        would have to be created for it. Later calls — in this run or a later ``install`` —
        change nothing, so the backup always holds the version from before PowerContext.
        During ``uninstall`` a file the ledger does not know (an installation older than the
        ledger) is only noted, never backed up: nothing will restore from that copy.
        """
        self._load()
        key = str(Path(os.path.abspath(path)))
        self._touched.add(key)
        entry = self._files.get(key)
        if entry is not None:
            if not entry.get("existed") and key not in self._run_start:
                self._run_start[key] = _read(Path(key))
            backup = entry.get("backup")
            return Path(backup) if isinstance(backup, str) else None
        target = Path(key)
        try:
            info = target.stat()
        except FileNotFoundError:
            self._files[key] = {"existed": False}
            self._run_start[key] = None
            self._note_missing_folders(target.parent)
            self._dirty = True
            self._save()
            return None
        except OSError as exc:
            raise InstallError(f"cannot read {target}: {exc.strerror}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise InstallError(f"{target} is not a regular file; fix or move it, then retry")
        entry = {"existed": True, "mode": stat.S_IMODE(info.st_mode), "backup": None}
        self._files[key] = entry
        self._dirty = True
        backup_path: Path | None = None
        if not self._restoring:
            backup_path = target.with_name(target.name + BACKUP_SUFFIX)
            entry["backup"] = str(backup_path)
            self._save()  # the ledger names the backup before the copy exists: never orphaned
            if backup_path.is_file():
                # An older copy of ours that no ledger names (a ledger removed by hand): it is
                # older than the file, so it is the better record of how things were.
                detail = f"kept the earlier copy {backup_path}"
            else:
                shutil.copy2(target, backup_path)
                detail = f"previous version: {backup_path}"
            self._report.add(Change("backup", str(target), detail))
        return backup_path

    def watch(self, *roots: Path) -> None:
        """Note what is under ``roots`` now (folders the host CLI writes into, such as
        ``~/.claude/plugins``), so :meth:`settle` can tell what this run created there — and
        keep the JSON/TOML files directly in them (the host's registries, such as
        ``known_marketplaces.json``), so one the host rewrites gets its backup like any other."""
        self._load()
        for root in roots:
            key = str(Path(os.path.abspath(root)))
            if key in self._watched:
                continue
            self._note_missing_folders(Path(key))
            self._watched[key] = (set(_walk(Path(key))), False, frozenset())
            self._note_run_start(key)
            if self._restoring or not os.path.isdir(key):
                continue
            for item in os.scandir(key):
                if item.name.endswith((".json", ".toml")) and item.is_file(follow_symlinks=False):
                    info = item.stat(follow_symlinks=False)
                    data = _read(Path(item.path)) if info.st_size <= _TEXT_KEPT else None
                    if data is not None:
                        self._found[item.path] = (data, stat.S_IMODE(info.st_mode))

    def watch_state(self, root: Path, *, skip: frozenset[str] = frozenset()) -> None:
        """Note the host's whole folder before its CLI runs (after :meth:`watch` on the
        registration folders in it). What the host creates there for itself during our runs —
        first-run state in a folder it never used (databases, ids, bundled files), temp folders
        it leaves behind — was not there before install either; ``uninstall`` removes it, but
        only as long as nothing but our runs has touched any of it (each run checks that the
        files are still what our last run left). ``skip``: top-level names that are the user's
        data (sessions, transcripts) and are never looked at."""
        self._load()
        key = str(Path(os.path.abspath(root)))
        if key in self._watched:
            return
        self._note_missing_folders(Path(key))
        before = set(_walk(Path(key), skip=skip))
        self._watched[key] = (before, True, skip)
        for known, entry in self._files.items():
            if not entry.get("state"):
                continue
            recorded = entry.get("sha256")
            data = _read(Path(known))
            if data is not None and hashlib.sha256(data).hexdigest() != recorded:
                self._host_used = True  # the host ran without us since: its state is its own
                self._dirty = True
        self._note_run_start(key)

    def _note_run_start(self, root: str) -> None:
        """Keep the content of each file install created below ``root`` as this run starts."""
        for known, entry in self._files.items():
            inside = known.startswith(root + os.sep)
            if inside and not entry.get("existed") and known not in self._run_start:
                self._run_start[known] = _read(Path(known))

    def watch_file(self, path: Path) -> None:
        """A file the host CLI keeps for itself outside the watched folders (Claude Code's
        global ``.claude.json``): if it does not exist yet, whatever the host writes into it
        during our runs is ours; if it does and install did not create it, it is the host's
        own business and left alone (it changes with every normal use)."""
        self._load()
        key = str(Path(os.path.abspath(path)))
        entry = self._files.get(key)
        if entry is None and not os.path.lexists(key):
            self._files[key] = {"existed": False}
            self._note_missing_folders(Path(key).parent)
            self._run_start[key] = None
            self._dirty = True
        elif entry is not None and not entry.get("existed") and key not in self._run_start:
            self._run_start[key] = _read(Path(key))

    def settle(self) -> None:
        """End of an ``install`` (also a failed one: what it did must stay undoable).

        Everything new under the watched roots is recorded as created by this installation;
        each file install created gets its current content recorded (what "only ours" means at
        ``uninstall``); a file whose permissions the host CLI changed gets its own back.
        """
        self._load()
        self._record_watched()
        created = any(os.path.isdir(folder) for folder in self._folders)
        if not self.path.exists() and not self._files and not created:
            return  # nothing was done that would need undoing: no ledger either
        for key, entry in list(self._files.items()):
            if entry.get("existed"):
                if key in self._touched:
                    self._keep_mode(Path(key), entry)
            elif key in self._run_start:
                self._dirty |= self._account(key, entry, self._run_start[key])
        self._run_start.clear()
        self._touched.clear()
        self._save()

    def _account(self, key: str, entry: dict[str, Any], at_start: bytes | None) -> bool:
        """:func:`_account` — and a created file that is gone again is forgotten: there is
        nothing left to undo (if it comes back, a later run records it anew)."""
        if not os.path.lexists(key):
            del self._files[key]
            return True
        return _account(Path(key), entry, at_start)

    def _keep_mode(self, path: Path, entry: dict[str, Any]) -> bool:
        """Give ``path`` its recorded permissions back (a host CLI may write 0600)."""
        mode = entry.get("mode")
        try:
            current = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            return False
        if not isinstance(mode, int) or current == mode:
            return False
        os.chmod(path, mode)
        detail = f"permissions back to {mode:04o} (the host CLI had changed them to {current:04o})"
        self._report.add(Change("restored", str(path), detail))
        return True

    # ---- uninstall: write and restore -------------------------------------------------------

    def write_json(
        self, path: Path, before: dict[str, Any] | None, after: dict[str, Any] | None, detail: str
    ) -> Change | None:
        """Write the document ``after`` (``None``: delete the file) if it differs from
        ``before``; see :meth:`write`."""
        if after == before:
            return None
        return self.write(path, None if after is None else dump_json(after), detail=detail)

    def write(
        self, path: Path, data: bytes | None, *, detail: str = "", new_file_mode: int = 0o600
    ) -> Change:
        """Replace ``path`` with ``data`` (``None``: delete it), recorded by
        :meth:`before_change` first — except that during ``uninstall``, if the result means
        what the file held before install, its old bytes and mode come back instead (and a
        file install created goes once nothing but ours would be left in it)."""
        self._load()
        key = str(Path(os.path.abspath(path)))
        self.before_change(Path(key))
        target = Path(key)
        if self._restoring:
            outcome = self._put_back(target, self._files[key], proposed=data)
            if outcome is not None:
                return Change(outcome[0], key, detail)
        if data is None:
            target.unlink()
            return Change("removed", key, detail)
        created = not target.exists()
        atomic_write(target, data, new_file_mode=new_file_mode)
        return Change("created" if created else "updated", key, detail)

    def _put_back(
        self, target: Path, entry: dict[str, Any], *, proposed: bytes | None
    ) -> tuple[str, bool] | None:
        """Make ``target`` what it was before install, if ``proposed`` (its content once our
        entries are out; ``None``: no file) loses nothing by that. Returns the action
        (``restored``/``removed``) and whether the disk changed, or ``None``: not possible."""
        if entry.get("existed"):
            backup = entry.get("backup")
            original = _read(Path(backup)) if isinstance(backup, str) else None
            mode = entry.get("mode")
            if original is None or not isinstance(mode, int):
                return None
            empty = b"{}" if target.suffix == ".json" else b""
            if not _equivalent(target.name, empty if proposed is None else proposed, original):
                return None
            changed = False
            if _read(target) != original:
                atomic_write(target, original, new_file_mode=mode)
                changed = True
            if stat.S_IMODE(target.stat().st_mode) != mode:
                os.chmod(target, mode)
                changed = True
            return "restored", changed
        if proposed is not None and not _only_ours(target.name, proposed, entry):
            return None
        try:
            target.unlink()
        except FileNotFoundError:
            return "removed", False
        return "removed", True

    def restore(self) -> None:
        """End of a successful ``uninstall``: every recorded file back to its prior state,
        every folder install created gone if only empty folders are left in it, then the
        backups and the ledger itself gone."""
        self._load()
        self._record_watched()
        for key, at_start in self._run_start.items():  # what this run's host CLI calls added
            entry = self._files.get(key)
            if entry is not None and not entry.get("existed"):
                self._account(key, entry, at_start)
        self._run_start.clear()
        if self._host_used and any(entry.get("state") for entry in self._files.values()):
            self._report.notes.append(
                "the host ran since install, so the state it created for itself during "
                "install (databases, ids, caches) stays: it is the host's now"
            )
        removed_files: list[str] = []
        for key in sorted(self._files):
            entry = self._files[key]
            if entry.get("state") and self._host_used:
                continue
            target = Path(key)
            current = _read(target)
            backup = entry.get("backup")
            has_backup = isinstance(backup, str) and os.path.isfile(backup)
            if entry.get("existed") and current is None:
                if has_backup:
                    self._report.notes.append(
                        f"{key} was deleted after install, so it was not recreated"
                    )
                continue
            outcome = self._put_back(target, entry, proposed=current)
            if outcome is not None:
                action, changed = outcome
                if changed and action == "removed":
                    removed_files.append(key)
                elif changed:
                    self._report.add(Change(action, key, "as before install"))
            elif entry.get("existed"):
                self._keep_mode(target, entry)
                if has_backup:
                    self._report.notes.append(
                        f"{key} differs from its version before install beyond PowerContext's "
                        "entries (changed since?), so it was kept as it is, without ours"
                    )
            else:
                self._report.notes.append(
                    f"{key} was created by install but now holds settings added since, so it "
                    "was kept"
                )
        for entry in self._files.values():
            backup = entry.get("backup")
            if isinstance(backup, str):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(backup)
        self._files.clear()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        removed: set[str] = set()
        for folder in sorted(self._folders, key=lambda name: name.count(os.sep), reverse=True):
            if _remove_empty_tree(Path(folder)):
                removed.add(folder)
        tops = sorted(folder for folder in removed if str(Path(folder).parent) not in removed)
        inside = {top: 0 for top in tops}
        for key in removed_files:
            top = next((top for top in tops if key.startswith(top + os.sep)), None)
            if top is None:
                self._report.add(Change("removed", key, "created by install"))
            else:
                inside[top] += 1
        for top, count in inside.items():
            what = f"{count} files" if count != 1 else "1 file"
            detail = f"created by install ({what})" if count else "empty folder created by install"
            self._report.add(Change("removed", top, detail))
        self._folders.clear()

    def _record_watched(self) -> None:
        """What appeared under the watched roots since :meth:`watch` counts as this
        installation's: a host CLI created it because we asked it to register or unregister.
        A registry file found there that the host rewrote gets its backup now, from the copy
        :meth:`watch` kept."""
        for path, (data, mode) in self._found.items():
            if _read(Path(path)) == data:
                continue
            self._touched.add(path)
            if path in self._files:
                continue
            backup = Path(path + BACKUP_SUFFIX)
            if not backup.is_file():
                atomic_write(backup, data, new_file_mode=mode)
                os.chmod(backup, mode)
            self._files[path] = {"existed": True, "mode": mode, "backup": str(backup)}
            self._touched.add(path)
            self._report.add(Change("backup", path, f"previous version: {backup}"))
            self._dirty = True
        self._found.clear()
        for root, (before, state, skip) in self._watched.items():
            for path in _walk(Path(root), skip=skip):
                if path in before or path in self._files or path in self._folders:
                    continue
                if path.endswith(BACKUP_SUFFIX):
                    continue  # our own copy (see above), not the host's
                if os.path.isdir(path) and not os.path.islink(path):
                    self._folders.add(path)
                else:
                    self._files[path] = {"existed": False, **({"state": True} if state else {})}
                    self._run_start[path] = None
                self._dirty = True
        self._watched.clear()


# ---- comparing documents ------------------------------------------------------------------


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _document(name: str, data: bytes) -> Any:
    """``data`` parsed the way the host reads it (``.json``/``.toml``), else :data:`_UNPARSED`."""
    try:
        text = data.decode("utf-8")
        if not text.strip():
            return {}
        if name.endswith(".json"):
            return json.loads(text)
        if name.endswith(".toml"):  # as JSON values, like the ledger stores them
            return json.loads(json.dumps(tomllib.loads(text), default=str))
    except (UnicodeDecodeError, ValueError):
        return _UNPARSED
    return _UNPARSED


def _vacuous(value: Any) -> bool:
    """Only empty containers: what a host leaves once its last entry of ours is removed."""
    if isinstance(value, dict):
        return all(_vacuous(item) for item in value.values())
    if isinstance(value, list):
        return not value
    return False


def _without_added_empties(current: Any, original: Any) -> Any:
    """``current`` minus the keys ``original`` does not have and that hold only empty
    containers (``"enabledPlugins": {}``, an empty ``[marketplaces]`` table)."""
    if not (isinstance(current, dict) and isinstance(original, dict)):
        return current
    return {
        key: _without_added_empties(value, original[key]) if key in original else value
        for key, value in current.items()
        if key in original or not _vacuous(value)
    }


def _equivalent(name: str, current: bytes, original: bytes) -> bool:
    """Whether ``current`` means what ``original`` meant (so the old bytes can come back)."""
    if current == original:
        return True
    now, before = _document(name, current), _document(name, original)
    if now is _UNPARSED or before is _UNPARSED:
        return False
    return bool(_without_added_empties(now, before) == before)


def _within(value: Any, recorded: Any) -> bool:
    """Whether everything in ``value`` was also in ``recorded`` (install's own content)."""
    if isinstance(value, dict) and isinstance(recorded, dict):
        return all(key in recorded and _within(item, recorded[key]) for key, item in value.items())
    if isinstance(value, list) and isinstance(recorded, list):
        return all(any(_within(item, other) for other in recorded) for item in value)
    return bool(value == recorded)


def _added(before: Any, after: Any) -> Any:
    """What ``after`` has that ``before`` had not (a key, a list item, a changed value)."""
    if isinstance(before, dict) and isinstance(after, dict):
        added = {}
        for key, value in after.items():
            if key not in before:
                added[key] = value
            elif value != before[key]:
                inner = _added(before[key], value)
                if inner not in ({}, []) or not isinstance(value, dict | list):
                    added[key] = inner
        return added
    if isinstance(before, list) and isinstance(after, list):
        return [item for item in after if item not in before]
    return after


def _merged(ours: Any, added: Any) -> Any:
    """``ours`` with ``added`` put in (both as :func:`_added` returns them)."""
    if isinstance(ours, dict) and isinstance(added, dict):
        merged = dict(ours)
        for key, value in added.items():
            merged[key] = _merged(ours[key], value) if key in ours else value
        return merged
    if isinstance(ours, list) and isinstance(added, list):
        return [*ours, *(item for item in added if item not in ours)]
    return added


def _account(path: Path, entry: dict[str, Any], at_start: bytes | None) -> bool:
    """Add to a created file's record what this run put in it.

    ``sha256`` is the file as our last run left it, kept only while *all* of it is ours: it
    was created by a run of ours, and every later run of ours found it as the one before had
    left it. ``ours`` (readable JSON/TOML only) is what our runs added — its content now minus
    ``at_start``, merged over the runs — so a file someone else also wrote into can still be
    told apart. Returns whether the record changed.
    """
    after = _read(path)
    if after is None:
        return False
    previous = (entry.get("ours"), entry.get("sha256"))
    recorded = entry.get("sha256")
    pure = at_start is None or (
        isinstance(recorded, str) and hashlib.sha256(at_start).hexdigest() == recorded
    )
    if pure:
        entry["sha256"] = hashlib.sha256(after).hexdigest()
    else:
        entry.pop("sha256", None)
    now = _document(path.name, after)
    if now is not _UNPARSED:
        prior = {} if at_start is None else _document(path.name, at_start)
        if prior is not _UNPARSED:
            entry["ours"] = _merged(entry.get("ours", {}), _added(prior, now))
    return (entry.get("ours"), entry.get("sha256")) != previous


def _only_ours(name: str, current: bytes, entry: Mapping[str, Any]) -> bool:
    """Whether a file install created holds nothing but what install put there."""
    if entry.get("sha256") == hashlib.sha256(current).hexdigest():
        return True
    now = _document(name, current)
    if now is _UNPARSED:
        return False
    if _vacuous(now):
        return True
    ours = entry.get("ours")
    return ours is not None and _within(now, ours)


# ---- folders ------------------------------------------------------------------------------


def _walk(root: Path, *, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every path below ``root`` (not following symlinks), as absolute strings; ``skip``:
    names directly in ``root`` left out, with everything below them."""
    if not root.is_dir() or root.is_symlink():
        return
    base_depth = str(root).count(os.sep)
    for folder, dirs, names in os.walk(root, followlinks=False):
        if folder == str(root) and skip:
            dirs[:] = [name for name in dirs if name not in skip]
            names = [name for name in names if name not in skip]
        if folder.count(os.sep) - base_depth >= _MAX_DEPTH:
            dirs.clear()
        for name in (*dirs, *names):
            yield os.path.join(folder, name)


def _remove_empty_tree(folder: Path) -> bool:
    """Remove ``folder`` if it holds nothing but empty folders; whether it is gone now."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    for path in sorted(_walk(folder), key=lambda name: name.count(os.sep), reverse=True):
        if os.path.isdir(path) and not os.path.islink(path):
            with contextlib.suppress(OSError):
                os.rmdir(path)
    try:
        folder.rmdir()
    except OSError:
        return False
    return True
