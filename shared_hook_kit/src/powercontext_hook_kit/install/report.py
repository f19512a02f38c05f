"""What one ``install``/``uninstall`` run did, and the error that stops a step.

The bottom layer of the install package: every other module reports what it changed as
:class:`Change` lines in a :class:`Report` (the user reads exactly these, or their JSON) and
raises :class:`InstallError` when a step cannot be done safely, so neither depends on anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Change", "InstallError", "Report"]


class InstallError(RuntimeError):
    """A step cannot be done safely. The message says what to fix; nothing was half-written."""


@dataclass(frozen=True)
class Change:
    """One thing ``install``/``uninstall`` did to the machine, as the user will read it."""

    action: str  # created | updated | removed | backup | ran | trusted | untrusted
    target: str
    detail: str = ""

    def line(self) -> str:
        suffix = f"  ({self.detail})" if self.detail else ""
        return f"  {self.action:<9} {self.target}{suffix}"

    def to_json(self) -> dict[str, str]:
        return {"action": self.action, "target": self.target, "detail": self.detail}


@dataclass
class Report:
    """Everything one ``install`` or ``uninstall`` run did, plus what the user should know."""

    host: str
    display_name: str
    action: str
    mode: str | None = None
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(change.action != "backup" for change in self.changes)

    def add(self, change: Change | None) -> None:
        if change is not None:
            self.changes.append(change)

    def render(self) -> str:
        how = {
            "plugin": f"as a {self.display_name} plugin",
            "hooks": "as hooks in the user config",
            None: "",
        }.get(self.mode, "")
        verb = "installed" if self.action == "install" else "uninstalled"
        head = f"PowerContext for {self.display_name}: {verb} {how}".rstrip()
        if not self.changed:
            head += " — nothing to change"
        lines = [head, *(change.line() for change in self.changes)]
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "action": self.action,
            "mode": self.mode,
            "changed": self.changed,
            "changes": [change.to_json() for change in self.changes],
            "notes": list(self.notes),
        }
