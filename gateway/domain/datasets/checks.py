"""What every reader shares: the document it yields, the error it raises, and the checks.

Text non-empty and within the limit, ids unique, mapped names present; UTF-8 lines read with a
cap; sizes and names written for messages, which never quote document text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from contracts.datasets import ColumnMapping

UTF8_BOM = b"\xef\xbb\xbf"
# A record is larger than its text (JSON escapes: "\u00e8" is 6 bytes for 2; CSV doubles
# quotes; other columns): a line past this many bytes cannot hold a valid document.
_LINE_BYTES_PER_DOCUMENT_BYTE = 4
_LINE_SLACK_BYTES = 1 << 20
AUTO_ID = "id"
AUTO_LABELS = ("labels", "label")
_NAMES_LISTED = 20


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


@dataclass(frozen=True, slots=True)
class Limits:
    max_document_bytes: int
    max_uncompressed_bytes: int

    @property
    def max_line_bytes(self) -> int:
        """Longest physical line a CSV/JSONL record may use."""
        return _LINE_BYTES_PER_DOCUMENT_BYTE * self.max_document_bytes + _LINE_SLACK_BYTES


class DocumentBuilder:
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
                    f"{locator}: duplicate id '{shorten(external_id)}' (first seen on {first})",
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
            limit = format_size(self.max_document_bytes)
            raise fail(f"document is {format_size(size)}, over the {limit} limit ('{field}')")


@dataclass(frozen=True, slots=True)
class Roles:
    """Mapped names, resolved against the header (CSV) or the first record (JSONL)."""

    text: str
    id: str | None
    labels: tuple[str, ...]
    metadata: tuple[str, ...] | None  # None: every name not used above


def resolve_roles(
    names: Sequence[str], mapping: ColumnMapping, locator: str, noun: str
) -> Roles:
    """Apply the mapping's defaults to the names present; a mapped name absent is an error."""
    present = set(names)
    explicit = [("text", mapping.text), *([("id", mapping.id)] if mapping.id else [])]
    explicit += [("label", name) for name in mapping.labels or []]
    explicit += [("metadata", name) for name in mapping.metadata or []]
    for role, name in explicit:
        if name not in present:
            raise DatasetInputError(
                f"{locator}: {role} {noun} '{name}' not found; {noun}s found: {list_names(names)}",
                field=name,
                locator=locator,
            )
    taken = {name for _, name in explicit}  # a default never steals an explicitly mapped name
    auto_id = AUTO_ID if AUTO_ID in present and AUTO_ID not in taken else None
    auto_labels = tuple(n for n in AUTO_LABELS if n in present and n not in taken)
    return Roles(
        text=mapping.text,
        id=mapping.id if mapping.id is not None else auto_id,
        labels=tuple(mapping.labels) if mapping.labels is not None else auto_labels,
        metadata=tuple(mapping.metadata) if mapping.metadata is not None else None,
    )


def split_labels(cell: str, separator: str) -> list[str]:
    """'a | b||c ' -> ['a', 'b', 'c']: parts stripped, empty parts dropped."""
    return [part for part in (p.strip() for p in cell.split(separator)) if part]


def numbered_utf8_lines(raw: BinaryIO, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """(line number from 1, line with its newline) decoded strictly; a leading BOM dropped."""
    number = 0
    while line := raw.readline(max_line_bytes + 1):
        number += 1
        locator = f"line {number}"
        if len(line) > max_line_bytes:
            raise DatasetInputError(
                f"{locator}: line is longer than {format_size(max_line_bytes)}, more than a"
                " document may hold",
                locator=locator,
            )
        if number == 1 and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as error:
            byte, _, column = utf8_error_position(line, error)
            raise DatasetInputError(
                f"{locator}: not valid UTF-8 (byte 0x{byte:02X} at column {column});"
                " save the file as UTF-8",
                locator=locator,
            ) from None
        yield number, text


def utf8_error_position(data: bytes, error: UnicodeDecodeError) -> tuple[int, int, int]:
    """(bad byte, line from 1, column from 1 in characters) of the first undecodable byte."""
    start = error.start
    line_start = data.rfind(b"\n", 0, start) + 1
    column = len(data[line_start:start].decode("utf-8", "replace")) + 1
    return data[start], data.count(b"\n", 0, start) + 1, column


def format_size(n_bytes: int) -> str:
    """12_300_000 -> '12.3 MB' (decimal units, as people read them)."""
    if n_bytes < 1000:
        return f"{n_bytes} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if n_bytes < scale * 1000 or unit == "GB":
            return f"{n_bytes / scale:.1f}".removesuffix(".0") + f" {unit}"
    raise AssertionError("unreachable")


def list_names(names: Sequence[str]) -> str:
    """'a', 'b', 'c' (and 12 more): the first few names, for messages."""
    shown = ", ".join(f"'{shorten(name)}'" for name in names[:_NAMES_LISTED])
    more = len(names) - _NAMES_LISTED
    return (shown + (f" (and {more} more)" if more > 0 else "")) or "none"


def shorten(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
