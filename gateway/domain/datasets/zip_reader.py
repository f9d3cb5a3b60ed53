"""Zip reader: one document per .txt member, every member vetted before any is read."""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from gateway.domain.datasets.checks import (
    UTF8_BOM,
    DatasetInputError,
    DocumentBuilder,
    Limits,
    ParsedDocument,
    format_size,
    list_names,
    utf8_error_position,
)

# Zip bomb heuristic: text compresses about 3-10:1, so 200:1 on a large member is an attack.
_ZIP_MAX_RATIO = 200
_ZIP_RATIO_MIN_BYTES = 1_000_000
_ZIP_TEXT_SUFFIX = ".txt"


def iter_zip(path: Path, builder: DocumentBuilder, limits: Limits) -> Iterator[ParsedDocument]:
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


def _zip_text_members(archive: zipfile.ZipFile, limits: Limits) -> list[zipfile.ZipInfo]:
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
                f"{format_size(limits.max_uncompressed_bytes)} limit uncompressed",
                locator=info.filename,
            )
        members.append(info)
    if not members:
        holds = f"it holds: {list_names(others)}" if others else "it is empty"
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
            f"{name}: document is {format_size(size)}, over the "
            f"{format_size(max_document_bytes)} limit",
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
            f"{name}: document is over the {format_size(max_document_bytes)} limit",
            field="text",
            locator=name,
        )
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        byte, line, column = utf8_error_position(data, error)
        raise DatasetInputError(
            f"{name}: not valid UTF-8 (byte 0x{byte:02X} on line {line}, column {column});"
            " save the file as UTF-8",
            field="text",
            locator=name,
        ) from None
