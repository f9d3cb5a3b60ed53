"""A training process SIGKILLed after a checkpoint resumes and ends as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from artifacts import ArtifactStore
from services.sae.pipeline import train_sae
from sae_fixtures import tiny_payload

CHILD = textwrap.dedent("""
    import sys, time
    from artifacts import ArtifactStore
    from sae_fixtures import tiny_payload
    from services.sae.pipeline import train_sae
    store = ArtifactStore(sys.argv[1])
    # slow each step down so that the parent can kill the run mid-way
    train_sae(tiny_payload(store, max_steps=400), store, should_stop=lambda: time.sleep(0.01) or False)
""")


@pytest.mark.slow
def test_sigkill_mid_run_then_resume(tmp_path):
    root = str(tmp_path / "killed")
    here = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parents[1]), str(here)])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, root], env=env)
    latest = Path(root) / "sae/7/checkpoint/latest.json"
    deadline = time.monotonic() + 45
    try:
        while time.monotonic() < deadline and child.poll() is None:
            if latest.exists() and int(json.loads(latest.read_text())["folder"][-8:]) >= 50:
                break
            time.sleep(0.05)
        assert child.poll() is None, "the child finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    store = ArtifactStore(root)
    assert not store.exists("sae/7/result.json")
    resumed = train_sae(tiny_payload(store, max_steps=400), store)
    assert 50 <= resumed.resumed_from_step < 400
    clean_store = ArtifactStore(str(tmp_path / "clean"))
    clean = train_sae(tiny_payload(clean_store, max_steps=400), clean_store)
    assert [p.fvu for p in resumed.loss_curve] == [p.fvu for p in clean.loss_curve]
    assert resumed.metrics == clean.metrics
