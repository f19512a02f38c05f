"""Progress on stderr for long operator commands (reindex --embeddings, export, import,
migrate): a bar redrawn in place on a TTY, else a plain ``<done> N/M`` line at every tenth,
and nothing with ``--json``."""

from __future__ import annotations

from typing import TextIO

__all__ = ["Progress"]


class Progress:
    WIDTH = 30

    def __init__(
        self,
        stream: TextIO,
        *,
        quiet: bool,
        label: str = "embedding",
        done_label: str = "embedded",
        unit: str = "",
    ) -> None:
        """``label`` names the bar (``embedding [###---] 3/10``); ``done_label`` starts the
        plain lines (``embedded 3/10``); ``unit`` follows the numbers (`` records``)."""
        self._stream = stream
        self._tty = stream.isatty()
        self._quiet = quiet
        self._label = label
        self._done_label = done_label
        self._unit = f" {unit}" if unit else ""
        self._last_tenth = -1
        self._finished = False

    def __call__(self, done: int, total: int) -> None:
        if self._quiet or self._finished:
            return
        done = max(0, min(done, total))
        if self._tty:
            filled = self.WIDTH * done // total if total else self.WIDTH
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            self._finished = done >= total
            end = "\n" if self._finished else ""
            self._stream.write(f"\r{self._label} [{bar}] {done:,}/{total:,}{self._unit}{end}")
            self._stream.flush()
            return
        tenth = 10 * done // total if total else 10
        if tenth != self._last_tenth:
            self._last_tenth = tenth
            self._finished = tenth >= 10
            self._stream.write(f"{self._done_label} {done}/{total}{self._unit}\n")
            self._stream.flush()
