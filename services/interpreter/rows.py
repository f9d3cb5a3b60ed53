"""Rows of a compressed sparse matrix read without scipy's fancy indexing: naming reads a few hundred rows of a
large matrix thousands of times a run (a feature's segments' terms, its segments' co-firing features), where
scipy's per-call checks and copies cost more than the rows themselves."""

from __future__ import annotations

import numpy as np


def spans(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """int64 [sum(stops - starts)]: starts[0]..stops[0]-1, then starts[1]..stops[1]-1, … in one gather."""
    starts, stops = np.asarray(starts, np.int64), np.asarray(stops, np.int64)
    sizes = stops - starts
    total = int(sizes.sum())
    if not total:
        return np.empty(0, np.int64)
    # each span's start, repeated over its length, plus 0, 1, … within it
    return np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(total, dtype=np.int64)


def row_entries(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """int64: the positions in `indices`/`data` of every entry of `rows` (CSR indptr), row by row, in order."""
    rows = np.asarray(rows, np.int64)
    return spans(indptr[rows], indptr[rows + 1])


def column_counts(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray, n_columns: int) -> np.ndarray:
    """int64 [n_columns]: how many of `rows` (repeats counted) hold each column, of a CSR matrix's structure."""
    return np.bincount(indices[row_entries(indptr, rows)], minlength=n_columns)
