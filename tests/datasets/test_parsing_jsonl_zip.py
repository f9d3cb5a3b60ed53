"""Streaming upload parsers, JSONL and ZIP: each rule, each error's locator, field and message
(CSV, format detection and the helpers: test_parsing.py)."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from contracts.datasets import ColumnMapping
from gateway.domain.datasets.parsing import ParsedDocument, iter_documents
from tests.datasets.test_parsing import SECRET, parse, parse_error, write

# ---- JSONL --------------------------------------------------------------------------------


def jsonl(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" if not isinstance(r, str) else r for r in records)


def test_jsonl_values_labels_and_metadata(tmp_path):
    content = jsonl(
        {"id": 7, "text": "nota uno", "labels": ["a ", "b|c", ""], "age": 3, "x": {"y": [1, None]}},
        "\n   \n",
        {"id": "B8", "text": "nota due", "labels": "a| b |", "label": "z"},
        {"id": "B9", "text": "nota tre", "labels": None},
    )
    first, second, third = parse(write(tmp_path, "a.jsonl", content), "jsonl")
    assert first == ParsedDocument(
        locator="line 1",
        external_id="7",
        text="nota uno",
        labels=("a", "b|c"),  # list items are labels as they are, not split
        metadata={"age": 3, "x": {"y": [1, None]}},
    )
    assert (second.locator, second.labels, second.metadata) == ("line 4", ("a", "b", "z"), {})
    assert (third.external_id, third.labels) == ("B9", ())


def test_jsonl_bom_and_mapping(tmp_path):
    content = "\ufeff" + jsonl({"nota": "x", "codice": "C1", "dx": 5, "ward": "PS", "other": 1})
    mapping = ColumnMapping(text="nota", id="codice", labels=["dx"], metadata=["ward"])
    (doc,) = parse(write(tmp_path, "a.jsonl", content), "jsonl", mapping)
    assert (doc.external_id, doc.labels, doc.metadata) == ("C1", ("5",), {"ward": "PS"})


def test_jsonl_malformed(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl({"text": "ok"}, '{"text": "' + SECRET + '",}\n'))
    error = parse_error(path, "jsonl")
    assert error.locator == "line 2"
    column = len('{"text": "' + SECRET + '",') + 1
    assert error.message == (
        "line 2: not valid JSON (Expecting property name enclosed in double quotes"
        f" at column {column})"
    )


def test_jsonl_rejects_nan(tmp_path):
    error = parse_error(write(tmp_path, "a.jsonl", '{"text": "x", "score": NaN}\n'), "jsonl")
    assert error.message == "line 1: not valid JSON (NaN is not allowed)"


@pytest.mark.parametrize(
    ("line", "found"), [("[1, 2]", "an array"), ('"x"', "a string"), ("3", "a number")]
)
def test_jsonl_non_object(tmp_path, line, found):
    error = parse_error(write(tmp_path, "a.jsonl", jsonl({"text": "ok"}, line + "\n")), "jsonl")
    assert error.locator == "line 2"
    assert error.message == f"line 2: expected a JSON object, found {found}"


def test_jsonl_missing_text_key(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl({"text": "ok"}, {"body": SECRET, "id2": 1}))
    error = parse_error(path, "jsonl")
    assert (error.field, error.locator) == ("text", "line 2")
    assert error.message == "line 2: key 'text' is missing; keys found: 'body', 'id2'"


def test_jsonl_missing_text_key_on_first_record(tmp_path):
    error = parse_error(write(tmp_path, "a.jsonl", jsonl({"body": "x"})), "jsonl")
    assert (error.field, error.locator) == ("text", "line 1")
    assert error.message == "line 1: text key 'text' not found; keys found: 'body'"


@pytest.mark.parametrize(("value", "found"), [(3, "a number"), (None, "null"), (["x"], "an array")])
def test_jsonl_text_not_a_string(tmp_path, value, found):
    error = parse_error(write(tmp_path, "a.jsonl", jsonl({"text": value})), "jsonl")
    assert (error.field, error.locator) == ("text", "line 1")
    assert error.message == f"line 1: field 'text' must be a string, not {found}"


def test_jsonl_empty_text(tmp_path):
    error = parse_error(write(tmp_path, "a.jsonl", jsonl({"text": " \n\t"})), "jsonl")
    assert (error.field, error.message) == ("text", "line 1: field 'text' is empty")


def test_jsonl_document_over_limit(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl({"text": "x" * 1500}))
    error = parse_error(path, "jsonl", max_document_bytes=1000)
    assert (error.field, error.locator) == ("text", "line 1")
    assert error.message == "line 1: document is 1.5 kB, over the 1 kB limit ('text')"


def test_document_size_message_in_megabytes(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl({"text": "x" * 12_300_000}))
    error = parse_error(path, "jsonl", max_document_bytes=10_000_000)
    assert error.message == "line 1: document is 12.3 MB, over the 10 MB limit ('text')"


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"id": 1, "text": "a"}, {"text": "b"}], "line 2: key 'id' is missing"),
        ([{"id": 1, "text": "a"}, {"id": None, "text": "b"}], "line 2: key 'id' is missing"),
        ([{"id": 1, "text": "a"}, {"id": " ", "text": "b"}], "line 2: field 'id' is empty"),
        (
            [{"id": 1, "text": "a"}, {"id": True, "text": "b"}],
            "line 2: field 'id' must be a string or an integer, not a boolean",
        ),
        (
            [{"id": 1, "text": "a"}, {"id": 1.5, "text": "b"}],
            "line 2: field 'id' must be a string or an integer, not a number",
        ),
        (
            [{"text": "a"}, {"id": 2, "text": "b"}],
            "line 2: key 'id' present, but the first record had none",
        ),
        (
            [{"id": "1", "text": "a"}, {"id": 1, "text": "b"}],
            "line 2: duplicate id '1' (first seen on line 1)",
        ),
    ],
)
def test_jsonl_ids(tmp_path, records, message):
    error = parse_error(write(tmp_path, "a.jsonl", jsonl(*records)), "jsonl")
    assert (error.field, error.locator) == ("id", "line 2")
    assert error.message.startswith(message)


def test_jsonl_labels_of_wrong_type(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl({"text": "a", "labels": [{"x": 1}]}))
    error = parse_error(path, "jsonl")
    assert (error.field, error.locator) == ("labels", "line 1")
    assert error.message == (
        "line 1: field 'labels' must be a string or a list of strings, not an array"
    )


def test_jsonl_rejects_strings_the_database_cannot_store(tmp_path):
    surrogate = parse_error(write(tmp_path, "a.jsonl", '{"text": "x\\ud800y"}\n'), "jsonl")
    assert (surrogate.field, surrogate.message) == (
        "text", "line 1: field 'text' contains an unpaired surrogate escape",
    )
    nul = parse_error(write(tmp_path, "b.jsonl", '{"text": "x", "ward": ["a\\u0000"]}\n'), "jsonl")
    assert (nul.field, nul.message) == ("ward", "line 1: field 'ward' contains a NUL character")


def test_jsonl_mapped_key_absent_from_first_record(tmp_path):
    path = write(tmp_path, "a.jsonl", jsonl({"text": "a", "ward": "PS"}))
    error = parse_error(path, "jsonl", ColumnMapping(metadata=["reparto"]))
    assert (error.field, error.locator) == ("reparto", "line 1")
    assert error.message == "line 1: metadata key 'reparto' not found; keys found: 'text', 'ward'"


def test_jsonl_not_utf8(tmp_path):
    error = parse_error(write(tmp_path, "a.jsonl", b'{"text": "caff\xe8"}\n'), "jsonl")
    assert error.message.startswith("line 1: not valid UTF-8 (byte 0xE8 at column 15)")


def test_jsonl_blank_file(tmp_path):
    error = parse_error(write(tmp_path, "a.jsonl", "\n  \n"), "jsonl")
    assert error.message == "the file holds no documents"


# ---- zip ----------------------------------------------------------------------------------


def make_zip(tmp_path: Path, members: dict[str, bytes], name: str = "notes.zip") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def test_zip_members_in_nested_folders(tmp_path):
    path = make_zip(
        tmp_path,
        {
            "notes/": b"",
            "notes/2024/a.txt": "\ufeffprima nota\n".encode(),
            "B.TXT": "seconda nota".encode(),
            "__MACOSX/notes/._a.txt": b"\x00\x05\x16\x07",
            ".DS_Store": b"\x00\x00",
            "notes/.hidden.txt": b"ignored",
            "readme.pdf": b"%PDF",
        },
    )
    docs = parse(path, "zip", ColumnMapping(text="ignored for zip"))
    assert docs == [
        ParsedDocument(
            "notes/2024/a.txt", "notes/2024/a", "prima nota\n", (), {"path": "notes/2024/a.txt"}
        ),
        ParsedDocument("B.TXT", "B", "seconda nota", (), {"path": "B.TXT"}),
    ]


@pytest.mark.parametrize(
    ("member", "problem"),
    [
        ("../evil.txt", "a '..' component"),
        ("notes/../../evil.txt", "a '..' component"),
        ("/etc/evil.txt", "an absolute path"),
        ("C:/evil.txt", "a drive letter"),
        ("notes\\..\\evil.txt", "a backslash"),
    ],
)
def test_zip_path_traversal_rejects_the_upload(tmp_path, member, problem):
    path = make_zip(tmp_path, {"a.txt": b"ok", member: b"x", "readme.md": b"x"})
    error = parse_error(path, "zip")
    assert (error.field, error.locator) == ("path", member)
    assert error.message == f"{member}: unsafe member path ({problem}); the upload is rejected"


def test_zip_bomb_member_over_document_limit(tmp_path):
    path = make_zip(tmp_path, {"a.txt": b"ok", "bomb.txt": bytes(50_000_000)})
    error = parse_error(
        path, "zip", max_document_bytes=1_000_000, max_uncompressed_bytes=10_000_000
    )
    assert (error.field, error.locator) == ("text", "bomb.txt")
    assert error.message == "bomb.txt: document is 50 MB, over the 1 MB limit"


def test_zip_bomb_compression_ratio(tmp_path):
    path = make_zip(tmp_path, {"bomb.txt": bytes(50_000_000)})
    error = parse_error(
        path, "zip", max_document_bytes=100_000_000, max_uncompressed_bytes=100_000_000
    )
    assert error.locator == "bomb.txt"
    assert error.message.startswith("bomb.txt: compressed ")
    assert "more than the 200:1 that text allows (zip bomb?)" in error.message


def test_zip_total_uncompressed_size(tmp_path):
    members = {f"n{i}.txt": bytes([65 + i]) * 400_000 for i in range(3)}
    path = make_zip(tmp_path, members)
    error = parse_error(path, "zip", max_document_bytes=1_000_000, max_uncompressed_bytes=1_000_000)
    assert error.locator == "n2.txt"
    assert error.message == "n2.txt: the text files add up to over the 1 MB limit uncompressed"


def test_zip_lying_header_is_caught(tmp_path):
    path = make_zip(tmp_path, {"a.txt": b"a much longer text than declared"})
    data = bytearray(path.read_bytes())
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, local + 22, 5)  # local header: uncompressed size
    struct.pack_into("<I", data, central + 24, 5)  # central directory: uncompressed size
    path.write_bytes(bytes(data))
    error = parse_error(path, "zip")
    assert error.locator == "a.txt"
    assert error.message.startswith("a.txt: cannot be read (")


def test_zip_without_text_files_lists_contents(tmp_path):
    error = parse_error(make_zip(tmp_path, {"a.pdf": b"x", "b/c.docx": b"y"}), "zip")
    assert error.field == "path"
    assert error.message == "the zip holds no .txt files; it holds: 'a.pdf', 'b/c.docx'"


def test_zip_empty(tmp_path):
    error = parse_error(make_zip(tmp_path, {}), "zip")
    assert error.message == "the zip holds no .txt files; it is empty"


def test_not_a_zip(tmp_path):
    error = parse_error(write(tmp_path, "a.zip", "id,text\n1,x\n"), "zip")
    assert (error.message, error.locator) == ("the file is not a valid zip archive", None)


def test_zip_member_not_utf8(tmp_path):
    error = parse_error(make_zip(tmp_path, {"n/a.txt": b"prima riga\ncaff\xe8\n"}), "zip")
    assert (error.field, error.locator) == ("text", "n/a.txt")
    assert error.message.startswith("n/a.txt: not valid UTF-8 (byte 0xE8 on line 2, column 5)")


def test_zip_empty_member(tmp_path):
    error = parse_error(make_zip(tmp_path, {"a.txt": b"ok", "b.txt": b" \n"}), "zip")
    assert (error.field, error.message) == ("text", "b.txt: field 'text' is empty")


def test_zip_duplicate_ids(tmp_path):
    error = parse_error(make_zip(tmp_path, {"a.txt": b"x", "a.TXT": b"y"}), "zip")
    assert (error.field, error.locator) == ("path", "a.TXT")
    assert error.message == "a.TXT: duplicate id 'a' (first seen on a.txt)"


# ---- bounded memory -----------------------------------------------------------------------


def write_large_csv(path: Path, n_rows: int, text_chars: int) -> None:
    """About n_rows * text_chars bytes, written a row at a time."""
    body = ("febbre e tosse da tre giorni, " * (text_chars // 30 + 1))[:text_chars]
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("id;text;reparto\n")
        for row in range(n_rows):
            out.write(f'P{row:07d};"{body}\n{row}";PS\n')


@pytest.mark.slow
def test_large_csv_streams_in_bounded_memory(tmp_path):
    path = tmp_path / "large.csv"
    write_large_csv(path, n_rows=10_000, text_chars=10_000)
    assert path.stat().st_size > 100_000_000
    count, last = 0, None
    tracemalloc.start()
    try:
        for document in iter_documents(
            path,
            "csv",
            ColumnMapping(),
            max_document_bytes=10_000_000,
            max_uncompressed_bytes=10_000_000,
        ):
            count, last = count + 1, document.external_id
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (count, last) == (10_000, "P0009999")
    assert peak < 20_000_000, f"peak traced memory {peak / 1e6:.1f} MB"

