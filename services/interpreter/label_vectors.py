"""Label texts' vectors for the embedding scorer: each text embedded once, cached, and embedded ahead on a thread.

Embedding labels is most of naming's cost, and the model is far faster on hundreds of texts a call than on fifty
(the demo's 2,341 labels on one bf16 thread: 11.9 s at 50 a call, 7.1 s at 500), so the Namer embeds the
candidates of several batches at once (`start`, from Namer.prepare) on a thread of its own, while it draws the
evidence of the next ones; a batch that needs them waits for that call only. A label's vector does not depend on
the texts embedded with it in fp32 and int8 (services/embedder/encoder.py forward_chunks pads a text by its own
length), so the vectors, and the names, are those of embedding each batch alone; in bf16 on an AMX CPU the matmul
kernel follows the batch's row count, and a vector moves within about 1e-3.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from services.interpreter.scoring import EmbedFn

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _embedding_thread() -> ThreadPoolExecutor:
    """One thread for the process: calls run in the order started (a batch waits for its own and those before)."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="label-vectors"))
        return _POOL[0]


class LabelVectors:
    """Vectors of label texts by `embed_texts` (sync or async), at most `cap` kept (given at each call)."""

    def __init__(self, embed_texts: EmbedFn) -> None:
        self.embed_texts = embed_texts
        self.vectors: dict[str, np.ndarray] = {}
        self.embedded = 0
        """Texts embedded so far (cache misses): what naming costs."""
        self._inflight: list[tuple[list[str], Future]] = []  # calls started on the thread, oldest first

    def start(self, texts: Sequence[str]) -> None:
        """Embed on the thread the texts of `texts` neither cached nor in flight, in one call."""
        flying = {t for new, _ in self._inflight for t in new}
        new = sorted({t for t in texts if t not in self.vectors and t not in flying})
        if new:
            self._inflight.append((new, _embedding_thread().submit(self.embed_texts, new)))

    def ready(self, texts: Sequence[str]) -> bool:
        """`get(texts)` would not wait for a call in flight."""
        needed = set(texts)
        return all(future.done() for new, future in self._inflight if not needed.isdisjoint(new))

    async def get(self, texts: Sequence[str], cap: int) -> dict[str, np.ndarray]:
        """Vectors of `texts`: the calls in flight that hold any of them awaited (and those started before), the
        rest embedded now in one call. When more than `cap` would be kept, the cache starts again from this
        call's texts, copied (a cached row is a view that would keep its whole batch's array)."""
        needed = set(texts)
        last = max((k for k, (new, _) in enumerate(self._inflight) if not needed.isdisjoint(new)), default=-1)
        done, self._inflight = self._inflight[: last + 1], self._inflight[last + 1:]
        for new, future in done:
            got = await asyncio.wrap_future(future)
            self._keep(new, await got if inspect.isawaitable(got) else got, needed, cap)
        new = sorted(needed - self.vectors.keys())
        if new:
            got = self.embed_texts(new)
            self._keep(new, await got if inspect.isawaitable(got) else got, needed, cap)
        return {t: self.vectors[t] for t in texts}

    def _keep(self, new: list[str], got: object, texts: set[str], cap: int) -> None:
        vectors = np.asarray(got, dtype=np.float32)
        if len(self.vectors) + len(new) > cap:
            self.vectors = {t: self.vectors[t].copy() for t in texts if t in self.vectors}
        self.vectors.update(zip(new, vectors))
        self.embedded += len(new)
