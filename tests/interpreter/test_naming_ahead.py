"""The groups of features a naming run draws ahead in a child process (services/interpreter/ahead.py): every
feature comes back once, in order, whichever process drew it; a failure in the child is raised in the parent with
its traceback; closing stops the child."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from services.interpreter import ahead as ahead_module
from services.interpreter.ahead import Ahead, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs fork and two cores")
PARENT = os.getpid()


def drawing(child_seconds: float):
    """A draw giving each feature with the process that drew it; the child takes `child_seconds` a chunk, so that
    the parent has chunks to draw."""

    async def draw(features: list[int]) -> list[tuple[int, int]]:
        if os.getpid() != PARENT:
            time.sleep(child_seconds)
        return [(f, os.getpid()) for f in features]

    return draw


slow_draw = drawing(0.2)


def test_groups_come_back_whole_and_in_order_drawn_by_both_processes(monkeypatch):
    monkeypatch.setattr(ahead_module, "CHUNK", 4)
    ahead = Ahead(slow_draw, lambda: None)
    try:
        groups = [list(range(g * 8, g * 8 + 8)) for g in range(3)]  # 2 chunks each; 3 sent, 3 left in the queue
        for g in groups:
            ahead.add(g)
        assert all(ahead.holds(f) for g in groups for f in g)
        got = asyncio.run(ahead.collect(groups[2][:1]))  # the last group needed: all three, oldest first
        assert [[f for f, _ in g] for g in got] == groups
        drawers = {pid for g in got for _, pid in g}
        assert PARENT in drawers and len(drawers) == 2  # the child drew the chunks sent, this process the others
        assert not any(ahead.holds(f) for g in groups for f in g)
        assert asyncio.run(ahead.collect()) == []  # nothing left
    finally:
        ahead.close()


def test_collect_without_need_returns_only_what_is_drawn():
    ahead = Ahead(slow_draw, lambda: None)
    try:
        ahead.add([1, 2, 3])
        assert asyncio.run(ahead.collect()) == []  # the child is still drawing: nothing is waited for
        deadline = time.monotonic() + 30
        got: list = []
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
            got = asyncio.run(ahead.collect())
        assert [[f for f, _ in g] for g in got] == [[1, 2, 3]]
        assert {pid for _, pid in got[0]} != {PARENT}
    finally:
        ahead.close()


async def failing_draw(features: list[int]) -> list[int]:
    if os.getpid() != PARENT:
        raise ValueError(f"cannot draw {features}")
    return features


def test_a_failure_in_the_child_is_raised_here_with_its_traceback():
    ahead = Ahead(failing_draw, lambda: None)
    try:
        ahead.add([7])
        with pytest.raises(RuntimeError, match=r"(?s)child process.*ValueError: cannot draw \[7\]"):
            asyncio.run(ahead.collect([7]))
    finally:
        ahead.close()


def test_close_stops_the_child():
    ahead = Ahead(slow_draw, lambda: None)
    process = ahead._worker._process
    assert process.is_alive()
    ahead.close()
    assert not process.is_alive() and process.exitcode is not None


def test_help_draws_here_the_oldest_groups_last_chunk_not_sent(monkeypatch):
    """What a naming run does while it waits for its labels' vectors."""
    monkeypatch.setattr(ahead_module, "CHUNK", 2)
    monkeypatch.setattr(ahead_module, "IN_FLIGHT", 1)
    ahead = Ahead(drawing(1.0), lambda: None)
    try:
        ahead.add([1, 2, 3, 4, 5, 6])  # chunks [1, 2] (sent), [3, 4], [5, 6]
        helped = 0
        while asyncio.run(ahead.help()):  # [5, 6] here, then [3, 4] here unless the child has had it sent meanwhile
            helped += 1
        assert 1 <= helped <= 2
        (group,) = asyncio.run(ahead.collect([1]))
        assert [f for f, _ in group] == [1, 2, 3, 4, 5, 6]
        assert dict(group)[5] == dict(group)[6] == PARENT and dict(group)[1] != PARENT
    finally:
        ahead.close()
