"""Child process of test_kill_resume.py: one embedding run, optionally hanging inside a shard.

Usage: python run_child.py STORE_ROOT PAYLOAD_JSON HANG_AT_SHARD (-1: never). Prints
`IN FLIGHT` once the run is inside shard HANG_AT_SHARD (a batch done, the shard unwritten),
then sleeps until killed; otherwise prints the EmbedJobResult JSON on its last line.
"""

from __future__ import annotations

import sys
import time

import torch

from artifacts import ArtifactStore
from contracts.embed import EmbedJobPayload
from contracts.jobs import Progress
from services.embedder.config import EmbedderSettings
from services.embedder.runs import run_embedding


def main() -> None:
    root, payload_json, hang_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    settings = EmbedderSettings(device="cpu", precision="fp32", threads=1, progress_interval_s=0.0)
    payload = EmbedJobPayload.model_validate_json(payload_json)

    def on_progress(progress: Progress) -> None:
        if progress.message is not None and progress.message.startswith(f"shard {hang_at + 1}/") \
                and not progress.message.endswith("done"):
            print("IN FLIGHT", flush=True)
            time.sleep(3600)  # a very long forward pass: the parent kills us here

    result = run_embedding(payload, ArtifactStore(root), settings=settings, on_progress=on_progress)
    print(result.model_dump_json(), flush=True)


if __name__ == "__main__":
    main()
