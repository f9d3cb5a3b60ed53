"""What a newcomer reads first stays a map, not a diary: the README and docs/ARCHITECTURE.md within
their lengths, no working-history words in them or in bench's result files, every bench script in
bench/README.md's index, every figure's result file present, every module within 400 lines."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

# "session" the way the product means it (an HTTP, dashboard or database session) is fine; what is
# refused is the word for a span of work, and issue numbers (`#29`): git log holds that history.
HISTORY = re.compile(r"session|#[0-9]+\b", re.IGNORECASE)
PRODUCT_SESSION = re.compile(
    r"session cookie|dashboard[ _]sessions?|SESSION_MAX_AGE|database session|HTTP session|SessionDep",
    re.IGNORECASE,
)
MAX_LINES = {"README.md": 250, "docs/ARCHITECTURE.md": 600}
MAX_MODULE_LINES = 400


def _read_files() -> list[Path]:
    """README.md, the text files under docs/ and every bench result file (screenshots are binary)."""
    docs = [p for p in (ROOT / "docs").rglob("*") if p.is_file() and p.suffix in {".md", ".txt"}]
    results = [p for p in BENCH.rglob("results/*") if p.is_file() and p.suffix in {".json", ".txt", ".md"}]
    return [ROOT / "README.md", BENCH / "README.md", *docs, *results]


@pytest.mark.parametrize("name, limit", sorted(MAX_LINES.items()))
def test_front_docs_are_short(name: str, limit: int) -> None:
    lines = (ROOT / name).read_text(encoding="utf-8").count("\n")
    assert lines <= limit, f"{name} has {lines} lines, at most {limit}"


def test_no_history_words_in_docs_or_results() -> None:
    found = []
    for path in _read_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(PRODUCT_SESSION.sub("", line)):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "history belongs to git log:\n" + "\n".join(found[:40])


def _bench_scripts() -> list[str]:
    scripts = [*BENCH.glob("*.py"), *BENCH.glob("*.sh"), *BENCH.glob("studies/*.py"), *BENCH.glob("studies/*.sh")]
    return sorted(str(p.relative_to(BENCH)) for p in scripts if p.name != "__init__.py")


def test_bench_index_lists_every_script() -> None:
    index = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [s for s in _bench_scripts() if f"`{s}`" not in index]
    assert not missing, f"bench/README.md lists no line for {missing}"


def test_cited_result_files_exist() -> None:
    cited = set()
    for name in ("README.md", "docs/ARCHITECTURE.md", "bench/README.md"):
        cited |= set(re.findall(r"bench/(?:studies/)?results/[\w.-]+\.(?:json|txt)", (ROOT / name).read_text()))
    missing = sorted(c for c in cited if not (ROOT / c).exists())
    assert not missing, f"cited but not in the repository: {missing}"


def test_modules_within_400_lines() -> None:
    packages = ("contracts", "artifacts", "services", "gateway", "bench")
    long = [f"{p.relative_to(ROOT)} ({n})" for pkg in packages for p in (ROOT / pkg).rglob("*.py")
            if "migrations" not in p.parts and (n := p.read_text(encoding="utf-8").count("\n")) > MAX_MODULE_LINES]
    assert not long, f"split these modules: {long}"
