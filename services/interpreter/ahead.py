"""A forked process that draws the evidence and keywords candidates of the features a run names next.

A feature's naming is the interpreter's own numpy work (its evidence, near misses and calibration set, the keywords
back-end's phrases: thousands of small operations that hold the GIL, so a thread would not run them beside the
naming thread) and embedding its labels (torch, on a thread of its own). On two cores the naming thread was the run's
critical path: about 13 of the demo's 15 s, while the label thread worked 6 (bench/results/naming-speed.json). So
`Namer.prepare` hands the groups ahead to one child process, forked from the Namer once its indexes are built (the
corpus, codes, term and stem indexes are shared copy-on-write, not copied), and the parent scores the group before
while the child draws the next ones (`Ahead`). A group goes to the child a CHUNK of features at a time, IN_FLIGHT
chunks at once; when the parent needs a group the child has not finished, or waits for its labels' vectors, it draws
the oldest group's last chunks not sent yet itself while the child draws the first ones, so that neither process
waits for the other while there is work left. What the child returns is what the parent would have drawn (the draws depend only on the seed and the
feature), so the names are those of naming in one process.

Only keywords back-ends run there: a language model's client, its connections and its threads stay in the parent.
The child draws the chunks in the order sent, and exits when the parent closes its end of the pipe (the parent's end
closing with it: a killed worker leaves no child behind).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
import queue
import signal
import threading
import traceback
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from services.cpu import usable_cpus

CHUNK = 64
"""Features the child is sent at a time (a batch): the parent may draw a group's last chunks not sent."""
IN_FLIGHT = 3
"""Chunks sent to the child and not taken back: the next ones wait in the pipe while it draws one."""


def can_fork() -> bool:
    """A child may be forked here: POSIX fork, two cores or more, and not inside a daemonic process (which may
    have no children)."""
    return ("fork" in multiprocessing.get_all_start_methods() and usable_cpus() >= 2
            and not multiprocessing.current_process().daemon)


class _Failed:
    """What the child sends back when a group failed: the traceback, raised in the parent."""

    def __init__(self, text: str) -> None:
        self.text = text


def _serve(draw: Callable[[list[int]], Any], conn: Connection, parent_end: Connection,
           on_start: Callable[[], None]) -> None:
    """The child: each list of features received is drawn and sent back, until the parent's end closes. A thread
    sends the results, so that the child draws the next chunk while the parent has not read the last one (a
    pipe holds 64 KB, a chunk's evidence about 1 MB)."""
    parent_end.close()  # so that the parent's death closes the pipe: recv() then raises EOFError
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which stops this
    on_start()
    outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def send() -> None:
        while (data := outbox.get()) is not None:
            try:
                conn.send_bytes(data)
            except OSError:  # the parent is gone
                return

    sender = threading.Thread(target=send, name="naming-ahead-send", daemon=True)
    sender.start()
    while True:
        try:
            features = conn.recv()
        except (EOFError, OSError):
            break
        try:
            out: Any = draw(features)
        except BaseException:  # noqa: BLE001 (sent to the parent, which raises it)
            out = _Failed(traceback.format_exc())
        outbox.put(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    outbox.put(None)
    sender.join(timeout=5)


def _stop(conn: Connection, process: multiprocessing.process.BaseProcess) -> None:
    conn.close()
    process.join(timeout=5)
    if process.is_alive():
        process.terminate()
        process.join(timeout=5)


class AheadWorker:
    """One child process running `draw(features)` for the lists `submit`ted, in order; `take` returns the oldest
    one's result (waiting for it), `ready` says whether it has come back."""

    def __init__(self, draw: Callable[[list[int]], Any], on_start: Callable[[], None] = lambda: None) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(draw, child, self._conn, on_start), daemon=True,
                                    name="naming-ahead")
        self._process.start()
        child.close()
        self.in_flight = 0
        """Lists sent and not taken back."""
        self._close = weakref.finalize(self, _stop, self._conn, self._process)

    def submit(self, features: Sequence[int]) -> None:
        self._conn.send(list(features))
        self.in_flight += 1

    def ready(self) -> bool:
        """The oldest list in flight has come back."""
        return self.in_flight > 0 and self._conn.poll()

    def take(self) -> Any:
        """What draw returned for the oldest list in flight, waiting for it."""
        self.in_flight -= 1
        try:
            got = pickle.loads(self._conn.recv_bytes())
        except EOFError as exc:
            raise RuntimeError(f"the naming process ahead exited (code {self._process.exitcode})") from exc
        if isinstance(got, _Failed):
            raise RuntimeError(f"drawing features ahead failed in the child process:\n{got.text}")
        return got

    def close(self) -> None:
        """Stop the child (what it was drawing is dropped)."""
        self._close()


@dataclass
class _Group:
    chunks: int
    parts: dict[int, list] = field(default_factory=dict)
    """Each drawn chunk's items, by its place in the group."""

    @property
    def complete(self) -> bool:
        return len(self.parts) == self.chunks


class Ahead:
    """Groups of features drawn ahead by `draw` (async: features -> one item per feature, in order), by a child
    process and, when a group is needed before the child has drawn it, by this one; `collect` returns the groups
    complete, in the order added."""

    def __init__(self, draw: Callable[[list[int]], Awaitable[list]], on_start: Callable[[], None]) -> None:
        self._draw = draw
        self._worker = AheadWorker(lambda features: asyncio.run(draw(features)), on_start)
        self._queue: deque[tuple[int, int, list[int]]] = deque()  # (group, chunk, features) not sent yet, in order
        self._sent: deque[tuple[int, int]] = deque()  # (group, chunk) of those in flight, in order
        self._groups: dict[int, _Group] = {}  # added, not returned yet, in order
        self._of: dict[int, int] = {}  # feature -> its group, until returned
        self._added = 0

    def holds(self, feature: int) -> bool:
        """`feature` is in a group added and not returned."""
        return feature in self._of

    def add(self, features: Sequence[int]) -> None:
        """A group to draw (features none of those held)."""
        group, self._added = self._added, self._added + 1
        chunks = [list(features[i:i + CHUNK]) for i in range(0, len(features), CHUNK)]
        self._groups[group] = _Group(len(chunks))
        self._queue.extend((group, k, c) for k, c in enumerate(chunks))
        self._of.update(dict.fromkeys(features, group))
        self._pump()

    async def collect(self, needed: Sequence[int] = ()) -> list[list]:
        """The groups complete, oldest first, up to the first one not complete: those drawn already and, drawing
        their chunks not sent or waiting for the child, those up to the last one holding any of `needed`."""
        last = max((self._of[f] for f in needed if f in self._of), default=-1)
        while True:
            self._intake()
            if all(g.complete for k, g in self._groups.items() if k <= last):
                break
            if self._queue and self._queue[0][0] <= last:  # the oldest needed group's last chunk not sent: here
                await self._draw_here(self._queue[0][0])
            else:
                self._take()
        out = []
        while self._groups and self._groups[first := next(iter(self._groups))].complete:
            parts = self._groups.pop(first).parts
            out.append([item for k in sorted(parts) for item in parts[k]])
        for f in [f for f, g in self._of.items() if g not in self._groups]:
            del self._of[f]
        return out

    async def help(self) -> bool:
        """Draw here the last chunk not sent of the oldest group with one (while this process would wait for
        something else); False when there is none."""
        self._intake()
        if not self._queue:
            return False
        await self._draw_here(self._queue[0][0])
        return True

    async def _draw_here(self, group: int) -> None:
        """The last chunk not sent of `group` (which has one), drawn in this process."""
        at = max(i for i, (g, _, _) in enumerate(self._queue) if g == group)
        _, k, chunk = self._queue[at]
        del self._queue[at]
        self._groups[group].parts[k] = await self._draw(chunk)

    def _intake(self) -> None:
        """The chunks the child has sent back taken, and the pipe filled again."""
        while self._worker.ready():
            self._take()
        self._pump()

    def _take(self) -> None:
        group, k = self._sent.popleft()
        self._groups[group].parts[k] = self._worker.take()

    def _pump(self) -> None:
        while self._queue and self._worker.in_flight < IN_FLIGHT:
            group, k, chunk = self._queue.popleft()
            self._worker.submit(chunk)
            self._sent.append((group, k))

    def close(self) -> None:
        self._worker.close()
