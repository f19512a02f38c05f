"""Build ``search/general_vocabulary.tsv``: how common a term is in general language.

The relevance floor (docs/decisions/recall-floor.md) asks how *specific* a term the prompt
shares with an entry is, within the scope and in general. A scope's own document frequencies
say nothing in a young scope (in a two-entry scope every word is "rare"), so the runtime ships a
compact prior: the per-token probability of common English words and of common Chinese
characters and character pairs, from two MIT-licensed sources:

* English: ``en_lexeme_prob.json.gz`` of the PyPI package ``spacy-lookups-data`` 1.0.5 (MIT,
  Explosion AI): log probabilities of about a million tokens. Tokens are casefolded and passed
  through the runtime analyzer's own word encoding (stemming included), so ``pushing``,
  ``pushed`` and ``push`` add up to the one term ``qpush`` that both documents and queries use.
* Chinese: ``jieba/dict.txt`` of the PyPI package ``jieba`` 0.42.1 (MIT, Sun Junyi): about
  350,000 words with corpus counts. Each word's count is spread over the characters and the
  adjacent character pairs it contains, per character position, which is what the analyzer
  emits (Han unigrams and bigrams). A pair also occurs *across* a word boundary (``里只`` in
  ``数据库里只存``), which no dictionary lists; for that the table keeps, per character, how
  often a word ends with it and how often a word starts with it, and the runtime estimates
  such a pair as ``ends(a) * starts(b)`` (words drawn independently, a unigram word model).

Only terms more frequent than ``--min-probability`` are kept. A word the table does not list
gets the probability-weighted mean probability of all the words it left out (a data-derived
estimate of "some word outside the common vocabulary"). Values are stored in quarter nats
(``round(-4 ln p)``), grouped by value, one line per value, so the file stays small and
a rebuild diffs line by line. It is package data, read by ``search/general_vocabulary.py``
(code, not 4,800 lines of generated literals).

Usage (the two files come from the packages' wheel / sdist)::

    python tools/build_general_vocab.py --spacy-lexeme-prob en_lexeme_prob.json.gz \\
        --jieba-dict jieba/dict.txt

The English keys are analyzer output: change the stemmer and this file must be rebuilt
(``tests/runtime/test_scoring.py`` checks every key is still a fixed point of the analyzer).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "runtime" / "src"))

from powercontext_runtime.search import analyzer  # noqa: E402

OUTPUT = ROOT / "runtime" / "src" / "powercontext_runtime" / "search" / "general_vocabulary.tsv"
_ASCII_WORD = re.compile(r"[a-z0-9]+")
# A Han pair that contains a function character is kept in queries only when it is a word
# (请求, 有效, 目的): any two-character word of the dictionary, plus technical words it lacks.
FUNCTION_WORD_MIN_COUNT = 1
EXTRA_FUNCTION_WORDS = ("会话",)  # "session"


def _is_han(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in analyzer._HAN_RANGES)


def english(path: Path, min_probability: float) -> tuple[dict[str, float], float]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        log_probs: dict[str, float] = json.load(f)
    totals: dict[str, float] = defaultdict(float)
    for token, log_p in log_probs.items():
        folded = token.casefold()
        if len(folded) < 2 or not _ASCII_WORD.fullmatch(folded):
            continue
        term = analyzer._word_term(folded)
        if term is not None and term.startswith("q"):
            totals[term] += math.exp(log_p)
    tail = [p for p in totals.values() if p < min_probability]
    # The probability of an unlisted word, weighted by how often each occurs: E[p | unlisted].
    unlisted = sum(p * p for p in tail) / sum(tail)
    return {t: p for t, p in totals.items() if p >= min_probability}, unlisted


@dataclass
class Chinese:
    chars: dict[str, float]
    pairs: dict[str, float]
    ends: dict[str, float]  # per position: a word ending with this character ends here
    starts: dict[str, float]  # per word: it starts with this character
    function_words: list[str]


def chinese(path: Path, min_probability: float) -> Chinese:
    chars: dict[str, int] = defaultdict(int)
    pairs: dict[str, int] = defaultdict(int)
    ends: dict[str, int] = defaultdict(int)
    starts: dict[str, int] = defaultdict(int)
    function_words: list[str] = []
    positions = 0
    words = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            word, count_text, *_ = line.split(" ")
            if not all(_is_han(c) for c in word):
                continue
            count = int(count_text)
            positions += count * len(word)
            words += count
            ends[word[-1]] += count
            starts[word[0]] += count
            for char in word:
                chars[char] += count
            for a, b in itertools.pairwise(word):
                pairs[a + b] += count
            if (
                len(word) == 2
                and count >= FUNCTION_WORD_MIN_COUNT
                and not analyzer._CJK_STOP_CHARS.isdisjoint(word)
            ):
                function_words.append(word)
    function_words += [w for w in EXTRA_FUNCTION_WORDS if w not in function_words]

    def kept(counts: dict[str, int], total: int) -> dict[str, float]:
        return {k: n / total for k, n in counts.items() if n / total >= min_probability}

    return Chinese(
        chars=kept(chars, positions),
        pairs=kept(pairs, positions),
        ends=kept(ends, positions),
        starts=kept(starts, words),
        function_words=sorted(function_words),
    )


def _buckets(probabilities: dict[str, float]) -> dict[int, list[str]]:
    grouped: dict[int, list[str]] = defaultdict(list)
    for term, p in probabilities.items():
        grouped[round(-4 * math.log(p))].append(term)
    return {k: sorted(v) for k, v in sorted(grouped.items())}


def _line(*fields: object) -> str:
    # Fields hold no tab or newline: English terms are ``[a-z0-9]`` analyzer output, the rest
    # Han characters.
    text = "\t".join(str(f) for f in fields)
    assert "\n" not in text and text.count("\t") == len(fields) - 1
    return text


def render_tables(
    min_probability: float,
    unlisted: float,
    tables: dict[str, tuple[dict[int, list[str]], str]],
    function_words: list[str],
    counts: str,
) -> str:
    """The data file: ``#`` comment lines, then one ``NAME<TAB>quarter nats<TAB>items`` line
    per bucket, items joined by the table's separator (a space, or nothing for single
    characters). Read by ``search/general_vocabulary.py``; ordered, so a rebuild diffs."""
    header = [
        "# Generated by tools/build_general_vocab.py: do not edit by hand.",
        "# Per-token probabilities of common terms in general language, in quarter nats",
        "# (round(-4 ln p)), grouped by value: NAME<TAB>quarter nats<TAB>items.",
        "# English: PyPI spacy-lookups-data 1.0.5, en_lexeme_prob (MIT License, Copyright",
        "# (c) 2019 ExplosionAI GmbH), casefolded and encoded by the runtime analyzer (stemmed",
        "# q terms). Chinese: PyPI jieba 0.42.1, dict.txt (MIT License, Copyright (c) 2013 Sun",
        "# Junyi), counts spread over the characters and adjacent character pairs of each word,",
        "# per character position, and how often a word ends / starts with each character",
        f"# (pairs across a word boundary). Terms rarer than p = {min_probability:g} are left out.",
        f"# {counts}.",
        "# HAN_FUNCTION_WORDS: two-character words that contain a function character (the",
        f"# analyzer's CJK stop characters), counted at least {FUNCTION_WORD_MIN_COUNT} times, plus"
        f" {', '.join(EXTRA_FUNCTION_WORDS)}.",
    ]
    body = [
        _line("MIN_PROBABILITY", "", repr(min_probability)),
        # E[p] of an English word the table leaves out, weighted by occurrence.
        _line("UNLISTED_ENGLISH_PROBABILITY", "", repr(float(f"{unlisted:.3g}"))),
    ]
    for name, (grouped, sep) in tables.items():
        body += [_line(name, value, sep.join(terms)) for value, terms in grouped.items()]
    body.append(_line("HAN_FUNCTION_WORDS", "", "".join(function_words)))
    return "\n".join(header + body) + "\n"


def render(en: dict[str, float], unlisted: float, zh: Chinese, min_probability: float) -> str:
    counts = (
        f"{len(en):,} English terms, {len(zh.chars):,} Han characters, {len(zh.pairs):,} Han pairs"
    )
    tables = {
        "ENGLISH": (_buckets(en), " "),  # word terms, space-separated
        "HAN_CHARACTERS": (_buckets(zh.chars), ""),  # one per code point
        "HAN_PAIRS": (_buckets(zh.pairs), " "),  # adjacent pairs within words
        "HAN_WORD_ENDS": (_buckets(zh.ends), ""),  # per position: a word ending here
        "HAN_WORD_STARTS": (_buckets(zh.starts), ""),  # per word: it starts with this
    }
    return render_tables(min_probability, unlisted, tables, zh.function_words, counts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spacy-lexeme-prob", type=Path, required=True)
    p.add_argument("--jieba-dict", type=Path, required=True)
    p.add_argument("--min-probability", type=float, default=1e-6)
    p.add_argument("--output", type=Path, default=OUTPUT)
    args = p.parse_args(argv)
    en, unlisted = english(args.spacy_lexeme_prob, args.min_probability)
    zh = chinese(args.jieba_dict, args.min_probability)
    args.output.write_text(render(en, unlisted, zh, args.min_probability), encoding="utf-8")
    print(
        f"{args.output}: {len(en)} English terms (unlisted p {unlisted:.3g}), "
        f"{len(zh.chars)} characters, {len(zh.pairs)} pairs, {len(zh.function_words)} "
        "function words",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
