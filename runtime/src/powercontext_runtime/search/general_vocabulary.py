"""How common a term is in general language: the relevance floor's prior
(docs/decisions/recall-floor.md), read from package data.

The table is generated data (``tools/build_general_vocab.py`` writes ``general_vocabulary.tsv``
next to this module; its header names the sources and their licences), kept out of Python
source so ``search/`` reads as code. It is read once, at import: the analyzer needs
``HAN_FUNCTION_WORDS`` to build its tables anyway, and reading the file (480 kB, one line per
probability value) costs about what loading the old generated module's bytecode did (≈ 1 ms;
the numbers are in the commit that moved it). Values stay packed strings here, as before;
``scoring._general`` decodes them into lookups on the first query.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = [
    "ENGLISH",
    "HAN_CHARACTERS",
    "HAN_FUNCTION_WORDS",
    "HAN_PAIRS",
    "HAN_WORD_ENDS",
    "HAN_WORD_STARTS",
    "MIN_PROBABILITY",
    "UNLISTED_ENGLISH_PROBABILITY",
]

DATA_FILE: Final = Path(__file__).with_name("general_vocabulary.tsv")

_TABLES = ("ENGLISH", "HAN_CHARACTERS", "HAN_PAIRS", "HAN_WORD_ENDS", "HAN_WORD_STARTS")


def _load(path: Path) -> tuple[dict[str, float], dict[str, dict[int, str]], str]:
    """``(scalars, tables, function words)`` from the data file: ``#`` comment lines, then
    ``NAME<TAB>quarter nats<TAB>items`` (the quarter nats empty for a scalar or the function
    words). A missing table or scalar fails here, at import, not on some later query."""
    scalars: dict[str, float] = {}
    tables: dict[str, dict[int, str]] = {name: {} for name in _TABLES}
    function_words = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        name, value, items = line.split("\t")
        if name == "HAN_FUNCTION_WORDS":
            function_words = items
        elif value:
            tables[name][int(value)] = items
        else:
            scalars[name] = float(items)
    if not function_words or not all(tables.values()):
        raise RuntimeError(f"{path.name} is incomplete: rebuild it (tools/build_general_vocab.py)")
    return scalars, tables, function_words


_scalars, _tables, _function_words = _load(DATA_FILE)

#: Terms rarer than this are not listed.
MIN_PROBABILITY: Final = _scalars["MIN_PROBABILITY"]
#: E[p] of an English word the table leaves out, weighted by occurrence.
UNLISTED_ENGLISH_PROBABILITY: Final = _scalars["UNLISTED_ENGLISH_PROBABILITY"]
#: English word terms (analyzer output, space-separated), keyed by quarter nats.
ENGLISH: Final = _tables["ENGLISH"]
#: Han characters (one per code point), keyed by quarter nats.
HAN_CHARACTERS: Final = _tables["HAN_CHARACTERS"]
#: Adjacent Han character pairs within words (space-separated).
HAN_PAIRS: Final = _tables["HAN_PAIRS"]
#: Per character position: a word ending with this character ends here.
HAN_WORD_ENDS: Final = _tables["HAN_WORD_ENDS"]
#: Per word: it starts with this character.
HAN_WORD_STARTS: Final = _tables["HAN_WORD_STARTS"]
#: Two-character words that contain a function character, concatenated: pairs a query keeps.
HAN_FUNCTION_WORDS: Final = _function_words
del _scalars, _tables, _function_words
