"""A corpus's terms, read once for TermIndex: each text's term ids, the vocabulary in the order terms first occur, and
how each word is written. A large corpus is read by two processes, each half of the texts, and the halves merged
into exactly what one pass gives (reading the texts is Python that holds the GIL: about 33 s of one core at 200,000
notes, while the other core waited)."""

from __future__ import annotations

import multiprocessing
import pickle
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import NamedTuple

import numpy as np

from services.interpreter.backends.words import terms, tokens

SHORT_TEXT = 400
"""Characters up to which a repeated text is recognised (clauses repeat; a copy is tokenised once)."""
TWO_PROCESSES_FROM = 32 * 2**20
"""Bytes of text from which the scan is split between this process and a forked one (where one can be forked). Below
it the child's vocabulary costs as much to send and merge as its half saves: on E3C's English, Spanish and Basque
cases (13.5 MB) 6.85 s in one process, 6.79 s in two; on its French cases (54 MB) 22.2 against 12.9 s, on 200,000
generated notes (171 MB) 41.9 against 23.5 s (bench/term_scan.py)."""


class Scan(NamedTuple):
    vocab: dict[str, int]  # term -> id, in the order terms first occur (a list of them in that order, as sent)
    rows: np.ndarray  # int32 [entries]: the text of each (text, term) entry
    cols: np.ndarray  # int32 [entries]: its term id
    surfaces: dict[str, Counter[str]]  # folded word -> how it is written (lower case), counted
    n: int  # texts read


def scan(texts: Iterable[str]) -> Scan:
    """One pass over `texts`. Short texts repeat (the demo's 71,298 clauses hold 15,017): tokenised once, a copy's
    terms copied and its surfaces counted at the end (a copy adds no new word or surface, so every Counter's order is
    a full pass's)."""
    surfaces: dict[str, Counter[str]] = {}
    vocab: dict[str, int] = {}
    # int32, compact: 27 million (text, term) pairs at 200,000 notes; csr_matrix keeps int32 indices without a copy
    rows, cols = array("i"), array("i")
    seen: dict[str, list[int]] = {}  # short text -> [its terms' start in cols, their number, its copies]
    n = 0
    for n, text in enumerate(texts, 1):
        found = seen.get(text) if len(text) <= SHORT_TEXT else None
        if found is None:
            ids = {vocab.setdefault(t, len(vocab)) for t in terms(text, surfaces)}
            if len(text) <= SHORT_TEXT:
                seen[text] = [len(cols), len(ids), 0]
            cols.extend(ids)
            rows.extend([n - 1] * len(ids))
        else:
            found[2] += 1
            cols.extend(cols[found[0]:found[0] + found[1]])
            rows.extend([n - 1] * found[1])
    for text, (_, _, copies) in seen.items():
        if copies:
            for word, surface, *_ in tokens(text):
                surfaces[word][surface] += copies
    return Scan(vocab, np.frombuffer(rows, np.int32), np.frombuffer(cols, np.int32), surfaces, n)


def merge(first: Scan, second: Scan) -> Scan:
    """What one pass over the first's texts and then the second's gives: the second's new terms after the first's, in
    their order; its texts after the first's; each word's new spellings after those the first saw."""
    vocab = first.vocab
    remap = np.fromiter((vocab.setdefault(t, len(vocab)) for t in second.vocab), np.int32, len(second.vocab))
    surfaces = first.surfaces
    for word, counts in second.surfaces.items():
        mine = surfaces.get(word)
        if mine is None:
            surfaces[word] = counts
        else:
            mine.update(counts)
    return Scan(vocab, np.concatenate([first.rows, second.rows + np.int32(first.n)]),
                np.concatenate([first.cols, remap[second.cols]]), surfaces, first.n + second.n)


def _send_half(text_at: Callable[[int], str], start: int, stop: int, conn: Connection) -> None:
    half = scan(text_at(p) for p in range(start, stop))
    terms_blob = "\n".join(half.vocab).encode()  # a term holds no line break; one string, not a list, to pickle
    conn.send_bytes(pickle.dumps((terms_blob, half._replace(vocab={})), protocol=pickle.HIGHEST_PROTOCOL))
    conn.close()


def _received(data: bytes) -> Scan:
    terms_blob, compact = pickle.loads(data)
    return compact._replace(vocab=terms_blob.decode().split("\n") if terms_blob else [])


def _middle(sizes: np.ndarray) -> int:
    """Where the texts split into two halves of about equal size (at least one text each)."""
    total = np.cumsum(sizes, dtype=np.int64)
    return int(min(max(np.searchsorted(total, total[-1] / 2) + 1, 1), len(sizes) - 1))


def scan_corpus(text_at: Callable[[int], str], n: int, *, sizes: np.ndarray | None = None,
                two_processes: bool | None = None) -> Scan:
    """`scan` of texts 0..n-1 (`text_at(p)`): where `sizes` (each text's length in bytes) add up to TWO_PROCESSES_FROM
    or more (or as `two_processes` says), the texts after their middle by a forked child while this process reads
    the first, then merged; if the child fails, read here."""
    from services.interpreter.ahead import can_fork

    if two_processes is None:
        two_processes = sizes is not None and int(np.sum(sizes)) >= TWO_PROCESSES_FROM and can_fork()
    if not two_processes or n < 2:
        return scan(text_at(p) for p in range(n))
    half = _middle(np.ones(n) if sizes is None else np.asarray(sizes))
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_send_half, args=(text_at, half, n, send), name="term-scan", daemon=True)
    child.start()
    send.close()
    try:
        first = scan(text_at(p) for p in range(half))
        try:
            second = _received(receive.recv_bytes())
        except (EOFError, OSError):  # the child died (killed, out of memory): read its half here
            second = scan(text_at(p) for p in range(half, n))
    finally:
        receive.close()
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
    return merge(first, second)
