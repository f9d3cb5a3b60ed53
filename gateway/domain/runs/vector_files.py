"""Uploaded document vectors, read and checked before anything is stored.

Two forms, told apart by their magic bytes:

- **.npy**: one float array [N, d], row i = the document at dataset position i (N = the
  dataset's documents). The header is read first, so a truncated file or a wrong shape is
  refused before any data is read; the data is then memory-mapped.
- **Parquet**: a `vector` column (list or fixed-size list of floats, every row d values) and one
  id column: `external_id` (the dataset's ids), `doc_id` (the gateway's document ids) or
  `position`. Rows in any order; every document exactly once. The ids are checked before any
  vector is read; vectors are then scattered into a float32 [N, d] memory map beside the upload.

Either way the result is float32 [N, d] in position order, every value finite (and, when the
run normalises, no row all zeros). Each error names the field and, where there is one, the row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gateway.domain.runs.errors import RunInputError

NPY_MAGIC, PARQUET_MAGIC = b"\x93NUMPY", b"PAR1"
ID_COLUMNS = ("external_id", "doc_id", "position")
VECTOR_COLUMN = "vector"
BLOCK_ROWS = 4096  # rows read and checked at a time: 4096 × 1024 float32 = 16 MB
_SHOWN = 3  # ids quoted in one message


@dataclass(frozen=True)
class DatasetKeys:
    """The dataset's document ids in position order, from its snapshot."""

    dataset_id: int
    doc_id: np.ndarray  # int64 [N]
    external_id: pa.Array  # string [N], null where the upload had no id

    @property
    def n(self) -> int:
        return len(self.doc_id)

    def name(self, position: int) -> str:
        """How a message names a document: its external id, else its position."""
        ext = self.external_id[position].as_py()
        return repr(ext) if ext is not None else f"position {position}"


class Vectors(NamedTuple):
    """Checked vectors in dataset position order, and what the upload was."""

    array: np.ndarray  # float32 [N, d]: a memory map (of the upload, or of a file beside it)
    format: str  # "npy" | "parquet"
    id_column: str | None  # the Parquet file's id column; None for .npy (position order)
    dtype: str  # the uploaded values' type, e.g. "float32"


def read_vectors(path: Path, keys: DatasetKeys, *, work_path: Path, max_bytes: int, normalize: bool) -> Vectors:
    """Read and check `path` against the dataset. `work_path`: where a Parquet upload's vectors are
    laid out in position order (the caller deletes it). Raises RunInputError naming the problem."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head.startswith(PARQUET_MAGIC):
        return _read_parquet(path, keys, work_path=work_path, max_bytes=max_bytes, normalize=normalize)
    if not head.startswith(NPY_MAGIC):
        raise RunInputError("file: neither an .npy array nor a Parquet file (see POST /api/v1/embedding-runs/import)",
                            field="file")
    vectors = _read_npy(path, keys, max_bytes=max_bytes)
    for start in range(0, keys.n, BLOCK_ROWS):  # .npy: a file row is a dataset position
        check_block(as_float32(vectors.array[start:start + BLOCK_ROWS]), start, keys, positions=None,
                    normalize=normalize)
    return vectors


def as_float32(values: np.ndarray) -> np.ndarray:
    """A float32 copy; a value beyond float32's range becomes inf (refused by check_block), silently."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32)


def check_block(block: np.ndarray, first_row: int, keys: DatasetKeys, *, positions: np.ndarray | None,
                normalize: bool, field: str = VECTOR_COLUMN) -> None:
    """Rows first_row.. of the upload (float32 [b, d]): every value finite; no zero row to normalise.
    `positions`: each row's dataset position (Parquet), None when row = position (.npy). `field`:
    what an error names."""
    finite = np.isfinite(block)  # [b, d]; float64 values past float32's range are inf here
    if not finite.all():
        row, col = map(int, np.argwhere(~finite)[0])
        value = block[row, col]
        what = "NaN" if np.isnan(value) else "an infinite value (or one beyond float32's range)"
        _row_error(f"holds {what} at column {col}", first_row + row, keys, positions, row, field)
    if normalize:
        zero = np.flatnonzero(~block.any(axis=1))
        if len(zero):
            _row_error("is all zeros: it has no direction to scale to unit length (send normalize=false to keep "
                       "vectors as given)", first_row + int(zero[0]), keys, positions, int(zero[0]), field)


def _row_error(problem: str, row: int, keys: DatasetKeys, positions: np.ndarray | None, in_block: int,
               field: str = VECTOR_COLUMN) -> NoReturn:
    position = row if positions is None else int(positions[in_block])
    raise RunInputError(f"{field}: row {row} (document {keys.name(position)}) {problem}", field=field,
                        locator=f"row {row}")


def _check_size(n: int, d: int, max_bytes: int) -> None:
    if d < 1:
        raise RunInputError("vector: the vectors have no values (dimension 0)", field="vector")
    if n * d * 4 > max_bytes:
        raise RunInputError(f"vector: {n:,} × {d:,} float32 values are {n * d * 4:,} bytes, over the "
                            f"{max_bytes:,}-byte upload limit", field="vector", status_code=413)


# -- .npy -------------------------------------------------------------------------------------

def _read_npy(path: Path, keys: DatasetKeys, *, max_bytes: int) -> Vectors:
    """The header checked (dtype, 2-D, one row per document, length), then the data memory-mapped."""
    with open(path, "rb") as f:
        try:
            version = np.lib.format.read_magic(f)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = reader(f)
        except (ValueError, OSError, EOFError) as exc:
            raise RunInputError(f"file: the .npy header is unreadable ({exc})", field="file") from None
        offset = f.tell()
    if dtype.kind != "f":
        raise RunInputError(f"vector: the .npy holds {dtype} values; floating-point vectors are required",
                            field="vector")
    if len(shape) != 2:
        raise RunInputError(f"vector: expected a 2-D array [documents, dimension], got shape {tuple(shape)}",
                            field="vector")
    if shape[0] != keys.n:
        raise RunInputError(f"vector: {shape[0]:,} rows, but dataset {keys.dataset_id} has {keys.n:,} documents "
                            "(an .npy file holds one row per document, in dataset order)", field="vector")
    _check_size(shape[0], shape[1], max_bytes)
    want, have = math.prod(shape) * dtype.itemsize, path.stat().st_size - offset
    if have != want:
        problem = "is truncated" if have < want else "has bytes after its array"
        raise RunInputError(f"file: the .npy file {problem}: its header promises {want:,} bytes of "
                            f"{shape[0]} × {shape[1]} {dtype}, {have:,} follow", field="file")
    array = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape), order="F" if fortran else "C")
    return Vectors(array, "npy", None, str(dtype))


# -- Parquet ----------------------------------------------------------------------------------

def _read_parquet(path: Path, keys: DatasetKeys, *, work_path: Path, max_bytes: int, normalize: bool) -> Vectors:
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise RunInputError(f"file: not a readable Parquet file, truncated or corrupt ({exc})", field="file") from None
    id_column, value_type, d = _parquet_schema(pf.schema_arrow)
    try:
        ids = pf.read(columns=[id_column]).column(id_column).combine_chunks()
    except (pa.ArrowException, OSError) as exc:
        raise RunInputError(f"file: column {id_column!r} is unreadable, truncated or corrupt ({exc})",
                            field="file") from None
    positions = match_ids(ids, id_column, keys)  # int64 [rows]: each row's dataset position
    out, row = None, 0
    try:
        for batch in pf.iter_batches(batch_size=BLOCK_ROWS, columns=[VECTOR_COLUMN]):
            block, d = vector_block(batch.column(0), row, d)
            if out is None:
                _check_size(keys.n, d, max_bytes)
                out = np.lib.format.open_memmap(work_path, mode="w+", dtype=np.float32, shape=(keys.n, d))
            where = positions[row:row + len(block)]
            check_block(block, row, keys, positions=where, normalize=normalize)
            out[where] = block
            row += len(block)
    except (pa.ArrowException, OSError) as exc:
        raise RunInputError(f"file: the Parquet file is unreadable after row {row}, truncated or corrupt ({exc})",
                            field="file") from None
    if out is None or row != keys.n:
        raise RunInputError(f"file: {row:,} vectors read, {keys.n:,} expected", field="file")
    return Vectors(out, "parquet", id_column, str(value_type))


def _parquet_schema(schema: pa.Schema) -> tuple[str, pa.DataType, int | None]:
    """(id column, value type, d if the list has a fixed size)."""
    present = [c for c in ID_COLUMNS if c in schema.names]
    if len(present) != 1:
        found = f"found {', '.join(present)}" if present else f"columns: {', '.join(schema.names)}"
        raise RunInputError(f"file: the Parquet file needs exactly one id column of {', '.join(ID_COLUMNS)} ({found})",
                            field="file")
    if VECTOR_COLUMN not in schema.names:
        raise RunInputError(f"vector: the Parquet file has no 'vector' column (columns: {', '.join(schema.names)})",
                            field="vector")
    vtype = schema.field(VECTOR_COLUMN).type
    is_list = pa.types.is_list(vtype) or pa.types.is_large_list(vtype) or pa.types.is_fixed_size_list(vtype)
    if not is_list or not pa.types.is_floating(vtype.value_type):
        raise RunInputError(f"vector: must be a list of floats, not {vtype}", field="vector")
    return present[0], vtype.value_type, vtype.list_size if pa.types.is_fixed_size_list(vtype) else None


def vector_block(column: pa.Array, first_row: int, d: int | None, *, field: str = VECTOR_COLUMN,
                 before: str = "the vectors before it") -> tuple[np.ndarray, int]:
    """One batch of the `vector` column as float32 [b, d]; every row present, d values, no null value.
    `field`: what an error names; `before`: what has d values (d None: the first row sets it)."""
    if column.null_count:
        row = first_row + int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise RunInputError(f"{field}: row {row} is null", field=field, locator=f"row {row}")
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)  # [b]
    d = int(lengths[0]) if d is None and len(lengths) else d
    wrong = np.flatnonzero(lengths != d)
    if len(wrong):
        row = first_row + int(wrong[0])
        raise RunInputError(f"{field}: row {row} has {lengths[wrong[0]]} values, {before} {d}",
                            field=field, locator=f"row {row}")
    values = column.flatten()  # the rows' values, this batch's slice only
    if values.null_count:
        at = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        row = first_row + at // d
        raise RunInputError(f"{field}: row {row} holds a null value at column {at % d}", field=field,
                            locator=f"row {row}")
    return as_float32(values.to_numpy(zero_copy_only=False)).reshape(len(column), d), d  # [b, d]


def positions_of(ids: pa.Array, column: str, keys: DatasetKeys, *, field: str | None = None) -> np.ndarray:
    """Each upload row's dataset position (int64 [rows]), else a 422 naming the first missing or
    unknown id. `field`: what an error names (default: the column)."""
    field = field or column
    if ids.null_count:
        row = int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])
        raise RunInputError(f"{field}: row {row} has no id", field=field, locator=f"row {row}")
    try:
        positions = _lookup(ids, column, keys, field)  # int64 [rows], -1 where unknown
    except pa.ArrowException as exc:  # e.g. a uint64 id past int64's range
        raise RunInputError(f"{field}: ids of type {ids.type} cannot be matched ({exc})", field=field) from None
    unknown = np.flatnonzero(positions < 0)
    if len(unknown):
        shown = ", ".join(repr(ids[int(r)].as_py()) for r in unknown[:_SHOWN])
        more = f" and {len(unknown) - _SHOWN} more" if len(unknown) > _SHOWN else ""
        raise RunInputError(f"{field}: {_count(len(unknown), 'id is', 'ids are')} not in dataset {keys.dataset_id}: "
                            f"{shown}{more} (first at row {unknown[0]})", field=field, locator=f"row {unknown[0]}")
    return positions


def match_ids(ids: pa.Array, column: str, keys: DatasetKeys) -> np.ndarray:
    """Each upload row's dataset position (int64 [rows]); every document exactly once, else a 422
    naming the first unknown, duplicated or missing id."""
    positions = positions_of(ids, column, keys)
    counts = np.bincount(positions, minlength=keys.n)  # [N]
    dup = np.flatnonzero(counts > 1)
    if len(dup):
        rows = np.flatnonzero(positions == dup[0])
        raise RunInputError(f"{column}: {ids[int(rows[0])].as_py()!r} appears {len(rows)} times (rows "
                            f"{', '.join(map(str, rows[:_SHOWN]))}); each document needs exactly one vector",
                            field=column, locator=f"row {rows[1]}")
    missing = np.flatnonzero(counts == 0)
    if len(missing):
        shown = ", ".join(keys.name(int(p)) for p in missing[:_SHOWN])
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise RunInputError(f"{column}: {_count(len(missing), 'document', 'documents')} of dataset {keys.dataset_id} "
                            f"{'has' if len(missing) == 1 else 'have'} no vector: "
                            f"{shown}{more}", field=column)
    return positions


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _lookup(ids: pa.Array, column: str, keys: DatasetKeys, field: str) -> np.ndarray:
    if column == "external_id":
        if keys.external_id.null_count:
            raise RunInputError(f"{field}: {keys.external_id.null_count} documents of dataset {keys.dataset_id} "
                                "have no external id; key the vectors by doc_id or position instead",
                                field=field)
        if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type) or pa.types.is_integer(ids.type)):
            raise RunInputError(f"{field}: must be strings, not {ids.type}", field=field)
        found = pc.index_in(ids.cast(pa.string()), value_set=keys.external_id)
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    if not pa.types.is_integer(ids.type):
        raise RunInputError(f"{field}: must be integers, not {ids.type}", field=field)
    values = ids.cast(pa.int64()).to_numpy(zero_copy_only=False)
    if column == "position":
        return np.where((values >= 0) & (values < keys.n), values, -1)
    found = pc.index_in(pa.array(values), value_set=pa.array(keys.doc_id))
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
