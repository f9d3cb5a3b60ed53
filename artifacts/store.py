"""Atomic, checksummed files over fsspec (`file://` by default, `s3://` when deployed).

Every write goes to a temporary name beside the target and is renamed into place only
once complete, so a reader never sees half a file and a killed writer leaves at most a
`.tmp-*` file behind (removed by `sweep_temporaries`). On S3 (s3fs) the rename is a
server-side copy and delete: the same guarantee, since an object appears only when complete.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import fsspec

from contracts.artifacts import ArtifactInfo

_TMP_MARK = ".tmp-"
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "az"})


class ArtifactWriter(io.RawIOBase):
    """A write-only binary file that hashes and counts what goes through it."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self._hash = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._hash.update(view)
        self.size += len(view)
        self._raw.write(view)
        return len(view)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


class ArtifactStore:
    """Files under one root URI; keys are relative POSIX paths such as `datasets/3/snapshot.parquet`."""

    def __init__(self, root: str, **storage_options: Any) -> None:
        if "://" not in root:
            root = Path(root).expanduser().resolve().as_uri()
        self.root = root.rstrip("/")
        self.protocol = self.root.split("://", 1)[0]
        if self.protocol in OBJECT_STORES:
            # Other processes write here too: a cached listing would hide their files (a shard
            # another worker finished would look missing). Credentials and AWS_ENDPOINT_URL come
            # from the environment, as botocore reads them.
            storage_options.setdefault("use_listings_cache", False)
        self.fs, self._root_path = fsspec.core.url_to_fs(self.root, **storage_options)
        if self.protocol == "file":
            self.fs.makedirs(self._root_path, exist_ok=True)

    # -- addressing -------------------------------------------------------------------
    def uri(self, key: str) -> str:
        """The URI of `key` under this store's root."""
        return f"{self.root}/{key.lstrip('/')}"

    def _path(self, uri_or_key: str) -> str:
        if "://" in uri_or_key:
            if not uri_or_key.startswith(self.root + "/"):
                raise ValueError(f"artifact {uri_or_key!r} is not under the store root {self.root!r}")
            key = uri_or_key[len(self.root) + 1 :]
        else:
            key = uri_or_key.lstrip("/")
        if any(part in ("..", "") for part in key.split("/")):
            raise ValueError(f"invalid artifact key {key!r}")
        return f"{self._root_path}/{key}"

    # -- writing ----------------------------------------------------------------------
    @contextmanager
    def open_write(self, key: str, *, kind: str = "blob") -> Iterator[ArtifactWriter]:
        """Write `key` atomically; the yielded writer's `info` is set after a clean exit.

        Usage: `with store.open_write("a/b.npy") as f: np.save(f, x)`, then `f.info`.
        """
        final = self._path(key)
        parent = final.rsplit("/", 1)[0]
        self.fs.makedirs(parent, exist_ok=True)
        tmp = f"{final}{_TMP_MARK}{uuid.uuid4().hex}"
        try:
            with self.fs.open(tmp, "wb") as raw:
                writer = ArtifactWriter(raw)
                yield writer
            self.fs.mv(tmp, final)
        except BaseException:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)
            raise
        writer.info = ArtifactInfo(uri=self.uri(key), size=writer.size, sha256=writer.sha256, kind=kind)  # type: ignore[attr-defined]

    def write_bytes(self, key: str, data: bytes, *, kind: str = "blob") -> ArtifactInfo:
        with self.open_write(key, kind=kind) as f:
            f.write(data)
        return f.info  # type: ignore[attr-defined]

    def put_file(self, key: str, local_path: str | Path, *, kind: str = "blob") -> ArtifactInfo:
        """Copy a finished local file into the store (atomically), in 1 MiB pieces."""
        with open(local_path, "rb") as src, self.open_write(key, kind=kind) as f:
            while chunk := src.read(1 << 20):
                f.write(chunk)
        return f.info  # type: ignore[attr-defined]

    # -- reading ----------------------------------------------------------------------
    def open(self, uri_or_key: str, mode: str = "rb") -> IO[bytes]:
        if "w" in mode:
            raise ValueError("use open_write for writing")
        return self.fs.open(self._path(uri_or_key), mode)

    def read_bytes(self, uri_or_key: str) -> bytes:
        with self.open(uri_or_key) as f:
            return f.read()

    def exists(self, uri_or_key: str) -> bool:
        return bool(self.fs.exists(self._path(uri_or_key)))

    def local_path(self, uri_or_key: str) -> str | None:
        """The filesystem path for `file://` stores (for libraries that want a path), else None."""
        return self._path(uri_or_key) if self.protocol == "file" else None

    def list(self, prefix: str) -> list[str]:
        """Keys of finished files under `prefix` (temporaries excluded), sorted."""
        base = self._path(prefix)
        if not self.fs.exists(base):
            return []
        root_len = len(self._root_path) + 1
        paths = self.fs.find(base)
        return sorted(p[root_len:] for p in paths if _TMP_MARK not in p.rsplit("/", 1)[-1])

    def checksum(self, uri_or_key: str) -> str:
        h = hashlib.sha256()
        with self.open(uri_or_key) as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    # -- removal ----------------------------------------------------------------------
    def delete(self, uri_or_key: str) -> None:
        path = self._path(uri_or_key)
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def sweep_temporaries(self, prefix: str = "") -> int:
        """Remove `.tmp-*` files left by killed writers; returns how many were removed."""
        base = self._path(prefix) if prefix else self._root_path
        if not self.fs.exists(base):
            return 0
        stale = [p for p in self.fs.find(base) if _TMP_MARK in p.rsplit("/", 1)[-1]]
        for p in stale:
            self.fs.rm(p)
        return len(stale)
