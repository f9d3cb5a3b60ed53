"""The two labelled sets of bench/status.py and the regular expressions a user would write for them.

- demo: Prisma's generated Italian notes (2,000, seed 0); positive = the note has the label
  `bronchiolitis:confirmed` (primary or secondary mention); every other note is negative,
  suspected, excluded and past bronchiolitis among them.
- negex: the NegEx test set (2,376 condition mentions in English clinical sentences), read in
  place; one row per mention; positive = *Affirmed*, negative = *Negated*. The text every method
  gets is the sentence with the mention wrapped in square brackets, `no [EDEMA].` (found
  case-insensitively, spaces flexible; of several occurrences the one in upper case, as the
  annotators marked it; when the sentence does not contain the mention — 11 rows whose sentence
  was cut short — the sentence is given unmarked).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gateway.demo.corpus import generate_notes

NEGEX = Path("/work/shared/data/negex/rsAnnotations-1-120-random.txt")
CONFIRMED = "bronchiolitis:confirmed"


class LabelledSet(NamedTuple):
    name: str
    texts: list[str]
    y: np.ndarray  # int64 [N]: 1 positive, 0 negative
    description: dict


def demo_set(n: int = 2000, seed: int = 0) -> LabelledSet:
    notes = list(generate_notes(n, seed))
    y = np.array([CONFIRMED in note.labels for note in notes], dtype=np.int64)
    return LabelledSet("demo", [note.text for note in notes], y, {
        "source": f"gateway.demo.corpus.generate_notes(n={n}, seed={seed})", "unit": "note",
        "positive": f"label {CONFIRMED!r} (any mention of the note)", "negative": "every other note",
        "n": len(notes), "positives": int(y.sum()),
        "suspected_bronchiolitis_notes": sum("bronchiolitis:suspected" in note.labels for note in notes),
        "notes_with_several_conditions": sum(len(note.labels) > 1 for note in notes),
    })


def mark_mention(condition: str, sentence: str) -> tuple[str, bool]:
    """The sentence with the condition wrapped in [ ]; (sentence, False) when it is not there."""
    pattern = r"\s+".join(re.escape(word) for word in condition.split())
    found = list(re.finditer(pattern, sentence, re.IGNORECASE)) if pattern else []
    if not found:
        return sentence, False
    upper = [m for m in found if m.group(0).isupper()]
    m = (upper or found)[0]
    return f"{sentence[:m.start()]}[{m.group(0)}]{sentence[m.end():]}", True


def negex_set(path: Path = NEGEX) -> LabelledSet:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:]
    marked = [mark_mention(r[1], r[2]) for r in rows]
    y = np.array([r[3].strip().lower() == "affirmed" for r in rows], dtype=np.int64)
    return LabelledSet("negex", [text for text, _ in marked], y, {
        "source": str(path), "unit": "condition mention (one row)", "positive": "Affirmed", "negative": "Negated",
        "n": len(rows), "positives": int(y.sum()), "distinct_sentences": len({r[2] for r in rows}),
        "text": "the sentence with the mention wrapped in [ ], the same text for every method",
        "mentions_not_found_in_sentence": sum(not ok for _, ok in marked),
    })


# --- regular expressions ---------------------------------------------------------------------
DEMO_MENTION = re.compile(r"bronchiolit", re.IGNORECASE)
DEMO_WORD = re.compile(r"bronchiolit\w*", re.IGNORECASE)
# The cue list of issue #16: the hedges and negations a user would think of first.
DEMO_CUES = re.compile(r"sospett|\?|esclus|possibil|probabil|pregress", re.IGNORECASE)
DEMO_BEFORE, DEMO_AFTER = 40, 25  # characters around a mention searched for a cue, within its sentence


def demo_regex(text: str) -> int:
    """Naive: the note names bronchiolitis."""
    return int(bool(DEMO_MENTION.search(text)))


def _sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    left = max(text.rfind(".", 0, start), text.rfind("\n", 0, start)) + 1
    ends = [i for i in (text.find(".", end), text.find("\n", end)) if i >= 0]
    return left, min(ends) if ends else len(text)


def demo_regex_cues(text: str) -> int:
    """Positive when some mention of bronchiolitis has no cue within 40 characters before or 25
    after it, in its own sentence (so a suspected bronchiolitis and a confirmed one in one note
    still count as confirmed)."""
    for m in DEMO_WORD.finditer(text):
        lo, hi = _sentence_bounds(text, m.start(), m.end())
        window = text[max(lo, m.start() - DEMO_BEFORE):min(hi, m.end() + DEMO_AFTER)]
        if not DEMO_CUES.search(window.replace(m.group(0), " ")):
            return 1
    return 0


def negex_regex(text: str) -> int:
    """Naive: the condition is named, so it is affirmed (every mention is positive)."""
    return 1


# Classic NegEx triggers (Chapman et al. 2001 and its distributed trigger list, the common ones):
# pre-negation phrases within 6 words before the mention, post-negation ones within 6 words after,
# pseudo-negations ignored, scope cut by a termination word.
NEGEX_PRE = (r"no|not|denies|denied|denying|without|negative for|free of|ruled out|rules out|absence of|"
             r"absent|no evidence of|no sign of|no signs of|never had|never developed|fails to reveal|"
             r"failed to reveal|did not reveal|does not reveal|not demonstrate|no new|no suspicious|"
             r"resolved|cannot see|no complaints of|rather than|declined|free from|neither|nor")
NEGEX_POST = r"free|is ruled out|was ruled out|are ruled out|have been ruled out|has been ruled out|unlikely|not seen|absent|negative"
NEGEX_PSEUDO = re.compile(r"\b(no increase|no change|no significant change|not only|not necessarily|"
                          r"without difficulty|no further|gram negative|not cause|not drain|no interval change)\b",
                          re.IGNORECASE)
NEGEX_TERMINATION = re.compile(r"\b(but|however|although|though|except|apart from|aside from|which|secondary to|"
                               r"cause of|etiology of|origin of|source of|presenting|patient)\b", re.IGNORECASE)
_PRE = re.compile(rf"\b({NEGEX_PRE})\b(?P<gap>(\W+\w+){{0,6}}?\W*)$", re.IGNORECASE)
_POST = re.compile(rf"^(?P<gap>\W*(\w+\W+){{0,6}}?)({NEGEX_POST})\b", re.IGNORECASE)
MENTION = re.compile(r"\[([^\]]*)\]")


def negex_regex_cues(text: str) -> int:
    """1 (affirmed) unless a NegEx trigger governs the bracketed mention; a sentence without a
    marked mention is read whole (a trigger anywhere negates)."""
    m = MENTION.search(text)
    before, after = (text[:m.start()], text[m.end():]) if m else (text, "")
    before, after = NEGEX_PSEUDO.sub(" ", before), NEGEX_PSEUDO.sub(" ", after)
    pre = _PRE.search(before)
    if pre and not NEGEX_TERMINATION.search(pre.group("gap")):
        return 0
    post = _POST.search(after)
    if post and not NEGEX_TERMINATION.search(post.group("gap")):
        return 0
    return 1
