"""Uploaded segment vectors (one vector per sentence-like span of a document), read and checked
before anything is stored; the optional `segments` part of `POST /api/v1/embedding-runs/import`.

Two forms, told apart by their magic bytes:

- **Parquet**: one id column (`external_id`, `doc_id` or `position`, as the document vectors'),
  `char_start` and `char_end` (integers: the segment is `text[char_start:char_end]` of the
  document's text, in characters) and `vector` (list of floats, the document vectors' d each).
- **.npz** (as `np.savez` writes it, compressed or not): arrays `char_start`, `char_end`,
  `vectors` [S, d] and one id array named `external_id`, `doc_id` or `position`.

Rows in any order, any number per document; every id must be a document of the dataset, every span
inside its document's text and not empty, no segment twice, every value finite. A document without
any segment gets one spanning its whole text with the document's own vector (what the embedder
does for a text without a sentence), so that every document has a row, as in embedded runs.

The result is what an embedded run's segment shards hold (contracts.embed.SEGMENT_ARRAYS): rows
sorted by (position, char_start, char_end), vectors float16 (scaled to unit norm when the run
normalises). Vectors are read in blocks and laid out in a float16 memory map beside the upload,
so memory stays bounded by the ids and spans (24 bytes a segment), never the vectors.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import IO, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gateway.domain.runs.errors import RunInputError
from gateway.domain.runs.vector_files import (
    BLOCK_ROWS,
    ID_COLUMNS,
    NPY_MAGIC,
    PARQUET_MAGIC,
    VECTOR_COLUMN,
    DatasetKeys,
    as_float32,
    check_block,
    positions_of,
    vector_block,
)

FIELD = "segments"
ZIP_MAGIC = b"PK\x03\x04"
SPAN_COLUMNS = ("char_start", "char_end")
NPZ_VECTORS = "vectors"
FLOAT16_MAX = float(np.finfo(np.float16).max)


class SegmentUpload(NamedTuple):
    """Checked segments in (position, char_start, char_end) order, documents without any filled."""

    vectors: np.ndarray  # float16 [S, d]: a memory map beside the upload
    position: np.ndarray  # int64 [S], non-decreasing, every document at least once
    char_start: np.ndarray  # int32 [S]
    char_end: np.ndarray  # int32 [S]
    format: str  # "parquet" | "npz"
    id_column: str
    n_uploaded: int  # segments in the upload
    n_filled: int  # documents that had none: one row each, the whole text and the document's vector


def f(name: str) -> str:
    """The name of a field of the segments file, as errors give it: `segments.char_start`."""
    return f"{FIELD}.{name}"


def read_segments(path: Path, keys: DatasetKeys, text_chars: np.ndarray, documents: np.ndarray, *,
                  work_path: Path, max_bytes: int, normalize: bool) -> SegmentUpload:
    """Read and check the segments file at `path` against the dataset (`text_chars`: int64 [N], each
    document's length in characters) and its document vectors (`documents`: float32 [N, d] in position
    order, already checked). `work_path`: where the float16 vectors are laid out (the caller deletes
    it). Raises RunInputError naming `segments` or one of its fields."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    if head.startswith(PARQUET_MAGIC):
        reader = _ParquetSegments(path)
    elif head.startswith(ZIP_MAGIC):
        reader = _NpzSegments(path)
    elif head.startswith(NPY_MAGIC):
        raise RunInputError(f"{FIELD}: a single .npy array cannot hold segments; send an .npz with arrays "
                            f"{', '.join((*SPAN_COLUMNS, NPZ_VECTORS))} and an id array, or Parquet", field=FIELD)
    else:
        raise RunInputError(f"{FIELD}: neither a Parquet file nor an .npz archive (see POST "
                            "/api/v1/embedding-runs/import)", field=FIELD)
    try:
        return _read(reader, keys, text_chars, documents, work_path=work_path, max_bytes=max_bytes,
                     normalize=normalize)
    finally:
        reader.close()


def _read(reader: _ParquetSegments | _NpzSegments, keys: DatasetKeys, text_chars: np.ndarray, documents: np.ndarray,
          *, work_path: Path, max_bytes: int, normalize: bool) -> SegmentUpload:
    d = documents.shape[1]
    ids, start, end = reader.ids_and_spans()
    positions = positions_of(ids, reader.id_column, keys, field=f(reader.id_column))  # int64 [S]
    s = len(positions)
    if s == 0:
        raise RunInputError(f"{FIELD}: the file holds no segment", field=FIELD)
    _check_spans(start, end, positions, text_chars, keys)
    order = np.lexsort((end, start, positions))  # [S]: upload rows in stored order
    same = np.flatnonzero((np.diff(positions[order]) == 0) & (np.diff(start[order]) == 0)
                          & (np.diff(end[order]) == 0))
    if len(same):
        a, b = sorted(map(int, order[same[0]:same[0] + 2]))
        raise RunInputError(f"{FIELD}: rows {a} and {b} are the same segment (document {keys.name(int(positions[a]))}, "
                            f"characters {start[a]}–{end[a]})", field=FIELD, locator=f"row {b}")
    missing = np.flatnonzero(np.bincount(positions, minlength=keys.n) == 0)  # documents without a segment
    total = s + len(missing)
    if total * d * 2 > max_bytes:
        raise RunInputError(f"{f(VECTOR_COLUMN)}: {total:,} segments × {d:,} float16 values are {total * d * 2:,} "
                            f"bytes, over the {max_bytes:,}-byte upload limit", field=f(VECTOR_COLUMN),
                            status_code=413)
    # stored row of every upload row and of every filled document: sorted by (position, start, end)
    all_pos = np.concatenate([positions, missing])
    all_start = np.concatenate([start, np.zeros(len(missing), np.int64)])
    all_end = np.concatenate([end, text_chars[missing]])
    stored = np.lexsort((all_end, all_start, all_pos))  # [total]: source row of each stored row
    dest = np.empty(total, dtype=np.int64)
    dest[stored] = np.arange(total)
    out = np.lib.format.open_memmap(work_path, mode="w+", dtype=np.float16, shape=(total, d))
    row = 0
    for block in reader.vector_blocks(s, d):  # float32 [b, d], upload order
        where = positions[row:row + len(block)]
        check_block(block, row, keys, positions=where, normalize=normalize, field=f(VECTOR_COLUMN))
        out[dest[row:row + len(block)]] = _as_stored(block, row, keys, where, normalize)
        row += len(block)
    if row != s:
        raise RunInputError(f"{FIELD}: {row:,} vectors read, {s:,} segments expected", field=FIELD)
    for first in range(0, len(missing), BLOCK_ROWS):
        docs = missing[first:first + BLOCK_ROWS]
        out[dest[s + first:s + first + len(docs)]] = _as_stored(as_float32(documents[docs]), None, keys, docs,
                                                                normalize)
    out.flush()
    return SegmentUpload(out, all_pos[stored], all_start[stored].astype(np.int32), all_end[stored].astype(np.int32),
                         reader.format, reader.id_column, s, len(missing))


def _as_stored(block: np.ndarray, first_row: int | None, keys: DatasetKeys, positions: np.ndarray,
               normalize: bool) -> np.ndarray:
    """float32 [b, d] → float16 [b, d], unit rows when `normalize`; a value past float16's range is a 422."""
    if normalize:
        block = (block / np.linalg.norm(block.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    big = np.flatnonzero(np.abs(block).max(axis=1) > FLOAT16_MAX) if len(block) else []
    if len(big) and first_row is not None:
        row = first_row + int(big[0])
        raise RunInputError(f"{f(VECTOR_COLUMN)}: row {row} (document {keys.name(int(positions[big[0]]))}) holds a "
                            f"value beyond float16's range (±{FLOAT16_MAX:g}): segment vectors are stored as float16; "
                            "scale them or send normalize=true", field=f(VECTOR_COLUMN), locator=f"row {row}")
    if len(big):  # a document's own vector, for a document without segments
        raise RunInputError(f"{FIELD}: document {keys.name(int(positions[big[0]]))} has no segment, and its document "
                            f"vector holds a value beyond float16's range (±{FLOAT16_MAX:g}) to stand in for one",
                            field=FIELD)
    return block.astype(np.float16)


def _check_spans(start: np.ndarray, end: np.ndarray, positions: np.ndarray, text_chars: np.ndarray,
                 keys: DatasetKeys) -> None:
    """0 ≤ char_start < char_end ≤ the document's length, row by row; a 422 naming the first bad one."""
    length = text_chars[positions]  # [S]
    for name, bad, why in (
        ("char_start", start < 0, lambda r: f"is {start[r]}, below 0"),
        ("char_end", end > length, lambda r: f"is {end[r]}, past the end of the document's text "
                                             f"({length[r]} characters)"),
        ("char_end", end <= start, lambda r: f"is {end[r]}, not after char_start {start[r]} (a segment "
                                             "is text[char_start:char_end], never empty)"),
    ):
        rows = np.flatnonzero(bad)
        if len(rows):
            r = int(rows[0])
            raise RunInputError(f"{f(name)}: row {r} (document {keys.name(int(positions[r]))}) {why(r)}",
                                field=f(name), locator=f"row {r}")


def _integers(values: pa.Array | np.ndarray, name: str) -> np.ndarray:
    """A span column as int64 [S]: integers, no null."""
    if isinstance(values, pa.ChunkedArray | pa.Array):
        if not pa.types.is_integer(values.type):
            raise RunInputError(f"{f(name)}: must be integers, not {values.type}", field=f(name))
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise RunInputError(f"{f(name)}: row {row} is null", field=f(name), locator=f"row {row}")
        values = values.to_numpy(zero_copy_only=False)
    elif values.dtype.kind not in "iu" or values.ndim != 1:
        raise RunInputError(f"{f(name)}: must be a 1-D array of integers, not {values.dtype} {values.shape}",
                            field=f(name))
    if values.dtype == np.uint64 and len(values) and values.max() > np.iinfo(np.int64).max:
        raise RunInputError(f"{f(name)}: values past int64's range", field=f(name))
    return values.astype(np.int64)


def _id_column(names: list[str], where: str) -> str:
    present = [c for c in ID_COLUMNS if c in names]
    if len(present) != 1:
        found = f"found {', '.join(present)}" if present else f"{where}: {', '.join(names)}"
        raise RunInputError(f"{FIELD}: needs exactly one id column of {', '.join(ID_COLUMNS)} ({found})", field=FIELD)
    return present[0]


class _ParquetSegments:
    format = "parquet"

    def __init__(self, path: Path) -> None:
        try:
            self.pf = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise RunInputError(f"{FIELD}: not a readable Parquet file, truncated or corrupt ({exc})",
                                field=FIELD) from None
        schema = self.pf.schema_arrow
        self.id_column = _id_column(schema.names, "columns")
        for name in (*SPAN_COLUMNS, VECTOR_COLUMN):
            if name not in schema.names:
                raise RunInputError(f"{f(name)}: the segments file has no {name!r} column (columns: "
                                    f"{', '.join(schema.names)})", field=f(name))
        vtype = schema.field(VECTOR_COLUMN).type
        is_list = pa.types.is_list(vtype) or pa.types.is_large_list(vtype) or pa.types.is_fixed_size_list(vtype)
        if not is_list or not pa.types.is_floating(vtype.value_type):
            raise RunInputError(f"{f(VECTOR_COLUMN)}: must be a list of floats, not {vtype}", field=f(VECTOR_COLUMN))

    def ids_and_spans(self) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        try:
            table = self.pf.read(columns=[self.id_column, *SPAN_COLUMNS])
        except (pa.ArrowException, OSError) as exc:
            raise RunInputError(f"{FIELD}: the ids and spans are unreadable, truncated or corrupt ({exc})",
                                field=FIELD) from None
        return (table.column(self.id_column).combine_chunks(),
                _integers(table.column("char_start"), "char_start"), _integers(table.column("char_end"), "char_end"))

    def vector_blocks(self, s: int, d: int):  # noqa: ANN201
        row = 0
        try:
            for batch in self.pf.iter_batches(batch_size=BLOCK_ROWS, columns=[VECTOR_COLUMN]):
                block, _ = vector_block(batch.column(0), row, d, field=f(VECTOR_COLUMN),
                                        before="the document vectors")
                row += len(block)
                yield block
        except (pa.ArrowException, OSError) as exc:
            raise RunInputError(f"{FIELD}: the Parquet file is unreadable after row {row}, truncated or corrupt "
                                f"({exc})", field=FIELD) from None

    def close(self) -> None:
        self.pf.close()


class _NpzSegments:
    format = "npz"

    def __init__(self, path: Path) -> None:
        try:
            self.zf = zipfile.ZipFile(path)
            names = [n.removesuffix(".npy") for n in self.zf.namelist()]
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise RunInputError(f"{FIELD}: not a readable .npz archive, truncated or corrupt ({exc})",
                                field=FIELD) from None
        self.id_column = _id_column(names, "arrays")
        for name in (*SPAN_COLUMNS, NPZ_VECTORS):
            if name not in names:
                raise RunInputError(f"{f(name)}: the .npz has no {name!r} array (arrays: {', '.join(names)})",
                                    field=f(name))

    def _member(self, name: str) -> IO[bytes]:
        try:
            return self.zf.open(f"{name}.npy")
        except (zipfile.BadZipFile, OSError, EOFError, RuntimeError) as exc:
            raise RunInputError(f"{f(name)}: unreadable, truncated or corrupt ({exc})", field=f(name)) from None

    def _small(self, name: str) -> np.ndarray:
        with self._member(name) as fh:
            try:
                return np.lib.format.read_array(fh, allow_pickle=False)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise RunInputError(f"{f(name)}: unreadable, truncated or corrupt ({exc})", field=f(name)) from None

    def ids_and_spans(self) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        raw = self._small(self.id_column)
        if raw.ndim != 1:
            raise RunInputError(f"{f(self.id_column)}: must be 1-D, not shape {raw.shape}", field=f(self.id_column))
        ids = pa.array(raw.astype(str) if raw.dtype.kind in "US" else raw)
        start, end = _integers(self._small("char_start"), "char_start"), _integers(self._small("char_end"), "char_end")
        if not len(ids) == len(start) == len(end):
            raise RunInputError(f"{FIELD}: {self.id_column}, char_start and char_end have {len(ids)}, {len(start)} "
                                f"and {len(end)} rows; one row per segment in each", field=FIELD)
        return ids, start, end

    def vector_blocks(self, s: int, d: int):  # noqa: ANN201
        name = f(NPZ_VECTORS)
        with self._member(NPZ_VECTORS) as fh:
            try:
                version = np.lib.format.read_magic(fh)
                reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                          else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = reader(fh)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise RunInputError(f"{name}: the array's header is unreadable ({exc})", field=name) from None
            if dtype.kind != "f":
                raise RunInputError(f"{name}: holds {dtype} values; floating-point vectors are required", field=name)
            if len(shape) != 2 or shape[0] != s:
                raise RunInputError(f"{name}: shape {tuple(shape)}, expected ({s}, {d}): one row per segment",
                                    field=name)
            if shape[1] != d:
                raise RunInputError(f"{name}: {shape[1]} values a row, the document vectors {d}", field=name)
            if fortran and s > 1 and d > 1:
                raise RunInputError(f"{name}: a Fortran-ordered array; save it C-ordered (np.ascontiguousarray)",
                                    field=name)
            for row in range(0, s, BLOCK_ROWS):
                rows = min(BLOCK_ROWS, s - row)
                want = rows * d * dtype.itemsize
                try:
                    data = fh.read(want)
                except (OSError, EOFError, zipfile.BadZipFile) as exc:
                    raise RunInputError(f"{name}: unreadable after row {row}, truncated or corrupt ({exc})",
                                        field=name) from None
                if len(data) != want:
                    raise RunInputError(f"{name}: the array is truncated after row {row + len(data) // (d * dtype.itemsize)}"
                                        f" of {s}", field=name)
                yield as_float32(np.frombuffer(data, dtype=dtype).reshape(rows, d))

    def close(self) -> None:
        self.zf.close()


def text_lengths(table_batches, n: int) -> np.ndarray:  # noqa: ANN001
    """int64 [n]: each document's text length in characters (Python's len), from snapshot batches
    holding `position` and `text`."""
    out = np.full(n, -1, dtype=np.int64)
    for batch in table_batches:
        out[batch.column("position").to_numpy()] = pc.utf8_length(batch.column("text")).to_numpy()
    return out
