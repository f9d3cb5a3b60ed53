"""Requests that arrive together run together: POST /passages calls for one model and spec that wait while the
model is busy are embedded in its next pass as one batch, each caller given its own texts' vectors.

Leader and followers, no thread of its own: a caller files its texts, then waits for the model's lock (which
serialises a model's work anyway: its tokenizer is not re-entrant). The first to get the lock takes every waiting
request with the same key, up to `max_texts` texts, computes them in one call and hands each its part; a caller
that finds its part done when it gets the lock returns it. One note's classify is a few forward passes of a few
rows each, so eight callers at once share passes instead of queueing for 8 x as many.

Batching changes no vector beyond the precision's own noise: a sequence is padded to a width fixed by its own
length (chunking.padded_length), so in fp32 and int8 a text gets bit for bit the vectors alone that it gets beside
others (in bf16 on an AMX CPU, within about 1e-3: oneDNN's kernel follows the row count). A batch that fails is
computed again request by request, so one caller's failure is not another's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

R = TypeVar("R")


@dataclass(eq=False)
class Ticket(Generic[R]):
    texts: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    result: R | None = None
    error: BaseException | None = None


class Batcher(Generic[R]):
    """`run(lock, key, texts, compute, split)`: `compute(texts)` on the texts of every waiting request of `key`
    (this one's among them), `split(computed, sizes)` into one result per request, in order."""

    def __init__(self, max_texts: int) -> None:
        self.max_texts = max_texts
        self._mu = threading.Lock()
        self._waiting: dict[Hashable, list[Ticket[R]]] = {}
        self.batches = 0  # passes computed (a test reads it)

    def waiting(self, key: Hashable) -> int:
        with self._mu:
            return len(self._waiting.get(key, ()))

    def _take(self, key: Hashable, mine: Ticket[R]) -> list[Ticket[R]]:
        """The waiting requests of `key`, this one first, while their texts fit in max_texts."""
        with self._mu:
            queue = self._waiting.get(key, [])
            taken, n = [mine], len(mine.texts)
            for ticket in queue:
                if ticket is not mine and n + len(ticket.texts) <= self.max_texts:
                    taken.append(ticket)
                    n += len(ticket.texts)
            rest = [t for t in queue if t not in taken]
            if rest:
                self._waiting[key] = rest
            else:
                self._waiting.pop(key, None)
            return taken

    def run(self, lock: threading.Lock, key: Hashable, texts: list[str], compute: Callable[[list[str]], object],
            split: Callable[[object, list[int]], list[R]]) -> R:
        mine: Ticket[R] = Ticket(list(texts))
        with self._mu:
            self._waiting.setdefault(key, []).append(mine)
        with lock:
            if not mine.done.is_set():
                taken = self._take(key, mine)
                self._compute(taken, compute, split)
        if mine.error is not None:
            raise mine.error
        return mine.result  # type: ignore[return-value]

    def _compute(self, taken: list[Ticket[R]], compute: Callable[[list[str]], object],
                 split: Callable[[object, list[int]], list[R]]) -> None:
        self.batches += 1
        try:
            parts = split(compute([t for ticket in taken for t in ticket.texts]), [len(t.texts) for t in taken])
        except BaseException as exc:  # noqa: BLE001 - each request alone below, its own error its own
            if len(taken) == 1:
                taken[0].error = exc
                taken[0].done.set()
                return
            for ticket in taken:
                self._compute([ticket], compute, split)
            return
        for ticket, part in zip(taken, parts):
            ticket.result = part
            ticket.done.set()
