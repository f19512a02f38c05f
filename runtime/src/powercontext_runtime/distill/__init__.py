"""Distillers: task results in, *pending* Experience proposals out (spec 06, issue #31).

A distiller never writes anything itself: it reads task results outside any transaction and
its proposals become pending candidates citing them, which a person approves or rejects. This
package holds the offline distiller's pure core (:mod:`.offline`): deterministic rules, no
model, no I/O, on by default because it only proposes; the opt-in model distiller
(:mod:`.openai_compatible`, imported by whoever enables it, so httpx is not loaded otherwise);
and :class:`DistillerUnavailable`, the one error a distiller raises.
"""

from __future__ import annotations

from .errors import DistillerFailure, DistillerUnavailable
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
from .skills import ApprovedExperienceView, SkillLesson, propose_skills

__all__ = [
    "GENERATORS",
    "MATCH_THRESHOLD",
    "RULES",
    "ApprovedExperienceView",
    "Change",
    "Check",
    "DistillerFailure",
    "DistillerUnavailable",
    "Lesson",
    "SkillLesson",
    "TaskInput",
    "propose_lessons",
    "propose_skills",
    "same_lesson",
    "similar",
]
