"""`prisma demo-corpus` and `prisma demo`: the demo corpus, and the demo's whole pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.accounts import create_api_key
from gateway.cli.common import console, session_factory_for
from gateway.cli.datasets import import_file
from contracts.sae import SaeConfig
from gateway.config import GatewaySettings, get_settings


def demo_corpus(
    out: Annotated[Path, typer.Argument(help="CSV file to write.")],
    n: Annotated[int, typer.Option(help="Number of notes.")] = 2000,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same file).")] = 0,
) -> None:
    """Write the seeded demo corpus of Italian paediatric visit notes."""
    from gateway.demo.corpus import write_csv

    path = write_csv(out, n=n, seed=seed)
    console.print(f"wrote {n:,} notes to {path}")


DEMO_NAME = "Demo: paediatric visit notes"
#: The demo SAE's batch: 2,048 rows, the learning rate the default rule's for that batch (linear scaling: 8 × the
#: rate at 256) for multilingual-e5-small's 384 dimensions (n = 3,072), and 100 warm-up steps of 256 rows kept as
#: 13 of 2,048.
DEMO_SAE_BATCH = {"batch_size": 2048, "lr": SaeConfig(batch_size=2048).resolved_lr(384), "lr_warmup_steps": 13}


def _demo_dataset(settings: GatewaySettings, n: int):  # noqa: ANN202
    """The demo dataset: the one already imported in this data dir, or a freshly generated one."""
    from sqlalchemy import select

    from gateway.demo.corpus import write_csv
    from gateway.domain.datasets.models import Dataset

    with session_factory_for(settings)() as session:
        existing = session.scalar(select(Dataset).where(Dataset.name == DEMO_NAME).order_by(Dataset.id))
    if existing is not None:
        return existing
    corpus = settings.data_dir / "demo" / "paediatric_notes.csv"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    write_csv(corpus, n=n)
    return import_file(settings, corpus, name=DEMO_NAME, id_column="id", label_columns="labels")


def _wait_status(state, getter, run_id: int) -> str:  # noqa: ANN001
    import time

    while True:
        with state.factory() as session:
            status = getter(session, run_id=run_id).status
        if status in ("succeeded", "failed", "cancelled"):
            return status
        time.sleep(2)


def _demo_sae_after(state, embedding_run_id: int) -> None:  # noqa: ANN001
    """Demo glue: once the corpus is embedded, train its SAE, name its features, then add the two
    ready concepts (each once)."""
    import asyncio

    from contracts.runs import SaeRunCreate
    from gateway.domain.auth.service import Principal
    from gateway.domain.concepts.demo import create_demo_concepts
    from gateway.domain.features.interpret import InterpretationRequest, start_interpretation
    from gateway.domain.jobs import repo as job_repo
    from gateway.domain.runs import repo as run_repo
    from gateway.domain.runs.sae import create_sae_runs

    demo = Principal(None, "demo")
    if _wait_status(state, run_repo.get_embedding_run, embedding_run_id) != "succeeded":
        return
    with state.factory() as session:
        existing = run_repo.list_sae_runs(session, embedding_run_id=embedding_run_id)
    if existing:
        sae_id = existing[-1].id
    else:
        # Trained on clauses and notes; a note's features are the max over its clauses (issue #16).
        # About 36 clauses a note: 8 passes; 4 measured worse (ARCHITECTURE, "The demo to named features").
        # In batches of 2,048 rows (about 260 steps), the learning rate scaled with the batch (8 × the rule's
        # at 256) and the warm-up kept in rows: a step of 2,048 costs 3.4 of 256, and bench/status.py's demo
        # protocol measured clause probe 0.935 / 0.896 / 0.966 and held-out FVU 0.034 (SAE seeds 0-2) against
        # 0.854 / 0.860 / 0.903 and 0.046 for batches of 256 at the rule's rate (bench/results/demo-sae-batch.json).
        config = SaeConfig(train_on="segments_and_documents", document_codes="max_over_segments", epochs=8,
                           **DEMO_SAE_BATCH)
        (run,) = asyncio.run(create_sae_runs(state, SaeRunCreate(embedding_run_id=embedding_run_id, config=config),
                                             demo, None))
        sae_id = run.id
    if _wait_status(state, run_repo.get_sae_run, sae_id) == "succeeded":
        # Deterministic job id: a demo started again does not name the features twice.
        job = asyncio.run(start_interpretation(state, sae_id, InterpretationRequest(), demo, None))
        _wait_status(state, lambda session, run_id: job_repo.get_job(session, job_id=run_id), job.id)
        # Named first, so that the concepts' features show their names; each concept is made once.
        asyncio.run(create_demo_concepts(state, sae_id, demo))


def demo(
    port: Annotated[int, typer.Option(help="Port.")] = 8000,
    n: Annotated[int, typer.Option(help="Number of demo notes.")] = 2000,
    document_vectors: Annotated[str, typer.Option(
        help="'segments': a note's vector is the mean of its clauses' (the model reads each text once: about "
             "a third of the embedding time); 'encoded': each note's text through the model as well, as a run "
             "does by default (text search a little better).")] = "segments",
) -> None:
    """Generate and import the demo corpus (once), start its pipeline, and serve the dashboard."""
    import asyncio
    import secrets
    import threading

    import uvicorn

    from contracts.runs import EmbeddingRunCreate
    from gateway.app import create_app
    from gateway.domain.auth.service import Principal
    from gateway.domain.runs.embedding import create_embedding_run

    if document_vectors not in ("segments", "encoded"):
        console.print(f"[red]--document-vectors: {document_vectors!r} is not 'segments' or 'encoded'[/]")
        raise typer.Exit(2)
    settings = get_settings()
    if not settings.embedded:
        console.print("[red]the demo runs in embedded mode: unset DATABASE_URL and REDIS_URL[/]")
        raise typer.Exit(2)
    ds = _demo_dataset(settings, n)
    key = create_api_key(settings, f"demo-{secrets.token_hex(3)}")
    application = create_app(settings)
    # Segments: a note's clauses embedded, so that one mention's status is not averaged away, and each note's
    # vector made from its clauses' (the model reads each distinct text once: the notes' own pass was about two
    # thirds of the demo's embedding). Text search ranks by the note and its best clause, which makes up for it
    # (bench/results/text-search.json: demo 0.738 this way, 0.778 encoding the notes too, 0.652 by their own
    # vectors alone); --document-vectors encoded reads the notes whole as well.
    body = EmbeddingRunCreate(dataset_id=ds.id, segments=True, document_vectors=document_vectors)
    run, _ = asyncio.run(create_embedding_run(application.state, body, Principal(None, "demo"), None))
    threading.Thread(target=_demo_sae_after, args=(application.state, run.id), daemon=True, name="demo-chain").start()
    print(f"\nPrisma demo: {ds.n_documents:,} documents in dataset {ds.id}; embedding run {run.id} is {run.status}.")
    print(f"  Open   http://127.0.0.1:{port}/login")
    print(f"  Key    {key}\n", flush=True)
    uvicorn.run(application, host="127.0.0.1", port=port, log_config=None, access_log=False)
