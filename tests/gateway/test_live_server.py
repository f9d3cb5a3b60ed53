"""`prisma serve` as its own process: the README's curl walk-through, a 300 MB upload with
bounded memory, and logs that never hold document text."""

from __future__ import annotations

import json
import shutil
import subprocess
from operator import itemgetter
from pathlib import Path

import numpy as np
import pytest

from tests.live import HTTP, create_key, live_server, peak_rss_bytes

pytestmark = pytest.mark.slow
MB = 1024 * 1024


def test_readme_walkthrough_serve_key_curl(tmp_path: Path) -> None:
    """prisma serve on a fresh data dir, prisma apikey create, curl upload -> the document count."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    data = tmp_path / "data"
    with live_server(data) as (url, _):
        key = create_key(data, "readme")
        csv = tmp_path / "notes.csv"
        csv.write_text("id,text\n1,Bronchiolite confermata\n2,Sospetta otite\n3,Esclusa polmonite\n")
        out = subprocess.run(
            ["curl", "-sS", "-H", f"Authorization: Bearer {key}", "-F", f"file=@{csv}", f"{url}/api/v1/datasets"],
            capture_output=True, text=True, check=True,
        )
        assert json.loads(out.stdout)["n_documents"] == 3
        denied = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{url}/api/v1/datasets"],
                                capture_output=True, text=True, check=True)
        assert denied.stdout == "401"


def write_big_csv(path: Path, target_bytes: int) -> int:
    """About `target_bytes` of CSV with ~30 KB notes; returns the number of documents. The words are drawn by
    numpy and picked by itemgetter: random.choice per word cost 10 s of CPU for 300 MB, this 2 s."""
    rng = np.random.default_rng(0)
    words = ("febbre tosse dispnea wheezing saturazione bronchiolite sospetta confermata esclusa otite "
             "polmonite lattante salbutamolo aerosol crepitii rientramenti apiretico idratazione").split()
    n = 0
    with path.open("w", encoding="utf-8") as f:
        f.write("id,text\n")
        written = 0
        while written < target_bytes:
            text = " ".join(itemgetter(*rng.integers(0, len(words), 3500))(words))
            line = f"N{n},{text}\n"
            f.write(line)
            written += len(line)
            n += 1
    return n


def test_300mb_upload_with_bounded_memory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    big = tmp_path / "big.csv"
    n_docs = write_big_csv(big, 300 * MB)
    assert big.stat().st_size >= 300 * MB
    with live_server(data) as (url, proc):
        key = create_key(data, "mem")
        headers = {"Authorization": f"Bearer {key}"}
        warm = HTTP.post(f"{url}/api/v1/datasets", headers=headers, files={"file": ("w.csv", b"text\nwarm up\n")})
        assert warm.status_code == 201
        before = peak_rss_bytes(proc.pid)
        with big.open("rb") as f:
            resp = HTTP.post(f"{url}/api/v1/datasets", headers=headers, files={"file": ("big.csv", f)}, timeout=600)
        assert resp.status_code == 201, resp.text
        assert resp.json()["n_documents"] == n_docs
        growth = peak_rss_bytes(proc.pid) - before
    assert growth < 150 * MB, f"peak memory grew by {growth / MB:.0f} MB for a 300 MB upload"


def test_logs_never_hold_document_text(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log_path = tmp_path / "server.log"
    secret = "Diagnosi riservata ZXQWERTY bronchiolite"
    with live_server(data, log_path=log_path) as (url, _):
        key = create_key(data, "logs")
        h = {"Authorization": f"Bearer {key}"}
        ok = HTTP.post(f"{url}/api/v1/datasets", headers=h, files={"file": ("a.csv", f"text\n{secret}\n".encode())})
        assert ok.status_code == 201
        bad = HTTP.post(f"{url}/api/v1/datasets", headers=h,
                         files={"file": ("b.csv", f"id,text\n1,{secret}\n1,{secret}\n".encode())})
        assert bad.status_code == 422
        HTTP.get(f"{url}/api/v1/datasets/{ok.json()['id']}/documents", headers=h)
    log = log_path.read_text()
    assert '"msg": "request"' in log and "dataset imported" in log  # the log really was written
    assert "ZXQWERTY" not in log


def test_several_gateway_processes_need_distributed_mode(tmp_path: Path) -> None:
    """Embedded mode runs its jobs inside the one gateway process (and SQLite takes one writer):
    `--workers 2` there is refused with the reason, before anything starts."""
    from tests.live import PRISMA, prisma_env

    out = subprocess.run([PRISMA, "serve", "--workers", "2"], env=prisma_env(tmp_path / "data"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--workers > 1 needs distributed mode" in " ".join(out.stderr.split())
    assert not (tmp_path / "data" / "prisma.db").exists()


def test_the_cli_runs_as_a_module_where_no_script_is_installed(tmp_path: Path) -> None:
    """`python -m gateway.cli` is the `prisma` command (bench/e2e.py uses it on a machine whose Python has
    the project on its path but not installed): the same refusal as the script's, under the same name."""
    import sys

    from tests.live import prisma_env

    out = subprocess.run([sys.executable, "-m", "gateway.cli", "serve", "--workers", "2"],
                         env=prisma_env(tmp_path / "data"), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--workers > 1 needs distributed mode" in " ".join(out.stderr.split())
    usage = subprocess.run([sys.executable, "-m", "gateway.cli", "serve", "--help"], env=prisma_env(tmp_path / "data"),
                           capture_output=True, text=True, timeout=120)
    assert usage.returncode == 0 and "Usage: prisma serve" in usage.stdout
