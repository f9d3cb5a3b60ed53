"""Segments: a text cut into clauses or sentences (with their character spans), the unit that keeps
the status of one mention among many (issue #16: a note's mean vector mixes "probabile bronchiolite"
in one line with "bronchiolite" confirmed in another).

Rules, in order:
  1. every newline is a boundary (clinical notes put headers, list items and vitals on lines);
  2. within a line, a sentence ends at `.`, `!` or `?` (closing quotes and brackets kept with it)
     followed by white space and then *not* by a lower-case letter, unless the word before the
     period is an abbreviation: a listed one (`Pz.`, `es.`, `ecc.`, `Dr.`, `Dott.`, `vs.`, `p.es.`,
     `e.g.`, `i.e.`, …), a word with an inner period (`p.o.`, `E.O.`), or a single capital (an
     initial); decimals (`37,5`, `37.5`) never end one, as nothing but white space may follow;
  3. unit "clause" (the default): within a sentence, a clause ends after a `,`, `;` or `:`
     followed by white space (so an inline header, `Diagnosi: bronchiolite`, is a clause of its
     own), and before a word that opens a contrast or an exception (`ma`, `però`, `tuttavia`,
     `but`, `however`, `except`, …: CLAUSE_OPENERS, where NegEx ends a negation's scope); decimals
     (`37,5`) and times (`10:30`) never end one. Unit "sentence" skips this rule;
  4. a piece longer than `max_words` whitespace words (unpunctuated text) is cut into windows
     of equal size, each at most `max_words` words (the embedder still chunk-and-averages a window
     longer than the model's, so no token is ever dropped).
Why clauses by default (bench/results/status.json): a hedge or a negation rarely reaches across a
comma, and a sentence vector of an English model mixes "Tosse, sospetta bronchiolite, esclusa
polmonite" into one direction; the probe on max-pooled clause codes scored higher than on sentence
codes on both labelled sets (the demo and NegEx), at about twice the segments. The cost: a hedge
that sits in a header (`Ipotesi diagnostica: bronchiolite`) is a clause apart from its mention; cutting
at the colon still measured better than keeping it (on the demo's training rows, five SAE seeds).
Spans are trimmed of white space and index the original text: `text[start:end]` is the segment.
Units "word" and "token" are not cut from the text: each white-space word (or word piece) is a segment,
read in its note by the documents' own pass (`token_segments`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from itertools import groupby
from typing import Any, NamedTuple

import numpy as np

from contracts.embed import IN_CONTEXT_UNITS
from services.embedder.distinct import SegmentCache, distinct_texts
from services.embedder.encoder import ChunkVectors, Embedded, embed_texts
from services.embedder.models import LoadedModel

MAX_WORDS = 100  # ≈ 128-200 MiniLM word pieces of Italian clinical text: within its 256-token window
UNITS = ("clause", "sentence")  # cut from the text (`split_segments`)
IN_CONTEXT = IN_CONTEXT_UNITS  # read in the note by the documents' own pass (`token_segments`)
TOKEN, WORD = IN_CONTEXT
DEFAULT_UNIT = "clause"
#: Lower-case words that open a clause inside a sentence: contrast and exception, where a negation's
#: or a hedge's scope ends (NegEx's termination terms). Italian and English.
CLAUSE_OPENERS = ("ma", "però", "tuttavia", "sebbene", "benché", "eccetto", "tranne",
                  "but", "however", "although", "though", "except", "yet")

#: Lower-case, without their final period. Italian and English clinical and general ones.
ABBREVIATIONS = frozenset({
    "pz", "pt", "es", "ecc", "etc", "dr", "dott", "dott.ssa", "dr.ssa", "sig", "sig.ra", "sigg", "prof",
    "prof.ssa", "vs", "p.es", "e.g", "i.e", "cfr", "fig", "figg", "tab", "pag", "pp", "n", "nr", "num",
    "ca", "cca", "approx", "aa", "gg", "sett", "mr", "mrs", "ms", "st", "no", "vol", "al", "eg", "ie",
    "resp", "max", "min", "temp", "sat", "freq", "rif", "tel", "cap", "art", "ss", "seg", "segg", "sx", "dx", "ant", "post",
})
_END = re.compile(r"[.!?]+[\"'»)\]]*(?=\s)")
_OPENING = "([\"'«"  # brackets and quotes that may precede a word
_NEXT = re.compile(r"\s*(\S?)")  # the first character after white space ('' at the line's end)
_WORD = re.compile(r"\S+")
# White space after `,` / `;` / `:`, or before an opener: the white space between two clauses.
_CLAUSE_GAP = re.compile(r"(?<=[,;:])\s+|\s+(?=(?:" + "|".join(CLAUSE_OPENERS) + r")\b)", re.IGNORECASE)


class Span(NamedTuple):
    start: int  # character offset of the segment's first character
    end: int  # one past its last character


def _word_before(line: str, end: int) -> str:
    """The word that ends at `end`: the characters before it back to white space or an opening
    bracket or quote (a backward scan: a regex anchored at `end` would try every start of the line)."""
    start = end
    while start > 0 and not line[start - 1].isspace() and line[start - 1] not in _OPENING:
        start -= 1
    return line[start:end]


def _is_abbreviation(line: str, period: int) -> bool:
    """The word ending at `line[period] == '.'` is an abbreviation (not a sentence end)."""
    word = _word_before(line, period)
    if not word:
        return False
    low = word.lower()
    if low in ABBREVIATIONS or low.rstrip(".") in ABBREVIATIONS:
        return True
    parts = word.strip(".").split(".")
    if len(parts) > 1:  # p.o. / E.O. / b.i.d. (not 38.5)
        return all(0 < len(part) <= 3 and part.isalpha() for part in parts)
    return len(word) == 1 and word.isupper()  # an initial


def _sentence_spans(line: str, offset: int) -> list[Span]:
    spans, start = [], 0
    for m in _END.finditer(line):
        nxt = _NEXT.match(line, m.end()).group(1)  # type: ignore[union-attr]
        if not nxt or nxt.islower():
            continue
        if line[m.start()] == "." and m.end() - m.start() == 1 and _is_abbreviation(line, m.start()):
            continue
        spans.append(Span(offset + start, offset + m.end()))
        start = m.end()
    spans.append(Span(offset + start, offset + len(line)))
    return spans


def _trim(text: str, span: Span) -> Span | None:
    piece = text[span.start:span.end]
    stripped = piece.lstrip()
    if not stripped:
        return None
    start = span.start + len(piece) - len(stripped)
    return Span(start, start + len(stripped.rstrip()))


def _clauses(text: str, span: Span) -> list[Span]:
    """The sentence `span` cut at every clause gap (rule 3), each piece trimmed."""
    cuts = [(m.start(), m.end()) for m in _CLAUSE_GAP.finditer(text, span.start, span.end)]
    bounds = [span.start, *(c for cut in cuts for c in cut), span.end]
    pieces = (_trim(text, Span(a, b)) for a, b in zip(bounds[::2], bounds[1::2]))
    return [p for p in pieces if p is not None]


def _windows(text: str, span: Span, max_words: int) -> list[Span]:
    """The span cut into ceil(W / max_words) windows of whole words, sizes differing by ≤ 1."""
    if span.end - span.start <= 2 * max_words:  # max_words + 1 words need 2 * max_words + 1 characters
        return [span]
    words = [(span.start + m.start(), span.start + m.end()) for m in _WORD.finditer(text[span.start:span.end])]
    if len(words) <= max_words:
        return [span]
    k = math.ceil(len(words) / max_words)
    bounds = [round(i * len(words) / k) for i in range(k + 1)]
    return [Span(words[a][0], words[b - 1][1]) for a, b in zip(bounds, bounds[1:])]


def split_segments(text: str, *, max_words: int = MAX_WORDS, unit: str = DEFAULT_UNIT) -> list[Span]:
    """The text's segments in order, as character spans (see the module docstring); [] for a text
    that is empty or only white space."""
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, not {max_words}")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, not {unit!r}")
    out: list[Span] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        for span in _sentence_spans(line, offset):
            trimmed = _trim(text, span)
            if trimmed is None:
                continue
            for piece in _clauses(text, trimmed) if unit == "clause" else [trimmed]:
                out.extend(_windows(text, piece, max_words))
        offset += len(line)
    return out


class SegmentVectors(NamedTuple):
    """Every segment of a list of texts, embedded on its own; rows in document, then text order."""

    doc: np.ndarray  # int64 [S]: index of the text in the input, non-decreasing
    char_start: np.ndarray  # int32 [S]
    char_end: np.ndarray  # int32 [S]
    vectors: np.ndarray  # float32 [S, d] (float16 for unit "token", as its shard stores them)
    n_tokens: np.ndarray  # int64 [S]: tokens fed to the model, special tokens included (1 a token)
    n_embedded: int  # segments the model embedded: the distinct texts not already in the cache
    word_vectors: np.ndarray | None = None  # float16 [W, d]: with word states, each word read in its note
    word_segment: np.ndarray | None = None  # int64 [W]: the row of the segment each word lies in


def segment_spans(texts: Sequence[str], *, max_words: int = MAX_WORDS,
                  unit: str = DEFAULT_UNIT) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(doc int64 [S], char_start int32 [S], char_end int32 [S]) of every text's segments; a text
    without any (empty, white space) gets one spanning it whole, so every document has a row."""
    doc, start, end = [], [], []
    for i, text in enumerate(texts):
        spans = split_segments(text, max_words=max_words, unit=unit) or [Span(0, len(text))]
        doc += [i] * len(spans)
        start += [s.start for s in spans]
        end += [s.end for s in spans]
    return (np.asarray(doc, dtype=np.int64), np.asarray(start, dtype=np.int32), np.asarray(end, dtype=np.int32))


def embed_segments(lm: LoadedModel, texts: Sequence[str], *, pooling: str = "mean", normalize: bool = True,
                   max_words: int = MAX_WORDS, unit: str = DEFAULT_UNIT, cache: SegmentCache | None = None,
                   **embed_kw: Any) -> SegmentVectors:
    """Each segment of each text through `embed_texts` (same model, pooling, chunk-and-average),
    all segments of all texts sharing batches (of one padded width, as every text). Each distinct
    text (`distinct.distinct_texts`) is embedded once, and not at all when `cache` has it: a repeat
    gets its first copy's vector, bit for bit the one it would have got itself."""
    doc, start, end = segment_spans(texts, max_words=max_words, unit=unit)
    pieces = [texts[d][a:b] for d, a, b in zip(doc.tolist(), start.tolist(), end.tolist())]
    found = distinct_texts(lm, pieces)
    vectors = np.empty((len(found.keys), lm.dim), dtype=np.float32)  # [U, d]
    n_tokens = np.empty(len(found.keys), dtype=np.int64)  # [U]
    todo = []
    for j, key in enumerate(found.keys):
        hit = None if cache is None else cache.get(key)
        if hit is None:
            todo.append(j)
        else:
            vectors[j], n_tokens[j] = hit
    if todo:
        emb = embed_texts(lm, [found.texts[j] for j in todo], pooling=pooling, normalize=normalize, **embed_kw)
        vectors[todo], n_tokens[todo] = emb.vectors, emb.n_tokens
        if cache is not None:
            cache.put([found.keys[j] for j in todo], emb.vectors, emb.n_tokens)
    return SegmentVectors(doc, start, end, vectors[found.inverse], n_tokens[found.inverse], len(todo))


def mean_of_segments(position: np.ndarray, vectors: np.ndarray, n_tokens: np.ndarray, n_docs: int, n_special: int,
                     *, normalize: bool = True) -> np.ndarray:
    """float32 [n_docs, d]: each document's vector as the mean of its segments' vectors (rows in
    document order, every document with one), each weighted by its content tokens (tokens fed less
    the specials and the prompt), then unit norm when `normalize`: chunk-and-average done with the
    document's segments, so that every token counts once but is read in its own clause."""
    weights = np.maximum(n_tokens - n_special, 1).astype(np.float32)  # [S]
    starts = np.searchsorted(position, np.arange(n_docs))
    if not len(position) or np.any(np.diff(np.append(starts, len(position))) <= 0):
        raise ValueError("every document needs at least one segment")  # segment_spans gives each one
    out = np.add.reduceat(vectors * weights[:, None], starts, axis=0)  # [D, d]
    out /= np.add.reduceat(weights, starts)[:, None]
    if normalize:
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out.astype(np.float32, copy=False)


def documents_from_segments(seg: SegmentVectors, n_docs: int, *, normalize: bool, n_special: int) -> Embedded:
    """A run's documents when its `document_vectors` is 'segments': `mean_of_segments`, so the
    document's text is not read by the model a second time. Its chunks are its segments (their
    vectors and character spans); a chunk's token span counts that segment's own tokens, laid end to
    end, so the shard's token count is the segments' (specials included), as a reused shard reads it."""
    vectors = mean_of_segments(seg.doc, seg.vectors, seg.n_tokens, n_docs, n_special, normalize=normalize)
    n_chunks = np.bincount(seg.doc, minlength=n_docs).astype(np.int64)  # [D]
    length = np.maximum(seg.n_tokens - n_special, 0).astype(np.int64)  # [S]
    end = np.cumsum(length)
    first = np.concatenate([[0], np.cumsum(n_chunks)[:-1]])  # each document's first row
    end -= np.repeat(end[first] - length[first], n_chunks)  # restart the count at each document
    chunks = ChunkVectors(doc=seg.doc.astype(np.int64), token_start=(end - length).astype(np.int32),
                          token_end=end.astype(np.int32), char_start=seg.char_start.astype(np.int32),
                          char_end=seg.char_end.astype(np.int32), vectors=seg.vectors)
    n_tokens = np.bincount(seg.doc, weights=seg.n_tokens, minlength=n_docs).astype(np.int64)
    return Embedded(vectors, chunks, n_chunks, n_tokens)


def token_segments(texts: Sequence[str], emb: Embedded, unit: str = TOKEN, block: int = 65_536) -> SegmentVectors:
    """Units read in the note, not cut from it (`embed_texts(token_states=True)`: the documents' own pass, so the
    text is read once). "token": each content word piece a segment, its vector the piece's last hidden state as
    the model read it in its text's chunk, its span the piece's characters less the white space a piece carries
    before its word. "word": each white-space word a segment, its vector the mean of its pieces' states, its span
    the word as written. Vectors at unit norm, in float16 as a segment shard stores them. A negation or a hedge
    changes the states of the words it governs, and a cue word is a word of its own, so such a feature keeps what
    a clause's mean averages away (bench/studies/results/token-features.json). Pieces of white space alone are
    left out; a text left without any keeps one row, its whole span with its document's vector, so every
    document has a row. Nothing is cached: a piece's state depends on its context."""
    if emb.tokens is None:
        raise ValueError("token segments need the documents' token states: embed_texts(token_states=True)")
    if unit not in IN_CONTEXT:
        raise ValueError(f"unit must be one of {', '.join(IN_CONTEXT)}, not {unit!r}")
    tok = emb.tokens
    rows: list[tuple[int, int, int, int, int]] = []  # (text, start, end, first piece in `pieces`, pieces)
    pieces: list[int] = []  # each row's state rows, row after row; -1 - i: text i's document vector
    for i, text in enumerate(texts):
        first = len(rows)
        kept = _kept_pieces(text, tok.offsets[i], int(tok.starts[i]))
        if unit == TOKEN:
            rows += [(i, a, b, len(pieces) + n, 1) for n, (a, b, _) in enumerate(kept)]
            pieces += [r for _, _, r in kept]
        elif kept:
            spans = [(m.start(), m.end()) for m in _WORD.finditer(text)]
            word_of = np.searchsorted([a for a, _ in spans], [a for a, _, _ in kept], side="right") - 1
            for w, group in groupby(zip(word_of.tolist(), kept), key=lambda x: x[0]):
                state_rows = [r for _, (_, _, r) in group]
                rows.append((i, *spans[w], len(pieces), len(state_rows)))
                pieces += state_rows
        if len(rows) == first:
            whole = _trim(text, Span(0, len(text))) or Span(0, len(text))
            rows.append((i, whole.start, whole.end, len(pieces), 1))
            pieces.append(-1 - i)
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 5)
    refs = np.asarray(pieces, dtype=np.int64)
    vectors = np.empty((len(table), tok.states.shape[1]), dtype=np.float16)  # [S, d]
    for lo in range(0, len(table), block):  # float32 a block at a time: a shard's pieces can be millions
        part = table[lo:lo + block]
        span = refs[part[0, 3]:part[-1, 3] + part[-1, 4]]  # the block's rows' pieces, in order
        x = np.empty((len(span), tok.states.shape[1]), dtype=np.float32)
        own = span >= 0
        x[own] = tok.states[span[own]]
        x[~own] = emb.vectors[-1 - span[~own]]
        x = np.add.reduceat(x, part[:, 3] - part[0, 3], axis=0)  # a word's sum: its mean up to a scale
        vectors[lo:lo + block] = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return SegmentVectors(table[:, 0], table[:, 1].astype(np.int32), table[:, 2].astype(np.int32), vectors,
                          np.ones(len(table), dtype=np.int64), 0)


def _kept_pieces(text: str, offsets: list[tuple[int, int]], first_row: int) -> list[tuple[int, int, int]]:
    """(start, end, state row) of a text's pieces, each span less its white space; pieces of white space left out."""
    out = []
    for j, (a, b) in enumerate(offsets):
        piece = text[a:b]
        start, end = a + len(piece) - len(piece.lstrip()), b - (len(piece) - len(piece.rstrip()))
        if end > start:
            out.append((start, end, first_row + j))
    return out


def with_words(seg: SegmentVectors, words: SegmentVectors) -> SegmentVectors:
    """`seg` (cut from the texts) with `words` (`token_segments(..., WORD)` of the same texts) as its word rows,
    each word tied to the segment it lies in: the last segment of its text starting at or before the word (a
    segment's bounds fall on white space, so a word lies in one). A text's fallback row (no piece) goes to its
    first segment."""
    seg_key = seg.doc.astype(np.int64) * (1 << 32) + seg.char_start
    word_key = words.doc.astype(np.int64) * (1 << 32) + words.char_start
    row = np.searchsorted(seg_key, word_key, side="right") - 1  # [W]
    first = np.searchsorted(seg.doc, words.doc, side="left")  # each word's text's first segment
    row = np.maximum(row, first).astype(np.int64)
    if len(row) and (np.any(seg.doc[row] != words.doc) or np.any(np.diff(row) < 0)):
        raise ValueError("words and segments are not of the same texts")
    return seg._replace(word_vectors=words.vectors, word_segment=row)


def embed_documents(lm: LoadedModel, texts: Sequence[str], *, segments: bool, unit: str, documents: str,
                    cache: SegmentCache | None = None, on_tokens: Any = None, word_states: bool = False,
                    **embed_kw: Any) -> tuple[Embedded, SegmentVectors | None]:
    """A run's documents and (with `segments`) their segments of `unit`: one pass for unit "token" (the
    documents' own) and for `documents` "segments" (the documents' vectors the mean of their segments'),
    else the documents' pass and the segments' own; with `word_states` the documents' pass also keeps its
    words (`with_words`). `on_tokens` follows the pass that reads the documents."""
    if segments and (unit in IN_CONTEXT or word_states):
        embedded = embed_texts(lm, texts, on_tokens=on_tokens, token_states=True, **embed_kw)
        if unit in IN_CONTEXT:
            return embedded._replace(tokens=None), token_segments(texts, embedded, unit)
        words = token_segments(texts, embedded, WORD)
        seg = embed_segments(lm, texts, unit=unit, cache=cache, **embed_kw)
        return embedded._replace(tokens=None), with_words(seg, words)
    if segments and documents == "segments":
        seg = embed_segments(lm, texts, unit=unit, cache=cache, on_tokens=on_tokens, **embed_kw)
        return documents_from_segments(seg, len(texts), normalize=embed_kw.get("normalize", True),
                                       n_special=lm.n_special), seg
    embedded = embed_texts(lm, texts, on_tokens=on_tokens, **embed_kw)
    seg = embed_segments(lm, texts, unit=unit, cache=cache, **embed_kw) if segments else None
    return embedded, seg
