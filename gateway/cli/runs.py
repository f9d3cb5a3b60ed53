"""`prisma embed` and `prisma embeddings`: embedding runs, computed here or imported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from gateway.cli.common import console
from gateway.config import get_settings

emb_app = typer.Typer(help="Embedding runs.", no_args_is_help=True)


def embed(
    dataset: Annotated[int, typer.Argument(help="Dataset id.")],
    model: Annotated[str, typer.Option(help="Local model directory, cached hub id, or 'default'.")] = "default",
    pooling: Annotated[str, typer.Option(help="mean | mean_content | cls")] = "mean",
    max_length: Annotated[int | None, typer.Option(help="Override the model's window (tokens).")] = None,
    shard_size: Annotated[int, typer.Option(help="Documents per checkpointed shard.")] = 2048,
    segments: Annotated[str, typer.Option(
        help="none | clause | sentence | word | token: embed every segment too (what clause probes and "
             "SEGMENT(...) read; word, token: each word or word piece as read in its note).")] = "none",
    document_vectors: Annotated[str, typer.Option(
        help="encoded | segments: each document through the model, or the mean of its segments' vectors "
             "(needs --segments; faster, weaker text search).")] = "encoded",
) -> None:
    """Embed DATASET (chunk-and-average), with a progress bar; resumes an interrupted run."""
    import asyncio

    from gateway.app import create_app
    from gateway.domain.auth.service import Principal
    from gateway.domain.runs.embedding import create_embedding_run, embedding_request
    from gateway.domain.runs.errors import RunInputError

    try:
        body = embedding_request(dataset, model=model, pooling=pooling, max_length=max_length, shard_size=shard_size,
                                 segments=segments, segments_field="--segments", document_vectors=document_vectors)
    except RunInputError as exc:
        console.print(f"[red]refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    settings = get_settings()
    application = create_app(settings, configure_logs=False)
    try:
        run, created = asyncio.run(create_embedding_run(application.state, body, Principal(None, "cli"), None))
    except RunInputError as exc:
        console.print(f"[red]refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    console.print(f"embedding run [bold]{run.id}[/] ({'started' if created else 'already exists'})")
    job = follow_job(application.state.factory, run.job_id)
    application.state.runner.shutdown()
    if job.status != "succeeded":
        console.print(f"[red]{job.status}[/]: {job.error or ''}")
        raise typer.Exit(1)
    result = job.result or {}
    console.print(f"done: {result.get('n_documents', 0):,} documents, {result.get('n_chunks', 0):,} chunks")


@emb_app.command("import")
def embeddings_import(
    dataset: Annotated[int, typer.Argument(help="Dataset id.")],
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help=(
        "Parquet (a 'vector' column and an id column: external_id, doc_id or position) or .npy [N, d] in "
        "dataset order."))],
    name: Annotated[str | None, typer.Option(
        help="The model's name, recorded as 'imported:<name>' (default: the file name).")] = None,
    dim: Annotated[int | None, typer.Option(help="Refuse the file unless its vectors have this dimension.")] = None,
    normalize: Annotated[bool, typer.Option(help="Scale each vector to unit L2 norm (as embedded runs are).")] = True,
    query_model: Annotated[str | None, typer.Option(help=(
        "Embedder model that embeds texts as these vectors were (enables text search and naming)."))] = None,
    query_pooling: Annotated[str, typer.Option(help="mean | mean_content | cls (with --query-model)")] = "mean",
    segments: Annotated[Path | None, typer.Option(exists=True, dir_okay=False, readable=True, help=(
        "Segment vectors too (for SAE runs with train_on segments): Parquet with an id column, char_start, "
        "char_end and vector, or .npz with arrays of those names (vectors [S, d])."))] = None,
) -> None:
    """Import vectors embedded elsewhere for DATASET as a succeeded embedding run; all or nothing."""
    import asyncio

    from gateway.app import create_app
    from gateway.domain.auth.service import Principal
    from gateway.domain.runs.embedding_import import import_embedding_run, import_request
    from gateway.domain.runs.errors import RunInputError

    fields = {"dataset_id": str(dataset), "name": name or "", "dim": "" if dim is None else str(dim),
              "normalize": str(normalize), "query_model": query_model or "", "query_pooling": query_pooling}
    application = create_app(get_settings(), configure_logs=False)
    try:
        req = import_request(fields, path=file, filename=file.name, segments_path=segments,
                             segments_filename=None if segments is None else segments.name)
        run = asyncio.run(import_embedding_run(application.state, req, Principal(None, "cli"), None))
    except RunInputError as exc:
        console.print(f"[red]import refused:[/] {exc.message}")
        raise typer.Exit(2) from None
    finally:
        application.state.runner.shutdown()
    console.print(f"embedding run [bold]{run.id}[/] ({run.model}): {run.n_documents:,} vectors of dimension {run.dim}")
    if segments is not None:
        result = run.result or {}
        console.print(f"segments: {result.get('n_segments_uploaded', 0):,} imported, "
                      f"{result.get('n_documents_without_segments', 0):,} documents without any given their whole text")


def follow_job(factory, job_id: str):  # noqa: ANN001, ANN201
    """Show a job's progress until it ends; returns its final row."""
    import time

    from gateway.domain.jobs import repo as job_repo

    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn()]
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("embedding", total=None, rate="")
        while True:
            with factory() as session:
                job = job_repo.get_job(session, job_id=job_id)
            bar.update(task, completed=job.progress_done, total=job.progress_total,
                       rate=f"{job.rate:.1f} {job.progress_unit}/s" if job.rate else "")
            if job.status in ("succeeded", "failed", "cancelled"):
                return job
            time.sleep(0.5)
