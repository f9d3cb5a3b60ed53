"""Documents' texts by position, read from the documents table in batches (never logged): what the
words-alone baselines and a probe's segment scope both read."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from gateway.domain.datasets.models import Document

TEXT_BATCH = 1000  # positions per query (bounded IN lists)


def texts_at(session: Session, *, dataset_id: int, positions: np.ndarray) -> Iterator[tuple[np.ndarray, list[str]]]:
    """(positions, texts) in batches of TEXT_BATCH, in the order given (ascending)."""
    for start in range(0, len(positions), TEXT_BATCH):
        batch = positions[start : start + TEXT_BATCH]
        stmt = select(Document.position, Document.text).where(
            Document.dataset_id == dataset_id, Document.position.in_([int(p) for p in batch]))
        found = dict(session.execute(stmt).all())
        yield batch, [found.get(int(p)) or "" for p in batch]
