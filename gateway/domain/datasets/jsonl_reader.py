"""JSONL reader: one JSON object per line; the first record's keys map the roles."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from contracts.datasets import ColumnMapping
from gateway.domain.datasets.checks import (
    AUTO_ID,
    AUTO_LABELS,
    DatasetInputError,
    DocumentBuilder,
    Limits,
    ParsedDocument,
    Roles,
    list_names,
    numbered_utf8_lines,
    resolve_roles,
    split_labels,
)


def iter_jsonl(
    path: Path, mapping: ColumnMapping, builder: DocumentBuilder, limits: Limits
) -> Iterator[ParsedDocument]:
    roles: Roles | None = None
    with path.open("rb") as raw:
        for number, line in numbered_utf8_lines(raw, limits.max_line_bytes):
            if not line or line.isspace():
                continue
            locator = f"line {number}"
            record = _parse_json_object(line, locator)
            if roles is None:  # the first record plays the part of a CSV header
                roles = resolve_roles(list(record), mapping, locator, "key")
                if mapping.labels is None:  # JSON omits keys freely: look for both on every line
                    taken = (roles.text, roles.id, *(roles.metadata or ()))
                    auto = tuple(n for n in AUTO_LABELS if n not in taken)
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
    record: dict[str, Any], locator: str, roles: Roles, separator: str, builder: DocumentBuilder
) -> ParsedDocument:
    if roles.text not in record:
        raise DatasetInputError(
            f"{locator}: key '{roles.text}' is missing; keys found: {list_names(list(record))}",
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


def _json_id(record: dict[str, Any], roles: Roles, locator: str) -> str | None:
    """The record's id as a string: a JSON string or integer, on every record or on none."""
    if roles.id is None:
        claimed = (roles.text, *roles.labels, *(roles.metadata or ()))
        if AUTO_ID in record and AUTO_ID not in claimed:
            raise DatasetInputError(
                f"{locator}: key '{AUTO_ID}' present, but the first record had none "
                "(ids must be on every record or none)",
                field=AUTO_ID,
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
        return split_labels(value, separator)
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
