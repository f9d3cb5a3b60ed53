"""Streaming upload parsers: each rule, each error's locator, field and message."""

from __future__ import annotations

import csv
import json
import pickle
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from contracts.datasets import ColumnMapping
from gateway.domain.datasets.parsing import (
    DatasetInputError,
    ParsedDocument,
    detect_format,
    iter_documents,
)

SECRET = "bronchiolite"  # stands for clinical text: must never appear in a message


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def parse(
    path: Path,
    fmt: str,
    mapping: ColumnMapping | None = None,
    *,
    max_document_bytes: int = 10_000,
    max_uncompressed_bytes: int = 1_000_000,
) -> list[ParsedDocument]:
    return list(
        iter_documents(
            path,
            fmt,  # type: ignore[arg-type]
            mapping or ColumnMapping(),
            max_document_bytes=max_document_bytes,
            max_uncompressed_bytes=max_uncompressed_bytes,
        )
    )


def parse_error(path: Path, fmt: str, mapping: ColumnMapping | None = None, **limits: int):
    with pytest.raises(DatasetInputError) as caught:
        parse(path, fmt, mapping, **limits)
    error = caught.value
    assert str(error) == error.message
    assert SECRET not in error.message
    return error


def make_zip(tmp_path: Path, members: dict[str, bytes], name: str = "notes.zip") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


# ---- contracts and format detection -------------------------------------------------------


def test_column_mapping_defaults_and_validation():
    mapping = ColumnMapping()
    assert (mapping.text, mapping.id, mapping.labels) == ("text", None, None)
    assert mapping.metadata is None
    assert mapping.label_separator == "|"
    with pytest.raises(ValidationError, match="more than one role: nota"):
        ColumnMapping(text="nota", metadata=["nota"])
    with pytest.raises(ValidationError):
        ColumnMapping(label="x")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("filename", "declared", "expected"),
    [
        ("notes.csv", None, "csv"),
        ("NOTES.CSV", None, "csv"),
        ("notes.jsonl", None, "jsonl"),
        ("notes.ndjson", None, "jsonl"),
        ("archive.ZIP", None, "zip"),
        ("export.txt", "CSV", "csv"),
        (None, "ndjson", "jsonl"),
        ("notes.csv", "zip", "zip"),
    ],
)
def test_detect_format(filename, declared, expected):
    assert detect_format(filename, declared) == expected


def test_detect_format_unknown_extension_names_file_and_formats():
    with pytest.raises(DatasetInputError) as caught:
        detect_format("notes.tsv")
    assert caught.value.field == "format"
    assert "'notes.tsv'" in caught.value.message
    assert ".csv" in caught.value.message and ".jsonl" in caught.value.message
    assert ".zip" in caught.value.message


def test_detect_format_unknown_declared():
    with pytest.raises(DatasetInputError) as caught:
        detect_format("notes.csv", "xlsx")
    assert caught.value.message == "unknown format 'xlsx'; accepted formats: csv, jsonl, zip"


def test_error_survives_pickling():
    """Workers may pass the error across processes: field and locator must survive."""
    error = DatasetInputError("line 3: field 'nota' is empty", field="nota", locator="line 3")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.field, copy.locator) == (str(error), "nota", "line 3")


def test_unknown_format_argument_fails_at_once(tmp_path):
    with pytest.raises(DatasetInputError) as caught:
        iter_documents(
            tmp_path / "x",
            "xlsx",  # type: ignore[arg-type]
            ColumnMapping(),
            max_document_bytes=1,
            max_uncompressed_bytes=1,
        )
    assert caught.value.field == "format"


# ---- CSV ----------------------------------------------------------------------------------


def test_csv_reads_ids_labels_and_metadata(tmp_path):
    path = write(
        tmp_path,
        "a.csv",
        "id,text,label,ward,age\nA1,febbre alta,bronchiolitis | asma||,PS,3\nA2,tosse,,,\n",
    )
    first, second = parse(path, "csv")
    assert first == ParsedDocument(
        locator="line 2",
        external_id="A1",
        text="febbre alta",
        labels=("bronchiolitis", "asma"),
        metadata={"ward": "PS", "age": "3"},
    )
    assert (second.locator, second.external_id, second.labels) == ("line 3", "A2", ())
    assert second.metadata == {"ward": "", "age": ""}


def test_csv_text_only_has_no_ids(tmp_path):
    path = write(tmp_path, "a.csv", "text\n uno \ndue\n")
    docs = parse(path, "csv")
    assert [(d.text, d.external_id, d.metadata) for d in docs] == [
        (" uno ", None, {}), ("due", None, {}),
    ]


def test_csv_multiline_fields_locate_the_record_start(tmp_path):
    content = (
        'id,text\n1,"riga uno\nriga due\nriga tre"\n\n2,"a ""quoted"" word"\n3,"x\r\ny"\n4,fine\n'
    )
    docs = parse(write(tmp_path, "a.csv", content), "csv")
    assert [(d.external_id, d.locator) for d in docs] == [
        ("1", "line 2"), ("2", "line 6"), ("3", "line 7"), ("4", "line 9"),
    ]
    assert docs[0].text == "riga uno\nriga due\nriga tre"
    assert docs[1].text == 'a "quoted" word'


def test_csv_semicolon_with_bom_and_crlf(tmp_path):
    content = "\ufeffid;text;labels\r\n1;nota, con virgola;a|b\r\n"
    (doc,) = parse(write(tmp_path, "a.csv", content), "csv")
    assert (doc.external_id, doc.text, doc.labels) == ("1", "nota, con virgola", ("a", "b"))


def test_csv_leading_blank_lines_before_a_semicolon_header(tmp_path):
    (doc,) = parse(write(tmp_path, "a.csv", "\n\r\nid;text\n1;una, nota\n"), "csv")
    assert (doc.locator, doc.external_id, doc.text) == ("line 4", "1", "una, nota")


def test_csv_tab_separated(tmp_path):
    (doc,) = parse(write(tmp_path, "a.csv", "id\ttext\n7\tuna, nota\n"), "csv")
    assert (doc.external_id, doc.text) == ("7", "una, nota")


def test_csv_mapping_renames_and_restricts(tmp_path):
    content = "codice;nota;diagnosi;esito;reparto\nX;testo;J21;ok;PS\n"
    mapping = ColumnMapping(
        text="nota", id="codice", labels=["diagnosi", "esito"], metadata=["reparto"]
    )
    (doc,) = parse(write(tmp_path, "a.csv", content), "csv", mapping)
    assert (doc.external_id, doc.labels, doc.metadata) == ("X", ("J21", "ok"), {"reparto": "PS"})
    without_metadata = mapping.model_copy(update={"metadata": []})
    (doc,) = parse(write(tmp_path, "b.csv", content), "csv", without_metadata)
    assert doc.metadata == {}


def test_csv_labels_deduplicated_and_custom_separator(tmp_path):
    content = "text,labels\nnota,a; b ;a;;\n"
    (doc,) = parse(write(tmp_path, "a.csv", content), "csv", ColumnMapping(label_separator=";"))
    assert doc.labels == ("a", "b")


def test_csv_not_utf8_names_line_and_column(tmp_path):
    path = write(tmp_path, "a.csv", b"id,text\n1,caff\xe8 amaro\n")
    error = parse_error(path, "csv")
    assert error.locator == "line 2"
    assert error.message.startswith("line 2: not valid UTF-8 (byte 0xE8 at column 7)")


def test_csv_missing_text_column_lists_columns(tmp_path):
    error = parse_error(write(tmp_path, "a.csv", "id,body,ward\n1,x,y\n"), "csv")
    assert (error.field, error.locator) == ("text", "line 1")
    assert error.message == (
        "line 1: text column 'text' not found; columns found: 'id', 'body', 'ward'"
    )


@pytest.mark.parametrize(
    ("mapping", "role", "name"),
    [
        (ColumnMapping(id="codice"), "id", "codice"),
        (ColumnMapping(labels=["diagnosi"]), "label", "diagnosi"),
        (ColumnMapping(metadata=["reparto"]), "metadata", "reparto"),
    ],
)
def test_csv_missing_mapped_column(tmp_path, mapping, role, name):
    error = parse_error(write(tmp_path, "a.csv", "id,text\n1,x\n"), "csv", mapping)
    assert (error.field, error.locator) == (name, "line 1")
    assert error.message == f"line 1: {role} column '{name}' not found; columns found: 'id', 'text'"


def test_csv_duplicate_header_column(tmp_path):
    error = parse_error(write(tmp_path, "a.csv", "text,ward,ward\nx,a,b\n"), "csv")
    assert (error.field, error.locator) == ("ward", "line 1")
    assert "appears twice" in error.message


def test_csv_wrong_number_of_fields(tmp_path):
    path = write(tmp_path, "a.csv", f"id,text,ward\n1,ok,PS\n2,{SECRET}\n")
    error = parse_error(path, "csv")
    assert error.locator == "line 3"
    assert error.message == "line 3: 2 fields, but the header has 3 columns"


@pytest.mark.parametrize("cell", ['""', "   ", '"\n  "'])
def test_csv_empty_text(tmp_path, cell):
    error = parse_error(write(tmp_path, "a.csv", f"id,text\n1,ok\n2,{cell}\n"), "csv")
    assert (error.field, error.locator) == ("text", "line 3")
    assert error.message == "line 3: field 'text' is empty"


def test_csv_empty_text_names_mapped_column(tmp_path):
    path = write(tmp_path, "a.csv", 'nota\n" "\n')
    error = parse_error(path, "csv", ColumnMapping(text="nota"))
    assert (error.field, error.message) == ("nota", "line 2: field 'nota' is empty")


def test_csv_document_over_limit_gives_its_size(tmp_path):
    text = "è" * 600  # 600 characters, 1,200 UTF-8 bytes
    path = write(tmp_path, "a.csv", f"text\nok\n{text}\n")
    error = parse_error(path, "csv", max_document_bytes=1000)
    assert (error.field, error.locator) == ("text", "line 3")
    assert error.message == "line 3: document is 1.2 kB, over the 1 kB limit ('text')"


def test_csv_field_past_csv_limit_is_reported_as_over_limit(tmp_path):
    # past csv's own limit (131,072 characters by default, never lowered) but under the line cap;
    # the limit is process-wide and an earlier import may have raised it: start from the default
    previous = csv.field_size_limit(131_072)
    path = write(tmp_path, "a.csv", f"text\nok\n\"{SECRET * 20_000}\"\n")
    try:
        error = parse_error(path, "csv", max_document_bytes=1000)
    finally:
        csv.field_size_limit(previous)
    assert error.locator == "line 3"
    assert error.message == "line 3: a field is over the 1 kB limit"


def test_csv_field_size_limit_is_never_lowered(tmp_path):
    previous = csv.field_size_limit()
    try:
        csv.field_size_limit(50_000_000)
        parse(write(tmp_path, "a.csv", "text\nok\n"), "csv", max_document_bytes=1000)
        assert csv.field_size_limit() == 50_000_000
        parse(write(tmp_path, "b.csv", "text\nok\n"), "csv", max_document_bytes=60_000_000)
        assert csv.field_size_limit() == 60_000_001
    finally:
        csv.field_size_limit(previous)


def test_csv_duplicate_id_names_both_lines(tmp_path):
    path = write(tmp_path, "a.csv", "id,text\nA17,x\nA2,y\nA17 ,z\n")
    error = parse_error(path, "csv")
    assert (error.field, error.locator) == ("id", "line 4")
    assert error.message == "line 4: duplicate id 'A17' (first seen on line 2)"


def test_csv_empty_id_cell_is_an_error(tmp_path):
    error = parse_error(write(tmp_path, "a.csv", "id,text\nA1,x\n ,y\n"), "csv")
    assert (error.field, error.locator) == ("id", "line 3")
    assert error.message == "line 3: field 'id' is empty"


def test_csv_unclosed_quote(tmp_path):
    error = parse_error(write(tmp_path, "a.csv", f'id,text\n1,ok\n2,"{SECRET}\nmore\n'), "csv")
    assert error.locator == "line 3"
    assert error.message == "line 3: a quoted field is never closed"


def test_csv_malformed_quoting(tmp_path):
    error = parse_error(write(tmp_path, "a.csv", f'id,text\n1,"{SECRET}"x\n'), "csv")
    assert error.locator == "line 2"
    assert error.message.startswith("line 2: malformed CSV (")


def test_csv_overlong_line_is_refused_before_reading_it_whole(tmp_path):
    path = write(tmp_path, "a.csv", "text\n" + "x" * 30_000_000 + "\n")
    tracemalloc.start()
    try:
        error = parse_error(path, "csv", max_document_bytes=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.locator == "line 2"
    assert error.message.startswith("line 2: line is longer than 1 MB")
    assert peak < 5_000_000, f"peak traced memory {peak / 1e6:.1f} MB"  # ~1 MB line cap


@pytest.mark.parametrize("content", ["", "\n\n", "\ufeff", "id,text\n", "id,text\n\n\n"])
def test_csv_without_documents(tmp_path, content):
    error = parse_error(write(tmp_path, "a.csv", content), "csv")
    assert error.message == "the file holds no documents"
    assert (error.locator, error.field) == (None, None)


def test_documents_are_yielded_before_a_later_error(tmp_path):
    docs = iter_documents(
        write(tmp_path, "a.csv", "text\nuno\n\"\"\n"),
        "csv",
        ColumnMapping(),
        max_document_bytes=100,
        max_uncompressed_bytes=100,
    )
    assert next(docs).text == "uno"
    with pytest.raises(DatasetInputError, match="line 3: field 'text' is empty"):
        next(docs)


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

