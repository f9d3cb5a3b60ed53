"""Streaming parsers: an uploaded CSV, JSONL or zip file, read record by record into documents.

Memory stays bounded whatever the file size: one line (or one zip member) is held at a time,
and the only state that grows is the map of ids already seen, for duplicate detection.
Every bad input raises DatasetInputError naming the line or member and the field; messages
never quote document text, which is clinical and sensitive (column names and ids are fine).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from contracts.datasets import ColumnMapping, DatasetFormat

_UTF8_BOM = b"\xef\xbb\xbf"
# A record is larger than its text (JSON escapes: "\u00e8" is 6 bytes for 2; CSV doubles
# quotes; other columns): a line past this many bytes cannot hold a valid document.
_LINE_BYTES_PER_DOCUMENT_BYTE = 4
_LINE_SLACK_BYTES = 1 << 20
# Zip bomb heuristic: text compresses about 3-10:1, so 200:1 on a large member is an attack.
_ZIP_MAX_RATIO = 200
_ZIP_RATIO_MIN_BYTES = 1_000_000
_ZIP_TEXT_SUFFIX = ".txt"
_EXTENSION_FORMATS: dict[str, DatasetFormat] = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".zip": "zip",
}
_DECLARED_FORMATS: dict[str, DatasetFormat] = {
    "csv": "csv", "jsonl": "jsonl", "ndjson": "jsonl", "zip": "zip",
}
_AUTO_ID = "id"
_AUTO_LABELS = ("labels", "label")
_NO_DOCUMENTS = "the file holds no documents"
_NAMES_LISTED = 20
_SNIFF_CHARS = 65_536  # a header is short; the Sniffer's regexes need not see a huge line


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """One document as read from the upload, before it is stored."""

    locator: str  # "line 12" (CSV/JSONL: where the record starts) or "notes/a.txt" (zip member)
    external_id: str | None
    text: str
    labels: tuple[str, ...]
    metadata: dict[str, Any]


class DatasetInputError(ValueError):
    """A problem with the uploaded file: message names the line/member and the field."""

    def __init__(self, message: str, *, field: str | None = None, locator: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.locator = locator

    def __str__(self) -> str:
        return self.message


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
    limits = _Limits(max_document_bytes, max_uncompressed_bytes)
    builder = _DocumentBuilder(max_document_bytes)
    if fmt == "csv":
        records = _iter_csv(path, mapping, builder, limits)
    elif fmt == "jsonl":
        records = _iter_jsonl(path, mapping, builder, limits)
    elif fmt == "zip":
        records = _iter_zip(path, builder, limits)
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


# ---- checks shared by every format -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Limits:
    max_document_bytes: int
    max_uncompressed_bytes: int

    @property
    def max_line_bytes(self) -> int:
        """Longest physical line a CSV/JSONL record may use."""
        return _LINE_BYTES_PER_DOCUMENT_BYTE * self.max_document_bytes + _LINE_SLACK_BYTES


class _DocumentBuilder:
    """Checks every format shares: text non-empty and within the limit, ids unique."""

    def __init__(self, max_document_bytes: int):
        self.max_document_bytes = max_document_bytes
        self.first_seen: dict[str, str] = {}  # external id -> locator; the one growing state

    def build(
        self,
        locator: str,
        text: str,
        *,
        text_field: str,
        external_id: str | None,
        id_field: str | None,
        labels: Iterable[str] = (),
        metadata: dict[str, Any],
    ) -> ParsedDocument:
        self._check_text(locator, text, text_field)
        if external_id is not None:
            first = self.first_seen.get(external_id)
            if first is not None:
                raise DatasetInputError(
                    f"{locator}: duplicate id '{_shorten(external_id)}' (first seen on {first})",
                    field=id_field,
                    locator=locator,
                )
            self.first_seen[external_id] = locator
        unique_labels = tuple(dict.fromkeys(labels))
        return ParsedDocument(locator, external_id, text, unique_labels, metadata)

    def _check_text(self, locator: str, text: str, field: str) -> None:
        def fail(problem: str) -> DatasetInputError:
            return DatasetInputError(f"{locator}: {problem}", field=field, locator=locator)

        if not text or text.isspace():
            raise fail(f"field '{field}' is empty")
        # PostgreSQL text cannot hold NUL, and a lone surrogate (JSON "\ud800") is not UTF-8.
        if "\x00" in text:
            raise fail(f"field '{field}' contains a NUL character")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise fail(f"field '{field}' contains an unpaired surrogate escape") from None
        if size > self.max_document_bytes:
            limit = _format_size(self.max_document_bytes)
            raise fail(f"document is {_format_size(size)}, over the {limit} limit ('{field}')")


@dataclass(frozen=True, slots=True)
class _Roles:
    """Mapped names, resolved against the header (CSV) or the first record (JSONL)."""

    text: str
    id: str | None
    labels: tuple[str, ...]
    metadata: tuple[str, ...] | None  # None: every name not used above


def _resolve_roles(
    names: Sequence[str], mapping: ColumnMapping, locator: str, noun: str
) -> _Roles:
    """Apply the mapping's defaults to the names present; a mapped name absent is an error."""
    present = set(names)
    explicit = [("text", mapping.text), *([("id", mapping.id)] if mapping.id else [])]
    explicit += [("label", name) for name in mapping.labels or []]
    explicit += [("metadata", name) for name in mapping.metadata or []]
    for role, name in explicit:
        if name not in present:
            raise DatasetInputError(
                f"{locator}: {role} {noun} '{name}' not found; {noun}s found: {_list_names(names)}",
                field=name,
                locator=locator,
            )
    taken = {name for _, name in explicit}  # a default never steals an explicitly mapped name
    auto_id = _AUTO_ID if _AUTO_ID in present and _AUTO_ID not in taken else None
    auto_labels = tuple(n for n in _AUTO_LABELS if n in present and n not in taken)
    return _Roles(
        text=mapping.text,
        id=mapping.id if mapping.id is not None else auto_id,
        labels=tuple(mapping.labels) if mapping.labels is not None else auto_labels,
        metadata=tuple(mapping.metadata) if mapping.metadata is not None else None,
    )


def _split_labels(cell: str, separator: str) -> list[str]:
    """'a | b||c ' -> ['a', 'b', 'c']: parts stripped, empty parts dropped."""
    return [part for part in (p.strip() for p in cell.split(separator)) if part]


# ---- CSV ---------------------------------------------------------------------------------


def _iter_csv(
    path: Path, mapping: ColumnMapping, builder: _DocumentBuilder, limits: _Limits
) -> Iterator[ParsedDocument]:
    # csv's limit is process-wide: only ever raise it, so that our own size check speaks first.
    csv.field_size_limit(max(csv.field_size_limit(), limits.max_document_bytes + 1))
    with path.open("rb") as raw:
        lines = (line for _, line in _numbered_utf8_lines(raw, limits.max_line_bytes))
        first, n_blank = next(lines, None), 0
        while first is not None and not first.strip("\r\n"):  # sniff the header, not a blank
            first, n_blank = next(lines, None), n_blank + 1
        if first is None:
            return
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
    """',' unless the header is clearly ';'- or tab-separated (Italian Excel exports use ';')."""
    try:
        return csv.Sniffer().sniff(header_line[:_SNIFF_CHARS], delimiters=",;\t").delimiter
    except csv.Error:  # one column, or nothing to go on
        return ","


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
        message = f"{locator}: a field is over the {_format_size(max_document_bytes)} limit"
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
    roles = _resolve_roles(names, mapping, locator, "column")
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
    row: list[str], locator: str, columns: _CsvColumns, builder: _DocumentBuilder
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
        for label in _split_labels(row[position], columns.label_separator)
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


# ---- JSONL -------------------------------------------------------------------------------


def _iter_jsonl(
    path: Path, mapping: ColumnMapping, builder: _DocumentBuilder, limits: _Limits
) -> Iterator[ParsedDocument]:
    roles: _Roles | None = None
    with path.open("rb") as raw:
        for number, line in _numbered_utf8_lines(raw, limits.max_line_bytes):
            if not line or line.isspace():
                continue
            locator = f"line {number}"
            record = _parse_json_object(line, locator)
            if roles is None:  # the first record plays the part of a CSV header
                roles = _resolve_roles(list(record), mapping, locator, "key")
                if mapping.labels is None:  # JSON omits keys freely: look for both on every line
                    taken = (roles.text, roles.id, *(roles.metadata or ()))
                    auto = tuple(n for n in _AUTO_LABELS if n not in taken)
                    roles = replace(roles, labels=auto)
            yield _json_document(record, locator, roles, mapping.label_separator, builder)


def _parse_json_object(line: str, locator: str) -> dict[str, Any]:
    try:
        value = json.loads(line, parse_constant=_reject_json_constant)
    except json.JSONDecodeError as error:
        raise DatasetInputError(
            f"{locator}: not valid JSON ({error.msg} at column {error.colno})", locator=locator
        ) from None
    except (ValueError, RecursionError) as error:  # NaN, 5000-digit integers, deep nesting
        raise DatasetInputError(f"{locator}: not valid JSON ({error})", locator=locator) from None
    if not isinstance(value, dict):
        raise DatasetInputError(
            f"{locator}: expected a JSON object, found {_json_type(value)}", locator=locator
        )
    return value


def _reject_json_constant(name: str) -> Any:
    """NaN and Infinity are not JSON and PostgreSQL's jsonb refuses them."""
    raise ValueError(f"{name} is not allowed")


def _json_document(
    record: dict[str, Any], locator: str, roles: _Roles, separator: str, builder: _DocumentBuilder
) -> ParsedDocument:
    if roles.text not in record:
        raise DatasetInputError(
            f"{locator}: key '{roles.text}' is missing; keys found: {_list_names(list(record))}",
            field=roles.text,
            locator=locator,
        )
    text = record[roles.text]
    if not isinstance(text, str):
        raise _json_type_error(locator, roles.text, "a string", text)
    labels = [
        label for key in roles.labels for label in _json_labels(record, key, separator, locator)
    ]
    used = {roles.text, roles.id, *roles.labels}
    if roles.metadata is None:
        metadata = {key: value for key, value in record.items() if key not in used}
    else:
        metadata = {key: record[key] for key in roles.metadata if key in record}
    for key, value in metadata.items():
        _check_json_strings(value, locator, key)
    return builder.build(
        locator,
        text,
        text_field=roles.text,
        external_id=_json_id(record, roles, locator),
        id_field=roles.id,
        labels=labels,
        metadata=metadata,
    )


def _json_id(record: dict[str, Any], roles: _Roles, locator: str) -> str | None:
    """The record's id as a string: a JSON string or integer, on every record or on none."""
    if roles.id is None:
        claimed = (roles.text, *roles.labels, *(roles.metadata or ()))
        if _AUTO_ID in record and _AUTO_ID not in claimed:
            raise DatasetInputError(
                f"{locator}: key '{_AUTO_ID}' present, but the first record had none "
                "(ids must be on every record or none)",
                field=_AUTO_ID,
                locator=locator,
            )
        return None
    value = record.get(roles.id)
    if value is None:
        raise DatasetInputError(
            f"{locator}: key '{roles.id}' is missing (ids must be on every record or none)",
            field=roles.id,
            locator=locator,
        )
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _json_type_error(locator, roles.id, "a string or an integer", value)
    external_id = str(value).strip()
    if not external_id:
        raise DatasetInputError(
            f"{locator}: field '{roles.id}' is empty", field=roles.id, locator=locator
        )
    _check_json_strings(external_id, locator, roles.id)
    return external_id


def _json_labels(record: dict[str, Any], key: str, separator: str, locator: str) -> list[str]:
    """A string (split by the separator), an integer, or a list of them; null means none."""
    value = record.get(key)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str | int) and not isinstance(item, bool) for item in items):
        raise _json_type_error(locator, key, "a string or a list of strings", value)
    _check_json_strings(items, locator, key)
    if isinstance(value, str):
        return _split_labels(value, separator)
    return [label for label in (str(item).strip() for item in items) if label]


def _check_json_strings(value: Any, locator: str, field: str) -> None:
    """Reject strings that PostgreSQL or Parquet cannot store: NUL, unpaired surrogates."""
    if isinstance(value, str):
        if "\x00" in value:
            raise DatasetInputError(
                f"{locator}: field '{field}' contains a NUL character", field=field, locator=locator
            )
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise DatasetInputError(
                    f"{locator}: field '{field}' contains an unpaired surrogate escape",
                    field=field,
                    locator=locator,
                ) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_json_strings(key, locator, field)
            _check_json_strings(item, locator, field)
    elif isinstance(value, list):
        for item in value:
            _check_json_strings(item, locator, field)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object"}.get(type(value), "a value")


def _json_type_error(locator: str, field: str, expected: str, value: Any) -> DatasetInputError:
    return DatasetInputError(
        f"{locator}: field '{field}' must be {expected}, not {_json_type(value)}",
        field=field,
        locator=locator,
    )


# ---- zip ---------------------------------------------------------------------------------


def _iter_zip(path: Path, builder: _DocumentBuilder, limits: _Limits) -> Iterator[ParsedDocument]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError):
        raise DatasetInputError("the file is not a valid zip archive") from None
    with archive:
        # Every name and declared size is checked before any member is read: one unsafe
        # member rejects the whole upload.
        for info in _zip_text_members(archive, limits):
            name = info.filename
            yield builder.build(
                name,
                _read_zip_text(archive, info, limits.max_document_bytes),
                text_field="text",
                external_id=name[: -len(_ZIP_TEXT_SUFFIX)],
                id_field="path",
                metadata={"path": name},
            )


def _zip_text_members(archive: zipfile.ZipFile, limits: _Limits) -> list[zipfile.ZipInfo]:
    """The .txt members to read, once every member's name and declared size has passed."""
    members: list[zipfile.ZipInfo] = []
    others: list[str] = []
    total = 0
    for info in archive.infolist():
        _check_zip_name(info.filename)
        if info.is_dir() or _is_zip_noise(info.filename):
            continue
        if not info.filename.lower().endswith(_ZIP_TEXT_SUFFIX):
            others.append(info.filename)
            continue
        _check_zip_declared_size(info, limits.max_document_bytes)
        total += info.file_size
        if total > limits.max_uncompressed_bytes:
            raise DatasetInputError(
                f"{info.filename}: the text files add up to over the "
                f"{_format_size(limits.max_uncompressed_bytes)} limit uncompressed",
                locator=info.filename,
            )
        members.append(info)
    if not members:
        holds = f"it holds: {_list_names(others)}" if others else "it is empty"
        raise DatasetInputError(f"the zip holds no .txt files; {holds}", field="path")
    return members


_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")


def _check_zip_name(name: str) -> None:
    """Refuse names that could escape a folder if anyone ever extracted the archive."""
    if name.startswith("/"):
        problem = "an absolute path"
    elif "\\" in name:
        problem = "a backslash"
    elif _DRIVE_LETTER.match(name):
        problem = "a drive letter"
    elif ".." in name.split("/"):
        problem = "a '..' component"
    else:
        return
    raise DatasetInputError(
        f"{name}: unsafe member path ({problem}); the upload is rejected",
        field="path",
        locator=name,
    )


def _is_zip_noise(name: str) -> bool:
    """macOS resource forks and dotfiles (.DS_Store, ._a.txt) are not documents."""
    parts = name.split("/")
    return parts[0] == "__MACOSX" or any(part.startswith(".") for part in parts)


def _check_zip_declared_size(info: zipfile.ZipInfo, max_document_bytes: int) -> None:
    name, size = info.filename, info.file_size
    if size > max_document_bytes:
        raise DatasetInputError(
            f"{name}: document is {_format_size(size)}, over the "
            f"{_format_size(max_document_bytes)} limit",
            field="text",
            locator=name,
        )
    ratio = size / max(info.compress_size, 1)
    if size > _ZIP_RATIO_MIN_BYTES and ratio > _ZIP_MAX_RATIO:
        raise DatasetInputError(
            f"{name}: compressed {ratio:.0f}:1, more than the {_ZIP_MAX_RATIO}:1 that text"
            " allows (zip bomb?)",
            locator=name,
        )


def _read_zip_text(archive: zipfile.ZipFile, info: zipfile.ZipInfo, max_document_bytes: int) -> str:
    """The member's text, read with a hard cap in case its header lies about its size."""
    name = info.filename
    try:
        with archive.open(info) as member:
            data = member.read(max_document_bytes + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as error:
        # RuntimeError: encrypted member; NotImplementedError: unknown compression method
        raise DatasetInputError(f"{name}: cannot be read ({error})", locator=name) from None
    if len(data) > max_document_bytes:
        raise DatasetInputError(
            f"{name}: document is over the {_format_size(max_document_bytes)} limit",
            field="text",
            locator=name,
        )
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        byte, line, column = _utf8_error_position(data, error)
        raise DatasetInputError(
            f"{name}: not valid UTF-8 (byte 0x{byte:02X} on line {line}, column {column});"
            " save the file as UTF-8",
            field="text",
            locator=name,
        ) from None


# ---- bytes and names ---------------------------------------------------------------------


def _numbered_utf8_lines(raw: BinaryIO, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """(line number from 1, line with its newline) decoded strictly; a leading BOM dropped."""
    number = 0
    while line := raw.readline(max_line_bytes + 1):
        number += 1
        locator = f"line {number}"
        if len(line) > max_line_bytes:
            raise DatasetInputError(
                f"{locator}: line is longer than {_format_size(max_line_bytes)}, more than a"
                " document may hold",
                locator=locator,
            )
        if number == 1 and line.startswith(_UTF8_BOM):
            line = line[len(_UTF8_BOM) :]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            byte, _, column = _utf8_error_position(line, error)
            raise DatasetInputError(
                f"{locator}: not valid UTF-8 (byte 0x{byte:02X} at column {column});"
                " save the file as UTF-8",
                locator=locator,
            ) from None
        yield number, text


def _utf8_error_position(data: bytes, error: UnicodeDecodeError) -> tuple[int, int, int]:
    """(bad byte, line from 1, column from 1 in characters) of the first undecodable byte."""
    start = error.start
    line_start = data.rfind(b"\n", 0, start) + 1
    column = len(data[line_start:start].decode("utf-8", "replace")) + 1
    return data[start], data.count(b"\n", 0, start) + 1, column


def _format_size(n_bytes: int) -> str:
    """12_300_000 -> '12.3 MB' (decimal units, as people read them)."""
    if n_bytes < 1000:
        return f"{n_bytes} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n_bytes < scale * 1000 or unit == "GB":
            return f"{n_bytes / scale:.1f}".removesuffix(".0") + f" {unit}"
    raise AssertionError("unreachable")


def _list_names(names: Sequence[str]) -> str:
    """'a', 'b', 'c' (and 12 more): the first few names, for messages."""
    shown = ", ".join(f"'{_shorten(name)}'" for name in names[:_NAMES_LISTED])
    more = len(names) - _NAMES_LISTED
    return (shown + (f" (and {more} more)" if more > 0 else "")) or "none"


def _shorten(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


__all__ = ["DatasetInputError", "ParsedDocument", "detect_format", "iter_documents"]
