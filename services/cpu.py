"""What the CPU can do, read once from /proc/cpuinfo: shared by the embedder (its precision and threads), the SAE
trainer (its encoder's matmul) and naming (its threads and child process)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def usable_cpus() -> int:
    """The CPUs this process may run on (cgroup/affinity aware where the OS tells)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX: bf16 matmuls run at about twice the fp32 speed or more (Linux flags).
    PRISMA_CPU_NATIVE_BF16=0 (or 1) overrides the flags, to measure on this CPU what 'auto' picks on
    another (with ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2, an AVX2-only CPU's path)."""
    forced = os.environ.get("PRISMA_CPU_NATIVE_BF16", "").strip()
    return forced == "1" if forced in ("0", "1") else cpu_flags_have_bf16()


@lru_cache(maxsize=1)
def cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Linux; empty elsewhere): 'model name', 'flags', ..."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags() -> set[str]:
    info = cpuinfo()
    return set(info.get("flags", info.get("Features", "")).split())  # x86, Arm


def cpu_flags_have_bf16() -> bool:
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})
