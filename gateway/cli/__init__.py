"""`prisma`: serve, migrate, manage users, projects and keys, import datasets and embeddings, run workers,
run the demo. One module per command group; this one puts them together."""

from __future__ import annotations

import os

import typer

from gateway.cli import accounts, datasets, db, demo, runs, serve
from gateway.cli.serve import SERVICE_NAMES, WORKER_MODULES
from gateway.config import PRIVATE_UMASK

__all__ = ["SERVICE_NAMES", "WORKER_MODULES", "app"]

app = typer.Typer(help="Prisma: interpretable text embeddings.", no_args_is_help=True, add_completion=False)
app.add_typer(db.app, name="db")
app.add_typer(accounts.user_app, name="user")
app.add_typer(accounts.project_app, name="project")
app.add_typer(accounts.key_app, name="apikey")
app.add_typer(datasets.app, name="datasets")
app.add_typer(runs.emb_app, name="embeddings")
app.command()(runs.embed)
app.command()(serve.serve)
app.command()(serve.worker)
app.command()(serve.service)
app.command("demo-corpus")(demo.demo_corpus)
app.command()(demo.demo)


@app.callback()
def _owner_only_files() -> None:
    """Every command's files (the database, uploads, artifacts, workers' shards) are owner-only."""
    os.umask(PRIVATE_UMASK)


if __name__ == "__main__":
    app()
