"""Import every module of the project's packages and print the ones that fail, all at once (a lent GPU
machine's image lacks packages; one run should name every missing one, not the first). Exit 1 if any."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
argparse.ArgumentParser(description=__doc__).parse_args()
PACKAGES = ("contracts", "artifacts", "services", "gateway")
failed: dict[str, str] = {}
for package in PACKAGES:
    for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # noqa: BLE001 - each failure is reported, none stops the walk
            failed[info.name] = f"{type(exc).__name__}: {exc}"
for name, why in failed.items():
    print(f"{name}: {why}")
print(f"{len(failed)} of the modules failed to import")
sys.exit(1 if failed else 0)
