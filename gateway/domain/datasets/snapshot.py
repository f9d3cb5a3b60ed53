"""The dataset snapshot: an immutable Parquet file the services read instead of the database.

Columns: position int64 (document order, the row index of every later artifact), doc_id
int64 (the gateway's document id), external_id string, text string, labels list<string>,
metadata string (JSON). Written in row groups so that neither writer nor readers hold the
whole dataset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

SNAPSHOT_SCHEMA = pa.schema(
    [
        pa.field("position", pa.int64(), nullable=False),
        pa.field("doc_id", pa.int64(), nullable=False),
        pa.field("external_id", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("metadata", pa.string()),
    ]
)


class SnapshotWriter:
    """Append batches of documents to a local Parquet file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = pq.ParquetWriter(str(path), SNAPSHOT_SCHEMA, compression="zstd")

    def write_batch(self, rows: list[dict[str, Any]], doc_ids: list[int]) -> None:
        table = pa.table(
            {
                "position": [r["position"] for r in rows],
                "doc_id": doc_ids,
                "external_id": [r["external_id"] for r in rows],
                "text": [r["text"] for r in rows],
                "labels": [r["labels"] for r in rows],
                "metadata": [json.dumps(r["meta"], ensure_ascii=False) for r in rows],
            },
            schema=SNAPSHOT_SCHEMA,
        )
        self._writer.write_table(table)

    def write_table(self, table: pa.Table) -> None:
        """Rows already in the snapshot's layout (another snapshot's row group)."""
        self._writer.write_table(table.select(SNAPSHOT_SCHEMA.names).cast(SNAPSHOT_SCHEMA))

    def close(self) -> None:
        self._writer.close()
