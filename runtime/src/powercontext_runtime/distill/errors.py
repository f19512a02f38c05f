"""The one error a distiller raises: it could not answer for this task now.

A distiller only proposes, so failing costs nothing but a missed proposal; what the worker
needs is *which kind* of failure it was, to decide between "try this task again later" (the
endpoint is down or slow) and "move on" (the model answered, but with something we refuse —
asking again would most likely get the same answer). The message is fixed text: it never
holds the task, the prompt or the model's answer, because it may end up in a log.
"""

from __future__ import annotations

from typing import Literal, get_args

from ..errors import UnavailableError

__all__ = ["DistillerFailure", "DistillerUnavailable"]

#: ``timeout`` — no whole answer within the distiller's deadline; ``unreachable`` — a
#: transport error (refused, reset, DNS); ``http_status`` — any status but 200;
#: ``oversize`` — the answer is larger than the distiller reads; ``invalid_output`` — an
#: answer that is not the schema, or breaks the Experience contract's limits.
DistillerFailure = Literal["timeout", "unreachable", "http_status", "oversize", "invalid_output"]
_RETRYABLE: frozenset[str] = frozenset({"timeout", "unreachable", "http_status"})


class DistillerUnavailable(UnavailableError):
    """A distiller gave no lessons for this task because of ``kind`` (never content).

    ``retryable`` is true when the endpoint, not its answer, failed: the same task may well
    succeed later. An answer we refused (``oversize``, ``invalid_output``) is not retryable.
    """

    default_code = "distiller_unavailable"

    def __init__(self, distiller: str, kind: DistillerFailure) -> None:
        if kind not in get_args(DistillerFailure):
            raise ValueError(f"unknown distiller failure kind: {kind}")
        super().__init__(
            f"the {distiller} distiller is unavailable ({kind})",
            details={"distiller": distiller, "kind": kind},
        )
        self.distiller = distiller
        self.kind: DistillerFailure = kind
        self.retryable = kind in _RETRYABLE
