"""Stream a multipart upload to disk, enforcing the size limit while it arrives.

FastAPI's `UploadFile` would parse the whole body before the handler runs, so an oversized
upload could only be refused after it had been received. Here the body is fed chunk by
chunk to python-multipart's parser; the file part goes straight to a temporary file and
the upload is refused (413) as soon as the byte count passes the limit. The form's other parts
are held in memory, so they are bounded too: at most `MAX_PARTS` parts, each text field at most
`MAX_FIELD_BYTES` (python-multipart itself bounds each part's headers: 8 of 4 KiB).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

MAX_FIELD_BYTES = 64 * 1024
MAX_PARTS = 16  # the upload form has the file and 7 text fields


class UploadError(Exception):
    def __init__(self, status_code: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.field = field


@dataclass
class ReceivedUpload:
    """The form's small fields, and the one file part on disk."""

    fields: dict[str, str] = field(default_factory=dict)
    file_path: Path | None = None
    filename: str | None = None
    file_field: str | None = None
    size: int = 0  # bytes of all file parts together
    extra_files: dict[str, Path] = field(default_factory=dict)  # optional file parts (`extra_file_fields`)
    extra_filenames: dict[str, str] = field(default_factory=dict)

    def cleanup(self) -> None:
        if self.file_path is not None:
            self.file_path.unlink(missing_ok=True)
        for path in self.extra_files.values():
            path.unlink(missing_ok=True)


class _PartState:
    def __init__(self) -> None:
        self.headers: dict[str, bytes] = {}
        self.header_field = b""
        self.header_value = b""
        self.name: str | None = None
        self.filename: str | None = None
        self.buffer = bytearray()
        self.out: IO[bytes] | None = None


def _on_header_end(state: _PartState) -> None:
    state.headers[state.header_field.decode("latin-1").lower()] = state.header_value
    state.header_field = b""
    state.header_value = b""


async def receive_upload(request: Request, *, tmp_dir: Path, max_bytes: int, file_field: str = "file",
                         extra_file_fields: tuple[str, ...] = ()) -> ReceivedUpload:
    """Receive `multipart/form-data`, one file field (`file_field`), optional other file fields
    (`extra_file_fields`, at most one part each) and small text fields. `max_bytes` bounds the
    file parts together."""
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in params:
        raise UploadError(415, "the body must be multipart/form-data with a 'file' part", field="file")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes + MAX_FIELD_BYTES * MAX_PARTS:
        raise UploadError(413, f"upload of {int(declared):,} bytes is over the {max_bytes:,}-byte limit", field="file")

    tmp_dir.mkdir(parents=True, exist_ok=True)
    result = ReceivedUpload()
    state = _PartState()
    parts = 0

    def on_part_begin() -> None:
        nonlocal parts
        parts += 1
        if parts > MAX_PARTS:
            raise UploadError(413, f"the form has more than {MAX_PARTS} parts, the limit", field="form")
        state.__init__()  # type: ignore[misc]

    def on_header_field(data: bytes, start: int, end: int) -> None:
        state.header_field += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        state.header_value += data[start:end]

    def on_headers_finished() -> None:
        disposition, opts = parse_options_header(state.headers.get("content-disposition", b""))
        state.name = opts.get(b"name", b"").decode()
        raw_filename = opts.get(b"filename")
        if raw_filename is not None and state.name in extra_file_fields:
            if state.name in result.extra_files:
                raise UploadError(422, f"only one '{state.name}' file per upload", field=state.name)
            fd, path = tempfile.mkstemp(prefix="upload-", dir=tmp_dir)
            state.out = os.fdopen(fd, "wb")
            result.extra_files[state.name] = Path(path)
            result.extra_filenames[state.name] = os.path.basename(
                raw_filename.decode("utf-8", "replace").replace("\\", "/"))
        elif raw_filename is not None and state.name == file_field:
            if result.file_path is not None:
                raise UploadError(422, "only one file per upload", field=file_field)
            fd, path = tempfile.mkstemp(prefix="upload-", dir=tmp_dir)
            state.out = os.fdopen(fd, "wb")
            result.file_path = Path(path)
            result.filename = os.path.basename(raw_filename.decode("utf-8", "replace").replace("\\", "/"))
            result.file_field = state.name

    def on_part_data(data: bytes, start: int, end: int) -> None:
        n = end - start
        if state.out is not None:
            result.size += n
            if result.size > max_bytes:
                raise UploadError(413, f"upload is over the {max_bytes:,}-byte limit", field=file_field)
            state.out.write(data[start:end])
        else:
            if len(state.buffer) + n > MAX_FIELD_BYTES:
                raise UploadError(413, f"form field '{state.name}' is over the {MAX_FIELD_BYTES:,}-byte limit",
                                  field=state.name)
            state.buffer += data[start:end]

    def on_part_end() -> None:
        if state.out is not None:
            state.out.close()
            state.out = None
        elif state.name:
            try:
                result.fields[state.name] = state.buffer.decode("utf-8")
            except UnicodeDecodeError:
                raise UploadError(422, f"form field '{state.name}' is not valid UTF-8", field=state.name) from None

    callbacks = {
        "on_part_begin": on_part_begin,
        "on_header_field": on_header_field,
        "on_header_value": on_header_value,
        "on_header_end": lambda: _on_header_end(state),
        "on_headers_finished": on_headers_finished,
        "on_part_data": on_part_data,
        "on_part_end": on_part_end,
    }
    parser = MultipartParser(params[b"boundary"], callbacks)  # type: ignore[arg-type]
    try:
        async for chunk in request.stream():
            parser.write(chunk)
        parser.finalize()
    except UploadError:
        _abort(state, result)
        raise
    except Exception as exc:  # malformed multipart framing
        _abort(state, result)
        raise UploadError(400, f"malformed multipart body: {exc}") from None
    if result.file_path is None:
        raise UploadError(422, f"no file in the upload: send it in the '{file_field}' form field", field=file_field)
    return result


def _abort(state: _PartState, result: ReceivedUpload) -> None:
    if state.out is not None:
        state.out.close()
    result.cleanup()
