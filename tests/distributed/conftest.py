"""The multi-process deployment, started once per test session (it takes a minute on two cores)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.demo.corpus import generate_notes
from tests.conftest import create_pg_database, drop_pg_database
from tests.distributed.harness import Deployment

N_NOTES = 192


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("distributed")
    url = create_pg_database()
    dep = Deployment(root=root, database_url=url, artifact_root=(root / "artifacts").as_uri())
    try:
        dep.start_all()
        yield dep
    finally:
        dep.stop_all()
        drop_pg_database(url)


@pytest.fixture(scope="session")
def notes_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "notes.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text", "labels"])
        for note in generate_notes(n=N_NOTES, seed=11):
            w.writerow([note.id, note.text, "|".join(note.labels)])
    return path
