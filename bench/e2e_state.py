"""bench/e2e.py's stages across calls: what a stopped run had finished, so `--resume DIR` goes on from there.

The data dir keeps `e2e-state.json`: the run's arguments, the ids the stages left (dataset, runs, concept), each
finished stage's figures, the job each unfinished stage was waiting on, and the seconds an interrupted stage had
already taken. A resumed call starts `prisma serve` on the same data dir (embedded mode), which queues again the jobs
the killed process left (gateway/domain/jobs/runner.py `resume_unfinished`: training resumes from its last
checkpoint, naming from the features it had stored), waits on the same job instead of submitting another, and adds
this call's seconds to the stage's earlier ones.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "e2e-state.json"


class StageState:
    def __init__(self, root: Path, args: dict[str, Any]) -> None:
        self.path = root / NAME
        self.data: dict[str, Any] = {"args": args, "ids": {}, "stages": {}, "pending": {}, "partial_seconds": {},
                                     "calls": 0}
        if self.path.exists():
            self.data = json.loads(self.path.read_text())
        self.data["calls"] += 1
        self.current: tuple[str, float] | None = None
        self.save()

    @property
    def ids(self) -> dict[str, Any]:
        return self.data["ids"]

    @property
    def stages(self) -> dict[str, dict]:
        return self.data["stages"]

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)

    def job(self, stage: str, submit: Callable[[], str]) -> str:
        """The path to poll for `stage`'s job: the one a stopped call was waiting on, else a new one (saved)."""
        path = self.data["pending"].get(stage)
        if path is None:
            path = self.data["pending"][stage] = submit()
            self.save()
        return path

    def start(self, stage: str) -> None:
        self.current = (stage, time.perf_counter())

    def finish(self, stage: str, figures: dict) -> dict:
        """The stage's figures with the seconds of earlier calls added, kept as finished."""
        earlier = self.data["partial_seconds"].pop(stage, 0.0)
        if earlier:
            figures = {**figures, "seconds": round(figures["seconds"] + earlier, 2), "resumed": True,
                       "seconds_before_resume": round(earlier, 2)}
        self.data["pending"].pop(stage, None)
        self.stages[stage] = figures
        self.current = None
        self.save()
        return figures

    def interrupted(self) -> None:
        """Keep the seconds the stage in progress has taken in this call."""
        if self.current is not None:
            stage, t0 = self.current
            self.data["partial_seconds"][stage] = self.data["partial_seconds"].get(stage, 0.0) + time.perf_counter() - t0
            self.current = None
            self.save()


def stop_on_sigterm() -> None:
    """SIGTERM (`timeout`, a device call's limit) unwinds like Ctrl-C, so the state is saved and the server stopped."""
    def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
