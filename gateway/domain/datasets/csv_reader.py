"""CSV reader: the header maps columns to roles, then one record per document."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.datasets import ColumnMapping
from gateway.domain.datasets.checks import (
    DatasetInputError,
    DocumentBuilder,
    Limits,
    ParsedDocument,
    format_size,
    numbered_utf8_lines,
    resolve_roles,
    split_labels,
)

MAX_HEADER_BYTES = 64_000  # column names only: a thousand columns of 60 characters fit
_DELIMITERS = (",", ";", "\t")  # in order of preference when they split the header equally


def iter_csv(
    path: Path, mapping: ColumnMapping, builder: DocumentBuilder, limits: Limits
) -> Iterator[ParsedDocument]:
    # csv's limit is process-wide: only ever raise it, so that our own size check speaks first.
    csv.field_size_limit(max(csv.field_size_limit(), limits.max_document_bytes + 1))
    with path.open("rb") as raw:
        lines = (line for _, line in numbered_utf8_lines(raw, limits.max_line_bytes))
        first, n_blank = next(lines, None), 0
        while first is not None and not first.strip("\r\n"):  # sniff the header, not a blank
            first, n_blank = next(lines, None), n_blank + 1
        if first is None:
            return
        header_line = n_blank + 1
        if len(first.encode()) > MAX_HEADER_BYTES:
            raise DatasetInputError(
                f"line {header_line}: the header line is longer than {format_size(MAX_HEADER_BYTES)},"
                " the limit for column names",
                locator=f"line {header_line}",
            )
        delimiter = _sniff_delimiter(first)
        # The blanks go back in so that the reader's line count stays the file's.
        replayed = itertools.chain(itertools.repeat("\n", n_blank), [first], lines)
        reader = csv.reader(replayed, delimiter=delimiter, strict=True)
        records = _csv_records(reader, limits.max_document_bytes)
        header_line, header = next(records, (0, None))
        if header is None:
            return
        columns = _csv_columns(header, mapping, f"line {header_line}")
        for start, row in records:
            yield _csv_document(row, f"line {start}", columns, builder)


def _sniff_delimiter(header_line: str) -> str:
    """',' unless ';' or tab splits the header into more columns (Italian Excel exports use ';').

    Each candidate is one pass of the csv module over the line, so quotes are honoured and the
    cost is linear (csv.Sniffer's quote regex took seconds on a 24 KB line of `,"`).
    """
    def width(delimiter: str) -> int:
        try:
            return len(next(csv.reader([header_line], delimiter=delimiter), []))
        except csv.Error:  # e.g. an unclosed quote under this delimiter: not the one
            return 0

    widths = {delimiter: width(delimiter) for delimiter in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda d: (widths[d], -_DELIMITERS.index(d)))
    return best if widths[best] > 1 else ","


def _csv_records(reader: Any, max_document_bytes: int) -> Iterator[tuple[int, list[str]]]:
    """(line where the record starts, its fields) for each non-blank record."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise _csv_error(error, start, reader.line_num, max_document_bytes) from None
        if row:
            yield start, row


def _csv_error(
    error: csv.Error, start: int, line: int, max_document_bytes: int
) -> DatasetInputError:
    """csv's own messages are terse; say what went wrong in the user's terms."""
    locator, detail = f"line {start}", str(error)
    if "field larger than field limit" in detail:
        message = f"{locator}: a field is over the {format_size(max_document_bytes)} limit"
    elif "unexpected end of data" in detail:
        message = f"{locator}: a quoted field is never closed"
    else:
        where = "" if line == start else f", on line {line}"
        message = f"{locator}: malformed CSV ({detail}{where})"
    return DatasetInputError(message, locator=locator)


@dataclass(frozen=True, slots=True)
class _CsvColumns:
    """The header's width and the (name, position) of each mapped column."""

    width: int
    text: tuple[str, int]
    id: tuple[str, int] | None
    labels: tuple[tuple[str, int], ...]
    metadata: tuple[tuple[str, int], ...]
    label_separator: str


def _csv_columns(header: list[str], mapping: ColumnMapping, locator: str) -> _CsvColumns:
    names = [name.strip() for name in header]
    positions: dict[str, int] = {}
    for position, name in enumerate(names):
        if name and name in positions:
            raise DatasetInputError(
                f"{locator}: column '{name}' appears twice in the header",
                field=name,
                locator=locator,
            )
        positions[name] = position
    roles = resolve_roles(names, mapping, locator, "column")
    used = {roles.text, roles.id, *roles.labels}
    metadata = roles.metadata
    if metadata is None:  # empty header cells come from trailing separators, not data
        metadata = tuple(name for name in names if name and name not in used)
    return _CsvColumns(
        width=len(names),
        text=(roles.text, positions[roles.text]),
        id=(roles.id, positions[roles.id]) if roles.id is not None else None,
        labels=tuple((name, positions[name]) for name in roles.labels),
        metadata=tuple((name, positions[name]) for name in metadata),
        label_separator=mapping.label_separator,
    )


def _csv_document(
    row: list[str], locator: str, columns: _CsvColumns, builder: DocumentBuilder
) -> ParsedDocument:
    if len(row) != columns.width:
        raise DatasetInputError(
            f"{locator}: {len(row)} fields, but the header has {columns.width} columns",
            locator=locator,
        )
    external_id = None
    if columns.id is not None:
        id_name, id_position = columns.id
        external_id = row[id_position].strip()
        if not external_id:  # ids are all or nothing once an id column exists
            raise DatasetInputError(
                f"{locator}: field '{id_name}' is empty", field=id_name, locator=locator
            )
    labels = [
        label
        for _, position in columns.labels
        for label in split_labels(row[position], columns.label_separator)
    ]
    text_name, text_position = columns.text
    return builder.build(
        locator,
        row[text_position],
        text_field=text_name,
        external_id=external_id,
        id_field=columns.id[0] if columns.id else None,
        labels=labels,
        metadata={name: row[position] for name, position in columns.metadata},
    )
