"""Distillers: task results in, *pending* Experience proposals out (spec 06, issue #31).

A distiller never writes anything itself: it reads task results outside any transaction and
its proposals become pending candidates citing them, which a person approves or rejects. This
package holds the offline distiller's pure core (:mod:`.offline`): deterministic rules, no
model, no I/O, on by default because it only proposes.
"""

from __future__ import annotations

from .offline import (
    GENERATORS,
    MATCH_THRESHOLD,
    RULES,
    Change,
    Check,
    Lesson,
    TaskInput,
    propose_lessons,
    same_lesson,
    similar,
)

__all__ = [
    "GENERATORS",
    "MATCH_THRESHOLD",
    "RULES",
    "Change",
    "Check",
    "Lesson",
    "TaskInput",
    "propose_lessons",
    "same_lesson",
    "similar",
]
