"""Streaming parsers: an uploaded CSV, JSONL or zip file, read record by record into documents.

Memory stays bounded whatever the file size: one line (or one zip member) is held at a time,
and the only state that grows is the map of ids already seen, for duplicate detection.
Every bad input raises DatasetInputError naming the line or member and the field; messages
never quote document text, which is clinical and sensitive (column names and ids are fine).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from contracts.datasets import ColumnMapping, DatasetFormat
from gateway.domain.datasets.checks import (
    DatasetInputError,
    DocumentBuilder,
    Limits,
    ParsedDocument,
)
from gateway.domain.datasets.csv_reader import iter_csv
from gateway.domain.datasets.jsonl_reader import iter_jsonl
from gateway.domain.datasets.zip_reader import iter_zip

_EXTENSION_FORMATS: dict[str, DatasetFormat] = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".zip": "zip",
}
_DECLARED_FORMATS: dict[str, DatasetFormat] = {
    "csv": "csv", "jsonl": "jsonl", "ndjson": "jsonl", "zip": "zip",
}
_NO_DOCUMENTS = "the file holds no documents"


def detect_format(filename: str | None, declared: str | None = None) -> DatasetFormat:
    """The upload's format: the declared one if given, else from the file name's extension."""
    if declared is not None and declared.strip():
        fmt = _DECLARED_FORMATS.get(declared.strip().lower().lstrip("."))
        if fmt is None:
            raise DatasetInputError(
                f"unknown format '{declared}'; accepted formats: csv, jsonl, zip", field="format"
            )
        return fmt
    fmt = _EXTENSION_FORMATS.get(PurePosixPath(filename or "").suffix.lower())
    if fmt is None:
        raise DatasetInputError(
            f"cannot tell the format of '{filename or ''}'; accepted: .csv, .jsonl (or .ndjson),"
            " .zip, or declare the format",
            field="format",
        )
    return fmt


def iter_documents(
    path: Path,
    fmt: DatasetFormat,
    mapping: ColumnMapping,
    *,
    max_document_bytes: int,
    max_uncompressed_bytes: int,
) -> Iterator[ParsedDocument]:
    """Documents of the uploaded file at `path`, one at a time, checked as they are read.

    Raises DatasetInputError (while iterating) at the first bad record, and at the end if the
    file held no document. Limits are in bytes of UTF-8 text (uncompressed for zip members).
    """
    if max_document_bytes < 1 or max_uncompressed_bytes < 1:
        raise ValueError("limits must be positive")
    limits = Limits(max_document_bytes, max_uncompressed_bytes)
    builder = DocumentBuilder(max_document_bytes)
    if fmt == "csv":
        records = iter_csv(path, mapping, builder, limits)
    elif fmt == "jsonl":
        records = iter_jsonl(path, mapping, builder, limits)
    elif fmt == "zip":
        records = iter_zip(path, builder, limits)
    else:
        raise DatasetInputError(
            f"unknown format '{fmt}'; accepted formats: csv, jsonl, zip", field="format"
        )
    return _require_some(records)


def _require_some(documents: Iterable[ParsedDocument]) -> Iterator[ParsedDocument]:
    """Pass documents through; an upload with none is an error, not an empty dataset."""
    empty = True
    for document in documents:
        empty = False
        yield document
    if empty:
        raise DatasetInputError(_NO_DOCUMENTS)


__all__ = ["DatasetInputError", "ParsedDocument", "detect_format", "iter_documents"]
