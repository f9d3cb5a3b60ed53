"""The locks in requirements/: every line pinned and hashed, every dependency of pyproject.toml
there at a version its range allows, and the Makefile and the Dockerfile installing from them
with pip's hash checking (the few exceptions named)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
REQS = ROOT / "requirements"
LOCKS = ("dev.lock", "runtime.lock", "torch-cpu.lock", "llama-cpp-python.lock")
PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def read_lock(name: str) -> dict[str, tuple[str, frozenset[str]]]:
    """{canonical name: (version, sha256 hashes)} of a lock; fails on any line that is not a
    `name==version` pin, one of its hashes, or a comment."""
    entries: dict[str, tuple[str, frozenset[str]]] = {}
    current = None
    for raw in (REQS / name).read_text().splitlines():
        line = raw.split("#", 1)[0].strip().removesuffix("\\").strip()
        if not line:
            continue
        if line.startswith("--hash="):
            assert current is not None and HASH.match(line), f"{name}: {raw!r}"
            version, hashes = entries[current]
            entries[current] = (version, hashes | {line})
            continue
        match = PINNED.match(line)
        assert match, f"{name}: {raw!r} is not a name==version pin"
        current = canonicalize_name(match[1])
        assert current not in entries, f"{name}: {current} twice"
        entries[current] = (match[2], frozenset())
    return entries


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def in_lines(path: Path) -> list[str]:
    return [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines() if ln.split("#", 1)[0].strip()]


def assert_in_range(lock: dict[str, tuple[str, frozenset[str]]], requirement: str, where: str) -> None:
    req = Requirement(requirement)
    name = canonicalize_name(req.name)
    assert name in lock, f"{req.name} ({requirement}) is missing from {where}"
    version = lock[name][0]
    assert req.specifier.contains(version, prereleases=True), \
        f"{where} pins {req.name}=={version}, outside pyproject's {requirement}"


@pytest.mark.parametrize("name", LOCKS)
def test_every_lock_line_is_a_pin_with_a_hash(name: str) -> None:
    entries = read_lock(name)
    assert entries
    for package, (_, hashes) in entries.items():
        assert hashes, f"{name}: {package} has no --hash"


def test_runtime_and_test_dependencies_are_locked_within_their_ranges() -> None:
    project = pyproject()["project"]
    dev, runtime = read_lock("dev.lock"), read_lock("runtime.lock")
    torch, llama = read_lock("torch-cpu.lock"), read_lock("llama-cpp-python.lock")
    for requirement in project["dependencies"]:
        if canonicalize_name(Requirement(requirement).name) == "torch":
            assert_in_range(torch, requirement, "torch-cpu.lock")
            continue
        assert_in_range(dev, requirement, "dev.lock")
        assert_in_range(runtime, requirement, "runtime.lock")
    (llama_cpp,) = project["optional-dependencies"]["llm"]
    assert_in_range(llama, llama_cpp, "llama-cpp-python.lock")
    for requirement in project["optional-dependencies"]["test"]:
        assert_in_range(dev, requirement, "dev.lock")
    # The build tools (installed from the locks, then --no-build-isolation) and the --no-deps extras.
    for requirement in [*pyproject()["build-system"]["requires"], *in_lines(REQS / "build.in")]:
        assert_in_range(dev, requirement, "dev.lock")
        assert_in_range(runtime, requirement, "runtime.lock")
    for requirement in in_lines(REQS / "nodeps.in"):
        assert_in_range(dev, requirement, "dev.lock")


def test_the_image_gets_the_versions_the_tests_ran_on() -> None:
    dev = read_lock("dev.lock")
    for package, entry in read_lock("runtime.lock").items():
        assert dev.get(package) == entry, f"runtime.lock {package} {entry[0]} differs from dev.lock"
    # Both leave out what has a lock of its own.
    for lock in (dev, read_lock("runtime.lock")):
        assert "torch" not in lock and "llama-cpp-python" not in lock


def variable(text: str, name: str) -> str:
    match = re.search(rf"^(?:ARG )?{name}\s*\??=\s*\"?([^\"\s]+)", text, re.MULTILINE)
    assert match, name
    return match[1]


def test_the_makefile_and_dockerfile_versions_are_the_locked_ones() -> None:
    makefile, dockerfile = (ROOT / "Makefile").read_text(), (ROOT / "Dockerfile").read_text()
    (torch_version, _), = read_lock("torch-cpu.lock").values()
    assert torch_version == variable(makefile, "TORCH_VERSION") + "+cpu"
    assert variable(dockerfile, "TORCH_VERSION") == variable(makefile, "TORCH_VERSION")
    assert read_lock("llama-cpp-python.lock")["llama-cpp-python"][0] == variable(makefile, "LLAMA_CPP_VERSION")


def pip_commands(path: Path) -> list[str]:
    """Each `pip install` / `pip wheel` command of a Makefile or Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    return [part.strip() for ln in lines for part in re.split(r";|&&|\|\|", ln)
            if re.search(r"\bpip (install|wheel)\b", part)]


# The installs that cannot be hash-checked, each for a reason the README gives: torch from a CUDA
# index named at install time, the llama-cpp-python wheel we build from the hash-checked sdist,
# the project itself, and uv in its own venv for `make lock`.
UNCHECKED = (
    re.compile(r"pip install \"torch==\$\{?\(?TORCH_VERSION\)?\}?\" --index-url \"\$\(?(PRISMA_)?TORCH_INDEX\)?\"$"),
    re.compile(r"pip install --no-deps \$\(LLAMA_WHEELS\)/llama_cpp_python-\$\(LLAMA_CPP_VERSION\)-\*\.whl$"),
    re.compile(r"pip install --no-deps --no-build-isolation (-e )?\.$"),
    re.compile(r"\$\(LOCK_TOOLS\)/bin/pip install --quiet \"uv==\$\(UV_VERSION\)\"$"),
)


@pytest.mark.parametrize("name, locks", [
    ("Makefile", {"dev.lock", "torch-cpu.lock", "llama-cpp-python.lock"}),
    ("Dockerfile", {"runtime.lock", "torch-cpu.lock", "llama-cpp-python.lock"}),
])
def test_installs_are_hash_checked_from_the_locks(name: str, locks: set[str]) -> None:
    used = set()
    for command in pip_commands(ROOT / name):
        if "--require-hashes" in command:
            assert "--no-deps" in command, f"{name}: {command}"
            used.update(re.findall(r"-r requirements/(\S+\.lock)", command))
        else:
            assert any(p.search(command) for p in UNCHECKED), f"{name}: not hash-checked: {command}"
    assert used == locks
