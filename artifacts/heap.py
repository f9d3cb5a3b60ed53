"""Give memory freed by Python and numpy back to the operating system.

glibc keeps freed memory in its per-thread arenas: a process that ran a large job (naming
12,288 features of 200,000 documents, an SAE run) holds that job's peak for the rest of its
life, and the next job starts from it. In embedded mode that process is the server itself
(`bench/e2e.py`: 3.9 GB held after naming, 1.6 GB of it free; `malloc_trim(0)` gave it back).
Here, beside the artifact store, because every process (gateway and services) uses it.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):  # not glibc (musl)
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return fn


def trim_heap() -> bool:
    """Return every free page of every malloc arena to the OS (glibc `malloc_trim(0)`); False where
    the C library has no such call. Costs milliseconds; call it between batches and after jobs."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
